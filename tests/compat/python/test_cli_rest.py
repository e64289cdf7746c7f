"""The management endpoints and shapes the official `couchbase-cli` needs (issue 22 item 3), checked over plain HTTP
against a real three-node cluster, so they hold without the CLI installed (test_couchbase_cli.py drives the CLI
itself when it is).

The cluster is formed as `couchbase-cli server-add` forms it: three standalone nodes with their HTTPS management
ports on, the second and third added to the first with two `POST /controller/addNode` sent back to back, then a
rebalance and a bucket with one replica holding a few thousand documents (so a rebalance lasts long enough to be
seen running).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertMultiOptions

import settee_server
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import otp, pool, rebalance_ended, rest, wait_rebalanced

BUCKET = "clidata"
NODES = 3
DOCS = 3000
MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)


def rebalance(node: SetteeServer, members: list[SetteeServer], ejected: list[SetteeServer] = ()) -> None:
    names = lambda nodes: ",".join(otp(n) for n in nodes)  # noqa: E731
    status, body = rest(node, "POST", "/controller/rebalance",
                        {"knownNodes": names(members), "ejectedNodes": names(ejected)})
    assert status == 200, body


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("cli-rest"))
    servers = settee_server.cluster_servers(base, NODES)
    for s, tls in zip(servers, settee_server.free_ports(NODES)):
        s.mgmt_tls_port = tls
    try:
        for s in servers:
            s.start()
        # Regression (issue 22): two addNode calls sent back to back both succeed.
        for s in servers[1:]:
            status, body = rest(servers[0], "POST", "/controller/addNode",
                                {"hostname": s.mgmt_addr, "user": USERNAME, "password": PASSWORD})
            assert status == 200, body
            assert body["otpNode"] == otp(s)
        rebalance(servers[0], servers)
        wait_rebalanced(servers[0])
        status, body = rest(servers[0], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        for s in servers:
            wait_for(lambda: rest(s, "GET", f"/pools/default/buckets/{BUCKET}")[0] == 200, f"{BUCKET} on {s.host}")
        cluster = connect(servers[0])
        try:
            cluster.wait_until_ready(timedelta(seconds=20))
            collection = cluster.bucket(BUCKET).default_collection()
            # At `majority`: the tests hard-fail-over a node at once, which (in Couchbase as here) loses the
            # non-durable writes not yet replicated. Written plainly, documents were lost when a replica's stream
            # from the third node was still reconnecting (that node had not created the bucket yet) at the failover.
            docs = {f"doc-{i}": {"i": i, "pad": "x" * 512} for i in range(DOCS)}
            result = collection.upsert_multi(docs, UpsertMultiOptions(durability=MAJORITY))
            assert result.all_ok, result.exceptions
        finally:
            cluster.close()
        yield servers
    finally:
        settee_server.stop_all(servers)


def test_nodes_self_describes_the_node_with_its_storage_paths_and_quotas(nodes):
    """Regression (issue 22, `server-info`): `GET /nodes/self` was 404. It answers the node as /pools/default lists
    it, with ns_server's storage paths (the data directory) and the service quotas."""
    status, me = rest(nodes[1], "GET", "/nodes/self")
    assert status == 200, me
    assert me["thisNode"] is True and me["otpNode"] == otp(nodes[1])
    assert me["hostname"] == nodes[1].mgmt_addr
    assert me["storage"]["hdd"][0]["path"] == str(nodes[1].data_dir)
    assert me["memoryQuota"] >= 256 and "storageTotals" in me


def test_every_node_lists_its_configured_hostname_and_https_port(nodes):
    """Regression (issue 22, `host-list`, and topology commands' "Unable to get the HTTPS port"): every entry of
    /pools/default has `configuredHostname` and, with the TLS management port on, `ports.httpsMgmt`."""
    listed = {n["otpNode"]: n for n in pool(nodes[2])["nodes"]}
    for s in nodes:
        assert listed[otp(s)]["configuredHostname"] == s.mgmt_addr
        assert listed[otp(s)]["ports"]["httpsMgmt"] == s.mgmt_tls_port


def test_post_pools_default_sets_the_cluster_name_and_quotas_for_every_node(nodes):
    """Regression (issue 22, `setting-cluster`): `POST /pools/default` was 405. The name and quotas reach every
    node (they live in the cluster metadata); bad values and unknown keys are refused field by field."""
    status, body = rest(nodes[0], "POST", "/pools/default",
                        {"clusterName": "cli-test", "memoryQuota": 2048, "indexMemoryQuota": 512})
    assert status == 200, body
    for s in nodes:
        wait_for(lambda: pool(s)["clusterName"] == "cli-test", f"{s.host} to report the cluster name")
        p = pool(s)
        assert (p["memoryQuota"], p["indexMemoryQuota"]) == (2048, 512)
    status, body = rest(nodes[0], "POST", "/pools/default", {"memoryQuota": 10, "clusterName": "x" * 300})
    assert status == 400 and set(body["errors"]) == {"memoryQuota", "clusterName"}, body
    status, body = rest(nodes[0], "POST", "/pools/default", {"bogus": 1})
    assert status == 400 and body["errors"] == {"bogus": "Unsupported key"}, body
    assert pool(nodes[0])["memoryQuota"] == 2048


def test_index_settings_read_and_change(nodes):
    """Regression (issue 22, `server-add` and `setting-index`): `/settings/indexes` was 404. It reports ns_server's
    settings (memory-optimised storage), takes changes on any node and refuses bad values."""
    status, settings = rest(nodes[0], "GET", "/settings/indexes")
    assert status == 200, settings
    assert settings["storageMode"] == "memory_optimized"
    status, changed = rest(nodes[1], "POST", "/settings/indexes", {"indexerThreads": 4, "logLevel": "debug"})
    assert status == 200, changed
    assert (changed["indexerThreads"], changed["logLevel"]) == (4, "debug")
    wait_for(lambda: rest(nodes[2], "GET", "/settings/indexes")[1]["indexerThreads"] == 4, "the change to spread")
    status, body = rest(nodes[0], "POST", "/settings/indexes", {"storageMode": "plasma", "indexerThreads": -1})
    assert status == 400 and set(body["errors"]) == {"storageMode", "indexerThreads"}, body


def test_retry_rebalance_settings_answer_and_refuse_turning_retries_on(nodes):
    """Regression (issue 22, `setting-rebalance`): `/settings/retryRebalance` was 404. It reads as off, accepts
    off, refuses on with the reason (settee does not retry rebalances), and no retry is ever pending."""
    assert rest(nodes[0], "GET", "/settings/retryRebalance") == (
        200, {"enabled": False, "afterTimePeriod": 300, "maxAttempts": 1})
    assert rest(nodes[0], "POST", "/settings/retryRebalance", {"enabled": "false"})[0] == 200
    status, body = rest(nodes[0], "POST", "/settings/retryRebalance", {"enabled": "true", "afterTimePeriod": 60})
    assert status == 400 and "retry" in body["errors"]["enabled"], body
    assert rest(nodes[0], "GET", "/pools/default/pendingRetryRebalance") == (200, {"retry_rebalance": "not_pending"})


def test_usage_statistics_setting_round_trips(nodes):
    """`setting-notification` writes `POST /settings/stats`; the value reads back from every node."""
    assert rest(nodes[0], "POST", "/settings/stats", {"sendStats": "true"})[0] == 200
    wait_for(lambda: rest(nodes[2], "GET", "/settings/stats")[1] == {"sendStats": True}, "the setting to spread")
    assert rest(nodes[0], "POST", "/settings/stats", {"sendStats": "maybe"})[0] == 400


def test_node_init_accepts_the_nodes_own_name_and_refuses_another(nodes):
    """`node-init` (`POST /nodeInit`) succeeds for what already holds (the node's own host and data directory)
    and refuses a change it cannot make at run time, naming the flag to restart with."""
    assert rest(nodes[0], "POST", "/nodeInit",
                {"hostname": nodes[0].host, "dataPath": str(nodes[0].data_dir)})[0] == 200
    status, body = rest(nodes[0], "POST", "/nodeInit", {"hostname": "10.9.9.9", "dataPath": "/elsewhere"})
    assert status == 400, body
    assert "--host" in body["errors"]["hostname"] and "--data-dir" in body["errors"]["dataPath"], body


def test_add_node_over_https_is_refused_with_the_reason(nodes):
    """`server-add --server-add https://HOST:TLSPORT` (ns_server then joins over TLS) gets a 400 that says to give
    the plain management address, instead of an unreachable-node error."""
    status, body = rest(nodes[0], "POST", "/controller/addNode",
                        {"hostname": f"https://{nodes[2].host}:{nodes[2].mgmt_tls_port}", "user": USERNAME,
                         "password": PASSWORD})
    assert status == 400 and "plain management address" in body["errors"]["_"], body


def test_bucket_list_ignores_a_trailing_slash(nodes):
    """Regression (issue 22): `GET /pools/default/buckets/` (the Java SDK's bucket manager) was 404; ns_server
    ignores trailing slashes."""
    status, buckets = rest(nodes[0], "GET", "/pools/default/buckets/")
    assert status == 200, buckets
    assert BUCKET in [b["name"] for b in buckets]
    assert rest(nodes[0], "GET", f"/pools/default/buckets/{BUCKET}/")[0] == 200


def running_task(node: SetteeServer):
    status, tasks = rest(node, "GET", "/pools/default/tasks")
    assert status == 200, tasks
    return tasks[0] if tasks[0]["status"] == "running" else None


def moves_per_node(node: SetteeServer, moves: int) -> None:
    status, body = rest(node, "POST", "/settings/rebalance", {"rebalanceMovesPerNode": moves})
    assert status == 200, body


def fail_over_hard(nodes: list[SetteeServer], victim: SetteeServer) -> None:
    status, body = rest(nodes[0], "POST", "/controller/failOver", {"otpNode": otp(victim)})
    assert status == 200, body


def test_balanced_turns_false_after_a_hard_failover_and_a_running_rebalance_answers_as_ns_server(nodes):
    """Regressions (issue 22): `balanced` stayed true after a hard failover; a running rebalance's task had no
    `recommendedRefreshPeriod` or `detailedProgress` (couchbase-cli's rebalance-status and progress bar crashed);
    a graceful failover was accepted during a rebalance (ns_server answers 503 "Cannot failover during
    rebalance"). `reAddNode` (`server-readd`) marks a full recovery, so the rebalance rebuilds the third node's
    copies one move per node at a time, long enough to be seen running."""
    assert pool(nodes[0])["balanced"] is True
    fail_over_hard(nodes, nodes[2])
    assert pool(nodes[0])["balanced"] is False
    status, body = rest(nodes[0], "POST", "/controller/reAddNode", {"otpNode": otp(nodes[2])})
    assert status == 200, body
    listed = {n["otpNode"]: n for n in pool(nodes[0])["nodes"]}
    assert listed[otp(nodes[2])]["recoveryType"] == "full"
    moves_per_node(nodes[0], 1)
    try:
        rebalance(nodes[0], nodes)
        task = wait_for(lambda: running_task(nodes[0]), "the rebalance to run", interval=0.01)
        assert task["recommendedRefreshPeriod"] > 0 and "detailedProgress" in task, task
        status, body = rest(nodes[0], "POST", "/controller/startGracefulFailover", {"otpNode": otp(nodes[1])})
        assert status == 503 and "during rebalance" in str(body), body
        assert pool(nodes[0])["rebalanceStatus"] == "running"
        wait_rebalanced(nodes[0])
    finally:
        moves_per_node(nodes[0], 4)
    assert pool(nodes[0])["balanced"] is True
    assert all(n["clusterMembership"] == "active" for n in pool(nodes[0])["nodes"])


def test_a_stopped_rebalance_leaves_the_cluster_unbalanced(nodes):
    """Regression (issue 22): `balanced` stayed true after a stopped rebalance, though the map was half moved."""
    fail_over_hard(nodes, nodes[2])
    status, body = rest(nodes[0], "POST", "/controller/setRecoveryType",
                        {"otpNode": otp(nodes[2]), "recoveryType": "full"})
    assert status == 200, body
    moves_per_node(nodes[0], 1)
    try:
        rebalance(nodes[0], nodes)
        wait_for(lambda: (running_task(nodes[0]) or {}).get("movesDone", 0) >= 2, "two moves", interval=0.01)
        assert rest(nodes[0], "POST", "/controller/stopRebalance", {})[0] == 200
        task = rebalance_ended(nodes[0])
    finally:
        moves_per_node(nodes[0], 4)
    assert 0 < task["movesDone"] < task["movesTotal"], task
    assert pool(nodes[0])["balanced"] is False
    rebalance(nodes[0], nodes)
    wait_rebalanced(nodes[0])
    assert pool(nodes[0])["balanced"] is True


def test_flush_empties_the_bucket_on_every_node(nodes):
    """Regression (issue 22, `bucket-flush` on a cluster): a flush reached only the node that received it, so the
    documents whose active vBuckets live on the other nodes survived. Every node now flushes its actives (the
    deletions replicate), whichever node is asked."""
    status, body = rest(nodes[1], "POST", f"/pools/default/buckets/{BUCKET}", {"flushEnabled": 1})
    assert status == 200, body
    cluster = connect(nodes[0])
    try:
        cluster.wait_until_ready(timedelta(seconds=20))
        collection = cluster.bucket(BUCKET).default_collection()
        keys = [f"doc-{i}" for i in range(0, DOCS, 10)]
        assert all(collection.exists(k).exists for k in keys)
        status, body = rest(nodes[2], "POST", f"/pools/default/buckets/{BUCKET}/controller/doFlush")
        assert status == 200, body
        left = [k for k in keys if collection.exists(k).exists]
        assert left == [], f"{len(left)} of {len(keys)} documents survived the flush"
        collection.upsert("after-flush", {"ok": True})
        assert collection.get("after-flush").content_as[dict] == {"ok": True}
    finally:
        cluster.close()


def test_a_node_rebalanced_out_can_be_added_back(nodes):
    """Regression (issue 22, "Prepare join failed"): a node rebalanced out of the cluster kept the cluster's
    metadata and refused to join again ("Node is already part of a cluster."), so `server-add` after a
    `rebalance --server-remove` failed. It belongs to no cluster once it is out, and joins again."""
    rebalance(nodes[0], nodes, [nodes[2]])
    wait_rebalanced(nodes[0])
    assert otp(nodes[2]) not in [n["otpNode"] for n in pool(nodes[0])["nodes"]]
    status, body = rest(nodes[0], "POST", "/controller/addNode",
                        {"hostname": nodes[2].mgmt_addr, "user": USERNAME, "password": PASSWORD})
    assert status == 200, body
    rebalance(nodes[0], nodes)
    wait_rebalanced(nodes[0])
    assert {n["otpNode"]: n["clusterMembership"] for n in pool(nodes[0])["nodes"]} == \
        {otp(s): "active" for s in nodes}
    assert pool(nodes[0])["balanced"] is True
