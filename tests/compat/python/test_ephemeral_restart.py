"""A node of a three-node cluster holding a memory-only (ephemeral) bucket is killed and restarted before the
cluster fails it over: it comes back empty, so the copies it held are gone. Couchbase's auto-reprovision
promotes the replicas of the vBuckets it held as active instead of letting the empty copies serve (and stream
their emptiness to the replicas); settee must do the same, and lose no acknowledged write.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertOptions

from cluster_load import documents_not_reading, wait_for
from sdk_connect import connect
from cluster_fixture import formed_cluster
from test_cluster import pool_nodes, rest, wait_rebalanced

BUCKET = "sessions"
MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)
NODES = 3
KEYS = 300


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("ephemeral"))
    with formed_cluster(base, NODES, BUCKET, bucket_type="ephemeral", replicas=1) as servers:
        yield servers


def test_a_memory_only_node_restarted_before_failover_loses_no_acknowledged_write(nodes):
    """Every document written with `majority` before the kill reads back after the node's restart, from every
    node's view of the cluster, and the bucket takes writes again."""
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=30))
    coll = cluster.bucket(BUCKET).default_collection()
    for i in range(KEYS):
        coll.upsert(f"s-{i}", {"i": i}, UpsertOptions(durability=MAJORITY, timeout=timedelta(seconds=10)))
    victim = nodes[2]
    victim.kill()
    victim.start()
    wait_for(lambda: pool_nodes(nodes[0])[victim.mgmt_addr]["status"] == "healthy", "the node to answer again")
    written = {f"s-{i}": {"i": i} for i in range(KEYS)}
    missing = documents_not_reading(coll, written)
    assert missing == [], f"{len(missing)} of {KEYS} acknowledged documents lost, e.g. {missing[:10]}"
    coll.upsert("after", {"ok": True}, UpsertOptions(timeout=timedelta(seconds=10)))
    assert coll.get("after").content_as[dict] == {"ok": True}
    # The node holds no copy of the bucket until a rebalance gives it copies again, as after Couchbase's
    # auto-reprovision; then every vBucket has both copies and every document is still there.
    known = ",".join(f"ns_1@127.0.0.{i + 1}" for i in range(NODES))
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
    assert status == 200, body
    wait_rebalanced(nodes[0])
    status, cfg = rest(nodes[0], "GET", f"/pools/default/b/{BUCKET}")
    assert status == 200, cfg
    rows = cfg["vBucketServerMap"]["vBucketMap"]
    assert all(-1 not in r for r in rows), "every vBucket has an active and a replica again"
    victim_index = cfg["vBucketServerMap"]["serverList"].index(f"{victim.host}:{victim.kv_port}")
    assert any(r[0] == victim_index for r in rows), "the restarted node holds actives again"
    assert documents_not_reading(coll, written) == [], "every document readable after the rebalance"
    cluster.close()
