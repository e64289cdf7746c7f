"""Bulk and concurrent traffic: thousands of upserts in flight at once, then every document read back."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from acouchbase.cluster import Cluster as AsyncCluster
from couchbase.options import GetMultiOptions, RemoveMultiOptions, UpsertMultiOptions

from sdk_connect import cluster_options

DOC_COUNT = 5000
BULK_TIMEOUT = timedelta(seconds=30)


def prefix() -> str:
    return f"bulk-{uuid.uuid4().hex[:8]}"


def value_for(i: int) -> dict:
    return {"i": i, "sq": i * i, "pad": "x" * (i % 64)}


def test_upsert_multi_5000_then_get_multi(collection):
    """upsert_multi pipelines 5,000 SETs on the connection; get_multi then returns every value unchanged."""
    p = prefix()
    docs = {f"{p}-{i}": value_for(i) for i in range(DOC_COUNT)}
    res = collection.upsert_multi(docs, UpsertMultiOptions(timeout=BULK_TIMEOUT))
    assert res.all_ok, dict(list(res.exceptions.items())[:5])
    assert len(res.results) == DOC_COUNT
    by_vbucket = {}
    for r in res.results.values():
        t = r.mutation_token()
        by_vbucket.setdefault(t.partition_id, []).append((t.sequence_number, r.cas))
    for vb, muts in by_vbucket.items():
        muts.sort()
        cases = [cas for _, cas in muts]
        # The HLC is per vBucket: within one, later mutations (higher seqno) always get a higher CAS.
        assert all(a < b for a, b in zip(cases, cases[1:])), f"vBucket {vb}: CAS not increasing with seqno"

    got = collection.get_multi(list(docs), GetMultiOptions(timeout=BULK_TIMEOUT))
    assert got.all_ok, dict(list(got.exceptions.items())[:5])
    assert {k: r.content_as[dict] for k, r in got.results.items()} == docs

    removed = collection.remove_multi(list(docs), RemoveMultiOptions(timeout=BULK_TIMEOUT))
    assert removed.all_ok
    exists = collection.exists_multi(list(docs))
    assert not any(r.exists for r in exists.results.values())


def test_5000_concurrent_upserts_with_asyncio(server, collection):
    """5,000 upserts issued concurrently through acouchbase (asyncio) all succeed and all read back correctly."""
    p = prefix()

    async def run():
        c = await AsyncCluster.connect(server.connection_string, cluster_options())
        try:
            b = c.bucket("default")
            await b.on_connect()
            coll = b.default_collection()
            results = await asyncio.gather(*(coll.upsert(f"{p}-{i}", value_for(i)) for i in range(DOC_COUNT)),
                                           return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            assert not errors, f"{len(errors)} failed, first: {errors[0]!r}"
            reads = await asyncio.gather(*(coll.get(f"{p}-{i}") for i in range(DOC_COUNT)))
            return [r.content_as[dict] for r in reads]
        finally:
            await c.close()

    values = asyncio.run(run())
    assert values == [value_for(i) for i in range(DOC_COUNT)]
    # Read again through the synchronous client: the data are visible to every connection.
    got = collection.get_multi([f"{p}-{i}" for i in range(DOC_COUNT)])
    assert got.all_ok
    assert got.results[f"{p}-4999"].content_as[dict] == value_for(4999)


def test_concurrent_upserts_from_threads_to_same_keys(collection):
    """8 threads rewriting the same 200 keys concurrently: every op succeeds and each key ends with a value one
    of the writers wrote (no torn or lost documents)."""
    p = prefix()
    keys = [f"{p}-{i}" for i in range(200)]

    def writer(t: int) -> int:
        for k in keys:
            collection.upsert(k, {"writer": t, "key": k})
        return t

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(writer, range(8))) == list(range(8))
    got = collection.get_multi(keys)
    assert got.all_ok
    for k, r in got.results.items():
        doc = r.content_as[dict]
        assert doc["key"] == k and doc["writer"] in range(8)


def test_concurrent_increments_are_atomic(binary, collection, key):
    """1,000 increments from 8 threads on one counter lose no update: the final value is exactly 1,000."""
    from couchbase.options import IncrementOptions, SignedInt64, DeltaValue
    binary.increment(key, IncrementOptions(initial=SignedInt64(0)))

    def bump(_):
        binary.increment(key, IncrementOptions(delta=DeltaValue(1)))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(bump, range(1000)))
    assert collection.get(key).content_as[int] == 1000
