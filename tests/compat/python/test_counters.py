"""Binary collection operations: counters (INCREMENT/DECREMENT) and APPEND/PREPEND through the Python SDK."""

from __future__ import annotations

from datetime import timedelta

import pytest

from couchbase.exceptions import (CasMismatchException, DeltaInvalidException, DocumentNotFoundException)
from couchbase.options import (AppendOptions, DecrementOptions, DeltaValue, GetOptions, IncrementOptions,
                               PrependOptions, SignedInt64, UpsertOptions)
from couchbase.transcoder import RawBinaryTranscoder, RawStringTranscoder

RAW = RawBinaryTranscoder()
# A negative initial tells the SDK "do not create" (it then sends expiry 0xFFFFFFFF on the wire).
NO_INITIAL = SignedInt64(-1)


def test_increment_missing_with_initial_creates_at_initial(binary, collection, key):
    """Increment of a missing key with an initial value stores and returns the initial value (delta not applied)."""
    res = binary.increment(key, IncrementOptions(initial=SignedInt64(10), delta=DeltaValue(5)))
    assert res.content == 10
    assert res.cas != 0
    assert collection.get(key).content_as[int] == 10


def test_increment_existing_adds_delta(binary, collection, key):
    """Increment adds the delta to an existing counter, returns the new value and a new CAS."""
    first = binary.increment(key, IncrementOptions(initial=SignedInt64(10), delta=DeltaValue(5)))
    second = binary.increment(key, IncrementOptions(delta=DeltaValue(5)))
    assert second.content == 15
    assert second.cas not in (0, first.cas)
    assert collection.get(key).content_as[int] == 15


def test_increment_default_delta_is_one(binary, key):
    """Without a delta the SDK sends 1."""
    binary.increment(key, IncrementOptions(initial=SignedInt64(0)))
    assert binary.increment(key).content == 1


def test_increment_without_initial_option_creates_at_zero(binary, key):
    """Python 4.6.3 sends initial=0 when no initial is given, so a missing counter is created at 0."""
    assert binary.increment(key).content == 0
    assert binary.increment(key).content == 1


def test_increment_missing_without_initial_raises_not_found(binary, collection, key):
    """With "no initial" (expiry 0xFFFFFFFF) a missing counter is not created: DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        binary.increment(key, IncrementOptions(initial=NO_INITIAL))
    assert collection.exists(key).exists is False


def test_decrement_missing_without_initial_raises_not_found(binary, key):
    """Decrement with "no initial" of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        binary.decrement(key, DecrementOptions(initial=NO_INITIAL))


def test_decrement_with_initial_then_subtracts(binary, collection, key):
    """Decrement creates at the initial value, then subtracts the delta."""
    assert binary.decrement(key, DecrementOptions(initial=SignedInt64(100), delta=DeltaValue(1))).content == 100
    assert binary.decrement(key, DecrementOptions(delta=DeltaValue(30))).content == 70
    assert collection.get(key).content_as[int] == 70


def test_decrement_floors_at_zero(binary, key):
    """Decrementing below zero stops at 0 (memcached semantics), it never goes negative."""
    binary.increment(key, IncrementOptions(initial=SignedInt64(3)))
    assert binary.decrement(key, DecrementOptions(delta=DeltaValue(10))).content == 0


def test_increment_wraps_at_2_pow_64(binary, collection, key):
    """Counters are unsigned 64-bit: incrementing 2^64-1 by 1 wraps to 0."""
    collection.upsert(key, str(2**64 - 1), UpsertOptions(transcoder=RawStringTranscoder()))
    assert binary.increment(key, IncrementOptions(delta=DeltaValue(1))).content == 0


def test_increment_accepts_json_number_document(binary, collection, key):
    """A document whose body is a JSON number (written by the JSON transcoder) is a valid counter."""
    collection.upsert(key, 100)
    assert binary.increment(key, IncrementOptions(delta=DeltaValue(1))).content == 101


def test_increment_non_numeric_raises_delta_invalid(binary, collection, key):
    """Incrementing a non-numeric document fails with DELTA_BADVAL → DeltaInvalidException, body unchanged."""
    collection.upsert(key, {"not": "a number"})
    with pytest.raises(DeltaInvalidException):
        binary.increment(key, IncrementOptions(delta=DeltaValue(1)))
    assert collection.get(key).content_as[dict] == {"not": "a number"}


def test_increment_with_expiry_sets_ttl_on_creation(binary, collection, key):
    """An expiry passed with increment-with-initial applies to the newly created counter."""
    binary.increment(key, IncrementOptions(initial=SignedInt64(1), expiry=timedelta(hours=1)))
    assert collection.get(key, GetOptions(with_expiry=True)).expiry_time is not None


def test_append_and_prepend_concatenate_bytes(binary, collection, key):
    """Append adds bytes after the value, prepend before it; both return a new CAS."""
    cas = collection.upsert(key, b"middle", UpsertOptions(transcoder=RAW)).cas
    appended = binary.append(key, b"-end")
    assert appended.cas not in (0, cas)
    prepended = binary.prepend(key, b"start-")
    assert prepended.cas not in (0, appended.cas)
    assert collection.get(key, GetOptions(transcoder=RAW)).value == b"start-middle-end"


def test_append_with_current_cas_succeeds(binary, collection, key):
    """Append with the current CAS is applied."""
    cas = collection.upsert(key, b"a", UpsertOptions(transcoder=RAW)).cas
    binary.append(key, b"b", AppendOptions(cas=cas))
    assert collection.get(key, GetOptions(transcoder=RAW)).value == b"ab"


def test_append_with_stale_cas_raises_cas_mismatch(binary, collection, key):
    """Append with an outdated CAS fails with CasMismatchException and changes nothing."""
    old = collection.upsert(key, b"a", UpsertOptions(transcoder=RAW)).cas
    collection.upsert(key, b"b", UpsertOptions(transcoder=RAW))
    with pytest.raises(CasMismatchException):
        binary.append(key, b"c", AppendOptions(cas=old))
    with pytest.raises(CasMismatchException):
        binary.prepend(key, b"c", PrependOptions(cas=old))
    assert collection.get(key, GetOptions(transcoder=RAW)).value == b"b"


def test_append_missing_raises_document_not_found(binary, key):
    """Append to a missing key gets NOT_STORED, which the SDK reports as DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        binary.append(key, b"x")


def test_prepend_missing_raises_document_not_found(binary, key):
    """Prepend to a missing key gets NOT_STORED → DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        binary.prepend(key, b"x")


def test_append_to_counter_changes_its_digits(binary, collection, key):
    """Append works on the ASCII digits of a counter: 12 with "3" appended increments from 123."""
    binary.increment(key, IncrementOptions(initial=SignedInt64(12)))
    binary.append(key, b"3")
    assert binary.increment(key, IncrementOptions(delta=DeltaValue(1))).content == 124
