"""XDCR between settee clusters, set up with Couchbase's REST calls and checked through the official SDK: creates,
updates, deletions and expiries replicated with their metadata (value, flags, expiry, CAS), pause and resume, a
source restart that resumes from its checkpoint instead of resending from zero, statistics, collections and
filters, and bidirectional replication that converges without the same mutation bouncing back and forth.
test_xdcr_tls.py covers encryption and client certificates, test_xdcr_faults.py crashes, restarts, rebalance and
failover. Every bucket here is made with its own type, so the suite's second, persistent-bucket pass
(scripts/test-compat.sh) leaves these modules out."""

from __future__ import annotations

import time
import urllib.parse
from datetime import timedelta

from couchbase.options import UpsertOptions
from couchbase.transcoder import RawBinaryTranscoder

import couchbase.subdocument as SD

from conditions import wait_until
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer
from test_backup import _upsert_ok, snapshot, start
from test_cluster import rest


def replicate(src: SetteeServer, dst: SetteeServer, name: str, user: tuple = (USERNAME, PASSWORD), **settings) -> str:
    """Creates a remote cluster reference to `dst` on `src` (as `user`) and a replication of bucket default; returns
    its id."""
    status, body = rest(src, "POST", "/pools/default/remoteClusters",
                        {"name": name, "hostname": dst.mgmt_addr, "username": user[0], "password": user[1]})
    assert status == 200, body
    assert body["name"] == name and body["uuid"], body
    form = {"fromBucket": "default", "toCluster": name, "toBucket": "default", "replicationType": "continuous"}
    status, body = rest(src, "POST", "/controller/createReplication", form | settings)
    assert status == 200, body
    return body["id"]


def task(node: SetteeServer, rid: str) -> dict:
    status, tasks = rest(node, "GET", "/pools/default/tasks")
    assert status == 200, tasks
    found = [t for t in tasks if t.get("type") == "xdcr" and t["id"] == rid]
    assert found, tasks
    return found[0]


def caught_up(node: SetteeServer, rid: str, written_at_least: int = 0) -> dict:
    """Waits until the replication runs with no change left and at least `written_at_least` documents written."""
    def done():
        t = task(node, rid)
        ok = t["status"] == "running" and t["changesLeft"] == 0 and t["docsWritten"] >= written_at_least
        return t if ok else None
    return wait_until(done, timeout_seconds=60, what=f"replication {rid} to catch up")


def settings_path(rid: str) -> str:
    return "/settings/replications/" + urllib.parse.quote(rid, safe="")


def test_one_way_replication_keeps_metadata_pauses_and_resumes_from_its_checkpoint(tmp_path):
    src = start(tmp_path / "src")
    dst = start(tmp_path / "dst")
    try:
        c = connect(src)
        c.wait_until_ready(timedelta(seconds=20))
        source = c.bucket("default").default_collection()
        raw = UpsertOptions(transcoder=RawBinaryTranscoder())
        # Written before the replication exists: the first run reads them from seqno 0.
        for i in range(100):
            source.upsert(f"early-{i}", {"i": i})
        rid = replicate(src, dst, "dc2", checkpointInterval="1")
        for i in range(200):
            if i % 4 == 0:
                source.upsert(f"bin-{i}", f"binary {i}".encode(), raw)
            else:
                source.upsert(f"doc-{i}", {"i": i}, UpsertOptions(expiry=timedelta(hours=1 + i % 3)))
        for i in range(1, 200, 5):
            if i % 4:
                source.upsert(f"doc-{i}", {"i": i, "updated": True})
        deleted = [f"doc-{i}" for i in range(2, 200, 7) if i % 4]
        for k in deleted:
            source.remove(k)
        source.upsert("short-lived", {"ttl": 2}, UpsertOptions(expiry=timedelta(seconds=2)))
        # User and system xattrs travel with their documents.
        source.mutate_in("doc-1", [SD.upsert("meta.owner", "alice", xattr=True, create_parents=True),
                                   SD.upsert("_sys.tag", 7, xattr=True, create_parents=True)])
        keys = [f"early-{i}" for i in range(100)] + [f"bin-{i}" if i % 4 == 0 else f"doc-{i}" for i in range(200)]
        t = caught_up(src, rid, written_at_least=300)
        # The same counts in /metrics, under Couchbase's XDCR names and labels.
        status, text = rest(src, "GET", "/metrics")
        assert status == 200
        written = [line for line in text.splitlines() if line.startswith("xdcr_docs_written_total{")]
        assert len(written) == 1 and 'sourceBucketName="default"' in written[0], written
        assert float(written[0].rsplit(" ", 1)[1]) >= t["docsWritten"], (written, t)

        d = connect(dst)
        d.wait_until_ready(timedelta(seconds=20))
        target = d.bucket("default").default_collection()
        before = snapshot(source, keys)
        after = snapshot(target, keys)
        assert before == after
        assert all(after[k] is None for k in deleted)
        assert after["bin-0"][0] == (b"binary 0", before["bin-0"][0][1])
        got = target.lookup_in("doc-1", [SD.get("meta.owner", xattr=True), SD.get("_sys.tag", xattr=True)])
        assert (got.content_as[str](0), got.content_as[int](1)) == ("alice", 7)
        # The expiry replicated as the document's own: it is gone on the target too once its time passed.
        wait_until(lambda: not target.exists("short-lived").exists, timeout_seconds=30, what="the expiry on the target")
        # Reading it on the source turns it into a tombstone there, which replicates as a deletion.
        wait_until(lambda: not source.exists("short-lived").exists, timeout_seconds=30, what="the expiry on the source")

        # Pause: new writes stay on the source until the replication resumes.
        status, body = rest(src, "POST", settings_path(rid), {"pauseRequested": "true"})
        assert status == 200 and body["pauseRequested"] is True, body
        wait_until(lambda: task(src, rid)["status"] == "paused", timeout_seconds=10, what="the pause")
        source.upsert("while-paused", {"p": 1})
        time.sleep(2)  # Long enough for a running replication to have copied it (it takes milliseconds).
        assert not target.exists("while-paused").exists
        status, body = rest(src, "POST", settings_path(rid), {"pauseRequested": "false"})
        assert status == 200, body
        wait_until(lambda: target.exists("while-paused").exists, timeout_seconds=30, what="the write after resume")

        # A source restart resumes from its checkpoint: nothing is read again.
        caught_up(src, rid)
        c.close()
        assert src.stop() in (0, -15)
        src.start()
        c = connect(src)
        c.wait_until_ready(timedelta(seconds=20))
        source = c.bucket("default").default_collection()
        t = caught_up(src, rid)
        assert t["docsChecked"] == 0, t
        source.upsert("after-restart", {"r": 1})
        wait_until(lambda: target.exists("after-restart").exists, timeout_seconds=30, what="a write after restart")
        assert caught_up(src, rid, written_at_least=1)["docsChecked"] == 1

        # Cancelling removes the task.
        status, _ = rest(src, "DELETE", "/controller/cancelXDCR/" + urllib.parse.quote(rid, safe=""))
        assert status == 200
        status, tasks = rest(src, "GET", "/pools/default/tasks")
        assert not [t for t in tasks if t.get("type") == "xdcr"], tasks
        wait_until(lambda: not list((src.data_dir / "xdcr").glob("*.ckpt.json")), timeout_seconds=10,
                   what="the checkpoints of the cancelled replication to go")
        c.close()
        d.close()
    finally:
        src.stop()
        dst.stop()


def test_replication_statistics_read_where_couchbase_serves_them(tmp_path):
    """Issue 19: XDCR's statistics where Couchbase 7 serves them after a replication of sets and deletions: the
    bucket's XDCR section `/pools/default/buckets/@xdcr-<bucket>/stats` with ns_server's names
    (`replications/<uuid>/<source>/<target>/docs_written`, `changes_left`, `wtavg_docs_latency` in ms, goxdcr's
    set/deletion splits, `data_replicated`, `bandwidth_usage`, `size_rep_queue`, `replication_changes_left`), the
    statistics API `/pools/default/stats/range/xdcr_*` with goxdcr's labels, and `/metrics`
    (`xdcr_docs_checked_total`, `xdcr_wtavg_docs_latency_seconds`, `xdcr_deletion_docs_written_total`,
    `xdcr_data_replicated_bytes`, ...)."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        rid = replicate(a, b, "to-b")
        uuid = rid.split("/")[0]
        ca = connect(a)
        ca.wait_until_ready(timedelta(seconds=20))
        ka = ca.bucket("default").default_collection()
        for i in range(50):
            ka.upsert(f"k-{i}", {"i": i})
        caught_up(a, rid, written_at_least=50)  # first, so that no set is deduplicated into its deletion
        for i in range(0, 50, 5):
            ka.remove(f"k-{i}")
        caught_up(a, rid, written_at_least=60)
        prefix = f"replications/{uuid}/default/default/"

        def section():
            status, body = rest(a, "GET", "/pools/default/buckets/@xdcr-default/stats")
            assert status == 200, body
            samples = body["op"]["samples"]
            last = lambda name: next((v for v in reversed(samples.get(name, [])) if v is not None), None)
            ok = last(prefix + "docs_written") == 60 and last(prefix + "changes_left") == 0
            return (samples, last) if ok and last("replication_changes_left") == 0 else None
        samples, last = wait_until(section, timeout_seconds=10, what="the XDCR section's samples")
        assert len(samples["timestamp"]) == len(samples[prefix + "docs_written"])
        assert any((v or 0) > 0 for v in samples[prefix + "wtavg_docs_latency"]), "replies took some time"
        assert any((v or 0) > 0 for v in samples[prefix + "rate_replicated"]), "60 writes in a second or so"
        # goxdcr's splits and sizes: 50 sets and 10 deletions written, the bytes of their requests (each at least
        # the 48 bytes of header and extras, a set also its key and body), per second in bandwidth_usage, and
        # nothing left queued.
        splits = {stat: last(prefix + stat) for stat in ("set_docs_written", "deletion_docs_written",
                                                          "expiry_docs_written", "set_received_from_dcp",
                                                          "deletion_received_from_dcp", "set_failed_cr_source",
                                                          "deletion_failed_cr_source", "size_rep_queue",
                                                          "docs_rep_queue")}
        assert splits == {"set_docs_written": 50, "deletion_docs_written": 10, "expiry_docs_written": 0,
                          "set_received_from_dcp": 50, "deletion_received_from_dcp": 10, "set_failed_cr_source": 0,
                          "deletion_failed_cr_source": 0, "size_rep_queue": 0, "docs_rep_queue": 0}, splits
        sent = last(prefix + "data_replicated")
        assert 60 * 48 + 50 * len('{"i":0}') <= sent < 60 * 100, sent
        assert any((v or 0) > 0 for v in samples[prefix + "bandwidth_usage"]), "bytes sent in a second or so"
        assert max(v or 0 for v in samples[prefix + "bandwidth_usage"]) <= sent
        assert "ops" not in samples and "curr_connections" not in samples, "the section holds XDCR's only"
        assert rest(a, "GET", "/pools/default/buckets/@xdcr-missing/stats")[0] == 404

        status, body = rest(a, "GET", "/pools/default/stats/range/xdcr_docs_written_total"
                                      "?sourceBucketName=default&start=-30&step=1")
        assert status == 200 and not body["errors"], body
        [series] = body["data"]
        assert series["metric"]["targetClusterUUID"] == uuid and series["metric"]["targetBucketName"] == "default"
        assert series["values"][-1][1] == "60", series
        for metric, value in (("xdcr_deletion_docs_written_total", "10"), ("xdcr_set_docs_written_total", "50"),
                              ("xdcr_data_replicated_bytes", str(int(sent))), ("xdcr_size_rep_queue_bytes", "0")):
            status, body = rest(a, "GET", f"/pools/default/stats/range/{metric}?sourceBucketName=default&start=-30")
            assert status == 200 and not body["errors"], body
            assert body["data"][0]["values"][-1][1] == value, (metric, body)
        status, body = rest(a, "GET", "/pools/default/stats/range/xdcr_docs_written_total?targetBucketName=other")
        assert status == 200 and body["data"] == [], body

        status, text = rest(a, "GET", "/metrics")
        assert status == 200
        checked = [line for line in text.splitlines() if line.startswith("xdcr_docs_checked_total{")]
        assert checked and float(checked[0].rsplit(" ", 1)[1]) >= 60, checked
        metric = lambda name: [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                               if line.startswith(name + "{")]
        assert metric("xdcr_deletion_docs_written_total") == [10] and metric("xdcr_set_docs_written_total") == [50]
        assert metric("xdcr_data_replicated_bytes") == [sent] and metric("xdcr_size_rep_queue_bytes") == [0]
        assert "# TYPE xdcr_data_replicated_bytes gauge" in text
        assert any(line.startswith("xdcr_wtavg_docs_latency_seconds{") for line in text.splitlines())
        ca.close()
    finally:
        a.stop()
        b.stop()


def test_bidirectional_replication_converges_without_ping_pong(tmp_path):
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        a_to_b = replicate(a, b, "to-b")
        b_to_a = replicate(b, a, "to-a")
        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        ka, kb = ca.bucket("default").default_collection(), cb.bucket("default").default_collection()
        for i in range(100):
            (ka if i % 2 else kb).upsert(f"k-{i}", {"from": "a" if i % 2 else "b", "i": i})
        caught_up(a, a_to_b, written_at_least=50)
        caught_up(b, b_to_a, written_at_least=50)
        # Updates of the same keys on both sides: each side's last write wins by revision, then CAS.
        for i in range(0, 100, 10):
            ka.upsert(f"k-{i}", {"a": i})
            kb.upsert(f"k-{i}", {"b": i})
            kb.upsert(f"k-{i}", {"b": i, "again": True})
        keys = [f"k-{i}" for i in range(100)]

        def converged():
            caught_up(a, a_to_b)
            caught_up(b, b_to_a)
            return snapshot(ka, keys) == snapshot(kb, keys)
        wait_until(converged, timeout_seconds=60, what="both sides to hold the same documents and CAS")
        assert kb.get("k-10").content_as[dict] == {"b": 10, "again": True}, "revision 3 beats revision 2"

        # No ping-pong: once converged, nothing more is written on either side (the counts are published once a
        # second, so they are read after two publications, then again three seconds later).
        time.sleep(2)
        counts = (task(a, a_to_b)["docsWritten"], task(b, b_to_a)["docsWritten"])
        time.sleep(3)
        assert (task(a, a_to_b)["docsWritten"], task(b, b_to_a)["docsWritten"]) == counts
        assert task(a, a_to_b)["changesLeft"] == 0 and task(b, b_to_a)["changesLeft"] == 0

        # A remote cluster in use cannot be deleted; bad requests name their field.
        status, body = rest(a, "DELETE", "/pools/default/remoteClusters/to-b")
        assert status == 400, body
        status, body = rest(a, "POST", "/controller/createReplication",
                            {"fromBucket": "default", "toCluster": "nope", "toBucket": "default"})
        assert status == 400 and "toCluster" in body["errors"], body
        status, body = rest(a, "POST", "/controller/createReplication",
                            {"fromBucket": "default", "toCluster": "to-b", "toBucket": "missing"})
        assert status == 400 and "toBucket" in body["errors"], body
        status, body = rest(a, "POST", "/controller/createReplication",
                            {"fromBucket": "default", "toCluster": "to-b", "toBucket": "default"})
        assert status == 400, "a duplicate replication is refused"
        status, remotes = rest(a, "GET", "/pools/default/remoteClusters")
        assert status == 200 and [r["name"] for r in remotes] == ["to-b"] and "password" not in remotes[0]

        # A paused replication cancelled: its checkpoints (saved by the pause) go although no runner is stopped.
        status, _ = rest(a, "POST", settings_path(a_to_b), {"pauseRequested": "true"})
        assert status == 200
        wait_until(lambda: task(a, a_to_b)["status"] == "paused", timeout_seconds=10, what="the pause")
        assert list((a.data_dir / "xdcr").glob("*.ckpt.json"))
        status, _ = rest(a, "DELETE", "/controller/cancelXDCR/" + urllib.parse.quote(a_to_b, safe=""))
        assert status == 200
        wait_until(lambda: not list((a.data_dir / "xdcr").glob("*.ckpt.json")), timeout_seconds=10,
                   what="the cancelled replication's checkpoints to go")
        status, _ = rest(a, "DELETE", "/pools/default/remoteClusters/to-b")
        assert status == 200, "no replication uses it any more"
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()


def pause(node: SetteeServer, rid: str, paused: bool) -> None:
    status, body = rest(node, "POST", settings_path(rid), {"pauseRequested": "true" if paused else "false"})
    assert status == 200, body
    wanted = "paused" if paused else "running"
    wait_until(lambda: task(node, rid)["status"] == wanted, timeout_seconds=20, what=f"{rid} {wanted}")


def test_lww_buckets_converge_on_the_last_write_and_a_mismatched_target_is_refused(tmp_path):
    """Issue 19 item 3: `conflictResolutionType=lww` (in every edition) is taken at bucket creation, shown, and
    refused on an edit, as ns_server does; SET_WITH_META resolves by CAS first in such a bucket, so bidirectional
    replication converges on the last write (by the hybrid-logical-clock CAS) where a `seqno` bucket keeps the
    version with more revisions; a replication between buckets that resolve differently is refused with goxdcr's
    words."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        for node in (a, b):
            status, body = rest(node, "POST", "/pools/default/buckets",
                                {"name": "lww", "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 0,
                                 "conflictResolutionType": "lww"})
            assert status == 202, body
            wait_until(lambda: rest(node, "GET", "/pools/default/buckets/lww")[0] == 200, 20, "bucket lww")
            assert rest(node, "GET", "/pools/default/buckets/lww")[1]["conflictResolutionType"] == "lww"
        assert rest(a, "GET", "/pools/default/buckets/default")[1]["conflictResolutionType"] == "seqno"
        status, body = rest(a, "POST", "/pools/default/buckets/lww", {"conflictResolutionType": "seqno"})
        assert status == 400 and "not allowed in update" in body["errors"]["conflictResolutionType"], body
        status, body = rest(a, "POST", "/pools/default/buckets",
                            {"name": "custom", "ramQuota": 100, "conflictResolutionType": "custom"})
        assert status == 400 and "conflictResolutionType" in body["errors"], body

        rid = replicate(a, b, "to-b")  # default (seqno) to default: allowed
        status, body = rest(a, "POST", "/controller/createReplication",
                            {"fromBucket": "default", "toCluster": "to-b", "toBucket": "lww",
                             "replicationType": "continuous"})
        assert status == 400 and "different ConflictResolutionType" in str(body), body
        status, _ = rest(a, "DELETE", "/controller/cancelXDCR/" + urllib.parse.quote(rid, safe=""))
        assert status == 200

        def lww_replication(src, dst, name):
            status, body = rest(src, "POST", "/controller/createReplication",
                                {"fromBucket": "lww", "toCluster": name, "toBucket": "lww",
                                 "replicationType": "continuous"})
            assert status == 200, body
            return body["id"]
        a_to_b = lww_replication(a, b, "to-b")
        assert rest(b, "POST", "/pools/default/remoteClusters",
                    {"name": "to-a", "hostname": a.mgmt_addr, "username": USERNAME, "password": PASSWORD})[0] == 200
        b_to_a = lww_replication(b, a, "to-a")
        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        ka, kb = ca.bucket("lww").default_collection(), cb.bucket("lww").default_collection()
        keys = [f"k-{i}" for i in range(20)]
        for k in keys:
            ka.upsert(k, {"first": True})
        caught_up(a, a_to_b, written_at_least=len(keys))
        # With both directions paused, side a updates every key three times (more revisions), then side b once,
        # later: by revision a's version would win; by last write, b's.
        pause(a, a_to_b, True)
        pause(b, b_to_a, True)
        for k in keys:
            for n in range(3):
                ka.upsert(k, {"side": "a", "n": n})
        time.sleep(0.05)
        for k in keys:
            kb.upsert(k, {"side": "b"})
        pause(a, a_to_b, False)
        pause(b, b_to_a, False)

        def converged():
            caught_up(a, a_to_b)
            caught_up(b, b_to_a)
            return snapshot(ka, keys) == snapshot(kb, keys)
        wait_until(converged, timeout_seconds=60, what="both sides to hold the same documents and CAS")
        assert all(ka.get(k).content_as[dict] == {"side": "b"} for k in keys), "the last write wins, not revisions"
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()


def test_filters_replicate_only_the_documents_and_deletions_they_accept(tmp_path):
    """Issue 19 item 4: `filterExpression` (SQL++ over the document and META(), checked when set: a bad one is
    refused naming the field) replicates only what it accepts, counted in `docsFiltered`; `filterDeletion` keeps
    deletions on the source; `filterBinary` leaves out documents that are not JSON; the settings read back."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        status, body = rest(a, "POST", "/pools/default/remoteClusters",
                            {"name": "to-b", "hostname": b.mgmt_addr, "username": USERNAME, "password": PASSWORD})
        assert status == 200, body
        form = {"fromBucket": "default", "toCluster": "to-b", "toBucket": "default", "replicationType": "continuous"}
        for bad in ["country = ", "NOW_MILLIS() > 0"]:
            status, body = rest(a, "POST", "/controller/createReplication", form | {"filterExpression": bad})
            assert status == 400 and "filterExpression" in body["errors"], body
        expression = 'country = "FR" OR REGEXP_CONTAINS(META().id, "^keep")'
        status, body = rest(a, "POST", "/controller/createReplication",
                            form | {"filterExpression": expression, "filterDeletion": "true", "filterBinary": "true"})
        assert status == 200, body
        rid = body["id"]
        status, settings = rest(a, "GET", settings_path(rid))
        assert status == 200 and settings["filterExpression"] == expression, settings
        assert settings["filterDeletion"] is True and settings["filterBinary"] is True, settings

        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        ka, kb = ca.bucket("default").default_collection(), cb.bucket("default").default_collection()
        for i in range(30):
            ka.upsert(f"user-{i}", {"country": "FR" if i % 3 == 0 else "US", "i": i})
        ka.upsert("keep-json", {"country": "US"})
        ka.upsert("keep-binary", b"\x00\x01", UpsertOptions(transcoder=RawBinaryTranscoder()))
        t = caught_up(a, rid, written_at_least=11)
        wanted = {f"user-{i}" for i in range(0, 30, 3)} | {"keep-json"}
        everything = {f"user-{i}" for i in range(30)} | {"keep-json", "keep-binary"}
        present = {k for k, v in snapshot(kb, sorted(everything)).items() if v is not None}
        assert present == wanted, sorted(present ^ wanted)
        wait_until(lambda: task(a, rid)["docsFiltered"] >= 21, timeout_seconds=10, what="the filtered count")
        assert task(a, rid)["docsFiltered"] == 21, t  # 20 US users and the binary document

        # filterDeletion: a deletion stays on the source; an update still replicates.
        ka.remove("user-0")
        ka.upsert("user-3", {"country": "FR", "i": 3, "again": True})
        wait_until(lambda: kb.get("user-3").content_as[dict].get("again"), timeout_seconds=30,
                   what="the update to replicate")
        caught_up(a, rid)
        assert kb.exists("user-0").exists, "the deletion was filtered"
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()


def test_filter_change_restreams_from_zero_unless_filter_skip_restream(tmp_path):
    """Issue 19: a new `filterExpression` restarts the replication from seqno 0 (its checkpoints dropped), so the
    documents the old filter left out reach the target, as goxdcr does unless `filterSkipRestream=true`, which
    keeps the checkpoints (the new filter applies to later changes only); an edit naming a filter without the
    flag is refused with goxdcr's words."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        rid = replicate(a, b, "to-b", filterExpression='REGEXP_CONTAINS(META().id, "^a-")', checkpointInterval="1")
        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        ka, kb = ca.bucket("default").default_collection(), cb.bucket("default").default_collection()
        for p in "abc":
            for i in range(5):
                ka.upsert(f"{p}-{i}", {"p": p, "i": i})
        caught_up(a, rid, written_at_least=5)
        every = [f"{p}-{i}" for p in "abc" for i in range(5)]
        on_target = lambda: {k for k in every if kb.exists(k).exists}
        assert on_target() == {f"a-{i}" for i in range(5)}
        wait_until(lambda: list((a.data_dir / "xdcr").glob("*.ckpt.json")), timeout_seconds=10,
                   what="a checkpoint file")

        status, body = rest(a, "POST", settings_path(rid), {"filterExpression": 'REGEXP_CONTAINS(META().id, "^b-")'})
        assert status == 400 and "skip restream flag is required" in body["errors"]["filterExpression"], body

        # Skipped: the checkpoints stay, so only b documents written from now on replicate.
        status, body = rest(a, "POST", settings_path(rid), {"filterExpression": 'REGEXP_CONTAINS(META().id, "^b-")',
                                                           "filterSkipRestream": "true"})
        assert status == 200, body
        # The runner restarts with the new filter within a manager pass: written again until it replicates.
        wait_until(lambda: ka.upsert("b-new", {"p": "b"}) and kb.exists("b-new").exists, timeout_seconds=30,
                   what="a b document written after the change")
        caught_up(a, rid)
        assert on_target() == {f"a-{i}" for i in range(5)}, "no re-stream: the older b documents stay behind"

        # Not skipped: the replication reads again from seqno 0 with the new filter.
        status, body = rest(a, "POST", settings_path(rid), {"filterExpression": 'REGEXP_CONTAINS(META().id, "^[bc]-")',
                                                           "filterSkipRestream": "false"})
        assert status == 200, body
        wanted = {f"a-{i}" for i in range(5)} | {f"{p}-{i}" for p in "bc" for i in range(5)}
        wait_until(lambda: on_target() == wanted, timeout_seconds=30, what="the documents the old filters left out")
        # The old stream's checkpoint file went; the new stream has its own.
        wait_until(lambda: [f.name for f in (a.data_dir / "xdcr").glob("*.ckpt.json")] and
                   all("restream" in f.name for f in (a.data_dir / "xdcr").glob("*.ckpt.json")),
                   timeout_seconds=10, what="only the new stream's checkpoints")
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()


def test_explicit_collection_mapping_sends_each_collection_where_its_rule_says(tmp_path):
    """Issue 19 item 4: `collectionsExplicitMapping` with `colMappingRules` (goxdcr's JSON): a scope rule keeps
    collection names, a collection rule renames, a collection no rule names (here the default one) is not
    replicated; malformed rules, and the migration mode beside explicit mapping, are refused naming their field."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        for node, namespaces in ((a, [("inventory", "hotels"), ("orders", "eu")]),
                                 (b, [("stock", "hotels"), ("sales", "europe")])):
            for scope, collection in namespaces:
                assert rest(node, "POST", "/pools/default/buckets/default/scopes", {"name": scope})[0] == 200
                status, body = rest(node, "POST", f"/pools/default/buckets/default/scopes/{scope}/collections",
                                    {"name": collection})
                assert status == 200, body
        status, body = rest(a, "POST", "/pools/default/remoteClusters",
                            {"name": "to-b", "hostname": b.mgmt_addr, "username": USERNAME, "password": PASSWORD})
        assert status == 200, body
        form = {"fromBucket": "default", "toCluster": "to-b", "toBucket": "default", "replicationType": "continuous",
                "collectionsExplicitMapping": "true"}
        for field, extra in (("colMappingRules", {"colMappingRules": '{"a": "b.c"}'}),
                             ("colMappingRules", {}),
                             ("collectionsMigrationMode", {"colMappingRules": '{"a": "b"}',
                                                           "collectionsMigrationMode": "true"})):
            status, body = rest(a, "POST", "/controller/createReplication", form | extra)
            assert status == 400 and field in body["errors"], (extra, body)
        rules = '{"inventory": "stock", "orders.eu": "sales.europe"}'
        status, body = rest(a, "POST", "/controller/createReplication", form | {"colMappingRules": rules})
        assert status == 200, body
        rid = body["id"]
        assert rest(a, "GET", settings_path(rid))[1]["colMappingRules"] == {"inventory": "stock",
                                                                           "orders.eu": "sales.europe"}

        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        src, dst = ca.bucket("default"), cb.bucket("default")
        hotels, eu = src.scope("inventory").collection("hotels"), src.scope("orders").collection("eu")
        wait_until(lambda: _upsert_ok(hotels) and _upsert_ok(eu), timeout_seconds=20, what="the new collections")
        for i in range(10):
            hotels.upsert(f"h-{i}", {"i": i})
            eu.upsert(f"o-{i}", {"i": i})
            src.default_collection().upsert(f"d-{i}", {"i": i})
        stock, europe = dst.scope("stock").collection("hotels"), dst.scope("sales").collection("europe")
        wait_until(lambda: all(stock.exists(f"h-{i}").exists and europe.exists(f"o-{i}").exists for i in range(10)),
                   timeout_seconds=30, what="the mapped collections on the target")
        caught_up(a, rid)
        assert not any(dst.default_collection().exists(f"d-{i}").exists for i in range(10)), "no rule, no copy"
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()


def test_migration_mode_sends_default_collection_documents_to_the_collections_their_rules_match(tmp_path):
    """Issue 19 item 4: `collectionsMigrationMode` with `colMappingRules` whose keys are filter expressions over
    the documents of the source's default collection and whose values are target collections, as goxdcr reads
    them: a document goes to every collection whose rule it matches (none: not replicated), a deletion follows to
    every rule's collection, other source collections are not replicated; rules goxdcr refuses (a deny rule, the
    mode beside explicit mapping) are refused with its words, naming the field."""
    a = start(tmp_path / "a")
    b = start(tmp_path / "b")
    try:
        for node, namespaces in ((a, [("inventory", "hotels")]),
                                 (b, [("travel", "hotels"), ("travel", "luxury"), ("inventory", "hotels")])):
            for scope, collection in namespaces:
                rest(node, "POST", "/pools/default/buckets/default/scopes", {"name": scope})
                status, body = rest(node, "POST", f"/pools/default/buckets/default/scopes/{scope}/collections",
                                    {"name": collection})
                assert status == 200, body
        status, body = rest(a, "POST", "/pools/default/remoteClusters",
                            {"name": "to-b", "hostname": b.mgmt_addr, "username": USERNAME, "password": PASSWORD})
        assert status == 200, body
        form = {"fromBucket": "default", "toCluster": "to-b", "toBucket": "default", "replicationType": "continuous",
                "collectionsMigrationMode": "true"}
        status, body = rest(a, "POST", "/controller/createReplication",
                            form | {"colMappingRules": '{"type = \\"hotel\\"": null}'})
        assert status == 400 and "Deny rules are not allowed" in body["errors"]["colMappingRules"], body
        status, body = rest(a, "POST", "/controller/createReplication",
                            form | {"colMappingRules": '{"type = \\"hotel\\"": "travel.hotels"}',
                                    "collectionsExplicitMapping": "true"})
        assert status == 400 and "cannot both be active" in body["errors"]["collectionsMigrationMode"], body
        rules = '{"type = \\"hotel\\"": "travel.hotels", "type = \\"hotel\\" AND stars >= 4": "travel.luxury"}'
        status, body = rest(a, "POST", "/controller/createReplication", form | {"colMappingRules": rules})
        assert status == 200, body
        rid = body["id"]
        shown = rest(a, "GET", settings_path(rid))[1]
        assert shown["collectionsMigrationMode"] is True and len(shown["colMappingRules"]) == 2, shown

        ca, cb = connect(a), connect(b)
        ca.wait_until_ready(timedelta(seconds=20))
        cb.wait_until_ready(timedelta(seconds=20))
        src, dst = ca.bucket("default"), cb.bucket("default")
        source = src.default_collection()
        for i in range(10):
            source.upsert(f"hotel-{i}", {"type": "hotel", "stars": i % 6})
        for i in range(5):
            source.upsert(f"airline-{i}", {"type": "airline"})
        inventory = src.scope("inventory").collection("hotels")
        wait_until(lambda: _upsert_ok(inventory), timeout_seconds=20, what="the source collection")
        inventory.upsert("inv-1", {"type": "hotel", "stars": 5})
        hotels, luxury = dst.scope("travel").collection("hotels"), dst.scope("travel").collection("luxury")
        caught_up(a, rid)
        present = lambda coll, keys: {k for k in keys if coll.exists(k).exists}
        every = [f"hotel-{i}" for i in range(10)] + [f"airline-{i}" for i in range(5)]
        wait_until(lambda: present(hotels, every) == {f"hotel-{i}" for i in range(10)}, timeout_seconds=30,
                   what="every hotel in travel.hotels")
        assert present(luxury, every) == {f"hotel-{i}" for i in range(10) if i % 6 >= 4}, "matching both: copied"
        assert not present(dst.default_collection(), every), "no rule sends anything to the default collection"
        assert not dst.scope("inventory").collection("hotels").exists("inv-1").exists, "default collection only"
        assert hotels.get("hotel-5").cas == source.get("hotel-5").cas, "the metadata travels with each copy"

        # A deletion has no body to match: it reaches every rule's collection.
        source.remove("hotel-4")
        wait_until(lambda: not hotels.exists("hotel-4").exists and not luxury.exists("hotel-4").exists,
                   timeout_seconds=30, what="the deletion in both collections")
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()
