"""Sub-document lookups and mutations (every spec type, xattrs, virtual xattrs, macros) through the Python SDK."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import couchbase.subdocument as SD
from couchbase.exceptions import (CasMismatchException, DocumentExistsException, DocumentNotFoundException,
                                  DocumentNotJsonException, InvalidArgumentException, PathExistsException,
                                  PathMismatchException, PathNotFoundException)
from couchbase.options import GetOptions, LookupInOptions, MutateInOptions, UpsertOptions
from couchbase.subdocument import MutationMacro, StoreSemantics, convert_macro_cas_to_cas
from couchbase.transcoder import RawBinaryTranscoder, RawJSONTranscoder

JSON_FLAGS = 0x02000000


def base_doc():
    return {"name": "settee", "seats": 3, "tags": ["red", "velvet"], "dims": {"w": 200, "h": 90}, "n": 10}


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as Couchbase uses for `value_crc32c`."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def body(collection, key):
    return collection.get(key).content_as[dict]


# --- lookups ----------------------------------------------------------------------------------------------------


def test_lookup_get_exists_count(collection, key):
    """lookup_in with get, exists and count specs returns each path's value, presence and element count."""
    collection.upsert(key, base_doc())
    res = collection.lookup_in(key, [SD.get("name"), SD.get("dims.w"), SD.exists("tags"), SD.exists("nope"),
                                     SD.count("tags"), SD.count("dims"), SD.get("tags[1]"), SD.get("tags[-1]")])
    assert res.content_as[str](0) == "settee"
    assert res.content_as[int](1) == 200
    assert res.exists(2) is True
    assert res.exists(3) is False
    assert res.content_as[int](4) == 2
    assert res.content_as[int](5) == 2
    assert res.content_as[str](6) == "velvet"
    assert res.content_as[str](7) == "velvet"
    assert res.cas == collection.get(key).cas


def test_lookup_full_document_spec(collection, key):
    """The whole-document get spec (opcode GET_DOC, empty path) returns the full body."""
    collection.upsert(key, base_doc())
    res = collection.lookup_in(key, [SD.get_full()])
    assert res.content_as[dict](0) == base_doc()


def test_lookup_missing_path_raises_path_not_found(collection, key):
    """A get spec on a missing path fails that spec only, with PathNotFoundException; other specs still succeed."""
    collection.upsert(key, base_doc())
    res = collection.lookup_in(key, [SD.get("nope.deeper"), SD.get("name")])
    with pytest.raises(PathNotFoundException):
        res.content_as[str](0)
    assert res.content_as[str](1) == "settee"


def test_lookup_path_through_scalar_raises_path_mismatch(collection, key):
    """Treating a string as an object or an array fails with PathMismatchException."""
    collection.upsert(key, base_doc())
    res = collection.lookup_in(key, [SD.get("name.first"), SD.get("name[0]")])
    with pytest.raises(PathMismatchException):
        res.content_as[str](0)
    with pytest.raises(PathMismatchException):
        res.content_as[str](1)


def test_lookup_missing_document_raises_document_not_found(collection, key):
    """lookup_in on a missing key fails at document level with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.lookup_in(key, [SD.get("name")])


def test_lookup_on_binary_document_raises_not_json(collection, key):
    """A path lookup in a non-JSON document fails with DocumentNotJsonException."""
    collection.upsert(key, b"\x00\x01\x02", UpsertOptions(transcoder=RawBinaryTranscoder()))
    with pytest.raises(DocumentNotJsonException):
        res = collection.lookup_in(key, [SD.get("a")])
        res.content_as[str](0)


# --- mutations --------------------------------------------------------------------------------------------------


def test_mutate_insert_upsert_replace_remove(collection, key):
    """insert adds a new path, upsert overwrites or adds, replace overwrites, remove deletes; CAS changes."""
    cas = collection.upsert(key, base_doc()).cas
    res = collection.mutate_in(key, [SD.insert("color", "red"), SD.upsert("seats", 4), SD.upsert("legs", 4),
                                     SD.replace("name", "couch"), SD.remove("n")])
    assert res.cas not in (0, cas)
    doc = body(collection, key)
    assert doc["color"] == "red" and doc["seats"] == 4 and doc["legs"] == 4 and doc["name"] == "couch"
    assert "n" not in doc
    assert collection.get(key).cas == res.cas


def test_mutate_create_parents(collection, key):
    """With create_parents (MKDIR_P) intermediate objects are created for insert/upsert/array_append."""
    collection.upsert(key, {})
    collection.mutate_in(key, [SD.upsert("a.b.c", 1, create_parents=True),
                               SD.insert("x.y", True, create_parents=True),
                               SD.array_append("list.items", "first", create_parents=True)])
    assert body(collection, key) == {"a": {"b": {"c": 1}}, "x": {"y": True}, "list": {"items": ["first"]}}


def test_mutate_upsert_without_parents_raises_path_not_found(collection, key):
    """Without create_parents a missing parent path fails with PathNotFoundException."""
    collection.upsert(key, {})
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.upsert("a.b", 1)])


def test_mutate_insert_existing_path_raises_path_exists(collection, key):
    """insert on a path that exists fails with PathExistsException and leaves the body unchanged."""
    collection.upsert(key, base_doc())
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.insert("name", "other")])
    assert body(collection, key) == base_doc()


def test_mutate_replace_missing_path_raises_path_not_found(collection, key):
    """replace on a missing path fails with PathNotFoundException."""
    collection.upsert(key, base_doc())
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.replace("nope", 1)])


def test_mutate_remove_missing_path_raises_path_not_found(collection, key):
    """remove on a missing path fails with PathNotFoundException."""
    collection.upsert(key, base_doc())
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.remove("nope")])


def test_mutate_is_atomic_when_a_later_spec_fails(collection, key):
    """If any spec fails, none is applied: the first spec's change is not visible afterwards."""
    cas = collection.upsert(key, base_doc()).cas
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.upsert("seats", 99), SD.replace("missing.path", 1)])
    assert body(collection, key) == base_doc()
    assert collection.get(key).cas == cas


def test_array_append_prepend_insert(collection, key):
    """array_append/prepend add at either end (several values at once too), array_insert at an index."""
    collection.upsert(key, {"arr": [2, 3]})
    collection.mutate_in(key, [SD.array_append("arr", 4), SD.array_prepend("arr", 1),
                               SD.array_append("arr", 5, 6), SD.array_insert("arr[1]", "x")])
    assert body(collection, key)["arr"] == [1, "x", 2, 3, 4, 5, 6]


def test_array_addunique_adds_then_refuses_duplicate(collection, key):
    """array_addunique appends a new scalar and fails with PathExistsException when it is already present."""
    collection.upsert(key, {"set": ["a"]})
    collection.mutate_in(key, [SD.array_addunique("set", "b")])
    assert body(collection, key)["set"] == ["a", "b"]
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.array_addunique("set", "a")])


def test_array_append_on_non_array_raises_path_mismatch(collection, key):
    """Array operations on an object or scalar fail with PathMismatchException."""
    collection.upsert(key, base_doc())
    with pytest.raises(PathMismatchException):
        collection.mutate_in(key, [SD.array_append("name", "x")])


def test_array_insert_out_of_range_raises_path_not_found(collection, key):
    """array_insert past the end of the array fails with PathNotFoundException."""
    collection.upsert(key, {"arr": [1]})
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.array_insert("arr[5]", 2)])


def test_subdoc_increment_decrement_return_new_values(collection, key):
    """Counter specs apply the delta and return the resulting number in the mutation result."""
    collection.upsert(key, base_doc())
    res = collection.mutate_in(key, [SD.increment("n", 5), SD.decrement("seats", 1),
                                     SD.increment("fresh.counter", 7, create_parents=True)])
    assert res.content_as[int](0) == 15
    assert res.content_as[int](1) == 2
    assert res.content_as[int](2) == 7
    doc = body(collection, key)
    assert doc["n"] == 15 and doc["seats"] == 2 and doc["fresh"] == {"counter": 7}


def test_subdoc_counter_on_string_raises_path_mismatch(collection, key):
    """A counter spec on a non-numeric value fails with PathMismatchException."""
    collection.upsert(key, base_doc())
    with pytest.raises(PathMismatchException):
        collection.mutate_in(key, [SD.increment("name", 1)])


def test_mutate_missing_document_raises_document_not_found(collection, key):
    """mutate_in with default (replace) semantics on a missing key fails with DocumentNotFoundException."""
    with pytest.raises(DocumentNotFoundException):
        collection.mutate_in(key, [SD.upsert("a", 1)])


def test_store_semantics_upsert_creates_document(collection, key):
    """StoreSemantics.UPSERT (doc flag MKDOC) creates the document when it is missing."""
    res = collection.mutate_in(key, [SD.upsert("a", 1), SD.upsert("b.c", 2, create_parents=True)],
                               MutateInOptions(store_semantics=StoreSemantics.UPSERT))
    assert res.cas != 0
    assert body(collection, key) == {"a": 1, "b": {"c": 2}}


def test_store_semantics_upsert_updates_existing_document(collection, key):
    """StoreSemantics.UPSERT on an existing document just applies the specs."""
    collection.upsert(key, {"keep": True})
    collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(store_semantics=StoreSemantics.UPSERT))
    assert body(collection, key) == {"keep": True, "a": 1}


def test_store_semantics_insert_creates_then_refuses(collection, key):
    """StoreSemantics.INSERT (doc flag ADD) creates a missing document and fails with DocumentExists after."""
    collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(store_semantics=StoreSemantics.INSERT))
    assert body(collection, key) == {"a": 1}
    with pytest.raises(DocumentExistsException):
        collection.mutate_in(key, [SD.upsert("a", 2)], MutateInOptions(store_semantics=StoreSemantics.INSERT))
    assert body(collection, key) == {"a": 1}


def test_store_semantics_replace_on_missing_raises_not_found(collection, key):
    """StoreSemantics.REPLACE (explicit) behaves like the default: missing document → DocumentNotFound."""
    with pytest.raises(DocumentNotFoundException):
        collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(store_semantics=StoreSemantics.REPLACE))


def test_mutate_with_stale_cas_raises_cas_mismatch(collection, key):
    """mutate_in with an outdated CAS fails with CasMismatchException."""
    old = collection.upsert(key, base_doc()).cas
    collection.upsert(key, base_doc())
    with pytest.raises(CasMismatchException):
        collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(cas=old))


def test_mutate_with_current_cas_succeeds(collection, key):
    """mutate_in with the current CAS is applied."""
    cas = collection.upsert(key, base_doc()).cas
    collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(cas=cas))
    assert body(collection, key)["a"] == 1


def test_mutate_with_expiry_sets_document_expiry(collection, key):
    """An expiry on mutate_in applies to the whole document ($document.exptime becomes non-zero)."""
    collection.upsert(key, base_doc())
    collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(expiry=timedelta(hours=1)))
    exptime = collection.lookup_in(key, [SD.get("$document.exptime", xattr=True)]).content_as[int](0)
    assert abs(exptime - (time.time() + 3600)) < 120


# --- extended attributes ----------------------------------------------------------------------------------------


def test_user_xattr_is_stored_apart_from_body(collection, key):
    """A user xattr written with mutate_in is readable with an xattr lookup and never appears in the body."""
    collection.upsert(key, base_doc())
    collection.mutate_in(key, [SD.upsert("meta.owner", "alice", xattr=True, create_parents=True),
                               SD.upsert("meta.rev", 1, xattr=True)])
    assert collection.get(key).content_as[dict] == base_doc()
    res = collection.lookup_in(key, [SD.get("meta", xattr=True), SD.get("meta.owner", xattr=True),
                                     SD.exists("meta.rev", xattr=True), SD.get("name")])
    assert res.content_as[dict](0) == {"owner": "alice", "rev": 1}
    assert res.content_as[str](1) == "alice"
    assert res.exists(2) is True
    assert res.content_as[str](3) == "settee"


def test_system_xattr_round_trips(collection, key):
    """An underscore-prefixed (system) xattr can be written and read back."""
    collection.upsert(key, base_doc())
    collection.mutate_in(key, [SD.upsert("_sys", {"k": "v"}, xattr=True)])
    assert collection.lookup_in(key, [SD.get("_sys", xattr=True)]).content_as[dict](0) == {"k": "v"}


def test_xattr_insert_existing_raises_path_exists_and_remove_works(collection, key):
    """xattr paths follow the same rules as body paths: insert twice → PathExists; remove deletes."""
    collection.upsert(key, base_doc())
    collection.mutate_in(key, [SD.insert("tx", {"id": 1}, xattr=True)])
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.insert("tx", {"id": 2}, xattr=True)])
    collection.mutate_in(key, [SD.remove("tx", xattr=True)])
    res = collection.lookup_in(key, [SD.exists("tx", xattr=True)])
    assert res.exists(0) is False


def test_missing_xattr_lookup_raises_path_not_found(collection, key):
    """An xattr lookup of an xattr that was never written fails with PathNotFoundException."""
    collection.upsert(key, base_doc())
    res = collection.lookup_in(key, [SD.get("nothing_here", xattr=True)])
    with pytest.raises(PathNotFoundException):
        res.content_as[dict](0)


def test_xattr_counter_and_array(collection, key):
    """Counter and array specs work inside xattrs too."""
    collection.upsert(key, base_doc())
    res = collection.mutate_in(key, [SD.increment("x.count", 3, xattr=True, create_parents=True),
                                     SD.array_append("x.list", "a", xattr=True, create_parents=True)])
    assert res.content_as[int](0) == 3
    assert collection.lookup_in(key, [SD.get("x", xattr=True)]).content_as[dict](0) == {"count": 3, "list": ["a"]}


def test_document_virtual_xattr_fields(collection, key):
    """`$document` reports CAS, seqno, exptime, flags, value_bytes, datatype, deleted, last_modified, value_crc32c
    with the types and values Couchbase uses."""
    cas = collection.upsert(key, base_doc()).cas
    raw = collection.get(key, GetOptions(transcoder=RawJSONTranscoder())).value
    res = collection.lookup_in(key, [SD.get("$document", xattr=True)])
    doc = res.content_as[dict](0)
    assert int(doc["CAS"], 16) == cas
    assert doc["CAS"].startswith("0x") and len(doc["CAS"]) == 18
    assert doc["seqno"].startswith("0x") and int(doc["seqno"], 16) > 0
    assert doc["vbucket_uuid"].startswith("0x")
    assert doc["exptime"] == 0
    assert doc["flags"] == JSON_FLAGS
    assert doc["value_bytes"] == len(raw)
    assert "json" in doc["datatype"]
    assert doc["deleted"] is False
    assert isinstance(doc["last_modified"], str)
    assert abs(int(doc["last_modified"]) - cas // 1_000_000_000) <= 1
    assert abs(int(doc["last_modified"]) - time.time()) < 300
    assert int(doc["value_crc32c"], 16) == crc32c(raw)


def test_document_virtual_xattr_single_fields(collection, key):
    """`$document.<field>` returns exactly the value of that field inside `$document`."""
    collection.upsert(key, base_doc(), UpsertOptions(expiry=timedelta(hours=1)))
    res = collection.lookup_in(key, [SD.get("$document", xattr=True), SD.get("$document.exptime", xattr=True),
                                     SD.get("$document.CAS", xattr=True), SD.get("$document.value_bytes", xattr=True),
                                     SD.get("$document.flags", xattr=True)])
    whole = res.content_as[dict](0)
    assert whole["exptime"] > 0
    assert res.content_as[int](1) == whole["exptime"]
    assert res.content_as[str](2) == whole["CAS"]
    assert res.content_as[int](3) == whole["value_bytes"]
    assert res.content_as[int](4) == whole["flags"]


def test_mutation_macro_cas_expands_to_new_cas(collection, key):
    """MutationMacro.cas() is replaced by the mutation's own CAS (in Couchbase's byte-swapped hex form)."""
    collection.upsert(key, base_doc())
    res = collection.mutate_in(key, [SD.upsert("txn.cas", MutationMacro.cas(), create_parents=True)])
    stored = collection.lookup_in(key, [SD.get("txn.cas", xattr=True)]).content_as[str](0)
    assert stored.startswith("0x") and len(stored) == 18
    assert convert_macro_cas_to_cas(stored) == res.cas


def test_mutation_macro_seqno_and_crc32c(collection, key):
    """MutationMacro.seq_no() and value_crc32c() expand to the new seqno and the body's CRC32C."""
    collection.upsert(key, base_doc())
    res = collection.mutate_in(key, [SD.upsert("m.seqno", MutationMacro.seq_no(), create_parents=True),
                                     SD.upsert("m.crc", MutationMacro.value_crc32c(), create_parents=True)])
    raw = collection.get(key, GetOptions(transcoder=RawJSONTranscoder())).value
    m = collection.lookup_in(key, [SD.get("m", xattr=True)]).content_as[dict](0)
    assert int(m["seqno"], 16) == res.mutation_token().sequence_number
    assert int(m["crc"], 16) == crc32c(raw)


def test_mutation_macro_in_array_append(collection, key):
    """Macros expand inside array_append too."""
    collection.upsert(key, base_doc())
    res = collection.mutate_in(key, [SD.array_append("hist", MutationMacro.cas(), create_parents=True)])
    hist = collection.lookup_in(key, [SD.get("hist", xattr=True)]).content_as[list](0)
    assert len(hist) == 1
    assert convert_macro_cas_to_cas(hist[0]) == res.cas


# --- limits, virtual $vbucket and tombstones --------------------------------------------------------------------


def test_vbucket_virtual_xattr_reports_hlc(collection, key):
    """`$vbucket.HLC` reports the vBucket's hybrid logical clock: `now` in seconds (decimal string) and its mode."""
    collection.upsert(key, base_doc())
    hlc = collection.lookup_in(key, [SD.get("$vbucket.HLC", xattr=True)]).content_as[dict](0)
    assert abs(int(hlc["now"]) - time.time()) < 300, hlc
    assert hlc["mode"] in ("real", "logical"), hlc


def test_path_longer_than_1024_bytes_is_invalid(collection, key):
    """kv_engine's validator refuses a path over 1024 bytes with EINVAL (InvalidArgumentException); a 1024-byte
    path is valid and simply not found."""
    collection.upsert(key, base_doc())
    with pytest.raises(InvalidArgumentException):
        collection.lookup_in(key, [SD.get("a" * 1025)])
    res = collection.lookup_in(key, [SD.get("a" * 1024)])
    with pytest.raises(PathNotFoundException):
        res.content_as[str](0)


def test_macro_in_array_addunique_is_refused(collection, key):
    """Couchbase refuses macro expansion in array_add_unique (EINVAL → InvalidArgumentException)."""
    collection.upsert(key, base_doc())
    with pytest.raises(InvalidArgumentException):
        collection.mutate_in(key, [SD.array_addunique("set", MutationMacro.cas(), create_parents=True)])


def test_tombstone_keeps_system_xattrs_only(collection, key):
    """Removing a document leaves a tombstone that keeps system (`_`) xattrs and drops user xattrs and the body:
    a normal lookup is DocumentNotFound, an access_deleted lookup sees `_sys` and `$document.deleted` = true."""
    collection.upsert(key, base_doc())
    collection.mutate_in(key, [SD.upsert("_sys", {"txn": 1}, xattr=True), SD.upsert("user", {"u": 1}, xattr=True)])
    collection.remove(key)
    with pytest.raises(DocumentNotFoundException):
        collection.lookup_in(key, [SD.get("_sys", xattr=True)])
    res = collection.lookup_in(key, [SD.get("_sys", xattr=True), SD.exists("user", xattr=True),
                                     SD.get("$document.deleted", xattr=True)],
                               LookupInOptions(access_deleted=True))
    assert res.content_as[dict](0) == {"txn": 1}
    assert res.exists(1) is False
    assert res.content_as[bool](2) is True


def test_access_deleted_mutation_updates_tombstone_xattr(collection, key):
    """mutate_in with access_deleted writes a system xattr on a tombstone without reviving the document."""
    collection.upsert(key, base_doc())
    collection.remove(key)
    collection.mutate_in(key, [SD.upsert("_txn", {"state": "pending"}, xattr=True, create_parents=True)],
                         MutateInOptions(access_deleted=True))
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)
    res = collection.lookup_in(key, [SD.get("_txn", xattr=True)], LookupInOptions(access_deleted=True))
    assert res.content_as[dict](0) == {"state": "pending"}
