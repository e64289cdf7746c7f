"""SQL++ on a three-node cluster of real `settee server` processes (127.0.0.31-34): every node answers for every
document of the bucket (its own vBuckets and the other nodes'), DML changes documents wherever they live, a name
prepared on one node runs on another, a rebalance that adds a fourth node while a query streams its rows
neither loses nor repeats a row, and `request_plus` queries through a secondary index see every acknowledged
durable write while a node is killed, failed over and rebalanced out.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from couchbase.n1ql import QueryScanConsistency
from couchbase.options import QueryOptions

import settee_server
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import rest, wait_rebalanced

BUCKET = "qc"
DOCS = 3000
PAD = "x" * 700


def query(node: SetteeServer, statement: str, **fields) -> dict:
    """Runs a statement on one node's query port (JSON body, as the SDKs send it) and returns the answer."""
    request = dict(fields) if statement is None else {"statement": statement, **fields}
    body = json.dumps(request).encode()
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    req = urllib.request.Request(f"http://{node.host}:{node.query_port}/query/service", data=body, method="POST",
                                 headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("qcluster"))
    servers = settee_server.cluster_servers(base, 4, first_ip=31)
    for s in servers[1:3]:
        s.join = servers[0].mgmt_addr
    try:
        for s in servers[:3]:
            s.start()
        known = ",".join(f"ns_1@127.0.0.{31 + i}" for i in range(3))
        status, body = rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(servers[0])
        status, body = rest(servers[0], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        yield servers
    finally:
        settee_server.stop_all(servers)


@pytest.fixture(scope="module")
def loaded(nodes):
    """DOCS documents written through the SDK (spread over every node's vBuckets) and a primary index."""
    c = connect(nodes[0])
    try:
        coll = c.bucket(BUCKET).default_collection()

        def writable():
            try:
                coll.upsert("probe", {"probe": True})
                return True
            except Exception:  # noqa: BLE001 - the bucket is still being created on some node
                return False

        wait_for(writable, "the bucket to take writes", timeout=60)
        coll.remove("probe")
        for i in range(DOCS):
            coll.upsert(f"k{i:05}", {"i": i, "group": i % 7, "pad": PAD})
        c.query_indexes().create_primary_index(BUCKET)
        yield [f"k{i:05}" for i in range(DOCS)]
    finally:
        c.close()


def test_every_node_answers_for_every_document(nodes, loaded):
    """COUNT, an ordered scan of every key and an aggregate give the whole bucket on each node."""
    for node in nodes[:3]:
        got = query(node, f"SELECT COUNT(*) AS n FROM `{BUCKET}`", scan_consistency="request_plus")
        assert got["status"] == "success" and got["results"] == [{"n": DOCS}], (node.host, got)
        got = query(node, f"SELECT RAW META().id FROM `{BUCKET}` ORDER BY META().id", scan_consistency="request_plus")
        assert got["results"] == loaded, node.host
        got = query(node, f"SELECT RAW META().id FROM `{BUCKET}` ORDER BY META().id DESC", scan_consistency="request_plus")
        assert got["results"] == loaded[::-1], node.host
        got = query(node, f"SELECT `group`, COUNT(*) AS n FROM `{BUCKET}` GROUP BY `group` ORDER BY `group`")
        assert got["results"] == [{"group": g, "n": len(range(g, DOCS, 7))} for g in range(7)], node.host


def test_a_secondary_index_answers_on_every_node(nodes, loaded):
    """A secondary index (each node indexes its own vBuckets) answers on each node with the whole bucket's matching
    documents: an equality query that fetches, a covering one (its entries merged in index order from every node)
    with LIMIT and OFFSET in the scan, read from the top down for DESC and MAX, and a COUNT that sums every node's
    count of the range."""
    got = query(nodes[0], f"CREATE INDEX ix_group ON `{BUCKET}`(`group`)")
    assert got["status"] == "success", got
    matching = [k for k in loaded if int(k[1:]) % 7 == 4]
    for node in nodes[:3]:
        q = f"SELECT RAW i FROM `{BUCKET}` WHERE `group` = 4 ORDER BY i"
        got = query(node, q, scan_consistency="request_plus")
        assert got["results"] == list(range(4, DOCS, 7)), (node.host, got)
        plan = json.dumps(query(node, "EXPLAIN " + q)["results"])
        assert "IndexScan3" in plan and "Fetch" in plan, plan
        q = f"SELECT RAW META().id FROM `{BUCKET}` WHERE `group` = 4 ORDER BY META().id LIMIT 50 OFFSET 10"
        got = query(node, q, scan_consistency="request_plus")
        assert got["results"] == matching[10:60], (node.host, got)
        plan = json.dumps(query(node, "EXPLAIN " + q)["results"])
        assert "covers" in plan and "Fetch" not in plan and '"limit": "50"' in plan, plan
        q = f"SELECT RAW META().id FROM `{BUCKET}` WHERE `group` = 4 ORDER BY META().id DESC LIMIT 50 OFFSET 10"
        got = query(node, q, scan_consistency="request_plus")
        assert got["results"] == matching[::-1][10:60], (node.host, got)
        plan = json.dumps(query(node, "EXPLAIN " + q)["results"])
        assert '"desc": true' in plan and "Order" not in plan, plan
        q = f"SELECT RAW MAX(`group`) FROM `{BUCKET}` WHERE `group` < 4"
        assert query(node, q, scan_consistency="request_plus")["results"] == [3], node.host
        q = f"SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE `group` = 4"
        got = query(node, q, scan_consistency="request_plus")
        assert got["results"] == [len(matching)], (node.host, got)
        assert "IndexCountScan2" in json.dumps(query(node, "EXPLAIN " + q)["results"])


def test_covering_scans_keep_missing_keys_missing_on_every_node(nodes, loaded):
    """A covering scan of an index whose second key no document has answers rows without that field on every
    node: the entries other nodes send keep MISSING apart from null."""
    got = query(nodes[0], f"CREATE INDEX ix_group_flag ON `{BUCKET}`(`group`, flag)")
    assert got["status"] == "success", got
    matching = [k for k in loaded if int(k[1:]) % 7 == 5]
    q = f"SELECT META().id AS k, flag FROM `{BUCKET}` USE INDEX (ix_group_flag) WHERE `group` = 5 ORDER BY k LIMIT 4"
    for node in nodes[:3]:
        got = query(node, q, scan_consistency="request_plus")
        assert got["results"] == [{"k": k} for k in matching[:4]], (node.host, got)
        assert "covers" in json.dumps(query(node, "EXPLAIN " + q)["results"])


def test_sdk_queries_spread_over_the_nodes_agree(nodes, loaded):
    """The SDK sends queries to every node in turn; each answer is complete."""
    c = connect(nodes[1])
    try:
        for _ in range(6):
            res = c.query(f"SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE `group` = $1",
                          QueryOptions(positional_parameters=[3], scan_consistency=QueryScanConsistency.REQUEST_PLUS))
            assert list(res.rows()) == [len(range(3, DOCS, 7))]
    finally:
        c.close()


def test_dml_changes_documents_on_every_node(nodes, loaded):
    """An UPDATE run on one node changes documents whose vBuckets live on all three; KV reads see the change."""
    keys = loaded[:300]
    got = query(nodes[2], f"UPDATE `{BUCKET}` USE KEYS $keys SET touched = 1", **{"$keys": keys})
    assert got["status"] == "success" and got["metrics"]["mutationCount"] == 300, got
    c = connect(nodes[0])
    try:
        coll = c.bucket(BUCKET).default_collection()
        assert all(coll.get(k).content_as[dict]["touched"] == 1 for k in keys[::37])
    finally:
        c.close()
    got = query(nodes[1], f"SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE touched = 1", scan_consistency="request_plus")
    assert got["results"] == [300], got


def test_a_name_prepared_on_one_node_runs_on_another(nodes, loaded):
    """PREPARE on the first node; {"prepared": name} on the third finds it."""
    got = query(nodes[0], f"PREPARE p_count FROM SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE `group` = $g")
    assert got["status"] == "success", got
    got = query(nodes[2], None, prepared="p_count", scan_consistency="request_plus", **{"$g": 1})
    assert got["results"] == [len(range(1, DOCS, 7))], got


def test_rebalance_under_a_streaming_query_keeps_every_row_once(nodes, loaded):
    """A fourth node is added and rebalanced in while a query streams every document to a slow reader: the rows
    are exactly the bucket's documents, each once."""
    nodes[3].join = nodes[0].mgmt_addr
    nodes[3].start()
    statement = json.dumps({"statement": f"SELECT META(d).id AS id, d.i, d.pad FROM `{BUCKET}` AS d",
                            "scan_consistency": "request_plus"}).encode()
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    req = urllib.request.Request(f"http://{nodes[1].host}:{nodes[1].query_port}/query/service", data=statement,
                                 method="POST",
                                 headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
    chunks: list[bytes] = []
    started = threading.Event()

    def read_slowly():
        with urllib.request.urlopen(req, timeout=600) as r:
            while True:
                chunk = r.read(8192)
                if not chunk:
                    return
                chunks.append(chunk)
                started.set()
                time.sleep(0.02)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    assert started.wait(60)
    known = ",".join(f"ns_1@127.0.0.{31 + i}" for i in range(4))
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
    assert status == 200, body
    assert reader.is_alive(), "the query finished before the rebalance started: nothing was tested"
    task = wait_rebalanced(nodes[0])
    streaming_through = reader.is_alive()
    reader.join(600)
    answer = json.loads(b"".join(chunks))
    assert answer["status"] == "success", answer.get("errors")
    ids = [r["id"] for r in answer["results"]]
    assert len(ids) == len(set(ids)) == DOCS and sorted(ids) == loaded
    print(f"rebalance {task}; the query was still streaming when it ended: {streaming_through}")
    # And after the rebalance, the new node answers for everything too.
    got = query(nodes[3], f"SELECT COUNT(*) AS n FROM `{BUCKET}`", scan_consistency="request_plus")
    assert got["results"] == [{"n": DOCS}], got


def test_request_plus_sees_every_acknowledged_write_through_failover_and_rebalance(nodes, loaded):
    """Durable writes keep coming while a node is killed, failed over and rebalanced out: every `request_plus`
    query through a secondary index, on any live node, returns every write acknowledged before it was sent, and
    never a document twice. (Runs after the fourth node joined.)"""
    from couchbase.durability import Durability, ServerDurability
    from couchbase.options import UpsertOptions

    c = connect(nodes[0])
    coll = c.bucket(BUCKET).default_collection()
    c.query_indexes().create_index(BUCKET, "ix_tag", ["tag"])
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    majority = UpsertOptions(durability=ServerDurability(Durability.MAJORITY))

    def write():
        i = 0
        while not stop.is_set():
            key = f"w{i:06}"
            try:
                coll.upsert(key, {"tag": "w", "i": i}, majority)
                with lock:
                    acked.append(key)
            except Exception:  # noqa: BLE001 - not acknowledged: the node of its vBucket is down or moving
                time.sleep(0.05)
            i += 1

    checks = 0

    def check(live: list[SetteeServer], may_fail: bool = False):
        """One query; `may_fail` while a dead node still holds active vBuckets (before its failover), when
        Couchbase too answers with an error rather than a partial result."""
        nonlocal checks
        with lock:
            expected = set(acked)
        node = live[checks % len(live)]
        checks += 1
        got = query(node, f"SELECT RAW META().id FROM `{BUCKET}` WHERE tag = 'w'", scan_consistency="request_plus",
                    timeout="60s")
        if may_fail and got.get("status") != "success":
            return
        assert got.get("status") == "success", (node.host, got.get("errors"))
        ids = got["results"]
        assert len(ids) == len(set(ids)), f"{node.host}: a document twice"
        missing = expected - set(ids)
        assert not missing, f"{node.host}: {len(missing)} acknowledged writes missing, e.g. {sorted(missing)[:3]}"

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for _ in range(5):
            check(nodes[:4])
        victim = nodes[3]
        victim.kill()
        for _ in range(3):
            check(nodes[:3], may_fail=True)
        status, body = rest(nodes[0], "POST", "/controller/failOver", {"otpNode": f"ns_1@{victim.host}"})
        assert status == 200, body
        for _ in range(5):
            check(nodes[:3])
        known = ",".join(f"ns_1@127.0.0.{31 + i}" for i in range(4))
        status, body = rest(nodes[0], "POST", "/controller/rebalance",
                            {"knownNodes": known, "ejectedNodes": f"ns_1@{victim.host}"})
        assert status == 200, body
        while rest(nodes[0], "GET", "/pools/default/rebalanceProgress")[1].get("status") == "running":
            check(nodes[:3])
        wait_rebalanced(nodes[0])
        for _ in range(3):
            check(nodes[:3])
    finally:
        stop.set()
        writer.join(60)
        c.close()
    print(f"\n{len(acked)} acknowledged durable writes, {checks} request_plus checks")
    assert len(acked) > 100, "too few writes were acknowledged to test anything"
