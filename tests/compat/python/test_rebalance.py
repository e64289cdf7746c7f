"""Online rebalance under a continuous Python SDK load: in from 1 to 3 nodes, a swap (one in, one out) with
`majority` writes, and a rebalance stopped half way and finished later. After each: zero client errors (timeouts
included), every key holds its last acknowledged value, replicas equal actives, the map is balanced.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException
from couchbase.options import UpsertOptions

import settee_server
from sdk_connect import connect
from settee_server import SetteeServer
from test_cluster import rest, wait_for

BUCKET = "moving"
KEYS = 500


class Writer:
    """Upserts `{"i": n}` over KEYS keys in a loop, remembering the last acknowledged value of each key."""

    def __init__(self, collection, durability=None):
        self.collection, self.durability = collection, durability
        self.acked: dict[str, int] = {}
        self.errors = Counter()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        i = 0
        while not self.stop_event.is_set():
            key = f"r-{i % KEYS}"
            try:
                options = UpsertOptions(timeout=timedelta(seconds=5))
                if self.durability:
                    options = UpsertOptions(timeout=timedelta(seconds=5), durability=self.durability)
                self.collection.upsert(key, {"i": i}, options)
                self.acked[key] = i
            except CouchbaseException as e:
                self.errors[type(e).__name__] += 1
            i += 1

    def __enter__(self):
        self.thread.start()
        wait_for(lambda: len(self.acked) == KEYS, "the writer to cover every key", timeout=60)
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(timeout=30)


def rebalance(node: SetteeServer, known: list[SetteeServer], ejected: list[SetteeServer], stop_after: float = 0):
    """Starts a rebalance on `node`; waits for it to end (or stops it after `stop_after` seconds). Returns the
    seconds it ran and the final task."""
    names = lambda nodes: ",".join(f"ns_1@{n.host}" for n in nodes)  # noqa: E731
    started = time.monotonic()
    status, body = rest(node, "POST", "/controller/rebalance",
                        {"knownNodes": names(known), "ejectedNodes": names(ejected)})
    assert status == 200, body
    if stop_after:
        time.sleep(stop_after)
        status, body = rest(node, "POST", "/controller/stopRebalance", {})
        assert status == 200, body

    def finished():
        status, tasks = rest(node, "GET", "/pools/default/tasks")
        assert status == 200, tasks
        return tasks[0] if tasks[0]["status"] != "running" else None

    task = wait_for(finished, "the rebalance to end", timeout=300)
    return time.monotonic() - started, task


def check(collection, writer: Writer, node: SetteeServer, members: list[SetteeServer]):
    assert sum(writer.errors.values()) == 0, f"client errors during the rebalance: {dict(writer.errors)}"
    lost = [(k, i) for k, i in writer.acked.items() if collection.get(k).content_as[dict]["i"] < i]
    assert lost == [], f"acknowledged writes lost: {lost[:10]}"
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
    ports = settee_server.free_ports(12)
    servers = [SetteeServer(kv_port=ports[3 * i], mgmt_port=ports[3 * i + 1], query_port=ports[3 * i + 2],
                            data_dir=base / f"n{i}", log_path=base / f"n{i}.log", bucket="", ip=f"127.0.0.{11 + i}")
               for i in range(4)]
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
    with Writer(collection) as writer:
        nodes[1].start()
        nodes[2].start()
        seconds, task = rebalance(nodes[0], nodes[:3], [])
        assert "errorMessage" not in task, task
        print(f"\nrebalance 1 -> 3 nodes: {seconds:.1f} s, {task['movesDone']} vBucket moves, "
              f"{len(writer.acked)} keys written meanwhile")
        time.sleep(1)
    check(collection, writer, nodes[0], nodes[:3])


def test_swap_one_node_in_one_out_with_majority_writes(nodes, collection):
    with Writer(collection, ServerDurability(DurabilityLevel.MAJORITY)) as writer:
        nodes[3].start()
        seconds, task = rebalance(nodes[0], nodes, [nodes[2]])
        assert "errorMessage" not in task, task
        print(f"\nswap: {seconds:.1f} s, {task['movesDone']} vBucket moves")
        time.sleep(1)
    members = [nodes[0], nodes[1], nodes[3]]
    check(collection, writer, nodes[0], members)
    listed = {n["hostname"] for n in rest(nodes[0], "GET", "/pools/default")[1]["nodes"]}
    assert nodes[2].mgmt_addr not in listed, "the ejected node left the cluster"


def test_stopped_rebalance_leaves_a_consistent_map_and_finishes_later(nodes, collection):
    members = [nodes[0], nodes[1]]
    with Writer(collection) as writer:
        _, task = rebalance(nodes[0], [nodes[0], nodes[1], nodes[3]], [nodes[3]], stop_after=0.3)
        status, cfg = rest(nodes[0], "GET", f"/pools/default/b/{BUCKET}")
        assert all(r[0] >= 0 for r in cfg["vBucketServerMap"]["vBucketMap"]), "every vBucket has an active"
        print(f"\nstopped after {task['movesDone']} of {task['movesTotal']} moves: {task.get('errorMessage')}")
        _, task = rebalance(nodes[0], [nodes[0], nodes[1], nodes[3]], [nodes[3]])
        assert "errorMessage" not in task, task
        time.sleep(1)
    check(collection, writer, nodes[0], members)
