"""A node of a three-node cluster holding a couchbase (persistent) bucket crashes and restarts before the cluster
fails it over, with `majority` writes acknowledged that its disk never got: `majority` waits for the replicas'
memory, not for any disk. Its copies come back with what the flusher had written, while the replicas still hold
the later writes; if the restarted copies served again as actives they would roll their replicas back and the
acknowledged writes would be gone (the black-box checker's finding 2, docs/reliability.md). The restarted node must
hand those vBuckets over to the replicas that are ahead, and lose nothing.

The disk is made slow on purpose (`--testing-fault-injection`, `POST /settee/testing/faults`): every fsync of the
victim's bucket blocks for a minute, so its flusher stops after one round and what is written next stays in memory.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertOptions

import settee_server
from cluster_load import documents_not_reading, wait_for
from sdk_connect import connect
from cluster_fixture import formed_cluster
from test_cluster import pool_nodes, rest

BUCKET = "orders"
MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)
NODES = 3
KEYS = 300


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("persistent-restart"))
    with formed_cluster(base, NODES, BUCKET, bucket_type="couchbase", replicas=1, extra=("--testing-fault-injection",)) as servers:
        yield servers


def test_faults_endpoint_exists_only_with_the_testing_flag(nodes, tmp_path):
    """Without `--testing-fault-injection` a node has no fault endpoint; with it, bad values are refused."""
    status, body = rest(nodes[0], "POST", "/settee/testing/faults", {"bucket": BUCKET, "syncDelayMs": "x"})
    assert status == 400, body
    plain = settee_server.new_server(tmp_path)
    plain.start()
    try:
        status, _ = rest(plain, "POST", "/settee/testing/faults", {"bucket": "default", "syncDelayMs": "0"})
        assert status == 404
    finally:
        plain.stop()


def test_a_persistent_node_restarted_before_failover_loses_no_majority_write(nodes):
    """Every `majority` write acknowledged before the crash reads back after the node's restart, although its
    disk never got the ones written while its fsyncs were stalled, and the bucket takes writes again."""
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=30))
    coll = cluster.bucket(BUCKET).default_collection()
    durable = UpsertOptions(durability=MAJORITY, timeout=timedelta(seconds=10))
    for i in range(KEYS):
        coll.upsert(f"o-{i}", {"i": i, "v": 1}, durable)
    victim = nodes[2]
    status, body = rest(victim, "POST", "/settee/testing/faults", {"bucket": BUCKET, "syncDelayMs": "60000"})
    assert status == 200, body
    # One more write starts a flusher round that blocks in its fsync; everything after it stays in memory.
    coll.upsert("o-trigger", {"v": 0}, durable)
    time.sleep(1)
    for i in range(KEYS):
        coll.upsert(f"o-{i}", {"i": i, "v": 2}, durable)
    victim.kill()
    victim.start()
    wait_for(lambda: pool_nodes(nodes[0])[victim.mgmt_addr]["status"] == "healthy", "the node to answer again")
    stale = documents_not_reading(coll, {f"o-{i}": {"i": i, "v": 2} for i in range(KEYS)})
    assert stale == [], f"{len(stale)} of {KEYS} acknowledged majority writes lost, e.g. {stale[:10]}"
    for i in range(KEYS):
        coll.upsert(f"o-{i}", {"i": i, "v": 3}, durable)
    assert coll.get("o-0").content_as[dict] == {"i": 0, "v": 3}
