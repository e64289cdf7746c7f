"""`POST /controller/resetAdminPassword` with the `@localtoken` login, as `couchbase-cli reset-admin-password`
calls it (issue 22 item 3), over HTTP against a real three-node cluster.

Each node writes a random token to `<data-dir>/localtoken` (mode 0600) at start. The token logs in as `@localtoken`
from 127.0.0.1 only and only for the reset; the new password reaches every node through the cluster metadata, the
old one is refused everywhere afterwards (REST and KV through the SDK), and the nodes keep talking to each other
(they authenticate with the cluster's node-to-node secret, not the administrator's password). The real CLI is
driven in test_couchbase_cli.py where it is installed.
"""

from __future__ import annotations

import base64
import http.client
import json
import stat
import urllib.parse
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import AuthenticationException
from couchbase.options import UpsertOptions

import settee_server
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import rest, wait_rebalanced

NODES = 3
NEW_PASSWORD = "n3w-Passw0rd"
BUCKET = "afterreset"
# Not 127.0.0.1: ns_server (and settee) accept the local token from 127.0.0.1 and ::1 only.
OTHER_LOOPBACK = "127.0.0.7"


def call(node: SetteeServer, method: str, path: str, user: str, password: str, form: dict | None = None,
         source: str | None = None) -> tuple[int, object]:
    """One management call with Basic credentials, from `source` if given; (status, JSON or text)."""
    connection = http.client.HTTPConnection(node.host, node.mgmt_port, timeout=60,
                                            source_address=(source, 0) if source else None)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    headers = {"Authorization": f"Basic {token}", "Content-Type": "application/x-www-form-urlencoded"}
    body = urllib.parse.urlencode(form) if form is not None else None
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        status, raw = response.status, response.read()
    finally:
        connection.close()
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")


def local_token(node: SetteeServer) -> str:
    return (node.data_dir / "localtoken").read_text().strip()


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Three nodes: the second joins with `--join`, the third is added with addNode (both ways take the cluster's
    node-to-node secret), rebalanced."""
    base = Path(tmp_path_factory.mktemp("reset-admin"))
    servers = settee_server.cluster_servers(base, NODES)
    servers[1].join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        status, body = rest(servers[0], "POST", "/controller/addNode",
                            {"hostname": servers[2].mgmt_addr, "user": USERNAME, "password": PASSWORD})
        assert status == 200, body
        known = ",".join(f"ns_1@{s.host}" for s in servers)
        status, body = rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(servers[0])
        yield servers
    finally:
        settee_server.stop_all(servers)


def test_every_node_writes_a_private_local_token(nodes):
    """The token file holds 32 hex digits and a newline, readable by the node's account only, and differs per node."""
    tokens = set()
    for n in nodes:
        path = n.data_dir / "localtoken"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        text = path.read_text()
        assert text.endswith("\n") and len(text.strip()) == 32 and int(text.strip(), 16) >= 0, text
        tokens.add(text.strip())
    assert len(tokens) == NODES


def test_only_the_token_from_localhost_may_reset(nodes):
    """A wrong token gets 401, the administrator's own credentials 403, the right token from another loopback
    address 400 "localhost only"; none of them changes the password."""
    node = nodes[0]
    form = {"password": NEW_PASSWORD}
    assert call(node, "POST", "/controller/resetAdminPassword", "@localtoken", "0" * 32, form)[0] == 401
    assert call(node, "POST", "/controller/resetAdminPassword", USERNAME, PASSWORD, form)[0] == 403
    status, body = call(node, "POST", "/controller/resetAdminPassword", "@localtoken", local_token(node), form,
                        source=OTHER_LOOPBACK)
    assert (status, body) == (400, "API is accessible from localhost only")
    # The token is no password for anything else.
    assert call(node, "GET", "/pools/default", "@localtoken", local_token(node))[0] == 401
    assert call(node, "GET", "/pools/default", USERNAME, PASSWORD)[0] == 200


def test_reset_reaches_every_node_and_the_nodes_keep_working_together(nodes):
    """The reset answers the new password; every node then refuses the old one and accepts the new one over REST
    and KV (the SDK), and a bucket created afterwards replicates with majority durability, which needs the nodes'
    replication connections to authenticate."""
    node = nodes[0]
    status, body = call(node, "POST", "/controller/resetAdminPassword", "@localtoken", local_token(node),
                        {"password": NEW_PASSWORD})
    assert (status, body) == (200, {"password": NEW_PASSWORD})
    for n in nodes:
        wait_for(lambda: call(n, "GET", "/pools/default", USERNAME, PASSWORD)[0] == 401,
                 f"the old password refused on {n.host}")
        assert call(n, "GET", "/pools/default", USERNAME, NEW_PASSWORD)[0] == 200
    status, body = call(nodes[1], "POST", "/pools/default/buckets", USERNAME, NEW_PASSWORD,
                        {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
    assert status == 202, body
    for n in nodes:
        wait_for(lambda: call(n, "GET", f"/pools/default/buckets/{BUCKET}", USERNAME, NEW_PASSWORD)[0] == 200,
                 f"{BUCKET} on {n.host}")
    cluster = connect(nodes[2], USERNAME, NEW_PASSWORD)
    try:
        cluster.wait_until_ready(timedelta(seconds=30))
        collection = cluster.bucket(BUCKET).default_collection()
        majority = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY),
                                 timeout=timedelta(seconds=20))
        for i in range(20):
            collection.upsert(f"doc-{i}", {"i": i}, majority)
        assert collection.get("doc-7").content_as[dict] == {"i": 7}
    finally:
        cluster.close()
    with pytest.raises(AuthenticationException):
        old = connect(nodes[0], USERNAME, PASSWORD)
        try:
            old.wait_until_ready(timedelta(seconds=10))
            old.bucket(BUCKET).default_collection().get("doc-7")
        finally:
            old.close()


def test_a_restarted_node_keeps_the_reset_password(nodes):
    """A node restarted with the old password on its command line takes the cluster's administrator from the
    metadata: the old password is refused there once it has caught up, the new one works."""
    node = nodes[2]
    node.stop()
    node.wait_ready = lambda timeout_seconds: None  # its readiness check logs in with the old password
    node.start()
    def new_password_works() -> bool:
        try:
            return call(node, "GET", "/pools/default", USERNAME, NEW_PASSWORD)[0] == 200
        except OSError:  # not listening yet
            return False

    wait_for(new_password_works, "the new password on the restarted node", timeout=60)
    assert call(node, "GET", "/pools/default", USERNAME, PASSWORD)[0] == 401


def test_generate_answers_a_random_password_that_works_everywhere(nodes):
    """`?generate=1` sets and answers a random password; the previous one is refused afterwards."""
    node = nodes[0]
    status, body = call(node, "POST", "/controller/resetAdminPassword?generate=1", "@localtoken", local_token(node))
    assert status == 200, body
    generated = body["password"]
    assert len(generated) >= 16 and generated != NEW_PASSWORD
    for n in nodes:
        wait_for(lambda: call(n, "GET", "/pools/default", USERNAME, generated)[0] == 200, f"{n.host}")
        assert call(n, "GET", "/pools/default", USERNAME, NEW_PASSWORD)[0] == 401
