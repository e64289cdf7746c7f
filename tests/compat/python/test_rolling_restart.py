"""`settee cluster rolling-restart` restarts every node of a three-node cluster in turn (graceful failover,
restart, warmup, delta recovery, rebalance) while the Python SDK keeps writing and reading: clients see latency,
never an error or a stale read, and no document is lost. Each node is a new process afterwards (its uptime starts
again) with the same data directory."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

import settee_server
from cluster_load import Writer
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME
from cluster_fixture import formed_cluster
from test_cluster import pool_nodes, rest

BUCKET = "rolling"
NODES = 3
KEYS = 200


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("rolling"))
    with formed_cluster(base, NODES, BUCKET, bucket_type="couchbase", replicas=1) as servers:
        yield servers


def uptime(node) -> int:
    status, pool = rest(node, "GET", "/pools/default")
    assert status == 200, pool
    return int(next(n for n in pool["nodes"] if n["thisNode"])["uptime"])


def test_rolling_restart_restarts_every_node_without_client_errors(nodes):
    """The command restarts the three nodes one after the other; a writer running throughout sees no error and
    no stale read, every document written reads back, and the cluster ends whole and balanced."""
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=30))
    coll = cluster.bucket(BUCKET).default_collection()
    for i in range(KEYS):
        coll.upsert(f"d-{i}", {"i": i})
    time.sleep(3)  # every node has run a while: a restarted one shows a smaller uptime
    assert min(uptime(n) for n in nodes) >= 3
    with Writer(coll, 50) as writer:
        began = time.monotonic()
        done = subprocess.run(
            [str(settee_server.settee_binary()), "cluster", "rolling-restart", "-c", nodes[0].mgmt_addr,
             "-u", USERNAME, "-p", PASSWORD, "--step-timeout-secs", "120"],
            capture_output=True, text=True, timeout=900)
        took = time.monotonic() - began
        time.sleep(1)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"done: {NODES} nodes restarted" in done.stdout
    # A node not restarted would have run through the whole command and more than 3 s before it.
    after = [uptime(n) for n in nodes]
    assert all(a <= took + 2 for a in after), (took, after)
    # Regression: a graceful failover took the node out of the bucket's server list at once, and the SDK (C++
    # core) stopped its session there, canceling the requests it had in flight (RequestCanceled for upserts, in
    # about one run of four). The node now stays listed, with no vBucket, until its clients stop sending to it.
    errors = dict(writer.errors)
    print(f"client errors: {errors}")
    when = [(round(t - began, 1), what) for t, what in writer.first_errors]
    assert errors == {}, f"{errors} at (s after the command started): {when}\n{done.stdout}"
    lost = [(k, i) for k, i in writer.acked.items() if coll.get(k).content_as[dict]["i"] < i]
    assert lost == [], f"acknowledged writes lost: {lost[:10]}"
    assert all(coll.get(f"d-{i}").content_as[dict] == {"i": i} for i in range(KEYS))
    pool = pool_nodes(nodes[0])
    assert all(n["clusterMembership"] == "active" and n["status"] == "healthy" for n in pool.values()), pool


def test_restart_endpoint_refuses_binaries_outside_the_install_directory(nodes):
    """Only an executable beside the running one may be run by a restart; nothing else on the machine."""
    status, body = rest(nodes[0], "POST", "/settee/node/restart", {"binary": "/bin/sh"})
    assert status == 400 and "binary" in body["errors"], body
    assert uptime(nodes[0]) >= 0
