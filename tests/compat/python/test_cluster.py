"""A cluster of three `settee server` processes on 127.0.0.1, .2 and .3, driven by the official Python SDK.

Formation uses both ways in: node 2 starts with `--join`, node 3 is added with `POST /controller/addNode`; a
rebalance activates them before the bucket (one replica) is created. Then: every node serves the same config;
the SDK reads, writes and reads replicas; one node is killed with SIGKILL under a `majority` write load and
auto-failed-over (5 s timeout), after which every acknowledged write is readable; the failed node, restarted,
serves nothing stale; a graceful failover of a live node keeps every acknowledged write.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException
from couchbase.options import GetAnyReplicaOptions, UpsertOptions

import kv_raw
from cluster_load import Writer, wait_for
import settee_server
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer

BUCKET = "replicated"
MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)
NODES = 3
KEYS = 200


def rest(node: SetteeServer, method: str, path: str, form: dict | None = None, timeout: float = 60.0):
    """One management call with the administrator's credentials: (status, decoded JSON or text)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(node.mgmt_url + path, data=data, method=method,
                                     headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, body.decode(errors="replace")


def rest_json(node: SetteeServer, path: str, body: dict | bytes, timeout: float = 30.0):
    """POSTs a JSON body (a dict, or its bytes) with the administrator's credentials: (status, text)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(node.mgmt_url + path, data=data, method="POST",
                                     headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def rebalance_ended(node: SetteeServer) -> dict:
    """Waits until the rebalance `node` runs has ended (it runs in the background, as in Couchbase); returns the
    task, with `errorMessage` if it stopped or failed."""
    def ended():
        status, tasks = rest(node, "GET", "/pools/default/tasks")
        assert status == 200, tasks
        return tasks[0] if tasks[0]["status"] != "running" else None

    return wait_for(ended, "the rebalance to end", timeout=300)


def wait_rebalanced(node: SetteeServer) -> dict:
    """As `rebalance_ended`, for a rebalance that must succeed."""
    task = rebalance_ended(node)
    assert "errorMessage" not in task, task
    return task


def pool(node: SetteeServer) -> dict:
    """`GET /pools/default` as the administrator."""
    status, body = rest(node, "GET", "/pools/default")
    assert status == 200, body
    return body


def pool_nodes(node: SetteeServer) -> dict:
    return {n["hostname"]: n for n in pool(node)["nodes"]}


def otp(node: SetteeServer) -> str:
    """The node's name as ns_server spells it in `otpNode` fields."""
    return f"ns_1@{node.host}"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("cluster"))
    servers = settee_server.cluster_servers(base, NODES)
    servers[1].join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        status, body = rest(servers[0], "POST", "/controller/addNode",
                            {"hostname": servers[2].mgmt_addr, "user": USERNAME, "password": PASSWORD})
        assert status == 200, body
        assert body["otpNode"] == "ns_1@127.0.0.3"
        known = ",".join(f"ns_1@127.0.0.{i + 1}" for i in range(NODES))
        status, body = rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(servers[0])
        status, body = rest(servers[1], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        yield servers
    finally:
        settee_server.stop_all(servers)


def terse(node: SetteeServer) -> dict:
    status, cfg = rest(node, "GET", f"/pools/default/b/{BUCKET}")
    assert status == 200, cfg
    return cfg


def test_every_node_serves_the_same_balanced_config(nodes):
    """All three nodes list the cluster alike; the map spreads actives evenly with no replica beside its active."""
    for n in nodes:
        listed = pool_nodes(n)
        assert sorted(listed) == sorted(s.mgmt_addr for s in nodes)
        assert {v["clusterMembership"] for v in listed.values()} == {"active"}
        wait_for(lambda: all(v["status"] == "healthy" for v in pool_nodes(n).values()), "healthy nodes")
    configs = [terse(n) for n in nodes]
    assert len({c["rev"] for c in configs}) == 1
    server_map = configs[0]["vBucketServerMap"]
    assert [c["vBucketServerMap"] for c in configs] == [server_map] * NODES
    assert sorted(server_map["serverList"]) == sorted(f"{s.host}:{s.kv_port}" for s in nodes)
    rows = server_map["vBucketMap"]
    assert len(rows) == 1024 and all(len(r) == 2 and r[0] != r[1] and -1 not in r for r in rows)
    actives = Counter(r[0] for r in rows)
    assert max(actives.values()) - min(actives.values()) <= 1
    for c in configs:
        this = [e for e in c["nodesExt"] if e.get("thisNode")]
        assert len(this) == 1


@pytest.fixture(scope="module")
def collection(nodes):
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=20))
    yield cluster.bucket(BUCKET).default_collection()
    cluster.close()


def test_sdk_writes_reads_and_replica_reads(nodes, collection):
    """Writes through the smart client land on all three nodes; replica reads return the same documents."""
    for i in range(KEYS):
        collection.upsert(f"doc-{i}", {"i": i}, UpsertOptions(durability=MAJORITY))
    for i in range(KEYS):
        assert collection.get(f"doc-{i}").content_as[dict] == {"i": i}
    for i in range(0, KEYS, 7):
        replica = wait_for(lambda: collection.get_any_replica(f"doc-{i}", GetAnyReplicaOptions()),
                           "a replica read")
        assert replica.content_as[dict] == {"i": i}


def vbucket_of(key: bytes) -> int:
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % 1024


def raw_get_status(node: SetteeServer, key: bytes) -> int:
    """GET `key` straight from `node`'s KV port (SASL PLAIN, SELECT_BUCKET): the status, without SDK routing."""
    with kv_raw.session(node, BUCKET) as sock:
        return kv_raw.call(sock, 0x00, key, vb=vbucket_of(key))[0]


def test_kill_under_majority_writes_then_auto_failover_loses_nothing(nodes, collection):
    """SIGKILL one node while a writer uses `majority`; auto-failover (5 s) promotes replicas; every write the SDK
    acknowledged reads back with its acknowledged value (or a later attempted one) and clients write again."""
    status, body = rest(nodes[0], "POST", "/settings/autoFailover", {"enabled": "true", "timeout": 5})
    assert status == 200, body
    acked: dict[str, int] = {}
    attempted: dict[str, set] = {}
    stop = threading.Event()
    errors = Counter()
    last_error_at = [0.0]

    def writer():
        i = 0
        while not stop.is_set():
            key = f"w-{i % KEYS}"
            attempted.setdefault(key, set()).add(i)
            try:
                collection.upsert(key, {"i": i}, UpsertOptions(durability=MAJORITY, timeout=timedelta(seconds=2)))
                acked[key] = i
            except CouchbaseException as e:
                errors[type(e).__name__] += 1
                last_error_at[0] = time.monotonic()
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        wait_for(lambda: len(acked) == KEYS, "the writer to cover every key", timeout=60)
        victim = nodes[2]
        victim.kill()
        killed_at = time.monotonic()
        wait_for(lambda: pool_nodes(nodes[0])[victim.mgmt_addr]["clusterMembership"] == "inactiveFailed",
                 "auto-failover of the killed node", timeout=60, interval=0.1)
        failed_over_at = time.monotonic()
        # Clients write again once a full pass over the keys goes by without an error.
        wait_for(lambda: time.monotonic() - last_error_at[0] > 3.0, "writes to succeed again", timeout=60)
        recovered_at = max(last_error_at[0], failed_over_at)
        print(f"\nauto-failover: node failed over {failed_over_at - killed_at:.1f} s after SIGKILL; "
              f"last client error {recovered_at - killed_at:.1f} s after it; errors {dict(errors)}")
    finally:
        stop.set()
        thread.join(timeout=30)
    lost = []
    for key, i in acked.items():
        got = collection.get(key).content_as[dict]["i"]
        if got < i or got not in attempted[key]:
            lost.append((key, i, got))
    assert lost == [], f"acknowledged majority writes lost: {lost[:10]}"
    cfg = terse(nodes[0])
    assert f"{nodes[2].host}:{nodes[2].kv_port}" not in cfg["vBucketServerMap"]["serverList"]


def test_failed_over_node_restarted_serves_nothing_stale(nodes, collection):
    """The killed node comes back with its old data on disk, learns it was failed over, and answers
    NOT_MY_VBUCKET for every key instead of serving what it held; the SDK keeps reading the current values."""
    victim = nodes[2]
    victim.start()
    # Its own metadata, restored from disk, still says active until the cluster brings it up to date.
    wait_for(lambda: pool_nodes(victim)[victim.mgmt_addr]["clusterMembership"] == "inactiveFailed",
             "the restarted node to learn it was failed over")
    for i in range(0, KEYS, 5):
        key = f"w-{i}".encode()
        assert wait_for(lambda: raw_get_status(victim, key) == 0x07, "NOT_MY_VBUCKET from the failed node")
    for i in range(KEYS):
        assert "i" in collection.get(f"w-{i}").content_as[dict]


def test_failed_over_node_sends_no_config_without_itself(nodes, collection):
    """NOT_MY_VBUCKET from a failed-over node carries no config (a config that does not list the node itself):
    the Go SDK applies an NMVB's config on the connection that received it, and closing that connection from there
    deadlocks it (found by tests/jepsen); the active nodes' NMVBs still carry theirs."""
    victim, member = nodes[2], nodes[0]
    assert pool_nodes(member)[victim.mgmt_addr]["clusterMembership"] == "inactiveFailed"
    key = b"w-0"
    with kv_raw.session(victim, BUCKET) as sock:
        status, _, body = kv_raw.call(sock, 0x00, key, vb=vbucket_of(key))
    assert (status, body) == (0x07, b"")
    with kv_raw.session(member, BUCKET) as sock:
        # A vBucket whose active is elsewhere, asked of `member`, gets NMVB with the config.
        servers = terse(member)["vBucketServerMap"]
        mine = servers["serverList"].index(f"{member.host}:{member.kv_port}")
        vb = next(v for v, row in enumerate(servers["vBucketMap"]) if row[0] != mine)
        status, _, body = kv_raw.call(sock, 0x00, b"any", vb=vb)
    assert status == 0x07 and json.loads(body)["vBucketServerMap"]["serverList"], body


def test_graceful_failover_keeps_every_acknowledged_write(nodes, collection):
    """Graceful failover of a live node under a write load: the node stops serving its actives, the replicas
    catch up, then they are promoted; every write the SDK acknowledged, durable or not, is still there."""
    with Writer(collection, KEYS, prefix="g-") as writer:
        leaving = nodes[1]
        started = time.monotonic()
        status, body = rest(nodes[0], "POST", "/controller/startGracefulFailover",
                            {"otpNode": f"ns_1@{leaving.host}"})
        assert status == 200, body
        print(f"\ngraceful failover took {time.monotonic() - started:.2f} s; writer errors {dict(writer.errors)}")
        assert pool_nodes(nodes[0])[leaving.mgmt_addr]["clusterMembership"] == "inactiveFailed"
        time.sleep(1)
    acked = writer.acked
    lost = [(k, i) for k, i in acked.items() if collection.get(k).content_as[dict]["i"] < i]
    assert lost == [], f"acknowledged writes lost by a graceful failover: {lost[:10]}"
