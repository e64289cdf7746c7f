"""Per-user limits on a real node (issue 17, item 2: "rate and connection limits per user"), as Couchbase 7.1+
has them: `limits` on `PUT /settings/rbac/users/local/<u>` and `enforceLimits` on `POST /internalSettings`.

The official Python SDK's own rate-limit suite (couchbase/tests/rate_limit_t.py) sets users up the same way and
expects RateLimitedException; these tests do the same through the SDK, and check the exact KV statuses (0x30-0x33)
on a raw connection where the SDK hides them.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from couchbase.exceptions import RateLimitedException

import kv_raw
from sdk_connect import connect
from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, new_server

USER_PASSWORD = "limited-password"
RATE_LIMITED_NETWORK_EGRESS = 0x31
RATE_LIMITED_MAX_CONNECTIONS = 0x32
RATE_LIMITED_MAX_COMMANDS = 0x33
MIB = 1 << 20


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> SetteeServer:
    srv = new_server(Path(tmp_path_factory.mktemp("settee-limits")))
    srv.start()
    status, body = admin(srv, "POST", "/internalSettings", {"enforceLimits": "true"})
    assert status == 200, body
    yield srv
    srv.stop()


def admin(node: SetteeServer, method: str, path: str, form: dict | None = None):
    """One management call as the administrator: (status, body text)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    data = urllib.parse.urlencode(form).encode() if form else None
    request = urllib.request.Request(node.mgmt_url + path, data=data, method=method,
                                     headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def limit_user(node: SetteeServer, user: str, limits: dict) -> None:
    """(Re)creates `user` with `limits` (ns_server's JSON), as the SDK suite's environment does. Each test has its
    own user: a user's per-minute counters outlive a change of its limits."""
    form = {"password": USER_PASSWORD, "roles": f"bucket_full_access[{BUCKET}]", "limits": json.dumps(limits)}
    status, body = admin(node, "PUT", f"/settings/rbac/users/local/{user}", form)
    assert status == 200, body
    away_from_a_minute_boundary()


def away_from_a_minute_boundary() -> None:
    """Waits out the last seconds of a wall-clock minute: the node's windows start at each whole minute, and a
    sequence of commands that straddles one would start counting again half-way."""
    left = 60 - time.time() % 60
    if left < 5:
        time.sleep(left + 0.2)


def kv_login(node: SetteeServer, user: str, password: str = USER_PASSWORD) -> tuple[socket.socket, int]:
    """A raw KV connection and the status of its SASL PLAIN as `user`."""
    sock = socket.create_connection((node.host, node.kv_port), timeout=5)
    status = kv_raw.call(sock, 0x21, b"PLAIN", f"\0{user}\0{password}".encode())[0]
    return sock, status


def test_kv_commands_over_the_minutes_budget_are_refused_with_rate_limited(node):
    # Proves num_ops_per_min: the user's 4th data command of the minute gets RATE_LIMITED_MAX_COMMANDS, on a second
    # connection too (the budget is the user's), while the administrator is not limited; the SDK raises
    # RateLimitedException.
    user = "ops"
    limit_user(node, user, {"kv": {"num_ops_per_min": 3}})
    sock, status = kv_login(node, user)
    with sock:
        assert status == 0
        assert kv_raw.call(sock, 0x89, BUCKET.encode())[0] == 0
        statuses = [kv_raw.call(sock, 0x01, f"k{i}".encode(), b"v", extras=bytes(8))[0] for i in range(4)]
        assert statuses == [0, 0, 0, RATE_LIMITED_MAX_COMMANDS]
        other, status = kv_login(node, user)
        with other:
            assert status == 0 and kv_raw.call(other, 0x89, BUCKET.encode())[0] == 0
            assert kv_raw.call(other, 0x00, b"k0")[0] == RATE_LIMITED_MAX_COMMANDS
    with kv_raw.session(node, BUCKET) as admin_sock:
        assert all(kv_raw.call(admin_sock, 0x00, b"k0")[0] == 0 for _ in range(10))

    limit_user(node, user, {"kv": {"num_ops_per_min": 5}})
    cluster = connect(node, user, USER_PASSWORD)
    try:
        collection = cluster.bucket(BUCKET).default_collection()
        with pytest.raises(RateLimitedException):
            for i in range(20):
                collection.upsert(f"sdk-{i}", {"n": i})
    finally:
        cluster.close()


def test_kv_connections_over_the_limit_are_refused_and_a_closed_one_frees_its_place(node):
    # Proves num_connections: the authentication that would open one connection too many is answered
    # RATE_LIMITED_MAX_CONNECTIONS (and leaves that connection unauthenticated); closing a connection frees its place.
    user = "conns"
    limit_user(node, user, {"kv": {"num_connections": 2}})
    first, s1 = kv_login(node, user)
    second, s2 = kv_login(node, user)
    third, s3 = kv_login(node, user)
    with first, third:
        assert (s1, s2, s3) == (0, 0, RATE_LIMITED_MAX_CONNECTIONS)
        assert kv_raw.call(third, 0x89, BUCKET.encode())[0] == 0x24  # EACCESS: not authenticated
        second.close()
        for _ in range(50):
            fourth, s4 = kv_login(node, user)
            fourth.close()
            if s4 == 0:
                break
            time.sleep(0.1)  # the node sees the close a moment later
        assert s4 == 0


def test_the_sdk_raises_rate_limited_when_the_user_has_one_connection(node):
    # Proves the SDK suite's max-connections case: with num_connections=1 the SDK (a cluster connection and a
    # bucket connection) cannot bootstrap both and raises RateLimitedException.
    user = "one-conn"
    limit_user(node, user, {"kv": {"num_connections": 1}})
    clusters = []
    try:
        with pytest.raises(RateLimitedException):
            for _ in range(2):
                cluster = connect(node, user, USER_PASSWORD)
                clusters.append(cluster)
                cluster.bucket(BUCKET).default_collection().exists("some-key")
    finally:
        for c in clusters:
            c.close()


def test_request_and_answer_bytes_over_the_minutes_budget_are_refused(node):
    # Proves ingress_mib_per_min and egress_mib_per_min through the SDK (its suite's 512 KiB documents), and on a
    # raw connection that egress is checked before a command: the answer that crosses the limit is still sent.
    user = "bytes"
    limit_user(node, user, {"kv": {"ingress_mib_per_min": 1}})
    cluster = connect(node, user, USER_PASSWORD)
    try:
        collection = cluster.bucket(BUCKET).default_collection()
        # Random text, so the SDK's Snappy compression cannot shrink the request under the limit.
        doc = {"body": base64.b64encode(os.urandom(384 * 1024)).decode()}
        with pytest.raises(RateLimitedException):
            for _ in range(3):
                collection.upsert("ingress", doc)
    finally:
        cluster.close()

    with kv_raw.session(node, BUCKET) as admin_sock:
        assert kv_raw.call(admin_sock, 0x01, b"big", b"y" * (700 * 1024), extras=bytes(8))[0] == 0
    limit_user(node, user, {"kv": {"egress_mib_per_min": 1}})
    sock, status = kv_login(node, user)
    with sock:
        assert status == 0 and kv_raw.call(sock, 0x89, BUCKET.encode())[0] == 0
        statuses = [kv_raw.call(sock, 0x00, b"big")[0] for _ in range(3)]
        assert statuses == [0, 0, RATE_LIMITED_NETWORK_EGRESS]


def test_queries_over_the_users_rate_are_refused_with_rate_limited(node):
    # Proves num_queries_per_min on the query service: the SDK raises RateLimitedException for the 2nd query (HTTP
    # 429, code 1192), and the administrator still queries.
    user = "queries"
    limit_user(node, user, {"query": {"num_queries_per_min": 1, "num_concurrent_requests": 10}})
    cluster = connect(node, user, USER_PASSWORD)
    try:
        assert list(cluster.query("SELECT 1 AS one").rows()) == [{"one": 1}]
        with pytest.raises(RateLimitedException):
            list(cluster.query("SELECT 2 AS two").rows())
    finally:
        cluster.close()
    token = base64.b64encode(f"{user}:{USER_PASSWORD}".encode()).decode()
    request = urllib.request.Request(f"http://{node.host}:{node.query_port}/query/service",
                                     data=urllib.parse.urlencode({"statement": "SELECT 3"}).encode(),
                                     headers={"Authorization": f"Basic {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 429
    assert json.loads(refused.value.read())["errors"][0]["code"] == 1192


def test_limits_apply_only_while_enforced_and_are_shown_checked_and_removed(node):
    # Proves enforceLimits turns the limits off and on at run time for open connections, that a user's limits are
    # shown by GET, checked with ns_server's words, kept when a PUT names none, and removed by `{}`.
    user = "toggled"
    limit_user(node, user, {"kv": {"num_ops_per_min": 2}})
    status, body = admin(node, "GET", f"/settings/rbac/users/local/{user}")
    assert status == 200 and json.loads(body)["limits"] == {"kv": {"num_ops_per_min": 2}}
    sock, status = kv_login(node, user)
    with sock:
        assert status == 0 and kv_raw.call(sock, 0x89, BUCKET.encode())[0] == 0
        try:
            assert admin(node, "POST", "/internalSettings", {"enforceLimits": "false"})[0] == 200
            assert json.loads(admin(node, "GET", "/internalSettings")[1])["enforceLimits"] is False
            assert [kv_raw.call(sock, 0x00, b"k0")[0] for _ in range(5)] == [0] * 5
        finally:
            assert admin(node, "POST", "/internalSettings", {"enforceLimits": "true"})[0] == 200
        away_from_a_minute_boundary()
        assert [kv_raw.call(sock, 0x00, b"k0")[0] for _ in range(3)] == [0, 0, RATE_LIMITED_MAX_COMMANDS]

    status, body = admin(node, "PUT", f"/settings/rbac/users/local/{user}",
                         {"roles": f"bucket_full_access[{BUCKET}]", "limits": '{"kv": {"num_ops_per_min": 0}}'})
    assert status == 400 and "The value must be in range from 1 to infinity" in body
    status, body = admin(node, "PUT", f"/settings/rbac/users/local/{user}",
                         {"roles": f"bucket_full_access[{BUCKET}]", "limits": '{"search": {}}'})
    assert status == 400 and "Unsupported key" in body
    assert admin(node, "PUT", f"/settings/rbac/users/local/{user}",
                 {"roles": f"bucket_full_access[{BUCKET}]", "name": "kept"})[0] == 200
    assert json.loads(admin(node, "GET", f"/settings/rbac/users/local/{user}")[1])["limits"]["kv"]
    assert admin(node, "PUT", f"/settings/rbac/users/local/{user}",
                 {"roles": f"bucket_full_access[{BUCKET}]", "limits": "{}"})[0] == 200
    assert "limits" not in json.loads(admin(node, "GET", f"/settings/rbac/users/local/{user}")[1])
