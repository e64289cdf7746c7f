"""Pre-RBAC clients on the KV port (issue 22 item 4): YCSB's Couchbase binding (java-client 2.x) logs in with the
bucket's name as the user and sends no SELECT_BUCKET. As kv_engine does, a connection that authenticates as a user
named as a bucket it may access is bound to that bucket; any other login stays on no bucket (NO_BUCKET).

Raw binary protocol against a real node, since the point is what the server does without SELECT_BUCKET.
"""

from __future__ import annotations

import socket
import zlib
from pathlib import Path

import pytest

import kv_raw
import settee_server
from test_cluster import rest

BUCKET = "ycsb"
SUCCESS, KEY_ENOENT, NO_BUCKET = 0x00, 0x01, 0x08
GET, SET, SASL_AUTH, SELECT_BUCKET = 0x00, 0x01, 0x21, 0x89


def vbucket_of(key: bytes) -> int:
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % 1024


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("legacy-auth"))
    srv = settee_server.new_server(base, bucket=BUCKET)
    srv.start()
    status, body = rest(srv, "POST", "/pools/default/buckets", {"name": "other", "ramQuota": 100})
    assert status == 202, body
    for user, roles in [(BUCKET, f"bucket_full_access[{BUCKET}]"),
                        ("reader", f"bucket_full_access[{BUCKET}]"),
                        ("other", f"data_reader[{BUCKET}]")]:
        status, body = rest(srv, "PUT", f"/settings/rbac/users/local/{user}", {"password": "secret", "roles": roles})
        assert status == 200, body
    yield srv
    srv.stop()


def login(node, user: str) -> socket.socket:
    sock = socket.create_connection((node.host, node.kv_port), timeout=5)
    status, _, body = kv_raw.call(sock, SASL_AUTH, b"PLAIN", f"\0{user}\0secret".encode())
    assert status == SUCCESS, (user, status, body)
    return sock


def test_login_named_as_a_bucket_binds_the_connection_to_it(node):
    """Regression (issue 22 item 4): every operation of a connection that logged in as `ycsb` got NO_BUCKET. It is
    now bound to bucket `ycsb` at once: a SET and a GET without SELECT_BUCKET succeed, and the document is the one a
    SELECT_BUCKET connection reads."""
    key = b"user1000"
    with login(node, BUCKET) as sock:
        extras = (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
        status, _, body = kv_raw.call(sock, SET, key, b'{"field0":"v"}', vb=vbucket_of(key), extras=extras)
        assert status == SUCCESS, body
        status, _, value = kv_raw.call(sock, GET, key, vb=vbucket_of(key))
        assert status == SUCCESS and value == b'{"field0":"v"}', (status, value)
    with kv_raw.session(node, BUCKET) as admin:
        assert kv_raw.call(admin, GET, key, vb=vbucket_of(key))[2] == b'{"field0":"v"}'


def test_other_logins_stay_on_no_bucket(node):
    """A user whose name is no bucket (`reader`), and a user named as a bucket it may not access (`other`, whose
    roles are on `ycsb` only), stay on no bucket: NO_BUCKET until SELECT_BUCKET."""
    key = b"k"
    for user in ("reader", "other"):
        with login(node, user) as sock:
            assert kv_raw.call(sock, GET, key, vb=vbucket_of(key))[0] == NO_BUCKET, user
            assert kv_raw.call(sock, SELECT_BUCKET, BUCKET.encode())[0] == SUCCESS, user
            assert kv_raw.call(sock, GET, key, vb=vbucket_of(key))[0] == KEY_ENOENT, user
