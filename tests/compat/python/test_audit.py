"""The audit log (issue 17, item 3) on a real node: `/settings/audit` turns it on, then each audited action (KV
authentication through the official SDK, REST Basic auth, user, bucket, scope and collection changes, auto-failover
and audit settings, document access) leaves its event in `<data-dir>/logs/audit.log` with Couchbase's id, the acting
user and both addresses; disabled events and disabled users stay out, the file rotates by size, and callers without
the security privilege get 403.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import AuthenticationException, CouchbaseException
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

import settee_server
from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, free_ports

DATA_EVENTS = "20488,20489,20490,20491"


@pytest.fixture(scope="module")
def audit_server(tmp_path_factory) -> SetteeServer:
    base = Path(tmp_path_factory.mktemp("settee-audit"))
    kv, mgmt, query = free_ports(3)
    srv = SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, data_dir=base / "data",
                       log_path=base / "settee.log", bucket_type="ephemeral")
    srv.start()
    yield srv
    srv.stop()


def rest(server: SetteeServer, method: str, path: str, form: Optional[Dict[str, str]] = None,
         user: str = USERNAME, password: str = PASSWORD) -> Tuple[int, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(server.mgmt_url + path, data=data, method=method,
                                     headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def ok(result: Tuple[int, str]) -> str:
    assert result[0] in (200, 202), result
    return result[1]


def log_dir(server: SetteeServer) -> Path:
    return server.data_dir / "logs"


def events(server: SetteeServer) -> List[dict]:
    """Every event in audit.log and the rotated files, oldest file first."""
    files = sorted(p for p in log_dir(server).glob("*-audit.log")) + [log_dir(server) / "audit.log"]
    out = []
    for f in files:
        if f.exists():
            out.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return out


def wait_for(server: SetteeServer, match, what: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in events(server) if match(e)]
        if found:
            return found[-1]
        time.sleep(0.05)
    raise AssertionError(f"no audit event for {what}; log holds ids {[e['id'] for e in events(server)]}")


def sdk(server: SetteeServer, user: str, password: str) -> Cluster:
    timeout = timedelta(seconds=10)
    opts = ClusterOptions(PasswordAuthenticator(user, password),
                          timeout_options=ClusterTimeoutOptions(kv_timeout=timeout, connect_timeout=timeout,
                                                                bootstrap_timeout=timeout))
    return Cluster(server.connection_string, opts)


def enable(server: SetteeServer, disabled: str = "") -> None:
    ok(rest(server, "POST", "/settings/audit", {"auditdEnabled": "true", "disabled": disabled, "disabledUsers": ""}))


def test_settings_round_trip_and_descriptors(audit_server):
    # Proves GET shows Couchbase's fields with the defaults (off, data events disabled), POST changes them, and the
    # descriptors list only filterable events.
    settings = json.loads(ok(rest(audit_server, "GET", "/settings/audit")))
    assert settings["auditdEnabled"] is False
    assert settings["logPath"] == str(log_dir(audit_server))
    assert {20488, 20489, 20490, 20491, 20485}.issubset(set(settings["disabled"]))
    assert settings["rotateInterval"] == 86400 and settings["rotateSize"] == 20 * 1024 * 1024
    descriptors = json.loads(ok(rest(audit_server, "GET", "/settings/audit/descriptors")))
    ids = {d["id"] for d in descriptors}
    assert 20488 in ids and 8201 in ids and 20481 not in ids
    bad = rest(audit_server, "POST", "/settings/audit", {"rotateInterval": "10", "disabled": "20481"})
    assert bad[0] == 400
    errors = json.loads(bad[1])["errors"]
    assert "rotateInterval" in errors and "disabled" in errors


def test_wrong_privileges_get_403(audit_server):
    # Proves only the administrator and security administrators may read or change the audit settings.
    ok(rest(audit_server, "PUT", "/settings/rbac/users/local/reader",
            {"password": "password1", "roles": f"data_reader[{BUCKET}]"}))
    ok(rest(audit_server, "PUT", "/settings/rbac/users/local/secadmin",
            {"password": "password1", "roles": "security_admin"}))
    for method, path, form in [("GET", "/settings/audit", None), ("POST", "/settings/audit", {"auditdEnabled": "true"}),
                               ("GET", "/settings/audit/descriptors", None)]:
        assert rest(audit_server, method, path, form, user="reader", password="password1")[0] == 403
    assert rest(audit_server, "GET", "/settings/audit", user="secadmin", password="password1")[0] == 200


def test_management_actions_are_audited_with_user_and_addresses(audit_server):
    # Proves the REST events: ids, the acting user (builtin admin / local user), remote and local addresses, and
    # each event's own fields.
    enable(audit_server, disabled=DATA_EVENTS)
    change = wait_for(audit_server, lambda e: e["id"] == 8240 and e.get("auditd_enabled") is True, "audit enabled")
    assert change["real_userid"] == {"domain": "builtin", "user": USERNAME}
    assert change["local"] == {"ip": "127.0.0.1", "port": audit_server.mgmt_port}
    assert change["remote"]["ip"] == "127.0.0.1" and change["remote"]["port"] > 0

    ok(rest(audit_server, "POST", "/pools/default/buckets",
            {"name": "audited", "ramQuota": "100", "bucketType": "ephemeral", "flushEnabled": "1"}))
    ok(rest(audit_server, "POST", "/pools/default/buckets/audited", {"ramQuota": "120"}))
    ok(rest(audit_server, "POST", "/pools/default/buckets/audited/scopes", {"name": "s1"}))
    ok(rest(audit_server, "POST", "/pools/default/buckets/audited/scopes/s1/collections", {"name": "c1"}))
    ok(rest(audit_server, "DELETE", "/pools/default/buckets/audited/scopes/s1/collections/c1"))
    ok(rest(audit_server, "DELETE", "/pools/default/buckets/audited/scopes/s1"))
    ok(rest(audit_server, "POST", "/pools/default/buckets/audited/controller/doFlush"))
    ok(rest(audit_server, "DELETE", "/pools/default/buckets/audited"))
    ok(rest(audit_server, "PUT", "/settings/rbac/users/local/alice",
            {"password": "password1", "roles": f"data_reader[{BUCKET}]"}))
    ok(rest(audit_server, "PUT", "/settings/rbac/users/local/alice", {"roles": f"data_writer[{BUCKET}]"}))
    ok(rest(audit_server, "POST", "/controller/changePassword", {"password": "password2"},
            user="alice", password="password1"))
    ok(rest(audit_server, "DELETE", "/settings/rbac/users/local/alice"))
    ok(rest(audit_server, "POST", "/settings/autoFailover", {"enabled": "true", "timeout": "30"}))
    ok(rest(audit_server, "POST", "/settings/autoFailover", {"enabled": "false"}))
    assert rest(audit_server, "GET", "/pools/default", user=USERNAME, password="wrong")[0] == 401

    bucket_event = lambda i: (lambda e: e["id"] == i and e.get("bucket_name") == "audited")
    created = wait_for(audit_server, bucket_event(8201), "create bucket")
    assert created["name"] == "create bucket" and created["type"] == "ephemeral"
    for i in (8202, 8204, 8203):
        wait_for(audit_server, bucket_event(i), f"bucket event {i}")
    scope = wait_for(audit_server, lambda e: e["id"] == 8259 and e.get("scope_name") == "s1", "create scope")
    assert scope["bucket_name"] == "audited" and "new_manifest_uid" in scope
    wait_for(audit_server, lambda e: e["id"] == 8261 and e.get("collection_name") == "c1", "create collection")
    wait_for(audit_server, lambda e: e["id"] == 8262 and e.get("collection_name") == "c1", "drop collection")
    wait_for(audit_server, lambda e: e["id"] == 8260 and e.get("scope_name") == "s1", "drop scope")
    added = wait_for(audit_server, lambda e: e["id"] == 8232 and e["reason"] == "added", "user added")
    assert added["identity"] == {"domain": "local", "user": "alice"} and added["roles"] == [f"data_reader[{BUCKET}]"]
    updated = wait_for(audit_server, lambda e: e["id"] == 8232 and e["reason"] == "updated", "role change")
    assert updated["roles"] == [f"data_writer[{BUCKET}]"]
    changed = wait_for(audit_server, lambda e: e["id"] == 8195, "password change")
    assert changed["real_userid"] == {"domain": "local", "user": "alice"}
    wait_for(audit_server, lambda e: e["id"] == 8194 and e["identity"]["user"] == "alice", "delete user")
    enabled = wait_for(audit_server, lambda e: e["id"] == 8220, "enable auto failover")
    assert enabled["timeout"] == 30
    wait_for(audit_server, lambda e: e["id"] == 8221, "disable auto failover")
    failure = wait_for(audit_server, lambda e: e["id"] == 8264, "REST auth failure")
    assert failure["real_userid"]["user"] == USERNAME and failure["remote"]["ip"] == "127.0.0.1"


def test_kv_authentication_is_audited(audit_server):
    # Proves the KV port's events through the official SDK: a successful SCRAM login (20485) with the user and both
    # addresses, and a wrong password (20481) naming the user and the reason.
    enable(audit_server, disabled=DATA_EVENTS)
    c = sdk(audit_server, USERNAME, PASSWORD)
    c.bucket(BUCKET).default_collection().upsert("audit-kv", {"a": 1})
    c.close()
    success = wait_for(audit_server, lambda e: e["id"] == 20485 and e["real_userid"]["user"] == USERNAME, "KV auth")
    assert success["local"] == {"ip": "127.0.0.1", "port": audit_server.kv_port}
    assert success["remote"]["ip"] == "127.0.0.1" and success["mechanism"].startswith("SCRAM-SHA")
    with pytest.raises((AuthenticationException, CouchbaseException)):
        bad = sdk(audit_server, "mallory", "not-the-password")
        bad.bucket(BUCKET).default_collection().get("audit-kv")
    failure = wait_for(audit_server, lambda e: e["id"] == 20481 and e["real_userid"]["user"] == "mallory",
                       "KV auth failure")
    assert failure["name"] == "authentication failed" and failure["reason"]
    # No document event while the data events are disabled.
    assert not [e for e in events(audit_server) if e["id"] in (20488, 20490)]


def test_data_access_events_and_disabled_users(audit_server):
    # Proves the optional document events (modify, read, delete) name bucket, key and user once enabled, and that a
    # user in disabledUsers leaves no event.
    ok(rest(audit_server, "PUT", "/settings/rbac/users/local/quiet",
            {"password": "password1", "roles": f"data_writer[{BUCKET}],data_reader[{BUCKET}]"}))
    ok(rest(audit_server, "POST", "/settings/audit",
            {"auditdEnabled": "true", "disabled": "", "disabledUsers": "quiet/local"}))
    c = sdk(audit_server, USERNAME, PASSWORD)
    coll = c.bucket(BUCKET).default_collection()
    coll.upsert("audit-doc", {"v": 1})
    coll.get("audit-doc")
    coll.remove("audit-doc")
    q = sdk(audit_server, "quiet", "password1")
    q.bucket(BUCKET).default_collection().upsert("quiet-doc", {"v": 1})
    for i, name in [(20490, "modify"), (20488, "read"), (20491, "delete")]:
        e = wait_for(audit_server, lambda e, i=i: e["id"] == i and e.get("key") == "audit-doc", f"document {name}")
        assert e["bucket"] == BUCKET and e["real_userid"]["user"] == USERNAME
        assert e["remote"]["ip"] == "127.0.0.1" and e["local"]["port"] == audit_server.kv_port
    coll.upsert("after-quiet", {"v": 1})
    wait_for(audit_server, lambda e: e.get("key") == "after-quiet", "a later event")
    assert not [e for e in events(audit_server) if e.get("key") == "quiet-doc"], "disabled user filtered"
    c.close()
    q.close()
    ok(rest(audit_server, "POST", "/settings/audit", {"disabled": DATA_EVENTS, "disabledUsers": ""}))


def test_file_rotates_by_size_and_turning_audit_off_stops_events(audit_server):
    # Proves rotation by size leaves `<host>-<time>-audit.log` files holding the older events, and that once audit is
    # off no further event is written (the change that turned it off is the last one).
    ok(rest(audit_server, "POST", "/settings/audit", {"auditdEnabled": "true", "rotateSize": "2048"}))
    for i in range(10):
        ok(rest(audit_server, "POST", "/settings/autoFailover", {"enabled": "true", "timeout": str(30 + i)}))
    wait_for(audit_server, lambda e: e["id"] == 8220 and e["timeout"] == 39, "the last change")
    rotated = list(log_dir(audit_server).glob("127.0.0.1-*-audit.log"))
    assert rotated, "rotated files exist"
    ok(rest(audit_server, "POST", "/settings/audit", {"auditdEnabled": "false", "rotateSize": str(20 * 1024 * 1024)}))
    wait_for(audit_server, lambda e: e["id"] == 8240 and e.get("auditd_enabled") is False, "audit disabled")
    ok(rest(audit_server, "POST", "/settings/autoFailover", {"enabled": "true", "timeout": "77"}))
    time.sleep(0.5)
    assert not [e for e in events(audit_server) if e["id"] == 8220 and e["timeout"] == 77]


def rebalanced(node: SetteeServer) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        tasks = json.loads(ok(rest(node, "GET", "/pools/default/tasks")))
        if tasks[0]["status"] != "running":
            assert "errorMessage" not in tasks[0], tasks[0]
            return
        time.sleep(0.2)
    raise AssertionError("rebalance did not end")


def test_settings_are_cluster_wide_and_topology_changes_are_audited(tmp_path_factory):
    # Proves the settings travel through the cluster metadata: set on one node, every node reports them and writes
    # its own requests' events to its own log, without a restart; and the topology events (add node, rebalance,
    # failover, recovery, remove node) on the node that served them, with otpNode names.
    base = Path(tmp_path_factory.mktemp("audit-cluster"))
    servers = settee_server.cluster_servers(base, 3, first_ip=41)
    servers[1].join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        enable(servers[0], disabled=DATA_EVENTS)
        for s in servers[:2]:
            deadline = time.monotonic() + 10
            while not json.loads(ok(rest(s, "GET", "/settings/audit")))["auditdEnabled"]:
                assert time.monotonic() < deadline, f"{s.host} never applied the settings"
                time.sleep(0.1)
        ok(rest(servers[1], "POST", "/pools/default/buckets",
                {"name": "b2", "ramQuota": "100", "bucketType": "ephemeral"}))
        wait_for(servers[1], lambda e: e["id"] == 8201 and e["bucket_name"] == "b2", "create bucket on node 2")
        assert not [e for e in events(servers[0]) if e["id"] == 8201], "node 1 served no bucket creation"

        ok(rest(servers[0], "POST", "/controller/addNode",
                {"hostname": servers[2].mgmt_addr, "user": USERNAME, "password": PASSWORD}))
        added = wait_for(servers[0], lambda e: e["id"] == 8196, "add node")
        assert added["node"] == "ns_1@127.0.0.43" and added["hostname"] == "127.0.0.43"
        known = ",".join(f"ns_1@127.0.0.{41 + i}" for i in range(3))
        ok(rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""}))
        started = wait_for(servers[0], lambda e: e["id"] == 8200, "rebalance initiated")
        assert sorted(started["known_nodes"]) == sorted(known.split(",")) and started["ejected_nodes"] == []
        rebalanced(servers[0])
        # The joined node applied the cluster's settings too: its own requests are audited in its own log.
        deadline = time.monotonic() + 10
        while not json.loads(ok(rest(servers[2], "GET", "/settings/audit")))["auditdEnabled"]:
            assert time.monotonic() < deadline, "the added node never applied the settings"
            time.sleep(0.1)
        ok(rest(servers[2], "POST", "/settings/autoFailover", {"enabled": "true", "timeout": "31"}))
        wait_for(servers[2], lambda e: e["id"] == 8220 and e["timeout"] == 31, "event on the added node")

        ok(rest(servers[0], "POST", "/controller/failOver", {"otpNode": "ns_1@127.0.0.43", "allowUnsafe": "true"}))
        failed = wait_for(servers[0], lambda e: e["id"] == 8198, "failover")
        assert failed["nodes"] == ["ns_1@127.0.0.43"] and failed["type"] == "hard"
        ok(rest(servers[0], "POST", "/controller/setRecoveryType",
                {"otpNode": "ns_1@127.0.0.43", "recoveryType": "full"}))
        recovery = wait_for(servers[0], lambda e: e["id"] == 8199, "recovery")
        assert recovery["node"] == "ns_1@127.0.0.43" and recovery["type"] == "full"
        ok(rest(servers[0], "POST", "/controller/rebalance",
                {"knownNodes": known, "ejectedNodes": "ns_1@127.0.0.43"}))
        removed = wait_for(servers[0], lambda e: e["id"] == 8197, "remove node")
        assert removed["node"] == "ns_1@127.0.0.43"
        rebalanced(servers[0])
    finally:
        settee_server.stop_all(servers)


def test_server_group_changes_are_audited_with_ns_server_ids(tmp_path_factory):
    # Proves each server-group change writes ns_server's event on the node that served it: add group (8210),
    # update group for a rename and for each group of a move (8212, with the members' otpNode names), delete
    # group (8211), and add node (8196) with the groupUUID of the group the node was added into.
    base = Path(tmp_path_factory.mktemp("audit-groups"))
    servers = settee_server.cluster_servers(base, 2, first_ip=51)
    groups_uri = "/pools/default/serverGroups"
    try:
        for s in servers:
            s.start()
        enable(servers[0], disabled=DATA_EVENTS)
        ok(rest(servers[0], "POST", groups_uri, {"name": "Rack B"}))
        added = wait_for(servers[0], lambda e: e["id"] == 8210, "add group")
        assert added["name"] == "add group" and added["group_name"] == "Rack B", added
        uuid = added["uuid"]
        ok(rest(servers[0], "PUT", f"{groups_uri}/{uuid}", {"name": "Rack C"}))
        renamed = wait_for(servers[0], lambda e: e["id"] == 8212, "update group (rename)")
        assert (renamed["group_name"], renamed["uuid"], renamed["nodes"]) == ("Rack C", uuid, []), renamed

        ok(rest(servers[0], "POST", f"{groups_uri}/{uuid}/addNode",
                {"hostname": servers[1].mgmt_addr, "user": USERNAME, "password": PASSWORD}))
        node = wait_for(servers[0], lambda e: e["id"] == 8196, "add node into a group")
        assert node["node"] == "ns_1@127.0.0.52" and node["groupUUID"] == uuid, node

        listing = json.loads(ok(rest(servers[0], "GET", groups_uri)))
        for g in listing["groups"]:
            g["nodes"] = [{"otpNode": "ns_1@127.0.0.51"}, {"otpNode": "ns_1@127.0.0.52"}] if g["name"] == "Group 1" \
                else []
        token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        put = urllib.request.Request(servers[0].mgmt_url + listing["uri"], method="PUT",
                                     data=json.dumps({"groups": listing["groups"]}).encode(),
                                     headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(put, timeout=30) as r:
            assert r.status == 200
        moved = wait_for(servers[0], lambda e: e["id"] == 8212 and e["group_name"] == "Group 1", "update group (move)")
        assert sorted(moved["nodes"]) == ["ns_1@127.0.0.51", "ns_1@127.0.0.52"], moved
        emptied = [e for e in events(servers[0]) if e["id"] == 8212 and e["uuid"] == uuid]
        assert emptied[-1]["nodes"] == [] and len(emptied) == 2, emptied

        ok(rest(servers[0], "DELETE", f"{groups_uri}/{uuid}"))
        deleted = wait_for(servers[0], lambda e: e["id"] == 8211, "delete group")
        assert (deleted["group_name"], deleted["uuid"]) == ("Rack C", uuid), deleted
    finally:
        settee_server.stop_all(servers)
