"""Expiry (relative and absolute), touch, get-and-touch and pessimistic locking through the Python SDK."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from couchbase.exceptions import (CasMismatchException, DocumentLockedException, DocumentNotFoundException,
                                  DocumentNotLockedException)
from couchbase.options import (GetAndLockOptions, GetOptions, ReplaceOptions, UnlockOptions, UpsertOptions)

from conditions import wait_until

SHORT_TTL = timedelta(seconds=2)
EXPIRY_DEADLINE_SECONDS = 15.0
# Operations that the client retries while the document is locked give up after this.
LOCKED_OP_TIMEOUT = timedelta(seconds=1)
LOCKED_CAS = 0xFFFFFFFFFFFFFFFF


def gone(collection, key) -> bool:
    try:
        collection.get(key)
    except DocumentNotFoundException:
        return True
    return False


def expiry_of(collection, key):
    return collection.get(key, GetOptions(with_expiry=True)).expiry_time


def assert_close(actual: datetime, expected: datetime, tolerance_seconds: float = 120) -> None:
    delta = abs((actual - expected).total_seconds())
    assert delta <= tolerance_seconds, f"expiry {actual} is {delta:.0f}s away from {expected}"


def test_short_relative_expiry_removes_document(collection, key):
    """A document written with a 2 s TTL is readable at once and then disappears (lazily or via the pager)."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=SHORT_TTL))
    assert collection.get(key).content_as[dict] == {"v": 1}
    wait_until(lambda: gone(collection, key), EXPIRY_DEADLINE_SECONDS, "the 2 s TTL document to expire")
    assert collection.exists(key).exists is False


def test_expired_document_can_be_inserted_again(collection, key):
    """Once a document expired, insert (ADD) of the same key succeeds as if it never existed."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=SHORT_TTL))
    wait_until(lambda: gone(collection, key), EXPIRY_DEADLINE_SECONDS, "the document to expire")
    collection.insert(key, {"v": 2})
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_absolute_expiry_beyond_30_days_keeps_document(collection, key):
    """An expiry over 30 days is sent as an absolute Unix time; the server must not read it as seconds-from-now
    (which would be in the past or centuries away): the doc stays and reports an expiry ~40 days ahead."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(days=40)))
    assert collection.get(key).content_as[dict] == {"v": 1}
    assert_close(expiry_of(collection, key), datetime.now() + timedelta(days=40))


def test_relative_expiry_is_reported_as_absolute_time(collection, key):
    """get(with_expiry) returns the absolute expiry the server computed from a relative TTL."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(hours=2)))
    assert_close(expiry_of(collection, key), datetime.now() + timedelta(hours=2))


def test_document_without_expiry_reports_none(collection, key):
    """A document written without expiry has exptime 0, which the SDK reports as no expiry."""
    collection.upsert(key, {"v": 1})
    got = collection.get(key, GetOptions(with_expiry=True))
    assert got.content_as[dict] == {"v": 1}
    assert got.expiry_time is None


def test_touch_sets_expiry_and_changes_cas(collection, key):
    """Touch gives an existing document a TTL (and a new CAS); with 2 s it then disappears."""
    cas = collection.upsert(key, {"v": 1}).cas
    res = collection.touch(key, SHORT_TTL)
    assert res.cas not in (0, cas)
    wait_until(lambda: gone(collection, key), EXPIRY_DEADLINE_SECONDS, "the touched document to expire")


def test_get_and_touch_returns_value_and_sets_expiry(collection, key):
    """Get-and-touch returns the current body and moves the expiry to the new value."""
    collection.upsert(key, {"v": 7})
    got = collection.get_and_touch(key, timedelta(hours=3))
    assert got.content_as[dict] == {"v": 7}
    assert_close(expiry_of(collection, key), datetime.now() + timedelta(hours=3))


def test_get_and_touch_with_zero_clears_expiry(collection, key):
    """Get-and-touch with 0 removes an existing expiry."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(hours=1)))
    collection.get_and_touch(key, timedelta(seconds=0))
    assert expiry_of(collection, key) is None


def test_replace_without_preserve_expiry_clears_ttl(collection, key):
    """A replace that carries no expiry resets the document's expiry to none (Couchbase default)."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(hours=1)))
    collection.replace(key, {"v": 2})
    assert expiry_of(collection, key) is None


def test_replace_with_preserve_expiry_keeps_ttl(collection, key):
    """Replace with preserve_expiry (the preserve-TTL frame) keeps the previous expiry."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(hours=1)))
    before = expiry_of(collection, key)
    collection.replace(key, {"v": 2}, ReplaceOptions(preserve_expiry=True))
    assert collection.get(key).content_as[dict] == {"v": 2}
    after = expiry_of(collection, key)
    assert after is not None
    assert_close(after, before, tolerance_seconds=2)


def test_upsert_with_preserve_expiry_keeps_ttl(collection, key):
    """Upsert with preserve_expiry keeps the existing TTL of the document it overwrites."""
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(hours=1)))
    collection.upsert(key, {"v": 2}, UpsertOptions(preserve_expiry=True))
    assert_close(expiry_of(collection, key), datetime.now() + timedelta(hours=1))


def test_get_and_lock_returns_value_and_lock_cas(collection, key):
    """Get-and-lock returns the body and a CAS that differs from the pre-lock CAS."""
    cas = collection.upsert(key, {"v": 1}).cas
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    assert locked.content_as[dict] == {"v": 1}
    assert locked.cas not in (0, cas, LOCKED_CAS)
    collection.unlock(key, locked.cas)


def test_second_lock_raises_document_locked(collection, key):
    """A second get-and-lock on a locked document gets LOCKED; the SDK retries, then raises DocumentLocked."""
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    with pytest.raises(DocumentLockedException):
        collection.get_and_lock(key, timedelta(seconds=10), GetAndLockOptions(timeout=LOCKED_OP_TIMEOUT))
    collection.unlock(key, locked.cas)


def test_upsert_on_locked_document_raises_until_unlock(collection, key):
    """Writers without the lock CAS get LOCKED (DocumentLockedException) until unlock; then the write succeeds."""
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=15))
    with pytest.raises(DocumentLockedException):
        collection.upsert(key, {"v": 2}, UpsertOptions(timeout=LOCKED_OP_TIMEOUT))
    collection.unlock(key, locked.cas)
    collection.upsert(key, {"v": 3})
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_get_of_locked_document_returns_locked_cas(collection, key):
    """A plain GET of a locked document succeeds and shows CAS 0xFFFFFFFFFFFFFFFF instead of the lock CAS."""
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    got = collection.get(key)
    assert got.content_as[dict] == {"v": 1}
    assert got.cas == LOCKED_CAS
    collection.unlock(key, locked.cas)


def test_replace_with_lock_cas_succeeds_and_unlocks(collection, key):
    """A mutation carrying the lock CAS is allowed and releases the lock."""
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=15))
    collection.replace(key, {"v": 2}, ReplaceOptions(cas=locked.cas))
    collection.upsert(key, {"v": 3}, UpsertOptions(timeout=LOCKED_OP_TIMEOUT))
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_unlock_with_wrong_cas_raises_cas_mismatch(collection, key):
    """Unlock with a CAS other than the lock CAS fails (LOCKED on the wire) and the SDK raises CasMismatch."""
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    with pytest.raises(CasMismatchException):
        collection.unlock(key, locked.cas + 1, UnlockOptions(timeout=LOCKED_OP_TIMEOUT))
    collection.unlock(key, locked.cas)


def test_unlock_of_unlocked_document_raises_not_locked(collection, key):
    """Unlock of a document that is not locked gets NOT_LOCKED → DocumentNotLockedException (Server 7.6+)."""
    cas = collection.upsert(key, {"v": 1}).cas
    with pytest.raises(DocumentNotLockedException):
        collection.unlock(key, cas)


def test_unlock_missing_document_raises_not_found(collection, key):
    """Unlock of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.unlock(key, 1234)


def test_lock_expires_after_lock_time(collection, key):
    """A 2 s lock blocks writers at first and is released by itself when the lock time elapses."""
    collection.upsert(key, {"v": 1})
    collection.get_and_lock(key, timedelta(seconds=2))
    with pytest.raises(DocumentLockedException):
        collection.upsert(key, {"v": 2}, UpsertOptions(timeout=timedelta(milliseconds=500)))

    def write_succeeds():
        try:
            collection.upsert(key, {"v": 3}, UpsertOptions(timeout=timedelta(milliseconds=500)))
            return True
        except DocumentLockedException:
            return False

    wait_until(write_succeeds, EXPIRY_DEADLINE_SECONDS, "the 2 s lock to expire")
    assert collection.get(key).content_as[dict] == {"v": 3}
