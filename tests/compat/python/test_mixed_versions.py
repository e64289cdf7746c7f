"""A rolling upgrade's mixed-version window on a real three-node cluster (issue 22, cluster compatibility version).

Node 1 runs with the hidden test-only SETTEE_TEST_META_VERSION=1: it announces metadata version 1, as a settee from
before versions were recorded, and it stops (the process exits) at any metadata command newer than that, as such a
settee cannot read them. It forms the cluster (a node older than the cluster could not join it), nodes 2 and 3
(this build) join. While node 1 is a member the cluster's version is 1 and node 2, which the REST calls go to,
must propose the older forms: a graceful failover of node 3 is `Failover` and the replica repair, with no drain
(the failed-over node is never listed without vBuckets), and a node added into a server group is added then moved
(two revisions of the groups). Node 1 keeps running and following the metadata throughout. Restarted without the
variable, it records version 2, the cluster's version rises, and the same operations take the new forms: the
graceful failover drains the node (listed with no vBucket for a second) and a node added into a group lands there
in one change. Last, node 1 restarted at version 1 again (a downgrade) finds version 2 commands in its log: it
exits, naming the first.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

import settee_server
from cluster_load import Background, Writer, wait_for
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_cluster import pool_nodes, rest, wait_rebalanced

BUCKET = "mixed"
NODES = 3
GROUPS = "/pools/default/serverGroups"
OLD = {"SETTEE_TEST_META_VERSION": "1"}


def otp(node: SetteeServer) -> str:
    return f"ns_1@{node.host}"


def versions(node: SetteeServer) -> dict:
    status, body = rest(node, "GET", "/settee/cluster/versions")
    assert status == 200, body
    return body


def groups(node: SetteeServer) -> dict:
    status, body = rest(node, "GET", GROUPS)
    assert status == 200, body
    return body


def groups_rev(node: SetteeServer) -> int:
    return int(groups(node)["uri"].split("?rev=")[1])


def group_members(node: SetteeServer, name: str) -> list[str]:
    return sorted(n["otpNode"] for g in groups(node)["groups"] if g["name"] == name for n in g["nodes"])


class ListingWatch(Background):
    """Polls the bucket's config on `node` every 20 ms and records whether `watched` was ever in `serverList`
    while holding no vBucket: a failed-over node being drained."""

    def __init__(self, node: SetteeServer, watched: SetteeServer):
        self.node, self.kv = node, f"{watched.host}:{watched.kv_port}"
        self.drained = False
        super().__init__()

    def run(self):
        while not self.stop_event.is_set():
            status, config = rest(self.node, "GET", f"/pools/default/b/{BUCKET}", timeout=5)
            if status == 200:
                servers = config["vBucketServerMap"]["serverList"]
                if self.kv in servers:
                    at = servers.index(self.kv)
                    if not any(at in row for row in config["vBucketServerMap"]["vBucketMap"]):
                        self.drained = True
            time.sleep(0.02)


def graceful_failover_and_back(nodes: list[SetteeServer], leaving: SetteeServer, collection) -> tuple[bool, Writer]:
    """Gracefully fails `leaving` over under a writer (asked of `nodes[0]`), then delta-recovers it and rebalances;
    returns whether it was drained and the writer."""
    with Writer(collection, 100, prefix=f"w{leaving.host[-1]}-") as writer, ListingWatch(nodes[0], leaving) as watch:
        status, body = rest(nodes[0], "POST", "/controller/startGracefulFailover", {"otpNode": otp(leaving)})
        assert status == 200, body
        assert pool_nodes(nodes[0])[leaving.mgmt_addr]["clusterMembership"] == "inactiveFailed"
        time.sleep(1.5)
    status, body = rest(nodes[0], "POST", "/controller/setRecoveryType",
                        {"otpNode": otp(leaving), "recoveryType": "delta"})
    assert status == 200, body
    known = ",".join(otp(n) for n in nodes)
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
    assert status == 200, body
    wait_rebalanced(nodes[0])
    lost = [(k, i) for k, i in writer.acked.items() if collection.get(k).content_as[dict]["i"] < i]
    assert lost == [], f"acknowledged writes lost: {lost[:10]}"
    return watch.drained, writer


def add_into_group(nodes: list[SetteeServer], extra: SetteeServer, name: str) -> int:
    """Adds the running `extra` through group `name`'s addNodeURI; returns how much the groups' revision grew."""
    add = next(g for g in groups(nodes[0])["groups"] if g["name"] == name)["addNodeURI"]
    before = groups_rev(nodes[0])
    status, body = rest(nodes[0], "POST", add, {"hostname": extra.mgmt_addr, "user": USERNAME, "password": PASSWORD})
    assert status == 200 and body["otpNode"] == otp(extra), body
    wait_for(lambda: otp(extra) in group_members(nodes[0], name), "the new node in its group")
    return groups_rev(nodes[0]) - before


def assert_following(old: SetteeServer, leader: SetteeServer):
    """`old` is alive and has applied what `leader` has."""
    assert old.process.poll() is None, f"node {old.host} exited:\n{old.log_tail()}"
    wait_for(lambda: pool_nodes(old).keys() == pool_nodes(leader).keys(), f"{old.host} to follow the metadata")
    assert group_members(old, "Rack B") == group_members(leader, "Rack B")


@pytest.fixture(scope="module")
def cluster_nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("mixed-versions"))
    servers = settee_server.cluster_servers(base, NODES + 2)
    members, extras = servers[:NODES], servers[NODES:]
    members[0].env.update(OLD)
    for s in members[1:]:
        s.join = members[0].mgmt_addr
    try:
        for s in members:
            s.start()
        wait_for(lambda: len(pool_nodes(members[0])) == NODES, "every node to join")
        known = ",".join(otp(n) for n in members)
        status, body = rest(members[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(members[0])
        status, body = rest(members[0], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        status, body = rest(members[0], "POST", GROUPS, {"name": "Rack B"})
        assert status == 200, body
        yield members, extras
    finally:
        settee_server.stop_all(servers)


@pytest.fixture(scope="module")
def collection(cluster_nodes):
    members, _ = cluster_nodes
    c = connect(members[1])
    c.wait_until_ready(timedelta(seconds=30))
    yield c.bucket(BUCKET).default_collection()
    c.close()


def new_first(members: list[SetteeServer]) -> list[SetteeServer]:
    """The members with node 2 (this build) first: the one the REST calls go to, so its proposals are checked."""
    return [members[1], members[2], members[0]]


def test_a_version_1_member_keeps_the_cluster_on_the_older_forms(cluster_nodes, collection):
    """With node 1 at version 1, the cluster's version is 1: graceful failover without a drain and add-then-move
    succeed, acknowledged writes survive, and node 1 (which would exit at a version 2 command) follows along."""
    members, extras = cluster_nodes
    v = versions(members[1])
    assert v["clusterMetaVersion"] == 1, v
    assert v["commandForms"] == {"gracefulFailover": "failoverThenRepair", "addNodeInGroup": "addNodeThenMove"}, v
    by_node = {n["otpNode"]: n["metaVersion"] for n in v["nodes"]}
    assert by_node == {otp(members[0]): 1, otp(members[1]): 2, otp(members[2]): 2}, v
    assert versions(members[0])["thisNodeMetaVersion"] == 1

    drained, writer = graceful_failover_and_back(new_first(members), members[2], collection)
    print(f"\nversion 1 graceful failover: writer errors {dict(writer.errors)}")
    assert not drained, "the failover drained the node: a version 2 command while a member reads version 1"
    extras[0].start()
    assert add_into_group(new_first(members), extras[0], "Rack B") == 2, "added then moved: two revisions"
    assert_following(members[0], members[1])
    known = ",".join(otp(n) for n in members + [extras[0]])
    status, body = rest(members[1], "POST", "/controller/rebalance", {"knownNodes": known,
                                                                      "ejectedNodes": otp(extras[0])})
    assert status == 200, body
    wait_rebalanced(members[1])
    assert_following(members[0], members[1])


def test_restarted_at_version_2_the_cluster_takes_the_new_forms(cluster_nodes, collection):
    """Node 1 restarted without the variable records version 2; every member then reads 2, and the same graceful
    failover drains the node and the next node added into a group lands there in one change."""
    members, extras = cluster_nodes
    old = members[0]
    assert old.stop() in (0, -15), old.log_tail()
    old.env.clear()
    old.start()
    for node in members:
        wait_for(lambda: versions(node)["clusterMetaVersion"] == 2, "the cluster's version to rise", timeout=60)
    v = versions(members[1])
    assert v["commandForms"] == {"gracefulFailover": "failoverDraining", "addNodeInGroup": "addNodeInGroup"}, v
    for node in members:
        wait_for(lambda: pool_nodes(node)[old.mgmt_addr]["status"] == "healthy", "node 3 healthy and warmed up")

    drained, writer = graceful_failover_and_back(new_first(members), members[2], collection)
    print(f"\nversion 2 graceful failover: writer errors {dict(writer.errors)}")
    assert drained, "the failover did not drain the node once every member reads version 2"
    extras[1].start()
    assert add_into_group(new_first(members), extras[1], "Rack B") == 1, "added into its group in one change"


def test_a_node_downgraded_below_its_log_exits_naming_the_command(cluster_nodes):
    """Node 1's log now holds version 2 commands (the drained failover): restarted as a version 1 node (a
    downgrade), it stops at the first one while replaying its log and exits with status 1, naming the command and
    the versions, instead of serving from a state short of the log. The other members carry on."""
    members, _ = cluster_nodes
    node = members[0]
    assert node.stop() in (0, -15), node.log_tail()
    node.env.update(OLD)
    with pytest.raises(RuntimeError, match="exited with status 1"):
        node.start()
    log = node.log_path.read_text(errors="replace")
    assert "metadata command FailoverDraining at log index" in log, log[-3000:]
    assert "needs metadata version 2; this node reads up to 1" in log, log[-3000:]
    assert "restart it on a settee at least as new as the cluster's other nodes" in log, log[-3000:]
    status, body = rest(members[1], "POST", "/pools/default/buckets",
                        {"name": "after", "bucketType": "ephemeral", "ramQuota": 100, "replicaNumber": 1})
    assert status == 202, body
