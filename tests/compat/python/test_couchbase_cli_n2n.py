"""The official `couchbase-cli` turning node-to-node encryption on and off on a two-node settee cluster (issue 17):
`node-to-node-encryption --get/--enable/--disable` and `setting-security --set --cluster-encryption-level`, in the
order Couchbase's "Manage Node-to-Node Encryption" page gives (auto-failover off first), with ns_server's refusals
(a level before encryption is on, turning encryption off at `all`). At `strict` the CLI reaches the second node over
its HTTPS port. Skipped without the CLI (see test_couchbase_cli.py and scripts/test-couchbase-cli.sh).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import settee_server
from cluster_load import wait_for
from test_cluster import pool_nodes, rest, wait_rebalanced
from test_couchbase_cli import CLI, cli, ok

pytestmark = pytest.mark.skipif(
    not CLI, reason="COUCHBASE_CLI is not set: run scripts/test-couchbase-cli.sh PATH-TO-COUCHBASE-CLI-CHECKOUT")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two nodes with their three TLS ports on, joined and rebalanced."""
    servers = settee_server.cluster_servers(Path(tmp_path_factory.mktemp("cli-n2n")), 2)
    ports = settee_server.free_ports(6)
    for i, s in enumerate(servers):
        s.kv_tls_port, s.mgmt_tls_port, s.query_tls_port = ports[3 * i:3 * i + 3]
    servers[1].join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        wait_for(lambda: len(pool_nodes(servers[0])) == 2, "both nodes to join")
        known = ",".join(f"ns_1@{s.host}" for s in servers)
        status, body = rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(servers[0])
        yield servers
    finally:
        settee_server.stop_all(servers)


def level(node) -> str | None:
    status, body = rest(node, "GET", "/settings/security")
    assert status == 200, body
    return body.get("clusterEncryptionLevel")


def test_node_to_node_encryption_enable_level_and_disable(pair):
    """Proves the CLI's whole cycle: disabled, a level refused, enable on every node, `all` and `strict` set (the
    second node then answered over HTTPS only), disable refused at `all`, back to `control`, disable, disabled."""
    first, second = pair
    ok(first, "node-to-node-encryption", "--get", expect="Node-to-node encryption is disabled")
    rc, out = cli(first, "setting-security", "--set", "--cluster-encryption-level", "all")
    assert rc != 0 and "Can't set cluster encryption level when cluster encryption is disabled." in out, out
    ok(first, "setting-autofailover", "--enable-auto-failover", "0")
    ok(first, "node-to-node-encryption", "--enable", expect="Switched node-to-node encryption on")
    ok(first, "node-to-node-encryption", "--get", expect="Node-to-node encryption is enabled")
    assert level(first) == "control", "the level shows, at its default, once every node encrypts"
    ok(first, "setting-security", "--set", "--cluster-encryption-level", "all", expect="Security settings updated")
    assert level(second) == "all"
    rc, out = cli(first, "node-to-node-encryption", "--disable")
    assert rc != 0 and "Can't disable nodeEncryption when the cluster encryption level has been set to all" in out

    ok(first, "setting-security", "--set", "--cluster-encryption-level", "strict", expect="Security settings updated")
    wait_for(lambda: cli(second, "server-list")[0] != 0, "the second node's plain port to close")
    ok(second, "server-list", expect="healthy active", tls=True)
    ok(second, "setting-security", "--set", "--cluster-encryption-level", "control", tls=True,
       expect="Security settings updated")
    wait_for(lambda: cli(second, "server-list")[0] == 0, "the second node's plain port to serve again")
    ok(first, "node-to-node-encryption", "--disable", expect="Switched node-to-node encryption off")
    ok(first, "node-to-node-encryption", "--get", expect="Node-to-node encryption is disabled")
    assert level(first) is None
