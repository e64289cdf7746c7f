"""Error statuses as the Python SDK surfaces them: each Couchbase condition must raise its own exception type."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from couchbase.exceptions import (AuthenticationException, BucketNotFoundException, CasMismatchException,
                                  CouchbaseException, DocumentExistsException, DocumentNotFoundException,
                                  InvalidArgumentException)
from couchbase.options import GetOptions, RemoveOptions, ReplaceOptions, UpsertOptions
from couchbase.transcoder import RawBinaryTranscoder

from sdk_connect import connect

MAX_VALUE_BYTES = 20 * 1024 * 1024
# The C++ core's errc::key_value::value_too_large; Python 4.6.3 has no dedicated class for it.
VALUE_TOO_LARGE_EC = 104


def test_insert_existing_raises_document_exists(collection, key):
    """Insert (ADD) of an existing key fails with KEY_EEXISTS → DocumentExistsException and leaves the doc alone."""
    collection.upsert(key, {"v": 1})
    with pytest.raises(DocumentExistsException):
        collection.insert(key, {"v": 2})
    assert collection.get(key).content_as[dict] == {"v": 1}


def test_replace_with_stale_cas_raises_cas_mismatch(collection, key):
    """Replace with an outdated CAS fails with CasMismatchException and does not write."""
    old = collection.upsert(key, {"v": 1}).cas
    collection.upsert(key, {"v": 2})
    with pytest.raises(CasMismatchException):
        collection.replace(key, {"v": 3}, ReplaceOptions(cas=old))
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_remove_with_stale_cas_raises_cas_mismatch(collection, key):
    """Remove with an outdated CAS fails with CasMismatchException and the document survives."""
    old = collection.upsert(key, {"v": 1}).cas
    collection.upsert(key, {"v": 2})
    with pytest.raises(CasMismatchException):
        collection.remove(key, RemoveOptions(cas=old))
    assert collection.exists(key).exists is True


def test_get_missing_raises_document_not_found(collection, key):
    """GET of a key that was never written fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_replace_missing_raises_document_not_found(collection, key):
    """Replace of a missing key fails with DocumentNotFoundException (it never creates)."""
    with pytest.raises(DocumentNotFoundException):
        collection.replace(key, {"v": 1})
    assert collection.exists(key).exists is False


def test_replace_missing_with_cas_raises_document_not_found(collection, key):
    """Replace with a CAS on a missing key is DocumentNotFound, not CasMismatch."""
    with pytest.raises(DocumentNotFoundException):
        collection.replace(key, {"v": 1}, ReplaceOptions(cas=12345))


def test_remove_missing_raises_document_not_found(collection, key):
    """Remove of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.remove(key)


def test_touch_missing_raises_document_not_found(collection, key):
    """Touch of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.touch(key, timedelta(seconds=10))


def test_get_and_touch_missing_raises_document_not_found(collection, key):
    """Get-and-touch of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.get_and_touch(key, timedelta(seconds=10))


def test_get_and_lock_missing_raises_document_not_found(collection, key):
    """Get-and-lock of a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.get_and_lock(key, timedelta(seconds=5))


@pytest.mark.parametrize("kind", ["random", "compressible"])
def test_value_over_20_mib_is_rejected_as_too_large(collection, key, kind):
    """A value of 20 MiB + 1 byte gets E2BIG, also when it is compressible (the limit is on the inflated size even if
    the client sent it Snappy-compressed). Python 4.6.3 has no dedicated class: it raises a plain CouchbaseException
    with ec 104 (value_too_large). Nothing is stored."""
    size = MAX_VALUE_BYTES + 1
    payload = os.urandom(size) if kind == "random" else b"x" * size
    with pytest.raises(CouchbaseException) as info:
        collection.upsert(key, payload, UpsertOptions(transcoder=RawBinaryTranscoder(), timeout=timedelta(seconds=30)))
    assert type(info.value) is CouchbaseException, repr(info.value)
    assert info.value.error_code == VALUE_TOO_LARGE_EC, repr(info.value)
    assert collection.exists(key).exists is False


def test_value_of_exactly_20_mib_is_accepted(collection, key):
    """20 MiB is Couchbase's largest item: a value of exactly that size is stored and read back."""
    payload = b"y" * MAX_VALUE_BYTES
    collection.upsert(key, payload, UpsertOptions(transcoder=RawBinaryTranscoder(), timeout=timedelta(seconds=30)))
    got = collection.get(key, GetOptions(transcoder=RawBinaryTranscoder(), timeout=timedelta(seconds=30)))
    assert len(got.value) == MAX_VALUE_BYTES
    collection.remove(key)


def test_key_of_251_bytes_raises_invalid_argument(collection):
    """Keys longer than 250 bytes are refused with InvalidArgumentException (EINVAL on the wire)."""
    with pytest.raises(InvalidArgumentException):
        collection.upsert("k" * 251, {"v": 1})


def test_wrong_password_raises_authentication_exception(server):
    """A wrong password fails SASL (AUTH_ERROR) and the SDK raises AuthenticationException, not a timeout."""
    with pytest.raises(AuthenticationException):
        c = connect(server, password="not-the-password")
        try:
            c.wait_until_ready(timedelta(seconds=10))
            c.bucket("default").default_collection().get("anything")
        finally:
            c.close()


def test_unknown_user_raises_authentication_exception(server):
    """An unknown user name fails SASL the same way as a wrong password."""
    with pytest.raises(AuthenticationException):
        c = connect(server, username="nobody-here", password="password")
        try:
            c.wait_until_ready(timedelta(seconds=10))
            c.bucket("default").default_collection().get("anything")
        finally:
            c.close()


def test_open_missing_bucket_fails(cluster):
    """Opening a bucket that does not exist fails at SELECT_BUCKET (EACCESS, as Couchbase answers for a bucket the
    user cannot see) with BucketNotFoundException, not with a retry-until-timeout (which KEY_ENOENT would cause)."""
    with pytest.raises(BucketNotFoundException):
        b = cluster.bucket("no-such-bucket")
        b.default_collection().get("k", GetOptions(timeout=timedelta(seconds=2)))
