"""Scopes and collections: the collection manager (REST) and KV traffic in non-default collections (LEB128 ids)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

import couchbase.subdocument as SD
from couchbase.exceptions import (CollectionAlreadyExistsException, CollectionNotFoundException,
                                  DocumentNotFoundException, ScopeAlreadyExistsException, ScopeNotFoundException,
                                  UnAmbiguousTimeoutException, AmbiguousTimeoutException)
from couchbase.management.collections import CreateCollectionSettings
from couchbase.options import (DeltaValue, GetOptions, IncrementOptions, SignedInt64, UpsertOptions)

from conditions import wait_until

READY_SECONDS = 15.0
SHORT = timedelta(seconds=2)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def scope_names(manager):
    return {s.name for s in manager.get_all_scopes()}


def collection_names(manager, scope):
    for s in manager.get_all_scopes():
        if s.name == scope:
            return {c.name for c in s.collections}
    return set()


def usable(coll) -> bool:
    """True once a KV write to `coll` succeeds (collection id resolved)."""
    coll.upsert("__probe", {"ok": True}, UpsertOptions(timeout=SHORT))
    return True


@pytest.fixture(scope="module")
def manager(bucket):
    return bucket.collections()


@pytest.fixture(scope="module")
def named(bucket, manager):
    """A scope and collection created through the SDK's collection manager, usable for KV."""
    scope, coll = unique("scope"), unique("coll")
    manager.create_scope(scope)
    manager.create_collection(scope, coll)
    c = bucket.scope(scope).collection(coll)
    wait_until(lambda: usable(c), READY_SECONDS, f"collection {scope}.{coll} to accept writes")
    return scope, coll, c


def test_default_scope_and_collection_are_listed(manager):
    """get_all_scopes always lists _default with its _default collection."""
    assert "_default" in scope_names(manager)
    assert "_default" in collection_names(manager, "_default")


def test_created_scope_and_collection_are_listed(manager, named):
    """A scope and collection created via the manager appear in get_all_scopes."""
    scope, coll, _ = named
    assert scope in scope_names(manager)
    assert collection_names(manager, scope) == {coll}


def test_kv_round_trip_in_named_collection(named, key):
    """upsert/get/replace/remove/exists work in a non-default collection."""
    _, _, c = named
    c.upsert(key, {"where": "named"})
    assert c.get(key).content_as[dict] == {"where": "named"}
    c.replace(key, {"where": "named", "v": 2})
    assert c.get(key).content_as[dict] == {"where": "named", "v": 2}
    assert c.exists(key).exists is True
    c.remove(key)
    assert c.exists(key).exists is False


def test_collections_are_isolated_namespaces(collection, named, key):
    """The same key in two collections names two independent documents."""
    _, _, c = named
    collection.upsert(key, {"where": "default"})
    c.upsert(key, {"where": "named"})
    assert collection.get(key).content_as[dict] == {"where": "default"}
    assert c.get(key).content_as[dict] == {"where": "named"}
    c.remove(key)
    assert collection.get(key).content_as[dict] == {"where": "default"}


def test_key_only_in_named_collection_is_missing_in_default(collection, named, key):
    """A document written to a named collection does not exist in the default collection."""
    _, _, c = named
    c.upsert(key, {"v": 1})
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_subdoc_and_counters_in_named_collection(named, key):
    """Sub-document and binary operations carry the collection id too."""
    _, _, c = named
    c.upsert(key, {"a": 1})
    c.mutate_in(key, [SD.upsert("b", 2)])
    assert c.lookup_in(key, [SD.get("b")]).content_as[int](0) == 2
    ckey = key + "-ctr"
    assert c.binary().increment(ckey, IncrementOptions(initial=SignedInt64(5), delta=DeltaValue(1))).content == 5
    assert c.binary().increment(ckey, IncrementOptions(delta=DeltaValue(1))).content == 6


def test_collection_in_default_scope(bucket, manager, key):
    """A named collection can live in the _default scope."""
    coll = unique("dflt")
    manager.create_collection("_default", coll)
    c = bucket.scope("_default").collection(coll)
    wait_until(lambda: usable(c), READY_SECONDS, f"collection _default.{coll}")
    c.upsert(key, {"v": 1})
    assert c.get(key).content_as[dict] == {"v": 1}
    assert coll in collection_names(manager, "_default")


def test_create_existing_scope_raises_scope_exists(manager, named):
    """Creating a scope twice fails with ScopeAlreadyExistsException."""
    scope, _, _ = named
    with pytest.raises(ScopeAlreadyExistsException):
        manager.create_scope(scope)


def test_create_existing_collection_raises_collection_exists(manager, named):
    """Creating a collection twice fails with CollectionAlreadyExistsException."""
    scope, coll, _ = named
    with pytest.raises(CollectionAlreadyExistsException):
        manager.create_collection(scope, coll)


def test_create_collection_in_missing_scope_raises_scope_not_found(manager):
    """Creating a collection in a scope that does not exist fails with ScopeNotFoundException."""
    with pytest.raises(ScopeNotFoundException):
        manager.create_collection(unique("noscope"), "c")


def test_drop_missing_scope_raises_scope_not_found(manager):
    """Dropping a scope that does not exist fails with ScopeNotFoundException."""
    with pytest.raises(ScopeNotFoundException):
        manager.drop_scope(unique("noscope"))


def test_drop_missing_collection_raises_collection_not_found(manager, named):
    """Dropping a collection that does not exist fails with CollectionNotFoundException."""
    scope, _, _ = named
    with pytest.raises(CollectionNotFoundException):
        manager.drop_collection(scope, unique("nocoll"))


def test_kv_in_missing_scope_raises_scope_not_found(bucket, key):
    """A KV op on a collection in a missing scope gets UNKNOWN_SCOPE from GET_COLLECTION_ID → ScopeNotFound."""
    c = bucket.scope(unique("noscope")).collection("c")
    with pytest.raises(ScopeNotFoundException):
        c.get(key, GetOptions(timeout=SHORT))


def test_kv_in_missing_collection_times_out(bucket, named, key):
    """A KV op on a missing collection gets UNKNOWN_COLLECTION from GET_COLLECTION_ID, which the SDK retries until
    its timeout: UnAmbiguousTimeoutException with retry reason key_value_collection_outdated."""
    scope, _, _ = named
    c = bucket.scope(scope).collection(unique("nocoll"))
    with pytest.raises(UnAmbiguousTimeoutException) as info:
        c.get(key, GetOptions(timeout=SHORT))
    assert "key_value_collection_outdated" in (info.value.error_context.retry_reasons or set()), repr(info.value)


def test_drop_collection_removes_it(bucket, manager, named, key):
    """A dropped collection disappears from get_all_scopes and KV ops on it stop succeeding."""
    scope, _, _ = named
    coll = unique("drop")
    manager.create_collection(scope, coll)
    c = bucket.scope(scope).collection(coll)
    wait_until(lambda: usable(c), READY_SECONDS, f"collection {scope}.{coll}")
    c.upsert(key, {"v": 1})
    manager.drop_collection(scope, coll)
    assert coll not in collection_names(manager, scope)

    def kv_fails():
        try:
            c.get(key, GetOptions(timeout=SHORT))
        except (UnAmbiguousTimeoutException, AmbiguousTimeoutException, CollectionNotFoundException):
            return True
        return False

    wait_until(kv_fails, READY_SECONDS, "KV on the dropped collection to fail")


def test_drop_scope_removes_it_and_its_collections(bucket, manager):
    """Dropping a scope removes it (and its collections) from the manifest."""
    scope = unique("tmpscope")
    manager.create_scope(scope)
    manager.create_collection(scope, "c1")
    assert collection_names(manager, scope) == {"c1"}
    manager.drop_scope(scope)
    assert scope not in scope_names(manager)


def test_collection_max_expiry_is_reported_and_applied(bucket, manager, key):
    """A collection created with max_expiry reports it, and documents written without TTL inherit it."""
    scope, coll = "_default", unique("ttl")
    manager.create_collection(scope, coll, CreateCollectionSettings(max_expiry=timedelta(seconds=2)))
    spec = [c for s in manager.get_all_scopes() if s.name == scope for c in s.collections if c.name == coll][0]
    assert spec.max_expiry == timedelta(seconds=2)
    c = bucket.scope(scope).collection(coll)
    wait_until(lambda: usable(c), READY_SECONDS, f"collection {scope}.{coll}")
    c.upsert(key, {"v": 1})
    assert c.get(key, GetOptions(with_expiry=True)).expiry_time is not None

    def gone():
        try:
            c.get(key)
        except DocumentNotFoundException:
            return True
        return False

    wait_until(gone, READY_SECONDS, "the document to expire by the collection's max_expiry")
