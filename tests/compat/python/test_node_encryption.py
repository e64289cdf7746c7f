"""Node-to-node encryption (issue 17, item 1): a 3-node cluster with its TLS ports on is switched, as Couchbase's
documentation does it (auto-failover off, then `enableExternalListener`, `setupNetConfig` and
`disableUnusedExternalListeners` with `nodeEncryption=on` on every node), to `clusterEncryptionLevel=all`: every
replication connection then runs over TLS (each node's `settee_dcp_replication_producers` gauge counts them by
transport, and counts none plain), `majority` writes succeed, a hard failover and a full-recovery rebalance work.
At `strict` the plain ports of a node not on 127.0.0.1 close every connection while the Python SDK works over
`couchbases://` with the cluster's CA; back at `control` the plain ports serve again and replication is plain.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import ClusterOptions, ClusterTimeoutOptions, UpsertOptions

import kv_raw
import settee_server
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import pool_nodes, rest, rest_json, wait_rebalanced

BUCKET = "sealed"
NODES = 3
MAJORITY = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY), timeout=timedelta(seconds=10))


def ok(reply):
    status, body = reply
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Three nodes on 127.0.0.1-3 with all TLS ports on, joined, rebalanced, one bucket with a replica."""
    base = Path(tmp_path_factory.mktemp("n2n"))
    servers = settee_server.cluster_servers(base, NODES)
    ports = settee_server.free_ports(3 * NODES)
    for i, s in enumerate(servers):
        s.kv_tls_port, s.mgmt_tls_port, s.query_tls_port = ports[3 * i:3 * i + 3]
    for s in servers[1:]:
        s.join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        wait_for(lambda: len(pool_nodes(servers[0])) == NODES, "every node to join")
        known = ",".join(f"ns_1@{s.host}" for s in servers)
        ok(rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""}))
        wait_rebalanced(servers[0])
        status, body = rest(servers[0], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        yield servers
    finally:
        settee_server.stop_all(servers)


@pytest.fixture(scope="module")
def ca_file(nodes, tmp_path_factory) -> str:
    """The cluster's CA as `/pools/default/certificate` serves it (every node adopted the first node's)."""
    pem = rest(nodes[0], "GET", "/pools/default/certificate")[1]
    assert all(rest(n, "GET", "/pools/default/certificate")[1] == pem for n in nodes), "one CA for the cluster"
    path = Path(tmp_path_factory.mktemp("ca")) / "ca.pem"
    path.write_text(pem)
    return str(path)


def replication_producers(node: SetteeServer, ca_file: str) -> dict:
    """The node's replication connections open now by transport, from `/metrics` on its HTTPS port (which `strict`
    leaves open)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    url = f"https://{node.host}:{node.mgmt_tls_port}/metrics"
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    context = ssl.create_default_context(cafile=ca_file)
    with urllib.request.urlopen(request, timeout=10, context=context) as r:
        text = r.read().decode()
    found = re.findall(r'^settee_dcp_replication_producers\{transport="(\w+)"\} (\d+)', text, re.M)
    return {transport: int(n) for transport, n in found}


def replication_runs_over(nodes, ca_file: str, transport: str):
    """Waits until every node serves its two peers' replication connections over `transport` and none other (each
    node holds replicas of the other two nodes' actives, one connection per source and bucket)."""
    other = "plain" if transport == "tls" else "tls"

    def settled():
        seen = [replication_producers(n, ca_file) for n in nodes]
        return all(s.get(transport) == NODES - 1 and s.get(other) == 0 for s in seen) and seen

    return wait_for(settled, f"replication over {transport} only", timeout=120)


def turn_on_node_encryption(nodes):
    for n in nodes:
        ok(rest(n, "POST", "/node/controller/enableExternalListener", {"nodeEncryption": "on"}))
    for n in nodes:
        ok(rest(n, "POST", "/node/controller/setupNetConfig", {"nodeEncryption": "on"}))
    for n in nodes:
        ok(rest(n, "POST", "/node/controller/disableUnusedExternalListeners", {}))


def majority_writes(collection, prefix: str, count: int = 50) -> dict:
    docs = {f"{prefix}-{i}": {"i": i, "p": prefix} for i in range(count)}
    for key, value in docs.items():
        collection.upsert(key, value, MAJORITY)
    return docs


def tls_collection(node: SetteeServer, ca_file: str):
    timeout = timedelta(seconds=10)
    timeouts = ClusterTimeoutOptions(kv_timeout=timeout, kv_durable_timeout=timeout, connect_timeout=timeout,
                                     bootstrap_timeout=timeout, management_timeout=timedelta(seconds=20))
    auth = PasswordAuthenticator(USERNAME, PASSWORD, cert_path=ca_file)
    cluster = Cluster(f"couchbases://{node.host}:{node.kv_tls_port}", ClusterOptions(auth, timeout_options=timeouts))
    cluster.wait_until_ready(timeout)
    return cluster, cluster.bucket(BUCKET).default_collection()


# A HELLO with no key and no features: the KV port answers it before authentication.
KV_HELLO = bytes([0x80, 0x1F]) + bytes(22)
HTTP_GET = b"GET /pools HTTP/1.1\r\nHost: x\r\n\r\n"


def plain_port_closes(host: str, port: int, kv: bool = False) -> bool:
    """Whether a connection to the port ends without an answer to a request it would answer (KV: HELLO)."""
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.settimeout(5)
            s.sendall(KV_HELLO if kv else HTTP_GET)
            return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_level_is_refused_until_every_node_has_node_encryption(nodes, ca_file):
    """Proves ns_server's order is enforced: no level before node encryption; no network change while auto-failover
    is on; `nodeEncryption` shows per node in /pools/nodes."""
    assert not plain_port_closes(nodes[1].host, nodes[1].kv_port, kv=True), "the probe sees an open KV port"
    assert not plain_port_closes(nodes[1].host, nodes[1].mgmt_port), "and an open management port"
    replication_runs_over(nodes, ca_file, "plain")
    status, body = rest(nodes[0], "POST", "/settings/security", {"clusterEncryptionLevel": "all"})
    assert status == 400
    assert body["errors"]["clusterEncryptionLevel"] == \
        "Can't set cluster encryption level when cluster encryption is disabled."
    assert "clusterEncryptionLevel" not in ok(rest(nodes[0], "GET", "/settings/security"))
    status, body = rest(nodes[1], "POST", "/node/controller/setupNetConfig", {"nodeEncryption": "on"})
    assert status == 400 and body["errors"]["_"] == "Can't change network configuration when auto-failover is enabled."
    ok(rest(nodes[0], "POST", "/settings/autoFailover", {"enabled": "false"}))
    wait_for(lambda: all(not ok(rest(n, "GET", "/settings/autoFailover"))["enabled"] for n in nodes),
             "every node to apply auto-failover off")
    ok(rest(nodes[1], "POST", "/node/controller/setupNetConfig", {"nodeEncryption": "on"}))
    want = {nodes[0].mgmt_addr: False, nodes[1].mgmt_addr: True, nodes[2].mgmt_addr: False}
    wait_for(lambda: {h: n["nodeEncryption"] for h, n in pool_nodes(nodes[0]).items()} == want,
             "nodeEncryption to show for the second node only")
    status, body = rest(nodes[0], "POST", "/settings/security", {"clusterEncryptionLevel": "all"})
    assert status == 400, "one node with encryption is not enough"


def test_all_puts_replication_on_tls_and_majority_writes_failover_and_rebalance_work(nodes, ca_file):
    """Proves `all`: each node's replication producers become TLS only (the plain gauge drops to 0, which it
    would not if any feed still streamed from a plain port), majority writes succeed, node encryption cannot be
    turned off at `all`, and a hard failover then a full-recovery rebalance keep every write, again over TLS."""
    turn_on_node_encryption(nodes)
    wait_for(lambda: all(n["nodeEncryption"] for n in pool_nodes(nodes[2]).values()), "every node to encrypt")
    ok(rest(nodes[0], "POST", "/settings/security", {"clusterEncryptionLevel": "all"}))
    wait_for(lambda: ok(rest(nodes[2], "GET", "/settings/security")).get("clusterEncryptionLevel") == "all",
             "the level to reach the third node")
    replication_runs_over(nodes, ca_file, "tls")
    cluster = connect(nodes[0])
    collection = cluster.bucket(BUCKET).default_collection()
    docs = majority_writes(collection, "all")

    cert_rules = json.dumps({"state": "mandatory",
                             "prefixes": [{"path": "subject.cn", "prefix": "", "delimiter": ""}]}).encode()
    status, body = rest_json(nodes[0], "/settings/clientCertAuth", cert_rules)
    assert status == 400 and "node-to-node encryption is on" in body, body

    status, body = rest(nodes[1], "POST", "/node/controller/setupNetConfig", {"nodeEncryption": "off"})
    assert status == 400
    assert body["errors"]["nodeEncryption"] == \
        "Can't disable nodeEncryption when the cluster encryption level has been set to all"

    ok(rest(nodes[0], "POST", "/controller/failOver", {"otpNode": f"ns_1@{nodes[2].host}"}))
    docs.update(majority_writes(collection, "after-failover"))
    ok(rest(nodes[0], "POST", "/controller/setRecoveryType",
            {"otpNode": f"ns_1@{nodes[2].host}", "recoveryType": "full"}))
    known = ",".join(f"ns_1@{s.host}" for s in nodes)
    ok(rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""}))
    wait_rebalanced(nodes[0])
    replication_runs_over(nodes, ca_file, "tls")
    docs.update(majority_writes(collection, "after-rebalance"))
    assert all(collection.get(k).content_as[dict] == v for k, v in docs.items())
    cluster.close()


def test_strict_closes_plain_ports_off_loopback_and_control_reopens_them(nodes, ca_file):
    """Proves `strict`: the second node (127.0.0.2) closes connections to its plain KV, management and query ports
    while the SDK writes with majority over `couchbases://` trusting the cluster CA; the first node's plain ports
    stay (127.0.0.1 is loopback, as Couchbase keeps its plain ports on localhost). Back at `control` the second
    node's plain ports serve again and replication returns to plain."""
    node = nodes[1]
    # Authenticated, so the unauthenticated-connection timeout cannot be what closes it.
    before = socket.create_connection((node.host, node.kv_port), timeout=5)
    assert kv_raw.call(before, 0x21, b"PLAIN", f"\0{USERNAME}\0{PASSWORD}".encode())[0] == 0
    ok(rest(nodes[0], "POST", "/settings/security", {"clusterEncryptionLevel": "strict"}))
    for port, kv in ((node.kv_port, True), (node.mgmt_port, False), (node.query_port, False)):
        wait_for(lambda: plain_port_closes(node.host, port, kv), f"{node.host}:{port} to close plain connections")
    assert not plain_port_closes(nodes[0].host, nodes[0].mgmt_port), "127.0.0.1 keeps its plain port"
    with pytest.raises(ConnectionError):
        kv_raw.call(before, 0x0A)  # NOOP: a plain KV connection opened before `strict` ends at its next request
    before.close()
    replication_runs_over(nodes, ca_file, "tls")
    cluster, collection = tls_collection(node, ca_file)
    docs = majority_writes(collection, "strict")
    assert all(collection.get(k).content_as[dict] == v for k, v in docs.items())
    cluster.close()

    ok(rest(nodes[0], "POST", "/settings/security", {"clusterEncryptionLevel": "control"}))
    wait_for(lambda: not plain_port_closes(node.host, node.kv_port, kv=True), "the plain KV port to serve again")
    assert rest(node, "GET", "/pools")[0] == 200
    replication_runs_over(nodes, ca_file, "plain")
    cluster = connect(node)
    majority_writes(cluster.bucket(BUCKET).default_collection(), "control")
    cluster.close()
