"""Online rebalance under a continuous Python SDK load: in from 1 to 3 nodes, a swap (one in, one out) with
`majority` writes, a rebalance out to 2 nodes stopped half way and finished later, and the recovery of a
failed-over node (delta, then full). After each: zero client errors (timeouts included), every key holds its last
acknowledged value, replicas equal actives, the map is balanced.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability

import kv_raw
import settee_server
from sdk_connect import connect
from settee_server import SetteeServer
from cluster_load import Writer, wait_for
from test_cluster import rebalance_ended, rest

BUCKET = "moving"
KEYS = 500


def rebalance(node: SetteeServer, known: list[SetteeServer], ejected: list[SetteeServer], stop_after_moves: int = 0):
    """Starts a rebalance on `node`; waits for it to end (or stops it once `stop_after_moves` vBucket moves are
    done: a count, not a time, so a slow machine still stops it part way). Returns the seconds it ran and the final
    task."""
    names = lambda nodes: ",".join(f"ns_1@{n.host}" for n in nodes)  # noqa: E731
    started = time.monotonic()
    status, body = rest(node, "POST", "/controller/rebalance",
                        {"knownNodes": names(known), "ejectedNodes": names(ejected)})
    assert status == 200, body
    if stop_after_moves:
        def moved():
            status, tasks = rest(node, "GET", "/pools/default/tasks")
            assert status == 200, tasks
            return tasks[0]["movesDone"] >= stop_after_moves or tasks[0]["status"] != "running"

        wait_for(moved, f"{stop_after_moves} vBucket moves", timeout=120, interval=0.02)
        status, body = rest(node, "POST", "/controller/stopRebalance", {})
        assert status == 200, body
    task = rebalance_ended(node)
    return time.monotonic() - started, task


def check(collection, writer: Writer, node: SetteeServer, members: list[SetteeServer]):
    assert sum(writer.errors.values()) == 0, f"client errors during the rebalance: {dict(writer.errors)}"
    lost = [(k, i) for k, i in writer.acked.items() if collection.get(k).content_as[dict]["i"] < i]
    assert lost == [], f"acknowledged writes lost: {lost[:10]}"
    check_map(collection, node, members)


def check_map(collection, node: SetteeServer, members: list[SetteeServer]):
    """The map covers exactly `members`, balanced, every vBucket with an active and a replica, and replica reads
    return what the actives hold."""
    status, cfg = rest(node, "GET", f"/pools/default/b/{BUCKET}")
    server_map = cfg["vBucketServerMap"]
    assert sorted(server_map["serverList"]) == sorted(f"{m.host}:{m.kv_port}" for m in members)
    rows = server_map["vBucketMap"]
    assert all(r[0] != r[1] and -1 not in r for r in rows)
    actives = Counter(r[0] for r in rows)
    assert max(actives.values()) - min(actives.values()) <= 1, actives
    for i in range(0, KEYS, 25):
        key = f"r-{i}"
        replica = wait_for(lambda: collection.get_any_replica(key), "a replica read")
        assert replica.content_as[dict] == collection.get(key).content_as[dict]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("rebalance"))
    ports = settee_server.free_ports(15)
    servers = [SetteeServer(kv_port=ports[3 * i], mgmt_port=ports[3 * i + 1], query_port=ports[3 * i + 2],
                            data_dir=base / f"n{i}", log_path=base / f"n{i}.log", bucket="", ip=f"127.0.0.{11 + i}")
               for i in range(5)]
    for s in servers[1:]:
        s.join = servers[0].mgmt_addr
    servers[0].start()
    yield servers
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def collection(nodes):
    status, body = rest(nodes[0], "POST", "/pools/default/buckets",
                        {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
    assert status == 202, body
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=20))
    coll = cluster.bucket(BUCKET).default_collection()
    yield coll
    cluster.close()


def test_rebalance_in_from_one_to_three_nodes(nodes, collection):
    with Writer(collection, KEYS) as writer:
        nodes[1].start()
        nodes[2].start()
        seconds, task = rebalance(nodes[0], nodes[:3], [])
        assert "errorMessage" not in task, task
        print(f"\nrebalance 1 -> 3 nodes: {seconds:.1f} s, {task['movesDone']} vBucket moves, "
              f"{len(writer.acked)} keys written meanwhile")
        time.sleep(1)
    check(collection, writer, nodes[0], nodes[:3])


def test_swap_one_node_in_one_out_with_majority_writes(nodes, collection):
    with Writer(collection, KEYS, durability=ServerDurability(DurabilityLevel.MAJORITY)) as writer:
        nodes[3].start()
        seconds, task = rebalance(nodes[0], nodes[:4], [nodes[2]])
        assert "errorMessage" not in task, task
        print(f"\nswap: {seconds:.1f} s, {task['movesDone']} vBucket moves")
        time.sleep(1)
    members = [nodes[0], nodes[1], nodes[3]]
    check(collection, writer, nodes[0], members)
    listed = {n["hostname"] for n in rest(nodes[0], "GET", "/pools/default")[1]["nodes"]}
    assert nodes[2].mgmt_addr not in listed, "the ejected node left the cluster"


def set_moves_per_node(node: SetteeServer, moves: int):
    status, body = rest(node, "POST", "/settings/rebalance", {"rebalanceMovesPerNode": moves})
    assert status == 200, body
    assert rest(node, "GET", "/settings/rebalance")[1] == {"rebalanceMovesPerNode": moves}


def test_stopped_rebalance_out_leaves_a_consistent_map_and_finishes_later(nodes, collection):
    members = [nodes[0], nodes[1]]
    status, body = rest(nodes[0], "POST", "/settings/rebalance", {"rebalanceMovesPerNode": 65})
    assert status == 400 and "rebalanceMovesPerNode" in body["errors"], body
    # One move per node at a time, so the stop lands half way.
    set_moves_per_node(nodes[0], 1)
    with Writer(collection, KEYS) as writer:
        _, task = rebalance(nodes[0], [nodes[0], nodes[1], nodes[3]], [nodes[3]], stop_after_moves=2)
        assert 0 < task["movesDone"] < task["movesTotal"], task
        assert task["errorMessage"] == "moving vBuckets of moving: Rebalance stopped by user.", task
        status, cfg = rest(nodes[0], "GET", f"/pools/default/b/{BUCKET}")
        assert all(r[0] >= 0 for r in cfg["vBucketServerMap"]["vBucketMap"]), "every vBucket has an active"
        print(f"\nstopped after {task['movesDone']} of {task['movesTotal']} moves")
        set_moves_per_node(nodes[0], 4)
        _, task = rebalance(nodes[0], [nodes[0], nodes[1], nodes[3]], [nodes[3]])
        assert "errorMessage" not in task, task
        time.sleep(1)
    check(collection, writer, nodes[0], members)


def kv_stat(node: SetteeServer, name: str) -> int:
    """One statistic of the bucket on `node`, from the KV port's STAT."""
    with kv_raw.session(node, BUCKET) as sock:
        return int(kv_raw.stats(sock)[name])


def node_entry(node: SetteeServer, about: SetteeServer) -> dict:
    listed = rest(node, "GET", "/pools/default")[1]["nodes"]
    return next(n for n in listed if n["hostname"] == about.mgmt_addr)


def test_failed_over_node_comes_back_by_delta_then_full_recovery(nodes, collection):
    extra = nodes[4]
    extra.join = nodes[0].mgmt_addr
    extra.start()
    members = [nodes[0], nodes[1], extra]
    _, task = rebalance(nodes[0], members, [])
    assert "errorMessage" not in task, task
    docs = {f"d-{i}": 0 for i in range(2000)}
    for key, v in docs.items():
        collection.upsert(key, {"v": v})
    otp = f"ns_1@{extra.host}"
    status, body = rest(nodes[0], "POST", "/controller/setRecoveryType", {"otpNode": otp, "recoveryType": "delta"})
    assert status == 400 and "otpNode" in body, "only a failed-over node can be recovered"

    # Delta: a graceful failover (maintenance), some documents change meanwhile, the node comes back with its data.
    status, body = rest(nodes[0], "POST", "/controller/startGracefulFailover", {"otpNode": otp})
    assert status == 200, body
    assert node_entry(nodes[0], extra)["clusterMembership"] == "inactiveFailed"
    for key in list(docs)[::10]:
        docs[key] = 1
        collection.upsert(key, {"v": 1})
    received_before = kv_stat(extra, "ep_dcp_replica_items_received")
    status, body = rest(nodes[0], "POST", "/controller/setRecoveryType", {"otpNode": otp, "recoveryType": "delta"})
    assert status == 200, body
    assert node_entry(nodes[0], extra)["recoveryType"] == "delta"
    # No writer this time, so what the node receives is what it lacked.
    seconds, task = rebalance(nodes[0], members, [])
    assert "errorMessage" not in task, task
    check_map(collection, nodes[0], members)
    received = kv_stat(extra, "ep_dcp_replica_items_received") - received_before
    held = kv_stat(extra, "curr_items_tot")
    print(f"\ndelta recovery: {seconds:.1f} s, {task['movesDone']} moves, {received} items received, {held} held")
    assert node_entry(nodes[0], extra)["recoveryType"] == "none"
    assert node_entry(nodes[0], extra)["clusterMembership"] == "active"
    assert all(collection.get(k).content_as[dict] == {"v": v} for k, v in docs.items())

    # Full: a hard failover, then the node's data is dropped and rebuilt.
    status, body = rest(nodes[0], "POST", "/controller/failOver", {"otpNode": otp})
    assert status == 200, body
    received_before = kv_stat(extra, "ep_dcp_replica_items_received")
    status, body = rest(nodes[0], "POST", "/controller/setRecoveryType", {"otpNode": otp, "recoveryType": "full"})
    assert status == 200, body
    with Writer(collection, KEYS) as writer:
        seconds, task = rebalance(nodes[0], members, [])
        assert "errorMessage" not in task, task
        time.sleep(1)
    check(collection, writer, nodes[0], members)
    received_full = kv_stat(extra, "ep_dcp_replica_items_received") - received_before
    held = kv_stat(extra, "curr_items_tot")
    print(f"full recovery: {seconds:.1f} s, {task['movesDone']} moves, {received_full} items received, {held} held")
    assert received_full >= held, "full recovery copies every item again"
    assert received < held / 3, f"delta recovery caught up ({received} items) instead of copying ({held} held)"
    assert all(collection.get(k).content_as[dict] == {"v": v} for k, v in docs.items())


def test_a_rebalance_with_an_unreachable_node_is_refused(nodes, collection):
    """A node that stays in the cluster but does not answer makes the rebalance fail at once with a clear reason,
    not wait for its copies to time out; the map is untouched."""
    extra = nodes[4]
    before = rest(nodes[0], "GET", f"/pools/default/b/{BUCKET}")[1]["vBucketServerMap"]["vBucketMap"]
    extra.kill()
    wait_for(lambda: node_entry(nodes[0], extra)["status"] == "unhealthy", "the node to look down", timeout=30)
    names = ",".join(f"ns_1@{n.host}" for n in [nodes[0], nodes[1], extra])
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": names, "ejectedNodes": ""})
    assert status == 400 and "unreachable" in body["errors"]["_"], body
    after = rest(nodes[0], "GET", f"/pools/default/b/{BUCKET}")[1]["vBucketServerMap"]["vBucketMap"]
    assert after == before
