"""`settee backup`: a full then an incremental backup of a node written by the official SDK, restored into a fresh
node with SET_WITH_META / DEL_WITH_META, every document equal (body, flags, expiry, CAS) and deleted documents
still deleted; a damaged archive file reported by `info` and refused by `restore`."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

from couchbase.exceptions import DocumentNotFoundException
from couchbase.options import GetOptions, UpsertOptions
from couchbase.transcoder import RawBinaryTranscoder, Transcoder

import couchbase.subdocument as SD

import settee_server
from conditions import wait_until
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer, new_server
from test_cluster import rest


def backup(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `settee backup ARGS`; fails the test on a non-zero exit when `check`."""
    cmd = [str(settee_server.settee_binary()), "backup", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def cluster_args(node: SetteeServer) -> list[str]:
    return ["-c", node.mgmt_url, "-u", USERNAME, "-p", PASSWORD]


def start(root: Path) -> SetteeServer:
    return new_server(base_dir=root, bucket_type="couchbase").start()


class FlagsTranscoder(Transcoder):
    """Reads any document as its raw bytes and flags, so a comparison covers both."""

    def encode_value(self, value):
        raise NotImplementedError

    def decode_value(self, value, flags):
        return bytes(value), flags


def snapshot(coll, keys):
    """Each key's ((body, flags), expiry, CAS), or None when the document does not exist."""
    out = {}
    for k in keys:
        try:
            r = coll.get(k, GetOptions(with_expiry=True, transcoder=FlagsTranscoder()))
            out[k] = (r.value, r.expiryTime, r.cas)
        except DocumentNotFoundException:
            out[k] = None
    return out


def test_full_and_incremental_backup_restore_every_document_with_its_metadata(tmp_path):
    src = start(tmp_path / "src")
    dst = start(tmp_path / "dst")
    try:
        status, _ = rest(src, "POST", "/pools/default/buckets/default/scopes", {"name": "app"})
        assert status == 200
        status, _ = rest(src, "POST", "/pools/default/buckets/default/scopes/app/collections", {"name": "orders"})
        assert status == 200
        c = connect(src)
        c.wait_until_ready(timedelta(seconds=20))
        b = c.bucket("default")
        default = b.default_collection()
        orders = b.scope("app").collection("orders")
        wait_until(lambda: _upsert_ok(orders), timeout_seconds=20, what="the new collection to accept writes")
        raw = UpsertOptions(transcoder=RawBinaryTranscoder())
        for i in range(400):
            if i % 3 == 0:
                default.upsert(f"bin-{i}", f"binary {i}".encode(), raw)
            else:
                default.upsert(f"doc-{i}", {"i": i, "name": f"n{i}"}, UpsertOptions(expiry=timedelta(hours=i % 5 + 1)))
        for i in range(100):
            orders.upsert(f"order-{i}", {"order": i})
        # User and system xattrs travel with their documents.
        default.mutate_in("doc-100", [SD.upsert("meta.owner", "alice", xattr=True, create_parents=True),
                                    SD.upsert("_sys.tag", 7, xattr=True, create_parents=True)])
        archive = tmp_path / "archive"
        backup("config", "-a", str(archive), "-r", "repo")
        backup("backup", "-a", str(archive), "-r", "repo", *cluster_args(src))
        # Changes between the backups: updates, deletions and new documents, in both collections.
        for i in range(1, 60, 3):
            default.upsert(f"doc-{i}", {"i": i, "updated": True})
        deleted = [f"doc-{i}" for i in range(2, 90, 3)] + [f"order-{i}" for i in range(0, 20)]
        for k in deleted:
            (orders if k.startswith("order") else default).remove(k)
        for i in range(400, 430):
            default.upsert(f"doc-{i}", {"i": i, "late": True})
        backup("backup", "-a", str(archive), "-r", "repo", *cluster_args(src))

        info = json.loads(backup("info", "-a", str(archive), "--json").stdout)
        backups = info["repos"][0]["backups"]
        assert [x["type"] for x in backups] == ["FULL", "INCR"]
        full, incr = backups
        assert full["mutations"] == 500 and full["damaged"] == [] and incr["damaged"] == []
        # Only what changed: 20 updates and 30 new documents, and the 50 deletions.
        assert (incr["mutations"], incr["tombstones"]) == (50, 50), incr

        backup("restore", "-a", str(archive), "-r", "repo", *cluster_args(dst))
        keys_default = [f"bin-{i}" if i % 3 == 0 else f"doc-{i}" for i in range(400)]
        keys_default += [f"doc-{i}" for i in range(400, 430)]
        keys_orders = [f"order-{i}" for i in range(100)]
        d = connect(dst)
        d.wait_until_ready(timedelta(seconds=20))
        db = d.bucket("default")
        before = snapshot(default, keys_default) | snapshot(orders, keys_orders)
        after = snapshot(db.default_collection(), keys_default) | snapshot(db.scope("app").collection("orders"), keys_orders)
        assert before == after
        assert all(before[k] is None for k in deleted)
        assert sum(v is not None for v in after.values()) == 530 - 50
        xattrs = [SD.get("meta.owner", xattr=True), SD.get("_sys.tag", xattr=True)]
        got = db.default_collection().lookup_in("doc-100", xattrs)
        assert (got.content_as[str](0), got.content_as[int](1)) == ("alice", 7)
        # The JSON documents carry their SDK flags: read back with the JSON transcoder they decode.
        assert db.default_collection().get("doc-1").content_as[dict] == {"i": 1, "updated": True}

        # Only the full backup (--end), into another bucket (--map-data), whose scope and collection are created.
        status, body = rest(dst, "POST", "/pools/default/buckets",
                            {"name": "copy", "ramQuota": "128", "bucketType": "couchbase"})
        assert status in (200, 202), body
        copy = d.bucket("copy")
        wait_until(lambda: _upsert_ok(copy.default_collection()), timeout_seconds=30, what="bucket copy to serve")
        backup("restore", "-a", str(archive), "-r", "repo", "--end", full["date"], "--map-data", "default=copy",
               *cluster_args(dst))
        assert copy.default_collection().get("doc-2").content_as[dict] == {"i": 2, "name": "n2"}, "deleted later"
        assert copy.default_collection().get("doc-1").content_as[dict] == {"i": 1, "name": "n1"}, "updated later"
        assert not copy.default_collection().exists("doc-400").exists, "written after the full backup"
        assert copy.scope("app").collection("orders").get("order-0").content_as[dict] == {"order": 0}

        # Merging the two backups keeps the newest version of each document, tombstones included.
        backup("merge", "-a", str(archive), "-r", "repo", "--start", full["date"], "--end", incr["date"])
        merged = json.loads(backup("info", "-a", str(archive), "--json").stdout)["repos"][0]["backups"]
        assert [(x["date"], x["type"]) for x in merged] == [(incr["date"], "FULL")]
        assert (merged[0]["mutations"], merged[0]["tombstones"]) == (480, 51), merged  # 50 deleted + the probe
        # ... into a bucket the restore creates from the saved settings (--auto-create-buckets).
        backup("restore", "-a", str(archive), "-r", "repo", "--map-data", "default=merged", "--auto-create-buckets",
               *cluster_args(dst))
        status, created = rest(dst, "GET", "/pools/default/buckets/merged")
        assert status == 200 and created["bucketType"] == "membase" and created["quota"]["rawRAM"] == 256 << 20
        mb = d.bucket("merged")
        again = snapshot(mb.default_collection(), keys_default) | snapshot(mb.scope("app").collection("orders"), keys_orders)
        assert again == before
        c.close()
        d.close()
    finally:
        src.stop()
        dst.stop()


def _upsert_ok(coll) -> bool:
    try:
        coll.upsert("probe", {"p": 1})
        coll.remove("probe")
        return True
    except Exception:
        return False


def test_damaged_archive_file_is_reported_by_info_and_refused_by_restore(tmp_path):
    src = start(tmp_path / "src")
    dst = start(tmp_path / "dst")
    try:
        c = connect(src)
        c.wait_until_ready(timedelta(seconds=20))
        coll = c.bucket("default").default_collection()
        for i in range(200):
            coll.upsert(f"k{i}", {"i": i})
        archive = tmp_path / "archive"
        backup("config", "-a", str(archive), "-r", "r")
        backup("backup", "-a", str(archive), "-r", "r", *cluster_args(src))
        data = sorted(archive.glob("r/*/default-*/data/*.dat"))
        assert data
        victim = data[len(data) // 2]
        blob = bytearray(victim.read_bytes())
        blob[-1] ^= 0x01
        victim.write_bytes(bytes(blob))

        info = backup("info", "-a", str(archive), "--json", check=False)
        assert info.returncode != 0
        damaged = json.loads(info.stdout)["repos"][0]["backups"][0]["damaged"]
        assert len(damaged) == 1 and victim.name in damaged[0] and "checksum" in damaged[0]

        restore = backup("restore", "-a", str(archive), "-r", "r", *cluster_args(dst), check=False)
        assert restore.returncode != 0 and "damaged" in restore.stderr
        d = connect(dst)
        d.wait_until_ready(timedelta(seconds=20))
        dc = d.bucket("default").default_collection()
        assert not any(dc.exists(f"k{i}").exists for i in range(200)), "nothing restored from a damaged backup"
        c.close()
        d.close()
    finally:
        src.stop()
        dst.stop()


def test_backup_of_a_two_node_cluster_reads_each_node_and_rereads_a_vbucket_whose_history_changed(tmp_path):
    """Each node streams its own active vBuckets; a vBucket whose saved vbuuid the producer does not know (as after
    a failover) is answered with a rollback and read whole again, listed in `full_vbuckets`."""
    from test_persistence import two_node_cluster

    nodes = two_node_cluster(tmp_path / "cluster")
    dst = start(tmp_path / "dst")
    try:
        c = connect(nodes[0])
        c.wait_until_ready(timedelta(seconds=30))
        coll = c.bucket("default").default_collection()
        wait_until(lambda: _upsert_ok(coll), timeout_seconds=30, what="the cluster's bucket to serve")
        for i in range(300):
            coll.upsert(f"k{i}", {"i": i})
        archive = tmp_path / "archive"
        backup("config", "-a", str(archive), "-r", "r")
        backup("backup", "-a", str(archive), "-r", "r", *cluster_args(nodes[0]))
        first = sorted((archive / "r").glob("*/backup.json"))[0]
        meta = json.loads(first.read_text())
        bucket = meta["buckets"][0]
        assert bucket["mutations"] == 300
        config = json.loads((first.parent / bucket["dir"] / "bucket-config.json").read_text())
        actives = {row[0] for row in config["vBucketServerMap"]["vBucketMap"]}
        assert len(config["vBucketServerMap"]["serverList"]) == 2 and actives == {0, 1}, "both nodes hold actives"
        # Pretend vBuckets 0-9 were on another history branch when the first backup read them: those holding data
        # are answered with a rollback (an empty one resumes from 0, where any history is valid).
        holding = [vb for vb in range(10) if bucket["vbuckets"][str(vb)]["seqno"] > 0]
        assert holding
        for vb in range(10):
            bucket["vbuckets"][str(vb)]["uuid"] ^= 0x5A5A
        first.write_text(json.dumps(meta))
        coll.upsert("k0", {"i": 0, "again": True})
        backup("backup", "-a", str(archive), "-r", "r", *cluster_args(nodes[0]))
        second = json.loads(sorted((archive / "r").glob("*/backup.json"))[1].read_text())["buckets"][0]
        assert second["full_vbuckets"] == holding
        reread = sum(1 for i in range(300) if _vb(f"k{i}") < 10)
        changed = 0 if _vb("k0") < 10 else 1
        assert second["mutations"] == reread + changed, second

        backup("restore", "-a", str(archive), "-r", "r", *cluster_args(dst))
        d = connect(dst)
        d.wait_until_ready(timedelta(seconds=20))
        dc = d.bucket("default").default_collection()
        keys = [f"k{i}" for i in range(300)]
        assert snapshot(dc, keys) == snapshot(coll, keys)
        # Restoring again: every version ties with what the node holds, so conflict resolution skips them all;
        # --force-updates writes them all anyway.
        again = backup("restore", "-a", str(archive), "-r", "r", *cluster_args(dst)).stdout
        assert ", 0 documents written," in again, again
        forced = backup("restore", "-a", str(archive), "-r", "r", "--force-updates", *cluster_args(dst)).stdout
        assert ", 0 skipped," in forced, forced
        assert snapshot(dc, keys) == snapshot(coll, keys)
        c.close()
        d.close()
    finally:
        settee_server.stop_all(nodes)
        dst.stop()


def _vb(key: str) -> int:
    """The vBucket of a key, as the SDKs compute it."""
    import zlib

    return ((zlib.crc32(key.encode()) >> 16) & 0x7FFF) % 1024


def _query(node: SetteeServer, statement: str) -> dict:
    from test_query_cluster import query

    return query(node, statement)


def _index_states(node: SetteeServer) -> dict:
    """(bucket, scope, collection, index) -> status, from `GET /indexStatus`."""
    status, body = rest(node, "GET", "/indexStatus")
    assert status == 200, body
    return {(i["bucket"], i["scope"], i["collection"], i["index"]): i["status"] for i in body["indexes"]}


def _index_replicas(node: SetteeServer) -> dict:
    """(bucket, scope, collection, index) -> numReplica, from `GET /indexStatus`."""
    status, body = rest(node, "GET", "/indexStatus")
    assert status == 200, body
    return {(i["bucket"], i["scope"], i["collection"], i["index"]): i["numReplica"] for i in body["indexes"]}


def test_index_definitions_are_backed_up_and_restored_deferred_or_built(tmp_path):
    """A built index and a deferred one are saved with the bucket; a restore into a fresh node creates both, the
    deferred one still deferred and with its replica count, the other built and answering a query; a second
    restore reports them existing;
    a merge carries them; `--disable-gsi-indexes` leaves them out of a backup and out of a restore; a damaged
    `indexes.json` is reported by `info` and refused by `restore`."""
    src = start(tmp_path / "src")
    dst = start(tmp_path / "dst")
    try:
        status, _ = rest(src, "POST", "/pools/default/buckets/default/scopes", {"name": "app"})
        assert status == 200
        status, _ = rest(src, "POST", "/pools/default/buckets/default/scopes/app/collections", {"name": "orders"})
        assert status == 200
        c = connect(src)
        c.wait_until_ready(timedelta(seconds=20))
        b = c.bucket("default")
        orders = b.scope("app").collection("orders")
        wait_until(lambda: _upsert_ok(orders), timeout_seconds=20, what="the new collection to accept writes")
        for i in range(50):
            b.default_collection().upsert(f"u{i}", {"name": f"n{i}", "age": i})
            orders.upsert(f"o{i}", {"total": i})
        for statement in ["CREATE INDEX ix_name ON `default`(name) WHERE age >= 10",
                          'CREATE INDEX ix_total ON `default`.app.orders(total) '
                          'WITH {"defer_build": true, "num_replica": 1}']:
            got = _query(src, statement)
            assert got["status"] == "success", got
        built, deferred = ("default", "_default", "_default", "ix_name"), ("default", "app", "orders", "ix_total")
        wait_until(lambda: _index_states(src).get(built) == "Ready", timeout_seconds=30, what="ix_name to be built")
        assert _index_states(src)[deferred] == "Created"

        archive = tmp_path / "archive"
        backup("config", "-a", str(archive), "-r", "repo")
        backup("backup", "-a", str(archive), "-r", "repo", *cluster_args(src))
        backup("backup", "-a", str(archive), "-r", "repo", *cluster_args(src))
        info = json.loads(backup("info", "-a", str(archive), "--json").stdout)["repos"][0]["backups"]
        assert [x["buckets"][0]["indexes"] for x in info] == [2, 2]
        backup("merge", "-a", str(archive), "-r", "repo", "--start", info[0]["date"], "--end", info[1]["date"])
        merged = json.loads(backup("info", "-a", str(archive), "--json").stdout)["repos"][0]["backups"]
        assert len(merged) == 1 and merged[0]["buckets"][0]["indexes"] == 2, merged

        out = backup("restore", "-a", str(archive), "-r", "repo", *cluster_args(dst)).stdout
        assert "2 indexes created, 0 existed" in out, out
        states = _index_states(dst)
        assert states[deferred] == "Created", states
        assert _index_replicas(dst) == {built: 0, deferred: 1}, "the replica count is restored with the index"
        wait_until(lambda: _index_states(dst).get(built) == "Ready", timeout_seconds=30, what="restored ix_name built")
        plan = _query(dst, "EXPLAIN SELECT name FROM `default` WHERE name = 'n20' AND age >= 10")
        assert "ix_name" in json.dumps(plan), plan
        got = _query(dst, "SELECT name FROM `default` WHERE name = 'n20' AND age >= 10")
        assert got["status"] == "success" and got["results"] == [{"name": "n20"}], got
        again = backup("restore", "-a", str(archive), "-r", "repo", *cluster_args(dst)).stdout
        assert "0 indexes created, 2 existed" in again, again

        # --disable-gsi-indexes on restore: a dropped index stays dropped.
        assert _query(dst, "DROP INDEX ix_name ON `default`")["status"] == "success"
        skipped = backup("restore", "-a", str(archive), "-r", "repo", "--disable-gsi-indexes", *cluster_args(dst))
        assert "0 indexes created, 0 existed" in skipped.stdout, skipped.stdout
        assert built not in _index_states(dst)
        # ... and on backup: no indexes.json, `indexes` null in info.
        backup("config", "-a", str(archive), "-r", "noix")
        backup("backup", "-a", str(archive), "-r", "noix", "--disable-gsi-indexes", *cluster_args(src))
        noix = json.loads(backup("info", "-a", str(archive), "-r", "noix", "--json").stdout)["repos"][0]
        assert noix["backups"][0]["buckets"][0]["indexes"] is None
        assert not list(archive.glob("noix/*/default-*/indexes.json"))

        # A damaged indexes.json: reported by info, refused by restore (nothing created).
        victim = next(archive.glob("repo/*/default-*/indexes.json"))
        victim.write_text(victim.read_text().replace("ix_name", "ix_nbme"))
        info = backup("info", "-a", str(archive), "-r", "repo", "--json", check=False)
        assert info.returncode != 0
        damaged = json.loads(info.stdout)["repos"][0]["backups"][0]["damaged"]
        assert len(damaged) == 1 and "indexes.json" in damaged[0] and "checksum" in damaged[0], damaged
        restore = backup("restore", "-a", str(archive), "-r", "repo", *cluster_args(dst), check=False)
        assert restore.returncode != 0 and "damaged" in restore.stderr
        assert built not in _index_states(dst)
        c.close()
    finally:
        src.stop()
        dst.stop()


def test_users_and_groups_are_backed_up_with_enable_users_and_log_in_after_restore(tmp_path):
    """Only `--enable-users` saves the cluster's users and groups (password hashes, never passwords); a restore with
    `--enable-users` creates them on a fresh node, where the user logs in with its old password and holds its
    roles and group; an existing user is reported and left alone unless `--overwrite-users`; a damaged users file
    is reported by `info` and refused by `restore`."""
    src = start(tmp_path / "src")
    dst = start(tmp_path / "dst")
    try:
        status, body = rest(src, "PUT", "/settings/rbac/groups/auditors", {"roles": "ro_admin", "description": "d"})
        assert status == 200, body
        status, body = rest(src, "PUT", "/settings/rbac/users/local/carol",
                            {"name": "Carol", "password": "carol-pass-1", "roles": "data_reader[default]",
                             "groups": "auditors"})
        assert status == 200, body
        archive = tmp_path / "archive"
        backup("config", "-a", str(archive), "-r", "repo")
        backup("backup", "-a", str(archive), "-r", "repo", *cluster_args(src))
        backup("backup", "-a", str(archive), "-r", "repo", "--enable-users", *cluster_args(src))
        listed = json.loads(backup("info", "-a", str(archive), "--json").stdout)["repos"][0]["backups"]
        assert [(b["users"], b["groups"]) for b in listed] == [(None, None), (1, 1)], listed
        saved = next(archive.glob("repo/*/users.json")).read_text()
        assert "carol-pass-1" not in saved and "carol" in saved

        out = backup("restore", "-a", str(archive), "-r", "repo", "--enable-users", *cluster_args(dst)).stdout
        assert "Users: 1 created, 0 replaced, 0 existing" in out, out
        status, carol = rest(dst, "GET", "/settings/rbac/users/local/carol")
        assert status == 200 and carol["name"] == "Carol" and carol["groups"] == ["auditors"], carol
        assert {r["role"] for r in carol["roles"]} == {"data_reader", "ro_admin"}, carol
        d = connect(dst, username="carol", password="carol-pass-1")
        d.wait_until_ready(timedelta(seconds=20))
        d.bucket("default").default_collection().exists("anything")
        d.close()

        # An existing user is left alone (its changed password keeps working) unless --overwrite-users.
        status, _ = rest(dst, "PUT", "/settings/rbac/users/local/carol",
                         {"name": "Carol", "password": "changed-pass", "roles": "data_reader[default]"})
        assert status == 200
        again = backup("restore", "-a", str(archive), "-r", "repo", "--enable-users", *cluster_args(dst)).stdout
        assert "0 created, 0 replaced, 1 existing left as they are (carol)" in again, again
        assert rest(dst, "GET", "/settings/rbac/users/local/carol")[1]["groups"] == []
        forced = backup("restore", "-a", str(archive), "-r", "repo", "--enable-users", "--overwrite-users",
                        *cluster_args(dst)).stdout
        assert "0 created, 1 replaced" in forced, forced
        assert rest(dst, "GET", "/settings/rbac/users/local/carol")[1]["groups"] == ["auditors"]

        victim = next(archive.glob("repo/*/users.json"))
        victim.write_text(victim.read_text().replace("Carol", "Carl "))
        info = backup("info", "-a", str(archive), "--json", check=False)
        assert info.returncode != 0
        damaged = json.loads(info.stdout)["repos"][0]["backups"][1]["damaged"]
        assert damaged == ["users.json: checksum mismatch"], damaged
        restore = backup("restore", "-a", str(archive), "-r", "repo", "--enable-users", *cluster_args(dst), check=False)
        assert restore.returncode != 0 and "damaged" in restore.stderr
    finally:
        src.stop()
        dst.stop()
