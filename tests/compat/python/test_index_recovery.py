"""Indexes after a crash (SIGKILL) of a node with a couchbase bucket, through the official Python SDK: the index
comes back from its last snapshot, catches up from the seqnos it saved, and answers exactly as the documents on
disk say, including when the crash came in the middle of an index build."""

from __future__ import annotations

import base64
import json
import random
import threading
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.management.options import CreateQueryIndexOptions, WatchQueryIndexOptions
from couchbase.n1ql import QueryScanConsistency
from couchbase.options import QueryOptions

import settee_server
from sdk_connect import connect

BUCKET = settee_server.BUCKET
PLUS = QueryOptions(scan_consistency=QueryScanConsistency.REQUEST_PLUS, timeout=timedelta(seconds=60))


def start(tmp_path: Path) -> settee_server.SetteeServer:
    """A node with a couchbase bucket whose indexes are snapshotted every second."""
    return settee_server.new_server(tmp_path, bucket_type="couchbase", ram_mb=512,
                                    extra=["--index-snapshot-secs", "1"]).start()


def index_stats(server, name: str) -> dict:
    token = base64.b64encode(f"{settee_server.USERNAME}:{settee_server.PASSWORD}".encode()).decode()
    url = f"http://{server.host}:{server.query_port}/api/v1/stats/{BUCKET}/{name}"
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response).get(f"{BUCKET}:{name}", {})
    except urllib.error.HTTPError:
        return {}


def wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def ready_cluster(server):
    cluster = connect(server)
    cluster.wait_until_ready(timedelta(seconds=60))
    return cluster


def churn(collection, stop: threading.Event):
    """Moves documents between groups and deletes some until `stop` (errors once the node is gone are expected)."""
    rng = random.Random(7)
    while not stop.is_set():
        i = rng.randrange(3000)
        try:
            if rng.random() < 0.2:
                collection.remove(f"k{i}")
            else:
                collection.upsert(f"k{i}", {"n": i, "grp": rng.choice([11, 12, i % 10])})
        except CouchbaseException:
            time.sleep(0.05)


def test_an_index_recovers_from_a_crash_without_a_rebuild(tmp_path: Path):
    """SIGKILL in the middle of a write load, while snapshots are being written every second: after the restart
    every `grp = g` query through the secondary index returns exactly the documents whose stored `grp` is g (read
    back with KV gets), and the index applied only the changes after its last snapshot rather than all 3000
    documents again."""
    server = start(tmp_path)
    try:
        cluster = ready_cluster(server)
        collection = cluster.bucket(BUCKET).default_collection()
        for i in range(3000):
            collection.upsert(f"k{i}", {"n": i, "grp": i % 10})
        cluster.query_indexes().create_index(BUCKET, "ix_grp", ["grp"], CreateQueryIndexOptions(timeout=timedelta(seconds=60)))
        cluster.query_indexes().watch_indexes(BUCKET, ["ix_grp"], WatchQueryIndexOptions(timeout=timedelta(seconds=60)))
        wait_for(lambda: index_stats(server, "ix_grp").get("disk_size", 0) > 0, "the first snapshot")
        # Changes keep coming while periodic snapshots are written, and the node dies in the middle of them.
        stop = threading.Event()
        writer = threading.Thread(target=churn, args=(collection, stop), daemon=True)
        writer.start()
        time.sleep(3.5)
        server.kill()
        stop.set()
        writer.join(timeout=30)
        cluster.close()

        server.start()
        cluster = ready_cluster(server)
        collection = cluster.bucket(BUCKET).default_collection()
        truth: dict[int, set[str]] = {}
        for i in range(3000):
            try:
                grp = collection.get(f"k{i}").content_as[dict]["grp"]
            except DocumentNotFoundException:
                continue
            truth.setdefault(grp, set()).add(f"k{i}")
        for grp in list(range(10)) + [11, 12]:
            got = {r for r in cluster.query(f"SELECT RAW META().id FROM `{BUCKET}` WHERE grp = $1",
                                            QueryOptions(positional_parameters=[grp],
                                                         scan_consistency=QueryScanConsistency.REQUEST_PLUS)).rows()}
            assert got == truth.get(grp, set()), f"grp {grp}: index and documents differ"
        stats = index_stats(server, "ix_grp")
        assert stats["num_docs_indexed"] < 3000, f"the index was rebuilt from zero: {stats}"
        cluster.close()
    finally:
        server.stop()


def test_a_crash_during_an_index_build_ends_with_a_complete_index(tmp_path: Path):
    """SIGKILL while a deferred index is being built over 60,000 documents: after the restart the index comes
    online and counts exactly the documents the bucket holds."""
    server = start(tmp_path)
    try:
        cluster = ready_cluster(server)
        cluster.query(f"UPSERT INTO `{BUCKET}` (KEY 'd' || TO_STRING(i), VALUE {{'n': i, 'pad': REPEAT('x', 200)}}) "
                      f"SELECT i FROM ARRAY_RANGE(0, 60000) AS i", QueryOptions(timeout=timedelta(seconds=120))).execute()
        mgr = cluster.query_indexes()
        mgr.create_index(BUCKET, "ix_n", ["n"], CreateQueryIndexOptions(deferred=True))
        mgr.build_deferred_indexes(BUCKET)
        # Past a periodic snapshot of the half-built index when the build is slow enough to have one.
        wait_for(lambda: index_stats(server, "ix_n").get("initial_build_progress", 0) >= 40, "the build", 300)
        state_at_crash = index_stats(server, "ix_n")
        cluster.close()
        server.kill()
        print(f"\nkilled with the index at {state_at_crash.get('index_state')} "
              f"{state_at_crash.get('initial_build_progress')}%")

        server.start()
        cluster = ready_cluster(server)
        cluster.query_indexes().watch_indexes(BUCKET, ["ix_n"], WatchQueryIndexOptions(timeout=timedelta(seconds=120)))
        cluster.query_indexes().create_primary_index(BUCKET)
        held = list(cluster.query(f"SELECT RAW COUNT(*) FROM `{BUCKET}`", PLUS).rows())[0]
        indexed = list(cluster.query(f"SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE n >= 0", PLUS).rows())[0]
        assert held > 0 and indexed == held, f"{indexed} index entries for {held} documents"
        plan = list(cluster.query(f"EXPLAIN SELECT RAW COUNT(*) FROM `{BUCKET}` WHERE n >= 0").rows())[0]
        assert "ix_n" in json.dumps(plan), "the count goes through the index"
        cluster.close()
    finally:
        server.stop()
