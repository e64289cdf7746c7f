"""The RBAC matrix (issue 17, item 6): each role, at bucket and narrower qualifiers, against each operation family on
the KV port (select the bucket, read and write documents in the default and in named collections, STAT, DCP_OPEN),
the management port (see the bucket, edit it, list users) and the query port (SELECT). One real node; the
expected table follows ns_server's role definitions as docs/compat.md describes them (including settee's
documented deviations). Every cell is checked and all mismatches are reported at once."""

from __future__ import annotations

import base64
import json
import socket
import struct
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import kv_raw
from settee_server import PASSWORD, USERNAME, SetteeServer, free_ports

BUCKET = "default"
SUCCESS, KEY_ENOENT, EACCESS = 0x00, 0x01, 0x24
HELLO, GET, SET, STAT, SELECT_BUCKET, DCP_OPEN, GET_COLLECTION_ID = 0x1F, 0x00, 0x01, 0x10, 0x89, 0x50, 0xBB
FEATURE_COLLECTIONS = 0x12

OPERATIONS = ["select", "get", "set", "get_c1", "get_c2", "set_c2", "stat", "dcp", "see", "manage", "users", "query"]

# Role -> the operations it may do (everything else must be refused).
EXPECTED = {
    "admin": set(OPERATIONS),
    "ro_admin": {"select", "stat", "see", "users"},
    "cluster_admin": {"select", "stat", "see", "manage", "users"},
    "security_admin_local": {"users"},
    "bucket_admin[default]": {"select", "stat", "see", "manage"},
    "bucket_full_access[default]": {"select", "get", "set", "get_c1", "get_c2", "set_c2", "stat", "dcp", "see",
                                    "query"},
    "data_reader[default]": {"select", "get", "get_c1", "get_c2", "see"},
    "data_reader[*]": {"select", "get", "get_c1", "get_c2", "see"},
    "data_reader[default:s:c1]": {"select", "get_c1", "see"},
    "data_writer[default]": {"select", "set", "set_c2", "see"},
    "data_writer[default:s]": {"select", "set_c2", "see"},
    "data_dcp_reader[default]": {"select", "get", "get_c1", "get_c2", "dcp", "see"},
    "data_dcp_reader[default:s]": {"select", "get_c1", "get_c2", "see"},
    "data_monitoring[default]": {"select", "stat", "see"},
    "data_backup[default]": {"select", "get", "set", "get_c1", "get_c2", "set_c2", "stat", "dcp", "see"},
    "replication_target[default]": {"select", "stat", "see"},
    "query_select[default]": {"query"},
    "query_select[default:s:c1]": set(),
    "data_monitoring[default:s]": set(),
}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def http(url: str, user: str, password: str, form: dict | None = None, method: str | None = None) -> int:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": basic(user, password)})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> SetteeServer:
    """A node with bucket `default`, scope `s` with collections `c1` and `c2`, a document in each, and the users."""
    base = Path(tmp_path_factory.mktemp("settee-rbac"))
    kv, mgmt, query = free_ports(3)
    srv = SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, data_dir=base / "data",
                       log_path=base / "settee.log", bucket_type="ephemeral")
    srv.start()
    admin = (USERNAME, PASSWORD)
    scopes = f"{srv.mgmt_url}/pools/default/buckets/{BUCKET}/scopes"
    assert http(scopes, *admin, {"name": "s"}) == 200
    for c in ("c1", "c2"):
        assert http(f"{scopes}/s/collections", *admin, {"name": c}) == 200
    for i, role in enumerate(EXPECTED):
        assert http(f"{srv.mgmt_url}/settings/rbac/users/local/u{i}", *admin,
                    {"password": "password", "roles": role}, method="PUT") == 200, role
    with kv_session(srv, *admin) as sock:
        assert kv_raw.call(sock, SELECT_BUCKET, BUCKET.encode())[0] == SUCCESS
        for path in ("_default._default", "s.c1", "s.c2"):
            assert kv_raw.call(sock, SET, doc_key(sock, path), b'{"v":1}', extras=bytes(8))[0] == SUCCESS, path
    yield srv
    srv.stop()


class kv_session:
    """An authenticated KV socket that negotiated collections (keys carry their collection id)."""

    def __init__(self, node: SetteeServer, user: str, password: str):
        self.node, self.user, self.password = node, user, password

    def __enter__(self):
        self.sock = socket.create_connection((self.node.host, self.node.kv_port), timeout=10)
        assert kv_raw.call(self.sock, HELLO, b"rbac", struct.pack(">H", FEATURE_COLLECTIONS))[0] == SUCCESS
        assert kv_raw.call(self.sock, 0x21, b"PLAIN", f"\0{self.user}\0{self.password}".encode())[0] == SUCCESS
        return self.sock

    def __exit__(self, *exc):
        self.sock.close()


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


COLLECTION_IDS: dict[str, int] = {}


def doc_key(sock, path: str) -> bytes:
    """The key `doc` in collection `path` (`scope.collection`), prefixed with its id (asked once, as the admin)."""
    if path not in COLLECTION_IDS:
        # GET_COLLECTION_ID with the path as its value; the id is the last 4 of the 12 extras bytes.
        sock.sendall(struct.pack(">BBHBBHIIQ", 0x80, GET_COLLECTION_ID, 0, 0, 0, 0, len(path), 0, 0) + path.encode())
        head = kv_raw._read(sock, 24)
        body = kv_raw._read(sock, struct.unpack(">I", head[8:12])[0])
        assert struct.unpack(">H", head[6:8])[0] == SUCCESS and head[4] == 12, (path, head)
        COLLECTION_IDS[path] = struct.unpack(">I", body[8:12])[0]
    return leb128(COLLECTION_IDS[path]) + b"doc"


def kv_outcomes(node: SetteeServer, user: str) -> dict[str, bool]:
    """What `user` may do on the KV port: each operation allowed (True) or refused with EACCESS (False)."""
    allowed = lambda status: status != EACCESS  # noqa: E731
    out = {}
    with kv_session(node, user, "password") as sock:
        out["select"] = allowed(kv_raw.call(sock, SELECT_BUCKET, BUCKET.encode())[0])
        if not out["select"]:
            return {op: False for op in ("select", "get", "set", "get_c1", "get_c2", "set_c2", "stat", "dcp")}
        keys = {p: doc_key(sock, p) for p in ("_default._default", "s.c1", "s.c2")}
        out["get"] = allowed(kv_raw.call(sock, GET, keys["_default._default"])[0])
        out["set"] = allowed(kv_raw.call(sock, SET, keys["_default._default"], b'{"v":2}', extras=bytes(8))[0])
        out["get_c1"] = allowed(kv_raw.call(sock, GET, keys["s.c1"])[0])
        out["get_c2"] = allowed(kv_raw.call(sock, GET, keys["s.c2"])[0])
        out["set_c2"] = allowed(kv_raw.call(sock, SET, keys["s.c2"], b'{"v":2}', extras=bytes(8))[0])
        status, _, _ = kv_raw.call(sock, STAT)
        if status == SUCCESS:
            while kv_raw.receive(sock)[1]:  # the STAT group ends with an empty key
                pass
        out["stat"] = allowed(status)
        # DCP_OPEN as a producer (flags 1); the connection is spent afterwards.
        out["dcp"] = allowed(kv_raw.call(sock, DCP_OPEN, b"rbac-matrix", extras=struct.pack(">II", 0, 1))[0])
    return out


def test_every_role_gets_exactly_its_privileges(node):
    """Proves the whole table: for each role and each operation family, allowed exactly when EXPECTED says."""
    mismatches = []
    for i, (role, expected) in enumerate(EXPECTED.items()):
        user = f"u{i}"
        got = kv_outcomes(node, user)
        got["see"] = http(f"{node.mgmt_url}/pools/default/buckets/{BUCKET}", user, "password") == 200
        got["manage"] = http(f"{node.mgmt_url}/pools/default/buckets/{BUCKET}", user, "password",
                             {"flushEnabled": "0"}) == 200
        got["users"] = http(f"{node.mgmt_url}/settings/rbac/users", user, "password") == 200
        query = urllib.parse.urlencode({"statement": f"SELECT RAW 1 FROM `{BUCKET}` USE KEYS 'doc'"}).encode()
        request = urllib.request.Request(f"http://{node.host}:{node.query_port}/query/service", data=query,
                                         headers={"Authorization": basic(user, "password")})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                got["query"] = json.loads(r.read())["status"] == "success"
        except urllib.error.HTTPError:
            got["query"] = False
        for op in OPERATIONS:
            if got[op] != (op in expected):
                mismatches.append(f"{role}: {op} {'allowed' if got[op] else 'refused'}")
    assert mismatches == [], "\n".join(mismatches)


def manifest_names(node: SetteeServer, user: str, password: str) -> dict[str, set[str]]:
    """GET_COLLECTIONS_MANIFEST (0xBA) as `user`: each scope's collection names."""
    with kv_session(node, user, password) as sock:
        assert kv_raw.call(sock, SELECT_BUCKET, BUCKET.encode())[0] == SUCCESS
        status, _, value = kv_raw.call(sock, 0xBA)
        assert status == SUCCESS, status
    return {s["name"]: {c["name"] for c in s["collections"]} for s in json.loads(value)["scopes"]}


def test_a_narrowed_user_sees_only_its_collections_in_the_manifest(node):
    """Regression (review): a user whose only role is on one collection read every scope and collection name in
    GET_COLLECTIONS_MANIFEST. Proves it sees its collection alone, a scope-narrowed user its scope, and a
    whole-bucket user everything, as kv_engine filters the manifest."""
    role_user = {role: f"u{i}" for i, role in enumerate(EXPECTED)}
    assert manifest_names(node, role_user["data_reader[default:s:c1]"], "password") == {"s": {"c1"}}
    assert manifest_names(node, role_user["data_writer[default:s]"], "password") == {"s": {"c1", "c2"}}
    everything = {"_default": {"_default"}, "s": {"c1", "c2"}}
    assert manifest_names(node, role_user["data_reader[default]"], "password") == everything
    assert manifest_names(node, USERNAME, PASSWORD) == everything
