"""Basic key-value operations through the official Python SDK: values, CAS, flags and replica reads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from couchbase.exceptions import DocumentNotFoundException, DocumentUnretrievableException, ValueFormatException
from couchbase.options import (GetOptions, InsertOptions, RemoveOptions, ReplaceOptions, UpsertOptions)
from couchbase.transcoder import (LegacyTranscoder, RawBinaryTranscoder, RawJSONTranscoder, RawStringTranscoder)

DOC = {"name": "settee", "kind": "sofa", "seats": 3, "tags": ["red", "velvet"], "nested": {"a": {"b": 1}}}


def test_upsert_then_get_returns_same_value_and_cas(collection, key):
    """An upsert stores the JSON body verbatim and GET returns it with the CAS the upsert reported."""
    res = collection.upsert(key, DOC)
    assert res.cas != 0
    got = collection.get(key)
    assert got.content_as[dict] == DOC
    assert got.cas == res.cas


def test_upsert_overwrites_and_changes_cas(collection, key):
    """Every mutation gets a new, non-zero CAS and the last upsert wins."""
    first = collection.upsert(key, {"v": 1})
    second = collection.upsert(key, {"v": 2})
    assert first.cas != 0 and second.cas != 0
    assert first.cas != second.cas
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_insert_creates_missing_document(collection, key):
    """Insert (ADD) of a new key succeeds and the document is readable."""
    res = collection.insert(key, DOC)
    assert res.cas != 0
    assert collection.get(key).content_as[dict] == DOC


def test_replace_with_current_cas_succeeds(collection, key):
    """Replace with the document's current CAS swaps the value and returns a fresh CAS."""
    cas = collection.upsert(key, {"v": 1}).cas
    res = collection.replace(key, {"v": 2}, ReplaceOptions(cas=cas))
    assert res.cas not in (0, cas)
    got = collection.get(key)
    assert got.content_as[dict] == {"v": 2}
    assert got.cas == res.cas


def test_replace_without_cas_overwrites_existing(collection, key):
    """Replace without a CAS overwrites an existing document."""
    collection.upsert(key, {"v": 1})
    collection.replace(key, {"v": 3})
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_remove_deletes_document(collection, key):
    """Remove returns a CAS and the document then reads as missing."""
    collection.upsert(key, DOC)
    res = collection.remove(key)
    assert res.cas != 0
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_remove_with_current_cas_succeeds(collection, key):
    """Remove with the current CAS deletes the document."""
    cas = collection.upsert(key, DOC).cas
    collection.remove(key, RemoveOptions(cas=cas))
    assert collection.exists(key).exists is False


def test_exists_reports_presence_and_absence(collection, key):
    """exists (GET_META v2) is true for a stored document and false for a missing or removed one."""
    assert collection.exists(key).exists is False
    cas = collection.upsert(key, DOC).cas
    res = collection.exists(key)
    assert res.exists is True
    assert res.cas == cas
    collection.remove(key)
    assert collection.exists(key).exists is False


def test_mutation_token_is_returned(collection, key):
    """Mutations carry a mutation token (vbuuid + seqno) and the seqno grows with each write to the vBucket."""
    t1 = collection.upsert(key, {"v": 1}).mutation_token()
    t2 = collection.upsert(key, {"v": 2}).mutation_token()
    assert t1 is not None and t2 is not None
    assert t1.partition_id == t2.partition_id
    assert t1.partition_uuid == t2.partition_uuid
    assert t2.sequence_number > t1.sequence_number


def test_get_any_replica_is_served_by_active(collection, key):
    """On a single node with no replicas, get_any_replica returns the active copy."""
    collection.upsert(key, DOC)
    res = collection.get_any_replica(key)
    assert res.content_as[dict] == DOC
    assert not res.is_replica


def test_get_all_replicas_returns_only_active(collection, key):
    """get_all_replicas on a 0-replica bucket yields exactly one result: the active."""
    collection.upsert(key, DOC)
    results = list(collection.get_all_replicas(key))
    assert len(results) == 1
    assert results[0].content_as[dict] == DOC
    assert not results[0].is_replica


def test_get_any_replica_missing_document_fails(collection, key):
    """A replica read of a missing key gets KEY_ENOENT from every copy: DocumentUnretrievableException."""
    with pytest.raises(DocumentUnretrievableException):
        collection.get_any_replica(key)


def test_get_with_projection_returns_selected_fields(collection, key):
    """get(project=...) (sub-document lookup under the hood) returns only the requested paths."""
    collection.upsert(key, DOC)
    got = collection.get(key, GetOptions(project=["name", "nested.a.b"]))
    assert got.content_as[dict] == {"name": "settee", "nested": {"a": {"b": 1}}}


def test_json_scalar_string_round_trip(collection, key):
    """A JSON string document (default transcoder) round-trips as a str."""
    collection.upsert(key, "just a string")
    assert collection.get(key).content_as[str] == "just a string"


def test_raw_binary_transcoder_round_trips_bytes(collection, key):
    """RawBinaryTranscoder stores arbitrary bytes (including NUL and non-UTF-8) and the binary flags come back."""
    payload = bytes(range(256)) * 4
    collection.upsert(key, payload, UpsertOptions(transcoder=RawBinaryTranscoder()))
    got = collection.get(key, GetOptions(transcoder=RawBinaryTranscoder()))
    assert got.value == payload


def test_raw_string_transcoder_round_trips_text(collection, key):
    """RawStringTranscoder stores UTF-8 text with string flags and reads it back unchanged."""
    text = "héllo wörld ✓"
    collection.upsert(key, text, UpsertOptions(transcoder=RawStringTranscoder()))
    got = collection.get(key, GetOptions(transcoder=RawStringTranscoder()))
    assert got.value == text


def test_raw_json_transcoder_returns_exact_bytes(collection, key):
    """RawJSONTranscoder writes pre-encoded JSON; the server returns exactly those bytes."""
    raw = b'{"b":2,  "a":[1,2,3]}'
    collection.upsert(key, raw, UpsertOptions(transcoder=RawJSONTranscoder()))
    got = collection.get(key, GetOptions(transcoder=RawJSONTranscoder()))
    assert got.value == raw
    assert collection.get(key).content_as[dict] == {"b": 2, "a": [1, 2, 3]}


def test_flags_are_stored_verbatim(collection, key):
    """Flags written by one transcoder are returned unchanged: a binary document refuses to decode as JSON/string
    (the SDK decodes lazily, on `.value`)."""
    collection.upsert(key, b"\x00\x01binary", UpsertOptions(transcoder=RawBinaryTranscoder()))
    with pytest.raises(ValueFormatException):
        collection.get(key, GetOptions(transcoder=RawStringTranscoder())).value
    with pytest.raises(ValueFormatException):
        collection.get(key, GetOptions(transcoder=RawJSONTranscoder())).value


def test_legacy_transcoder_round_trips_str_and_bytes(collection, key):
    """LegacyTranscoder picks flags by Python type; both str and bytes survive a round trip."""
    collection.upsert(key, "legacy text", UpsertOptions(transcoder=LegacyTranscoder()))
    assert collection.get(key, GetOptions(transcoder=LegacyTranscoder())).value == "legacy text"
    collection.upsert(key, b"\xffraw", UpsertOptions(transcoder=LegacyTranscoder()))
    assert collection.get(key, GetOptions(transcoder=LegacyTranscoder())).value == b"\xffraw"


def test_large_value_round_trips(collection, key):
    """A 5 MiB binary value is stored and returned intact (well below the 20 MiB limit)."""
    payload = (b"0123456789abcdef" * 65536) * 5
    collection.upsert(key, payload, UpsertOptions(transcoder=RawBinaryTranscoder()))
    assert collection.get(key, GetOptions(transcoder=RawBinaryTranscoder())).value == payload


def test_key_of_250_bytes_is_accepted(collection):
    """250 bytes is the largest key Couchbase accepts."""
    long_key = "k" * 250
    collection.upsert(long_key, {"len": 250})
    assert collection.get(long_key).content_as[dict] == {"len": 250}
    collection.remove(long_key)


def test_utf8_key_round_trips(collection):
    """Keys are bytes: a multi-byte UTF-8 key is stored and found again."""
    k = "clé-ünïcødé-✓"
    collection.upsert(k, {"ok": True})
    assert collection.get(k).content_as[dict] == {"ok": True}
    collection.remove(k)


def test_insert_with_expiry_and_remove(collection, key):
    """Insert accepts an expiry; the document is readable right away and removable."""
    collection.insert(key, DOC, InsertOptions(expiry=timedelta(hours=1)))
    assert collection.get(key).content_as[dict] == DOC
    collection.remove(key)
    assert collection.exists(key).exists is False
