"""The official `couchbase-cli` against a three-node settee cluster (issue 22 item 3).

couchbase-cli is not on PyPI and the CI machine cannot reach GitHub, so this module needs the CLI prepared by
`scripts/test-couchbase-cli.sh PATH` (which sets COUCHBASE_CLI to a wrapper) and is skipped without it. The tests
run in file order, each one a CLI command (or a few) as an operator would type it, checked by its output and by the
REST state it leaves; the last test prints which commands passed. test_cli_rest.py checks the same endpoints over
plain HTTP and runs everywhere.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest

import settee_server
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import pool, rest

CLI = os.environ.get("COUCHBASE_CLI", "")
pytestmark = pytest.mark.skipif(
    not CLI, reason="COUCHBASE_CLI is not set: run scripts/test-couchbase-cli.sh PATH-TO-COUCHBASE-CLI-CHECKOUT")

NODES = 3
DOCS = 3000
CLI_TIMEOUT_SECONDS = 300
# command -> "pass" / "FAIL: ..." as the tests record them, printed by the last test.
RESULTS: dict[str, str] = {}


def cli(node: SetteeServer, command: str, *args: str, tls: bool = False) -> tuple[int, str]:
    """Runs `couchbase-cli COMMAND -c NODE -u -p ARGS`; (exit status, stdout and stderr)."""
    address = f"https://{node.host}:{node.mgmt_tls_port}" if tls else node.mgmt_addr
    extra = ["--no-ssl-verify"] if tls else []
    done = subprocess.run([CLI, command, "-c", address, "-u", USERNAME, "-p", PASSWORD, *extra, *args],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS)
    return done.returncode, done.stdout + done.stderr


def ok(node: SetteeServer, command: str, *args: str, expect: str = "SUCCESS", tls: bool = False) -> str:
    """Runs a command that must succeed (status 0, `expect` in its output); records the result under its name."""
    rc, out = cli(node, command, *args, tls=tls)
    passed = rc == 0 and expect in out
    if passed:
        RESULTS.setdefault(command, "pass")
    else:
        RESULTS[command] = f"FAIL: {out.strip()[-200:]}"
    assert passed, f"couchbase-cli {command} {' '.join(args)} -> {rc}\n{out}"
    return out


def members(node: SetteeServer) -> dict[str, str]:
    return {n["otpNode"]: n["clusterMembership"] for n in pool(node)["nodes"]}


def bucket(node: SetteeServer, name: str) -> dict:
    status, body = rest(node, "GET", f"/pools/default/buckets/{name}")
    assert status == 200, body
    return body


def wait_balanced(node: SetteeServer) -> None:
    wait_for(lambda: pool(node)["balanced"], "the cluster to be balanced", timeout=120)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Three standalone nodes with their HTTPS management ports on; the CLI forms the cluster."""
    base = Path(tmp_path_factory.mktemp("couchbase-cli"))
    servers = settee_server.cluster_servers(base, NODES)
    for s, tls in zip(servers, settee_server.free_ports(NODES)):
        s.mgmt_tls_port = tls
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        settee_server.stop_all(servers)


def test_server_info_and_node_init(nodes):
    out = ok(nodes[0], "server-info", expect="otpNode")
    assert json.loads(out[out.index("{"):])["otpNode"] == f"ns_1@{nodes[0].host}"
    ok(nodes[0], "node-init", "--node-init-hostname", nodes[0].host, expect="Node initialized")


def test_cluster_init_is_refused_on_a_provisioned_node(nodes):
    """settee nodes are provisioned by their command line (--username/--password), so cluster-init meets an
    initialised node and the CLI says so, as it does against an initialised Couchbase node."""
    rc, out = cli(nodes[0], "cluster-init", "--cluster-username", USERNAME, "--cluster-password", PASSWORD,
                  "--cluster-ramsize", "1024", "--services", "data")
    RESULTS["cluster-init"] = "refused (node provisioned at start)" if "already initialized" in out else f"FAIL: {out}"
    assert rc != 0 and "already initialized" in out, out


def test_server_add_two_nodes_and_rebalance(nodes):
    ok(nodes[0], "server-add", "--server-add", f"{nodes[1].mgmt_addr},{nodes[2].mgmt_addr}",
       "--server-add-username", USERNAME, "--server-add-password", PASSWORD, "--services", "data",
       expect="Server added")
    listed = ok(nodes[0], "server-list", expect="inactiveAdded")
    assert len(listed.strip().splitlines()) == NODES, listed
    ok(nodes[0], "rebalance", "--no-progress-bar", expect="Rebalance complete")
    assert set(members(nodes[0]).values()) == {"active"}
    hosts = ok(nodes[0], "host-list", expect=nodes[2].mgmt_addr)
    assert sorted(hosts.split()) == sorted(s.mgmt_addr for s in nodes), hosts
    ok(nodes[1], "server-list", expect="healthy active", tls=True)


def test_bucket_create_edit_list_flush(nodes):
    ok(nodes[0], "bucket-create", "--bucket", "b1", "--bucket-type", "couchbase", "--bucket-ramsize", "128",
       "--bucket-replica", "1", "--bucket-eviction-policy", "fullEviction", "--durability-min-level", "majority",
       "--enable-flush", "1", "--wait", expect="Bucket created")
    ok(nodes[0], "bucket-create", "--bucket", "e1", "--bucket-type", "ephemeral", "--bucket-ramsize", "100",
       "--bucket-replica", "2", "--bucket-eviction-policy", "nruEviction", expect="Bucket created")
    wait_for(lambda: rest(nodes[1], "GET", "/pools/default/buckets/e1")[0] == 200, "e1 on the second node")
    b1, e1 = bucket(nodes[1], "b1"), bucket(nodes[1], "e1")
    assert (b1["bucketType"], b1["replicaNumber"], b1["evictionPolicy"], b1["durabilityMinLevel"]) == \
        ("membase", 1, "fullEviction", "majority"), b1
    assert (e1["bucketType"], e1["replicaNumber"], e1["evictionPolicy"]) == ("ephemeral", 2, "nruEviction"), e1
    ok(nodes[0], "bucket-edit", "--bucket", "b1", "--bucket-ramsize", "150", "--durability-min-level",
       "persistToMajority", expect="Bucket edited")
    edited = (150 * 1024 * 1024, "persistToMajority")
    wait_for(lambda: (bucket(nodes[2], "b1")["quota"]["rawRAM"], bucket(nodes[2], "b1")["durabilityMinLevel"]) == edited,
             "the edit to reach the third node")
    listed = ok(nodes[0], "bucket-list", expect="b1")
    assert "e1" in listed and "ephemeral" in listed
    for s in nodes:
        wait_for(lambda: rest(s, "GET", "/pools/default/buckets/b1")[0] == 200, f"b1 on {s.host}")
    cluster = connect(nodes[0])
    try:
        cluster.wait_until_ready(timedelta(seconds=20))
        coll = cluster.bucket("b1").default_collection()
        coll.upsert_multi({f"doc-{i}": {"i": i} for i in range(100)})
        ok(nodes[0], "bucket-flush", "--bucket", "b1", "--force", expect="Bucket flushed")
        wait_for(lambda: not coll.exists("doc-1").exists, "the flush to empty the bucket")
        # Documents for the rebalances below: enough that one move per node at a time takes a while.
        coll.upsert_multi({f"doc-{i}": {"i": i, "pad": "x" * 512} for i in range(DOCS)})
    finally:
        cluster.close()


def test_collection_manage(nodes):
    ok(nodes[0], "collection-manage", "--bucket", "b1", "--create-scope", "s1", expect="Scope created")
    ok(nodes[0], "collection-manage", "--bucket", "b1", "--create-collection", "s1.c1", "--max-ttl", "100",
       expect="Collection created")
    ok(nodes[0], "collection-manage", "--bucket", "b1", "--edit-collection", "s1.c1", "--max-ttl", "200",
       expect="Collection edited")
    listed = ok(nodes[0], "collection-manage", "--bucket", "b1", "--list-collections", "s1", expect="c1")
    assert "Scope s1" in listed, listed
    ok(nodes[0], "collection-manage", "--bucket", "b1", "--drop-collection", "s1.c1", expect="Collection dropped")
    ok(nodes[0], "collection-manage", "--bucket", "b1", "--drop-scope", "s1", expect="Scope dropped")


def test_user_manage(nodes):
    ok(nodes[0], "user-manage", "--set", "--rbac-username", "alice", "--rbac-password", "secret1",
       "--roles", "data_reader[b1],bucket_admin[b1]", "--auth-domain", "local", expect="User alice set")
    listed = json.loads(ok(nodes[0], "user-manage", "--list", expect="alice"))
    assert {r["role"] for r in listed[0]["roles"]} == {"data_reader", "bucket_admin"}, listed
    ok(nodes[0], "user-manage", "--my-roles", expect='"admin"')
    ok(nodes[0], "user-manage", "--delete", "--rbac-username", "alice", "--auth-domain", "local",
       expect="was removed")


def test_cluster_wide_settings(nodes):
    ok(nodes[0], "setting-cluster", "--cluster-name", "cli-cluster", "--cluster-ramsize", "2048",
       expect="Cluster settings modified")
    wait_for(lambda: (pool(nodes[2])["clusterName"], pool(nodes[2])["memoryQuota"]) == ("cli-cluster", 2048),
             "the settings to reach the third node")
    ok(nodes[0], "setting-autofailover", "--enable-auto-failover", "1", "--auto-failover-timeout", "30",
       "--max-failovers", "2", expect="Auto-failover settings modified")
    wait_for(lambda: rest(nodes[1], "GET", "/settings/autoFailover")[1]["timeout"] == 30, "auto-failover settings")
    ok(nodes[0], "setting-notification", "--enable-notifications", "0", expect="notification settings updated")
    ok(nodes[0], "setting-rebalance", "--set", "--moves-per-node", "8", "--enable", "0",
       expect="Rebalance settings updated")
    shown = ok(nodes[0], "setting-rebalance", "--get", expect="move per node: 8")
    assert "retry disabled" in shown, shown
    rc, out = cli(nodes[0], "setting-rebalance", "--set", "--enable", "1")
    assert rc != 0 and "does not retry" in out, out


def test_hard_failover_then_delta_recovery(nodes):
    ok(nodes[0], "failover", "--server-failover", nodes[2].mgmt_addr, "--hard", expect="Server failed over")
    assert members(nodes[0])[f"ns_1@{nodes[2].host}"] == "inactiveFailed"
    assert pool(nodes[0])["balanced"] is False
    ok(nodes[0], "recovery", "--server-recovery", nodes[2].mgmt_addr, "--recovery-type", "delta",
       expect="Servers recovered")
    ok(nodes[0], "rebalance", "--no-progress-bar", expect="Rebalance complete")
    assert set(members(nodes[0]).values()) == {"active"}
    wait_balanced(nodes[0])


def test_graceful_failover_then_server_readd(nodes):
    ok(nodes[0], "failover", "--server-failover", nodes[1].mgmt_addr, "--no-progress-bar",
       expect="Server failed over")
    assert members(nodes[0])[f"ns_1@{nodes[1].host}"] == "inactiveFailed"
    ok(nodes[0], "server-readd", "--server-add", nodes[1].mgmt_addr, expect="Servers recovered")
    ok(nodes[0], "rebalance", "--no-progress-bar", expect="Rebalance complete")
    assert set(members(nodes[0]).values()) == {"active"}
    wait_balanced(nodes[0])


def test_rebalance_status_and_rebalance_stop(nodes):
    """A rebalance of the third node out, one move per node at a time, is seen running by rebalance-status (with
    its progress details: the CLI crashed on the task before), is stopped, leaves the cluster unbalanced, then
    finishes when started again."""
    ok(nodes[0], "setting-rebalance", "--set", "--moves-per-node", "1", expect="Rebalance settings updated")
    ok(nodes[0], "rebalance", "--server-remove", nodes[2].mgmt_addr, "--no-wait", expect="Rebalance started")
    status = json.loads(ok(nodes[0], "rebalance-status", expect='"status"'))
    assert status["status"] == "running" and "progress" in status["details"], status
    ok(nodes[0], "rebalance-stop", expect="Rebalance stopped")
    wait_for(lambda: json.loads(cli(nodes[0], "rebalance-status")[1])["status"] != "running", "the stop")
    assert pool(nodes[0])["balanced"] is False
    ok(nodes[0], "setting-rebalance", "--set", "--moves-per-node", "4", expect="Rebalance settings updated")
    ok(nodes[0], "rebalance", "--server-remove", nodes[2].mgmt_addr, "--no-progress-bar",
       expect="Rebalance complete")
    assert list(members(nodes[0])) == [f"ns_1@{nodes[0].host}", f"ns_1@{nodes[1].host}"] or \
        sorted(members(nodes[0])) == sorted([f"ns_1@{nodes[0].host}", f"ns_1@{nodes[1].host}"])
    status = json.loads(ok(nodes[0], "rebalance-status", expect='"status"'))
    assert status["status"] == "notRunning", status


def groups(node: SetteeServer) -> dict[str, list[str]]:
    """Each server group's name and its nodes' hostnames (sorted), from `group-manage --list`."""
    listed, current = {}, None
    for line in ok(node, "group-manage", "--list", expect="Group 1").splitlines():
        if line.startswith(" server: "):
            listed[current].append(line.split(": ", 1)[1].strip())
        elif line.strip():
            current = line.strip()
            listed[current] = []
    return {name: sorted(hosts) for name, hosts in listed.items()}


def test_group_manage_create_rename_delete(nodes):
    """Server groups while the third node is out: create, rename, delete an empty group, list."""
    ok(nodes[0], "group-manage", "--create", "--group-name", "Rack B", expect="Server group created")
    ok(nodes[0], "group-manage", "--create", "--group-name", "Spare", expect="Server group created")
    ok(nodes[0], "group-manage", "--rename", "Rack C", "--group-name", "Spare", expect="Server group renamed")
    ok(nodes[0], "group-manage", "--delete", "--group-name", "Rack C", expect="Server group deleted")
    assert groups(nodes[1]) == {"Group 1": sorted([nodes[0].mgmt_addr, nodes[1].mgmt_addr]), "Rack B": []}


def test_server_add_brings_a_removed_node_back(nodes):
    """A node rebalanced out is added back with server-add (it was refused with "Prepare join failed"), straight
    into a server group."""
    ok(nodes[0], "server-add", "--server-add", nodes[2].mgmt_addr, "--server-add-username", USERNAME,
       "--server-add-password", PASSWORD, "--services", "data", "--group-name", "Rack B", expect="Server added")
    assert groups(nodes[0])["Rack B"] == [nodes[2].mgmt_addr]
    ok(nodes[0], "rebalance", expect="Rebalance complete")
    assert members(nodes[0]) == {f"ns_1@{s.host}": "active" for s in nodes}
    wait_balanced(nodes[0])


def test_group_manage_move_servers(nodes):
    """Moving a node between groups, then a rebalance; a group with nodes cannot be deleted. (Three nodes in groups
    of one and two have no better placement than the plain one, so this rebalance moves nothing: the four-node
    cluster of test_server_groups.py shows the maps following the groups.)"""
    rc, out = cli(nodes[0], "group-manage", "--delete", "--group-name", "Rack B")
    assert rc != 0 and "not empty" in out, out
    ok(nodes[0], "group-manage", "--move-servers", nodes[1].mgmt_addr, "--from-group", "Group 1",
       "--to-group", "Rack B", expect="Servers moved between groups")
    assert groups(nodes[0]) == {"Group 1": [nodes[0].mgmt_addr],
                                "Rack B": sorted([nodes[1].mgmt_addr, nodes[2].mgmt_addr])}
    ok(nodes[0], "rebalance", "--no-progress-bar", expect="Rebalance complete")
    wait_balanced(nodes[0])
    assert {n["hostname"]: n["serverGroup"] for n in pool(nodes[2])["nodes"]} == {
        nodes[0].mgmt_addr: "Group 1", nodes[1].mgmt_addr: "Rack B", nodes[2].mgmt_addr: "Rack B"}


def test_bucket_delete(nodes):
    ok(nodes[0], "bucket-delete", "--bucket", "e1", expect="Bucket deleted")
    assert rest(nodes[0], "GET", "/pools/default/buckets/e1")[0] == 404


def reset_admin_password(node: SetteeServer, *args: str, config_path: Path | None = None) -> tuple[int, str]:
    """Runs `couchbase-cli reset-admin-password` as an operator on the node's machine would: no credentials, the
    node's data directory as the configuration path (where it reads `localtoken`)."""
    path = config_path if config_path is not None else node.data_dir
    done = subprocess.run([CLI, "reset-admin-password", "--config-path", str(path), "--ip", node.host,
                           "--port", str(node.mgmt_port), *args],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS)
    return done.returncode, done.stdout + done.stderr


def admin_status(node: SetteeServer, password: str) -> int:
    token = base64.b64encode(f"{USERNAME}:{password}".encode()).decode()
    request = urllib.request.Request(node.mgmt_url + "/pools/default", headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_reset_admin_password(nodes):
    """reset-admin-password logs in as `@localtoken` with `<config-path>/localtoken`: `--new-password` and
    `--regenerate` change the administrator's password on every node (the old one refused), and a configuration
    path without the token file stops the CLI with a clear error. The password is set back at the end."""
    rc, out = reset_admin_password(nodes[0], "--new-password", "x", config_path=nodes[0].data_dir / "nowhere")
    assert rc != 0 and "localtoken" in out, out
    rc, out = reset_admin_password(nodes[0], "--new-password", "cli-new-pass")
    passed = rc == 0 and "Administrator password changed" in out
    for n in nodes:
        wait_for(lambda: admin_status(n, "cli-new-pass") == 200, f"the new password on {n.host}")
        passed = passed and admin_status(n, PASSWORD) == 401
    rc, out = reset_admin_password(nodes[1], "--regenerate")
    generated = out.strip().splitlines()[-1] if rc == 0 and out.strip() else ""
    for n in nodes:
        wait_for(lambda: admin_status(n, generated) == 200, f"the generated password on {n.host}")
    rc_back, out_back = reset_admin_password(nodes[0], "--new-password", PASSWORD)
    for n in nodes:
        wait_for(lambda: admin_status(n, PASSWORD) == 200, f"the original password back on {n.host}")
    passed = passed and rc == 0 and len(generated) >= 16 and rc_back == 0
    RESULTS["reset-admin-password"] = "pass" if passed else f"FAIL: {out.strip()[-200:]} {out_back.strip()[-200:]}"
    assert passed, (out, out_back)


def test_zz_report(nodes):
    """Prints the commands and their results (scripts/test-couchbase-cli.sh shows it with -s)."""
    version = os.environ.get("COUCHBASE_CLI_VERSION", "unknown")
    print(f"\ncouchbase-cli {version} against settee:")
    for command, result in sorted(RESULTS.items()):
        print(f"  {command:24} {result}")
    assert not [c for c, r in RESULTS.items() if r.startswith("FAIL")], RESULTS
