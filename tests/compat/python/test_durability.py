"""Synchronous durability (the durability frame info) on a single-node bucket: ephemeral buckets refuse the
persist levels, persistent (couchbase) buckets honour them."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

import couchbase.subdocument as SD
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import DurabilityImpossibleException, DurabilityInvalidLevelException
from couchbase.management.buckets import BucketType, CreateBucketSettings
from couchbase.options import (DecrementOptions, IncrementOptions, InsertOptions, MutateInOptions, RemoveOptions,
                               ReplaceOptions, SignedInt64, UpsertOptions)

from conditions import wait_until
from settee_server import suite_bucket_type

EPHEMERAL_ONLY = pytest.mark.skipif(suite_bucket_type() != "ephemeral", reason="ephemeral-bucket behaviour")
PERSISTENT_ONLY = pytest.mark.skipif(suite_bucket_type() != "couchbase", reason="persistent-bucket behaviour")

MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)
PERSIST_ACTIVE = ServerDurability(DurabilityLevel.MAJORITY_AND_PERSIST_TO_ACTIVE)
PERSIST_MAJORITY = ServerDurability(DurabilityLevel.PERSIST_TO_MAJORITY)
READY_SECONDS = 30.0


def test_majority_upsert_succeeds_with_zero_replicas(collection, key):
    """With 0 replicas the active alone is a majority, so a MAJORITY upsert is acknowledged and readable."""
    res = collection.upsert(key, {"v": 1}, UpsertOptions(durability=MAJORITY))
    assert res.cas != 0
    assert collection.get(key).content_as[dict] == {"v": 1}


def test_majority_applies_to_every_mutation_kind(collection, binary, key):
    """insert, replace, mutate_in, increment/decrement and remove all accept a MAJORITY durability frame."""
    collection.insert(key, {"v": 1}, InsertOptions(durability=MAJORITY))
    collection.replace(key, {"v": 2}, ReplaceOptions(durability=MAJORITY))
    collection.mutate_in(key, [SD.upsert("w", 3)], MutateInOptions(durability=MAJORITY))
    assert collection.get(key).content_as[dict] == {"v": 2, "w": 3}
    ctr = key + "-ctr"
    assert binary.increment(ctr, IncrementOptions(initial=SignedInt64(1), durability=MAJORITY)).content == 1
    assert binary.decrement(ctr, DecrementOptions(durability=MAJORITY)).content == 0
    collection.remove(key, RemoveOptions(durability=MAJORITY))
    assert collection.exists(key).exists is False


@EPHEMERAL_ONLY
def test_persist_to_majority_on_ephemeral_raises_invalid_level(collection, key):
    """PERSIST_TO_MAJORITY is meaningless for a memory-only bucket: DURABILITY_INVALID_LEVEL →
    DurabilityInvalidLevelException, and nothing is written."""
    with pytest.raises(DurabilityInvalidLevelException):
        collection.upsert(key, {"v": 1}, UpsertOptions(durability=PERSIST_MAJORITY))
    assert collection.exists(key).exists is False


@EPHEMERAL_ONLY
def test_majority_and_persist_active_on_ephemeral_raises_invalid_level(collection, key):
    """MAJORITY_AND_PERSIST_TO_ACTIVE is also refused on an ephemeral bucket with DurabilityInvalidLevelException."""
    with pytest.raises(DurabilityInvalidLevelException):
        collection.upsert(key, {"v": 1}, UpsertOptions(durability=PERSIST_ACTIVE))


@EPHEMERAL_ONLY
def test_persist_level_on_mutate_in_raises_invalid_level(collection, key):
    """The durability check applies to sub-document mutations too."""
    collection.upsert(key, {"v": 1})
    with pytest.raises(DurabilityInvalidLevelException):
        collection.mutate_in(key, [SD.upsert("w", 1)], MutateInOptions(durability=PERSIST_MAJORITY))
    assert collection.get(key).content_as[dict] == {"v": 1}


def test_majority_with_unreachable_replica_raises_impossible(cluster):
    """On a one-node cluster a bucket configured with 1 replica cannot reach a majority of 2 copies:
    a MAJORITY write gets DURABILITY_IMPOSSIBLE → DurabilityImpossibleException, while plain writes still work."""
    name = f"durimp_{uuid.uuid4().hex[:8]}"
    buckets = cluster.buckets()
    buckets.create_bucket(CreateBucketSettings(name=name, bucket_type=BucketType.EPHEMERAL, ram_quota_mb=100,
                                               num_replicas=1))
    try:
        c = cluster.bucket(name).default_collection()

        def writable():
            c.upsert("plain", {"ok": True}, UpsertOptions(timeout=timedelta(seconds=2)))
            return True

        wait_until(writable, READY_SECONDS, f"bucket {name} to accept plain writes")
        with pytest.raises(DurabilityImpossibleException):
            c.upsert("durable", {"v": 1}, UpsertOptions(durability=MAJORITY, timeout=timedelta(seconds=5)))
        assert c.get("plain").content_as[dict] == {"ok": True}
    finally:
        buckets.drop_bucket(name)


@PERSISTENT_ONLY
def test_persist_levels_succeed_on_a_persistent_bucket(collection, binary, key):
    """On a couchbase bucket both persist levels are acknowledged (after the flusher's fsync) for every mutation
    kind, and the values are readable."""
    for level in (PERSIST_ACTIVE, PERSIST_MAJORITY):
        collection.upsert(key, {"v": 1}, UpsertOptions(durability=level))
        collection.mutate_in(key, [SD.upsert("w", 2)], MutateInOptions(durability=level))
        assert collection.get(key).content_as[dict] == {"v": 1, "w": 2}
        assert binary.increment(key + "-n", IncrementOptions(durability=level)).content >= 0
        collection.remove(key, RemoveOptions(durability=level))
        assert collection.exists(key).exists is False
