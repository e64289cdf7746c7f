"""TLS through the official Python SDK (issue 17, item 1): `couchbases://` to the node's KV TLS port with the CA the
node serves at `/pools/default/certificate`, KV, query and management calls over the TLS ports the cluster config
advertises (kvSSL, n1qlSSL, mgmtSSL), a trust store without that CA failing, and curl over the management TLS port.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, free_ports, new_tls_server

# A trust store that holds public CAs but not the node's own.
SYSTEM_CAS = Path("/etc/ssl/certs/ca-certificates.crt")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory) -> SetteeServer:
    """A node with its three TLS ports on, on free ports."""
    srv = new_tls_server(Path(tmp_path_factory.mktemp("settee-tls")))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def ca_file(tls_server, tmp_path_factory) -> str:
    """The node's CA, fetched as an operator would: GET /pools/default/certificate on the plain management port."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(tls_server.mgmt_url + "/pools/default/certificate",
                                     headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        pem = response.read().decode()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    path = Path(tmp_path_factory.mktemp("ca")) / "ca.pem"
    path.write_text(pem)
    return str(path)


def tls_cluster(server: SetteeServer, trust_store: str, timeout: timedelta = timedelta(seconds=10)) -> Cluster:
    timeouts = ClusterTimeoutOptions(kv_timeout=timeout, connect_timeout=timeout, bootstrap_timeout=timeout,
                                     query_timeout=timedelta(seconds=20), management_timeout=timedelta(seconds=20))
    authenticator = PasswordAuthenticator(USERNAME, PASSWORD, cert_path=trust_store)
    return Cluster(f"couchbases://{server.host}:{server.kv_tls_port}",
                   ClusterOptions(authenticator, timeout_options=timeouts))


def test_kv_query_and_management_work_over_tls_with_the_served_ca(tls_server, ca_file):
    """Proves the SDK bootstraps over the KV TLS port trusting only the node's CA, then writes and reads a document,
    runs a query (the n1qlSSL port) and lists buckets (the mgmtSSL port)."""
    cluster = tls_cluster(tls_server, ca_file)
    try:
        cluster.wait_until_ready(timedelta(seconds=20))
        collection = cluster.bucket(BUCKET).default_collection()
        collection.upsert("tls-doc", {"over": "tls"})
        assert collection.get("tls-doc").content_as[dict] == {"over": "tls"}
        rows = list(cluster.query("SELECT 1 AS one").rows())
        assert rows == [{"one": 1}]
        names = [b.name for b in cluster.buckets().get_all_buckets()]
        assert BUCKET in names
    finally:
        cluster.close()


def test_a_trust_store_without_the_node_ca_fails(tls_server):
    """Proves certificate verification is real: a trust store of public CAs (not the node's) cannot bootstrap."""
    if not SYSTEM_CAS.is_file():
        pytest.skip("no system CA bundle to use as a foreign trust store")
    with pytest.raises(CouchbaseException):
        cluster = tls_cluster(tls_server, str(SYSTEM_CAS), timeout=timedelta(seconds=3))
        try:
            cluster.bucket(BUCKET).default_collection().upsert("never", {"written": False})
        finally:
            cluster.close()


def test_curl_over_the_management_tls_port(tls_server, ca_file):
    """Proves curl reaches /pools over HTTPS with the node's CA, and refuses the node without it."""
    url = f"https://{tls_server.host}:{tls_server.mgmt_tls_port}/pools"
    ok = subprocess.run(["curl", "-sS", "--cacert", ca_file, "-u", f"{USERNAME}:{PASSWORD}", "-o", "/dev/null",
                         "-w", "%{http_code}", url], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "200"
    refused = subprocess.run(["curl", "-sS", "--cacert", str(SYSTEM_CAS), "-o", "/dev/null", url],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 60, (refused.returncode, refused.stderr)  # 60: peer certificate cannot be verified


def _admin(node: SetteeServer, method: str, path: str, form: dict | None = None):
    """One management call as the administrator: (status, body text)."""
    import urllib.error
    import urllib.parse
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(node.mgmt_url + path, data=data, method=method,
                                     headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_a_two_node_cluster_shares_one_ca(tmp_path_factory):
    """Proves one CA covers a cluster: a node that joins serves its seed's CA, and after a rebalance spreads the
    bucket over both nodes, the SDK, trusting only that CA, writes and reads keys living on either node through
    their kvSSL ports."""
    import json
    import time
    from cluster_load import wait_for

    base = Path(tmp_path_factory.mktemp("settee-tls-cluster"))
    ports = free_ports(12)
    nodes = []
    for i, ip in enumerate(["127.0.0.61", "127.0.0.62"]):
        kv, mgmt, query, kv_tls, mgmt_tls, query_tls = ports[6 * i:6 * i + 6]
        nodes.append(SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, kv_tls_port=kv_tls,
                                  mgmt_tls_port=mgmt_tls, query_tls_port=query_tls, data_dir=base / f"n{i}",
                                  log_path=base / f"n{i}.log", bucket_type="ephemeral", ip=ip,
                                  bucket=BUCKET if i == 0 else ""))
    nodes[1].join = nodes[0].mgmt_addr
    try:
        for n in nodes:
            n.start()
        ca = [_admin(n, "GET", "/pools/default/certificate") for n in nodes]
        assert ca[0][0] == 200 and ca[0] == ca[1], "the joined node serves the seed's CA"
        status, body = _admin(nodes[0], "POST", "/controller/rebalance",
                              {"knownNodes": ",".join(f"ns_1@{n.ip}" for n in nodes), "ejectedNodes": ""})
        assert status == 200, body

        def rebalanced():
            _, tasks = _admin(nodes[0], "GET", "/pools/default/tasks")
            task = json.loads(tasks)[0]
            return task if task["status"] != "running" else None
        task = wait_for(rebalanced, "the rebalance to end", timeout=300)
        assert "errorMessage" not in task, task
        _, terse = _admin(nodes[0], "GET", f"/pools/default/b/{BUCKET}")
        config = json.loads(terse)
        actives = {row[0] for row in config["vBucketServerMap"]["vBucketMap"]}
        assert actives == {0, 1}, "both nodes hold active vBuckets"
        assert all("kvSSL" in n["services"] for n in config["nodesExt"]), config["nodesExt"]

        ca_file = base / "ca.pem"
        ca_file.write_text(ca[0][1])
        cluster = tls_cluster(nodes[0], str(ca_file))
        try:
            cluster.wait_until_ready(timedelta(seconds=30))
            collection = cluster.bucket(BUCKET).default_collection()
            for k in range(64):
                collection.upsert(f"tls-{k}", {"k": k})
            assert all(collection.get(f"tls-{k}").content_as[dict] == {"k": k} for k in range(64))
        finally:
            cluster.close()
    finally:
        for n in nodes:
            n.stop()
