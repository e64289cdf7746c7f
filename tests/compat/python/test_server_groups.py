"""Server groups (rack awareness, issue 22 item 5) on a real four-node cluster, over ns_server's REST API and the
official Python SDK.

The cluster starts with every node in "Group 1" and a bucket with one replica. The tests, in file order: the
listing and the refusals of the create / rename / delete calls; moving two nodes into a second group (a stale
revision is refused with 409) makes the cluster unbalanced; a rebalance then places every vBucket's replica in the
group its active is not in, as the cluster config the SDKs read shows (`vBucketMap` and `nodesExt[].serverGroup`),
so losing a whole group loses nothing; the SDK's `selected_server_group` read preference reads from the group it
names (also the cases of the SDK's own server-group tests: no preferred group, no document); a node added into a
group lands there.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException, DocumentUnretrievableException
import couchbase.subdocument as SD
from couchbase.options import (GetAllReplicasMultiOptions, GetAllReplicasOptions, GetAnyReplicaMultiOptions,
                               GetAnyReplicaOptions, LookupInAllReplicasOptions, LookupInAnyReplicaOptions,
                               UpsertOptions)

import settee_server
from cluster_fixture import formed_cluster
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import pool, rest, wait_rebalanced

BUCKET = "racked"
NODES = 4
GROUPS = "/pools/default/serverGroups"

try:
    from couchbase.replica_reads import ReadPreference
except ImportError:  # SDKs before 4.3 have no read preference.
    ReadPreference = None


def put_json(node: SetteeServer, path: str, body: dict):
    """A JSON PUT with the administrator's credentials: (status, decoded body)."""
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(node.mgmt_url + path, data=json.dumps(body).encode(), method="PUT",
                                     headers={"Authorization": f"Basic {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    return status, json.loads(raw or b"null")


def groups(node: SetteeServer) -> dict:
    status, body = rest(node, "GET", GROUPS)
    assert status == 200, body
    return body


def group(node: SetteeServer, name: str) -> dict:
    return next(g for g in groups(node)["groups"] if g["name"] == name)


def members(node: SetteeServer) -> dict[str, list[str]]:
    return {g["name"]: sorted(n["otpNode"] for n in g["nodes"]) for g in groups(node)["groups"]}


def otp(node: SetteeServer) -> str:
    return f"ns_1@{node.host}"


def move(node: SetteeServer, placement: dict[str, list[SetteeServer]], rev_uri: str | None = None):
    """PUTs the listing with every group's nodes as `placement` says (as couchbase-cli does): (status, body)."""
    listing = groups(node)
    uri = rev_uri or listing["uri"]
    for g in listing["groups"]:
        g["nodes"] = [{"otpNode": otp(s)} for s in placement.get(g["name"], [])]
    return put_json(node, uri, {"groups": listing["groups"]})


def terse_config(node: SetteeServer) -> dict:
    status, body = rest(node, "GET", f"/pools/default/b/{BUCKET}")
    assert status == 200, body
    return body


def chain_groups(config: dict) -> list[list[str]]:
    """Each vBucket's copies as the server groups they are in, read from the config as an SDK reads it: the map
    rows index `serverList` (host:kv), and `nodesExt` gives each host:kv its `serverGroup`."""
    group_of = {f"{n['hostname']}:{n['services']['kv']}": n["serverGroup"] for n in config["nodesExt"]}
    servers = config["vBucketServerMap"]["serverList"]
    return [[group_of[servers[i]] for i in row if i >= 0] for row in config["vBucketServerMap"]["vBucketMap"]]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("server-groups"))
    with formed_cluster(base, NODES, BUCKET, replicas=1) as servers:
        yield servers


def test_every_node_starts_in_group_1(nodes):
    listing = groups(nodes[0])
    assert listing["uri"].startswith(f"{GROUPS}?rev="), listing
    assert members(nodes[0]) == {"Group 1": sorted(otp(s) for s in nodes)}
    g1 = listing["groups"][0]
    assert g1["uri"] == f"{GROUPS}/0" and g1["addNodeURI"] == f"{GROUPS}/0/addNode", g1
    assert pool(nodes[0])["serverGroupsUri"].startswith(f"{GROUPS}?v=")
    assert {n["serverGroup"] for n in pool(nodes[1])["nodes"]} == {"Group 1"}
    assert {n["serverGroup"] for n in terse_config(nodes[2])["nodesExt"]} == {"Group 1"}


def test_create_rename_delete_with_ns_server_refusals(nodes):
    assert rest(nodes[0], "POST", GROUPS, {"name": "Rack B"}) == (200, [])
    assert rest(nodes[0], "POST", GROUPS, {"name": "Rack B"}) == (400, {"name": "already exists"})
    assert rest(nodes[0], "POST", GROUPS, {"name": "  "}) == (400, {"name": "cannot be empty"})
    assert rest(nodes[0], "POST", GROUPS, {}) == (400, {"name": "is missing"})
    assert rest(nodes[0], "POST", GROUPS, {"name": "Spare"}) == (200, [])
    spare = group(nodes[0], "Spare")["uri"]
    assert rest(nodes[0], "PUT", spare, {"name": "Rack B"}) == (400, {"name": "already exists"})
    assert rest(nodes[0], "PUT", spare, {"name": "Rack C"}) == (200, [])
    assert rest(nodes[0], "DELETE", f"{GROUPS}/0") == (400, {"_": "group is not empty"})
    assert rest(nodes[0], "DELETE", spare) == (200, [])
    assert rest(nodes[0], "DELETE", spare)[0] == 404
    wait_for(lambda: sorted(members(nodes[1])) == ["Group 1", "Rack B"], "every node to see the groups")


def test_moving_nodes_needs_the_current_revision(nodes):
    stale = groups(nodes[0])["uri"]
    assert rest(nodes[0], "POST", GROUPS, {"name": "Bump"}) == (200, [])
    status, _ = move(nodes[0], {"Group 1": nodes[:2], "Rack B": nodes[2:]}, rev_uri=stale)
    assert status == 409, "a listing from an older revision is refused"
    assert rest(nodes[0], "DELETE", group(nodes[0], "Bump")["uri"]) == (200, [])
    status, body = move(nodes[0], {"Group 1": nodes[:3]})
    assert (status, body) == (400, "Bad input"), "a node missing from the listing"
    assert move(nodes[0], {"Group 1": nodes[:2], "Rack B": nodes[2:]}) == (200, [])
    racks = {"Group 1": [otp(nodes[0]), otp(nodes[1])], "Rack B": [otp(nodes[2]), otp(nodes[3])]}
    assert members(nodes[0]) == racks, "applied on the node that answered"
    wait_for(lambda: members(nodes[3]) == racks, "the other nodes to apply the move")
    assert pool(nodes[0])["balanced"] is False, "the map does not follow the groups until a rebalance"


def test_rebalance_places_every_replica_in_the_other_group(nodes):
    known = ",".join(otp(s) for s in nodes)
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
    assert status == 200, body
    wait_rebalanced(nodes[0])
    wait_for(lambda: pool(nodes[0])["balanced"], "the cluster to be balanced")
    for node in nodes:
        config = wait_for(lambda: (c := terse_config(node)) and all(len(set(g)) == 2 for g in chain_groups(c)) and c,
                          f"{node.host} to serve the rebalanced map")
        by_host = {n["hostname"]: n["serverGroup"] for n in config["nodesExt"]}
        assert by_host == {s.host: ("Group 1" if s in nodes[:2] else "Rack B") for s in nodes}, by_host
    actives = [g[0] for g in chain_groups(terse_config(nodes[0]))]
    assert abs(actives.count("Group 1") - actives.count("Rack B")) <= 2, "actives stay balanced"


@pytest.mark.skipif(ReadPreference is None, reason="this Python SDK has no replica read preference")
def test_sdk_reads_replicas_from_the_selected_server_group(nodes):
    """The SDK's `selected_server_group` preference reads only copies in the group it names: every key has one
    copy in each group, so a read preferring either group finds it, and a group with no node finds nothing."""
    keys = {f"rack-{i}": {"i": i} for i in range(50)}
    writer = connect(nodes[0])
    try:
        writer.wait_until_ready(timedelta(seconds=20))
        writer.bucket(BUCKET).default_collection().upsert_multi(keys)
    finally:
        writer.close()
    for name in ["Group 1", "Rack B"]:
        cluster = connect(nodes[0], preferred_server_group=name)
        try:
            cluster.wait_until_ready(timedelta(seconds=20))
            coll = cluster.bucket(BUCKET).default_collection()
            preferred = ReadPreference.SELECTED_SERVER_GROUP
            for key, value in keys.items():
                got = wait_for(lambda: _any_replica(coll, key, preferred), f"{key} from {name}", timeout=10)
                assert got.content_as[dict] == value
                copies = list(coll.get_all_replicas(key, GetAllReplicasOptions(read_preference=preferred)))
                assert len(copies) == 1, f"one copy of {key} in {name}: {copies}"
        finally:
            cluster.close()
    nowhere = connect(nodes[0], preferred_server_group="No Such Rack")
    try:
        nowhere.wait_until_ready(timedelta(seconds=20))
        coll = nowhere.bucket(BUCKET).default_collection()
        with pytest.raises(DocumentUnretrievableException):
            coll.get_any_replica("rack-0", GetAnyReplicaOptions(read_preference=ReadPreference.SELECTED_SERVER_GROUP))
    finally:
        nowhere.close()


@pytest.mark.skipif(ReadPreference is None, reason="this Python SDK has no replica read preference")
def test_sdk_read_preference_cases_of_the_sdk_suite(nodes):
    """The cases of the Python SDK's own server-group tests (collection_t, collection_multi_t, subdoc_t:
    `*_read_preference`), written for this cluster: without a preferred group every replica read with
    `selected_server_group` is DocumentUnretrievable (single and multi gets, subdocument lookups); with one, the
    same calls answer from that group."""
    keys = {f"suite-{i}": {"batch": i} for i in range(4)}
    preferred = ReadPreference.SELECTED_SERVER_GROUP
    plain = connect(nodes[0])
    try:
        plain.wait_until_ready(timedelta(seconds=20))
        coll = plain.bucket(BUCKET).default_collection()
        coll.upsert_multi(keys)
        key = "suite-0"
        for read in (lambda: coll.get_any_replica(key, GetAnyReplicaOptions(read_preference=preferred)),
                     lambda: list(coll.get_all_replicas(key, GetAllReplicasOptions(read_preference=preferred))),
                     lambda: coll.lookup_in_any_replica(key, [SD.get("batch")],
                                                        LookupInAnyReplicaOptions(read_preference=preferred)),
                     lambda: list(coll.lookup_in_all_replicas(key, [SD.get("batch")],
                                                              LookupInAllReplicasOptions(read_preference=preferred)))):
            with pytest.raises(DocumentUnretrievableException):
                read()
        for multi in (coll.get_any_replica_multi(list(keys), GetAnyReplicaMultiOptions(read_preference=preferred,
                                                                                       return_exceptions=True)),
                      coll.get_all_replicas_multi(list(keys), GetAllReplicasMultiOptions(read_preference=preferred,
                                                                                         return_exceptions=True))):
            assert multi.all_ok is False and len(multi.results) == 0
            assert all(isinstance(e, DocumentUnretrievableException) for e in multi.exceptions.values())
    finally:
        plain.close()
    racked = connect(nodes[0], preferred_server_group="Rack B")
    try:
        racked.wait_until_ready(timedelta(seconds=20))
        coll = racked.bucket(BUCKET).default_collection()
        got = coll.lookup_in_any_replica("suite-1", [SD.get("batch")],
                                         LookupInAnyReplicaOptions(read_preference=preferred))
        assert got.content_as[int](0) == 1
        every = list(coll.lookup_in_all_replicas("suite-1", [SD.get("batch")],
                                                 LookupInAllReplicasOptions(read_preference=preferred)))
        assert [r.content_as[int](0) for r in every] == [1], "one copy in the group"
        multi = coll.get_any_replica_multi(list(keys), GetAnyReplicaMultiOptions(read_preference=preferred))
        assert multi.all_ok, multi.exceptions
        assert {k: r.content_as[dict] for k, r in multi.results.items()} == keys
    finally:
        racked.close()


def _any_replica(coll, key, preference):
    try:
        return coll.get_any_replica(key, GetAnyReplicaOptions(read_preference=preference))
    except DocumentUnretrievableException:
        return None


def test_failing_over_a_whole_group_loses_nothing(nodes):
    """Both nodes of "Rack B" hard-failed over, one after the other: neither failover risks data (ns_server's
    unsafe-failover refusal would answer 400 otherwise), and every majority-durable write is readable after."""
    keys = {f"rack-safe-{i}": {"i": i} for i in range(200)}
    cluster = connect(nodes[0])
    try:
        cluster.wait_until_ready(timedelta(seconds=20))
        coll = cluster.bucket(BUCKET).default_collection()
        for key, value in keys.items():
            coll.upsert(key, value, UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY)))
        for lost in nodes[2:]:
            assert rest(nodes[0], "POST", "/controller/failOver", {"otpNode": otp(lost)}) == (200, None)
        wait_for(lambda: {n["clusterMembership"] for n in pool(nodes[0])["nodes"] if n["otpNode"] in
                          (otp(nodes[2]), otp(nodes[3]))} == {"inactiveFailed"}, "the failovers")
        for key, value in keys.items():
            assert wait_for(lambda: _get(coll, key), f"{key} after the failovers", timeout=10) == value
    finally:
        cluster.close()


def _get(coll, key):
    try:
        return coll.get(key).content_as[dict]
    except CouchbaseException:
        return None


def groups_rev(node: SetteeServer) -> int:
    return int(groups(node)["uri"].split("?rev=")[1])


def test_a_node_added_into_a_group_lands_there(nodes, tmp_path_factory):
    """A node added through a group's addNodeURI is in that group from the one change of the groups that adds it
    (the groups' revision grows by one), never in the default group first."""
    base = Path(tmp_path_factory.mktemp("server-groups-extra"))
    extra = settee_server.cluster_servers(base, 1, first_ip=NODES + 1)[0]
    try:
        extra.start()
        add = group(nodes[0], "Rack B")["addNodeURI"]
        assert rest(nodes[0], "POST", f"{GROUPS}/nope/addNode", {"hostname": extra.mgmt_addr})[0] == 404
        before = groups_rev(nodes[0])
        status, body = rest(nodes[0], "POST", add,
                            {"hostname": extra.mgmt_addr, "user": USERNAME, "password": PASSWORD})
        assert status == 200 and body["otpNode"] == otp(extra), body
        assert otp(extra) in members(nodes[0])["Rack B"], "the member that added it answers once it is there"
        assert groups_rev(nodes[0]) == before + 1, "added into its group in one change, not added then moved"
        wait_for(lambda: otp(extra) in members(nodes[1])["Rack B"], "the other members to apply the move")
    finally:
        extra.stop()
