"""Persistent (couchbase) buckets through the official SDK: durable writes survive SIGKILL, data survives a
restart (warmup), a bucket holds far more data than its RAM quota, and its eviction watermarks can be moved."""

from __future__ import annotations

import hashlib
import random
import signal
import struct
import threading
import time
import zlib
from datetime import timedelta
from pathlib import Path

import pytest

from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertOptions, GetOptions
from couchbase.transcoder import RawBinaryTranscoder

import kv_raw
from conditions import wait_until
from sdk_connect import connect
import settee_server
from settee_server import SetteeServer, new_server
from test_cluster import rest

CRASH_ROUNDS = 4
PERSIST = UpsertOptions(durability=ServerDurability(DurabilityLevel.PERSIST_TO_MAJORITY),
                        timeout=timedelta(seconds=10))


def start_on(data_root: Path, **kwargs) -> SetteeServer:
    """A persistent-bucket server on fresh ports over the data directory under `data_root`."""
    server = new_server(base_dir=data_root, bucket_type="couchbase", **kwargs)
    return server.start()


def collection_of(cluster):
    bucket = cluster.bucket("default")
    return bucket.default_collection()


def test_persist_levels_are_accepted_on_a_persistent_bucket(tmp_path):
    """persistToMajority and majorityAndPersistActive writes succeed on a couchbase bucket and the value is there."""
    root = tmp_path
    server = start_on(root)
    try:
        cluster = connect(server)
        coll = collection_of(cluster)
        for level in (DurabilityLevel.PERSIST_TO_MAJORITY, DurabilityLevel.MAJORITY_AND_PERSIST_TO_ACTIVE):
            key = f"lvl-{level.name}"
            coll.upsert(key, {"level": level.name}, UpsertOptions(durability=ServerDurability(level)))
            assert coll.get(key).content_as[dict] == {"level": level.name}
        cluster.close()
    finally:
        server.stop()


def test_acknowledged_persisted_writes_survive_sigkill(tmp_path):
    """Under a persistToMajority write load the server is killed with SIGKILL at a random moment, several times;
    after every restart each write the SDK acknowledged is readable with its value (no acknowledged write lost,
    no wrong value)."""
    root = tmp_path
    acked: dict[str, dict] = {}
    rng = random.Random(7)
    for round_no in range(CRASH_ROUNDS):
        server = start_on(root)
        cluster = connect(server)
        coll = collection_of(cluster)
        # Everything acknowledged before the previous kill must be here.
        wait_until(lambda: coll.get(next(iter(acked))) if acked else True, 30, "warmup to finish")
        for key, value in acked.items():
            assert coll.get(key).content_as[dict] == value, f"round {round_no}: {key} lost or wrong"
        stop = threading.Event()

        def writer(worker: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"r{round_no}-w{worker}-{i}"
                value = {"round": round_no, "worker": worker, "i": i}
                try:
                    coll.upsert(key, value, PERSIST)
                    acked[key] = value
                except Exception:  # noqa: BLE001 - writes in flight at the kill are allowed to fail
                    return
                i += 1

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.0))
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        cluster.close()
        server.stop()
    assert len(acked) > 50, "the load must have acknowledged writes for the test to mean anything"
    server = start_on(root)
    try:
        cluster = connect(server)
        coll = collection_of(cluster)
        for key, value in acked.items():
            assert coll.get(key).content_as[dict] == value, f"final check: {key} lost or wrong"
        cluster.close()
    finally:
        server.stop()


def test_data_survives_a_clean_restart(tmp_path):
    """Documents written without durability are flushed at shutdown (SIGTERM) and loaded again by warmup."""
    root = tmp_path
    server = start_on(root)
    docs = {f"warm-{i}": {"i": i, "pad": "x" * 100} for i in range(3000)}
    try:
        cluster = connect(server)
        coll = collection_of(cluster)
        coll.upsert_multi(docs)
        cluster.close()
    finally:
        assert server.stop() == 0
    server = start_on(root)
    try:
        cluster = connect(server)
        coll = collection_of(cluster)
        got = coll.get_multi(list(docs))
        assert got.all_ok, got.exceptions
        for key, result in got.results.items():
            assert result.content_as[dict] == docs[key]
        cluster.close()
    finally:
        server.stop()


def test_bucket_holds_ten_times_its_quota(tmp_path):
    """A 16 MiB bucket takes 160 MiB of 100 KiB values (the item pager ejects values to disk) and every value reads
    back intact (background fetches)."""
    root = tmp_path
    server = start_on(root, ram_mb=16)
    try:
        cluster = connect(server)
        bucket = cluster.bucket("default")
        coll = bucket.default_collection()
        rng = random.Random(11)
        digests = {}
        batch = {}
        for i in range(1600):
            value = rng.randbytes(100 * 1024)
            key = f"big-{i}"
            digests[key] = hashlib.sha256(value).hexdigest()
            batch[key] = value
            if len(batch) == 50:
                result = coll.upsert_multi(batch, transcoder=RawBinaryTranscoder())
                assert result.all_ok, result.exceptions
                batch = {}
        for key, digest in digests.items():
            value = coll.get(key, GetOptions(transcoder=RawBinaryTranscoder())).content_as[bytes]
            assert hashlib.sha256(value).hexdigest() == digest, key
        cluster.close()
    finally:
        server.stop()


SET_PARAM = 0x82
FLUSH_PARAM, CONFIG_PARAM = struct.pack(">I", 1), struct.pack(">I", 6)
SUCCESS, KEY_ENOENT, EINVAL, EACCESS = 0x00, 0x01, 0x04, 0x24


def test_watermarks_move_with_set_param_and_the_pager_follows(tmp_path):
    """`cbepctl set flush_param mem_high_wat_percent 0.3` (SET_PARAM) moves the item pager's watermarks, STAT
    memory reports them, the pager ejects values down to the new low watermark, and every value still reads back.
    Bad values, byte-valued watermarks, unknown names and users without the bucket's management right are refused
    with the status Couchbase gives."""
    server = start_on(tmp_path, ram_mb=64)
    quota = 64 * 1024 * 1024
    try:
        status, body = rest(server, "PUT", "/settings/rbac/users/local/reader",
                            {"password": "reader-pw", "roles": "data_reader[default]"})
        assert status == 200, body
        cluster = connect(server)
        coll = collection_of(cluster)
        values = {f"wm-{i}": random.Random(i).randbytes(20 * 1024) for i in range(1000)}  # ~20 MiB, ~31 %
        for start in range(0, len(values), 100):
            chunk = dict(list(values.items())[start:start + 100])
            assert coll.upsert_multi(chunk, transcoder=RawBinaryTranscoder()).all_ok
        with kv_raw.session(server, "default") as sock:
            memory = kv_raw.stats(sock, b"memory")
            assert int(memory["ep_mem_high_wat"]) == quota * 85 // 100
            assert float(memory["ep_mem_low_wat_percent"]) == 0.75
            ejected_before = int(kv_raw.stats(sock)["ep_num_value_ejects"])

            refused = [
                (FLUSH_PARAM, b"mem_high_wat_percent", b"abc", EINVAL),
                (FLUSH_PARAM, b"mem_high_wat_percent", b"1.5", EINVAL),
                (FLUSH_PARAM, b"mem_high_wat_percent", b"0.5", EINVAL),  # below the low watermark (0.75)
                (FLUSH_PARAM, b"mem_high_wat", b"1000000", EINVAL),
                (FLUSH_PARAM, b"no_such_param", b"1", KEY_ENOENT),
                (struct.pack(">I", 2), b"mem_high_wat_percent", b"0.5", KEY_ENOENT),
            ]
            for extras, name, value, expected in refused:
                status, _, body = kv_raw.call(sock, SET_PARAM, name, value, extras=extras)
                assert status == expected, (name, value, status, body)
            assert float(kv_raw.stats(sock, b"memory")["ep_mem_high_wat_percent"]) == 0.85, "a refusal changes nothing"

            assert kv_raw.call(sock, SET_PARAM, b"mem_low_wat_percent", b"0.1", extras=FLUSH_PARAM)[0] == SUCCESS
            assert kv_raw.call(sock, SET_PARAM, b"mem_high_wat_percent", b"0.2", extras=CONFIG_PARAM)[0] == SUCCESS
            memory = kv_raw.stats(sock, b"memory")
            assert (int(memory["ep_mem_low_wat"]), int(memory["ep_mem_high_wat"])) == (quota // 10, quota // 5)

        with kv_raw.session(server, "default", "reader", "reader-pw") as sock:
            status, _, _ = kv_raw.call(sock, SET_PARAM, b"mem_high_wat_percent", b"0.9", extras=FLUSH_PARAM)
            assert status == EACCESS

        def paged():
            with kv_raw.session(server, "default") as sock:
                return int(kv_raw.stats(sock)["ep_num_value_ejects"]) > ejected_before and \
                    int(kv_raw.stats(sock, b"memory")["mem_used"]) <= quota // 5
        wait_until(paged, 30, "the item pager to bring memory under the new high watermark")
        for key, value in values.items():
            assert coll.get(key, GetOptions(transcoder=RawBinaryTranscoder())).content_as[bytes] == value, key
        cluster.close()
    finally:
        server.stop()


def two_node_cluster(root: Path) -> list[SetteeServer]:
    """Two nodes (127.0.0.21 and .22) in one cluster with a persistent bucket `default` of one replica: each node
    holds half the actives and the replicas of the other half."""
    ports = settee_server.free_ports(6)
    nodes = [SetteeServer(kv_port=ports[3 * i], mgmt_port=ports[3 * i + 1], query_port=ports[3 * i + 2],
                          data_dir=root / f"n{i}", log_path=root / f"n{i}.log", bucket="", ip=f"127.0.0.{21 + i}")
             for i in range(2)]
    nodes[1].join = nodes[0].mgmt_addr
    for n in nodes:
        n.start()
    known = ",".join(f"ns_1@{n.host}" for n in nodes)
    status, body = rest(nodes[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
    assert status == 200, body
    wait_until(lambda: rest(nodes[0], "GET", "/pools/default/tasks")[1][0]["status"] != "running", 60,
               "the rebalance that activates the second node")
    status, body = rest(nodes[0], "POST", "/pools/default/buckets",
                        {"name": "default", "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
    assert status == 202, body
    return nodes


def replica_items_received(node: SetteeServer) -> int:
    with kv_raw.session(node, "default") as sock:
        return int(kv_raw.stats(sock)["ep_dcp_replica_items_received"])


def all_persisted(node: SetteeServer) -> bool:
    with kv_raw.session(node, "default") as sock:
        seqnos = kv_raw.stats(sock, b"vbucket-seqno")
    return all(seqnos[f"vb_{v}:last_persisted_seqno"] == seqnos[f"vb_{v}:high_seqno"] for v in range(1024))


def test_a_restarted_replica_resumes_its_streams(tmp_path):
    """A replica node killed with SIGKILL and restarted resumes each replication stream where its disk stopped: it
    receives only what it lacks, not every document again. (It used to start a history branch of its own at
    warmup, which its active did not know, so every stream rolled back to zero and the whole vBucket was copied
    again; and its prepares were lost.) Majority writes after the restart succeed, so the streams are back."""
    nodes = two_node_cluster(tmp_path)
    try:
        cluster = connect(nodes[0])
        coll = collection_of(cluster)
        majority = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY), timeout=timedelta(seconds=10))
        wait_until(lambda: coll.upsert("probe", {"ok": True}, majority), 60, "the bucket to take majority writes")
        keys = 2000
        for i in range(keys):
            coll.upsert(f"doc-{i}", {"i": i}, majority)
        victim = nodes[1]
        received_before = replica_items_received(victim)
        assert received_before >= keys // 3, "the victim holds replicas of about half the documents"
        wait_until(lambda: all_persisted(victim), 30, "the victim's flusher to catch up")
        victim.kill()
        victim.start()
        wait_until(lambda: coll.upsert("after-restart", {"ok": True}, majority), 60,
                   "majority writes to succeed again")
        for i in range(20):
            coll.upsert(f"new-{i}", {"i": i}, majority)
        received_after = replica_items_received(victim)
        print(f"\nreplica items received: {received_before} before the restart, {received_after} after it")
        assert received_after < 100, f"the restarted replica streamed {received_after} items again"
        for i in range(0, keys, 97):
            assert coll.get_any_replica(f"doc-{i}").content_as[dict] == {"i": i}
        cluster.close()
    finally:
        for n in nodes:
            n.stop()


DCP_OPEN, DCP_STREAM_REQ, DCP_STREAM_END, DCP_SNAPSHOT, DCP_MUTATION = 0x50, 0x53, 0x55, 0x56, 0x57


def vbucket_of(key: str) -> int:
    return ((zlib.crc32(key.encode()) >> 16) & 0x7FFF) % 1024


def dcp_frame(sock) -> tuple[int, int, bytes, bytes, bytes]:
    """The next frame the producer sends: (opcode, status, extras, key, value)."""
    head = kv_raw._read(sock, 24)
    opcode, key_len, extras_len = head[1], struct.unpack(">H", head[2:4])[0], head[4]
    status = struct.unpack(">H", head[6:8])[0] if head[0] == 0x81 else 0
    body = kv_raw._read(sock, struct.unpack(">I", head[8:12])[0])
    return opcode, status, body[:extras_len], body[extras_len:extras_len + key_len], body[extras_len + key_len:]


def stream_once(node: SetteeServer, vb: int, start: int, end: int, uuid: int) -> tuple[dict[str, int], int, bool]:
    """One DCP stream of `vb` from `start` (a resume from the last seqno received, as a consumer does): the keys
    received with their seqnos, the last seqno received, and whether the producer ended the stream early."""
    with kv_raw.session(node, "default") as sock:
        sock.settimeout(30)
        status, _, _ = kv_raw.call(sock, DCP_OPEN, b"disk-read-fault", extras=struct.pack(">II", 0, 1))
        assert status == 0, hex(status)
        extras = struct.pack(">IIQQQQQ", 0, 0, start, end, uuid, start, start)
        status, _, _ = kv_raw.call(sock, DCP_STREAM_REQ, vb=vb, extras=extras)
        assert status == 0, f"stream request answered {status:#x}"
        received, last = {}, start
        while last < end:
            opcode, _, extras, key, _ = dcp_frame(sock)
            if opcode == DCP_MUTATION:
                last = struct.unpack(">Q", extras[:8])[0]
                received[key.decode()] = last
            elif opcode == DCP_STREAM_END:
                return received, last, True
        return received, last, False


def test_a_dcp_stream_ends_when_a_disk_read_fails_and_a_resume_misses_nothing(tmp_path):
    """Regression: a DCP stream that could not read an ejected value from disk (an I/O error) skipped that document
    and went on, so the replica or backup it fed silently lacked it. The stream now ends ("backfill failed"); the
    consumer asks again from the last seqno it has and gets every document, the one that failed included."""
    server = start_on(tmp_path, ram_mb=16, extra=["--testing-fault-injection"])
    try:
        keys = [k for k in (f"cold-{i}" for i in range(200_000)) if vbucket_of(k) == 7][:250]
        cluster = connect(server)
        coll = cluster.bucket("default").default_collection()
        value = bytes(100 * 1024)
        for i in range(0, len(keys), 25):
            result = coll.upsert_multi({k: value for k in keys[i:i + 25]}, transcoder=RawBinaryTranscoder())
            assert result.all_ok, result.exceptions
        cluster.close()
        wait_until(lambda: all_persisted(server), 60, "the flusher to write every document")
        with kv_raw.session(server, "default") as sock:
            seqnos = kv_raw.stats(sock, b"vbucket-seqno")
            wait_until(lambda: int(kv_raw.stats(sock)["ep_num_value_ejects"]) > 50, 60, "values to be ejected")
        high, uuid = int(seqnos["vb_7:high_seqno"]), int(seqnos["vb_7:uuid"])
        assert high == len(keys)
        status, body = rest(server, "POST", "/settee/testing/faults", {"bucket": "default", "failNextRead": "true"})
        assert status == 200, body
        received, last, ended = stream_once(server, 7, 0, high, uuid)
        assert ended and last < high, f"the stream went on past the failed read ({len(received)} of {len(keys)})"
        rest_of, last, ended = stream_once(server, 7, last, high, uuid)
        assert not ended and last == high
        received.update(rest_of)
        missing = sorted(set(keys) - set(received))
        assert missing == [], f"{len(missing)} documents never streamed: {missing[:5]}"
    finally:
        server.stop()
