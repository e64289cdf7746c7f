"""The availability failures of issue 21 (item 4) with real processes: one run of the recovery schedule (see
`chaos.py`; `scripts/chaos.sh N` runs it N times), and the rebalance that never ended, made deterministic."""

from __future__ import annotations

import os
import struct
from datetime import timedelta
from pathlib import Path

import chaos
import kv_raw
from cluster_load import wait_for
from sdk_connect import connect
from settee_server import SetteeServer
from test_cluster import rest, vbucket_of


def test_crash_failover_recovery_and_swap_keep_every_node_answering(tmp_path: Path):
    """SIGKILL and auto-failover, restart and delta recovery, graceful failover and full recovery, a swap
    rebalance, all under `majority` writes and CAS updates: every rebalance ends, every node keeps answering (no
    bucket stuck in TMPFAIL, KV pings and reads succeed) and no acknowledged write is lost."""
    seed = int(os.environ.get("SETTEE_CHAOS_SEED", "0")) or int.from_bytes(os.urandom(4), "big")
    print(f"\nchaos seed {seed} (SETTEE_CHAOS_SEED={seed} repeats the schedule's choices)")
    outcome = chaos.Chaos(tmp_path, seed).run()
    assert outcome.problems == [], f"seed {seed}: {outcome.problems}; logs in {tmp_path}"


def durable_set_raw(sock, key: bytes, value: bytes, vb: int, timeout_ms: int, opaque: int):
    """Sends a SET with a `majority` durability frame (alt request, frame id 1) without waiting for its reply."""
    framing = bytes([0x13, 0x01]) + struct.pack(">H", timeout_ms)
    extras = struct.pack(">II", 0, 0)
    body = framing + extras + key + value
    header = struct.pack(">BBBBBBHIIQ", 0x08, 0x01, len(framing), len(key), len(extras), 0, vb, len(body), opaque, 0)
    sock.sendall(header + body)


def test_a_rebalance_moving_vbuckets_whose_last_change_is_an_abort_ends(tmp_path: Path):
    """The swap rebalance that stopped at 682 of 683 moves: vBuckets whose last change is an aborted durable write
    (their replica was stopped, so nobody acknowledged it). A copy built from scratch during a rebalance never
    receives that abort, only a SEQNO_ADVANCED to its seqno, which replicas used to ignore: the move then waited
    for a seqno the copy could not reach. The rebalance that adds a third node must end, and every key keeps its
    value from before the aborted write."""
    nodes = chaos.cluster_nodes([f"127.0.0.{31 + i}" for i in range(3)], tmp_path)
    try:
        for n in nodes[:2]:
            n.start()
        orchestrator = chaos.Orchestrator(nodes, chaos.Outcome())
        orchestrator.rebalance("formation", nodes[:2], [])
        status, body = rest(nodes[0], "POST", "/pools/default/buckets",
                            {"name": chaos.BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        server_map = wait_for(lambda: rest(nodes[0], "GET", f"/pools/default/b/{chaos.BUCKET}")[1]
                              .get("vBucketServerMap"), "the bucket's map")
        first = f"{nodes[0].host}:{nodes[0].kv_port}"
        on_first = {vb for vb, chain in enumerate(server_map["vBucketMap"])
                    if server_map["serverList"][chain[0]] == first}
        keys = [k for k in (f"abort-{i}".encode() for i in range(2000)) if vbucket_of(k) in on_first][:64]
        wait_for(lambda: kv_raw_ready(nodes[0]), "the bucket to serve")
        with kv_raw.session(nodes[0], chaos.BUCKET) as sock:
            for key in keys:
                assert kv_raw.call(sock, 0x01, key, b'{"v":1}', vb=vbucket_of(key), extras=bytes(8))[0] == 0
            # Every thread stopped before the first durable write leaves: a replica thread still running would
            # acknowledge it, and the write would rightly succeed.
            nodes[1].pause()
            try:
                for opaque, key in enumerate(keys):
                    durable_set_raw(sock, key, b'{"v":2}', vbucket_of(key), 300, opaque)
                statuses = [kv_raw.receive(sock)[0] for _ in keys]
            finally:
                nodes[1].resume()
        assert set(statuses) == {0xA3}, "every durable write is aborted (SYNC_WRITE_AMBIGUOUS)"
        nodes[2].start()
        orchestrator.rebalance("rebalance in", nodes, [])
        assert orchestrator.outcome.problems == []
        cluster = connect(nodes[0])
        try:
            cluster.wait_until_ready(timedelta(seconds=30))
            collection = cluster.bucket(chaos.BUCKET).default_collection()
            assert all(collection.get(k.decode()).content_as[dict] == {"v": 1} for k in keys)
        finally:
            cluster.close()
    finally:
        for n in nodes:
            n.resume()
            n.stop()


def kv_raw_ready(node: SetteeServer) -> bool:
    try:
        with kv_raw.session(node, chaos.BUCKET) as sock:
            return kv_raw.call(sock, 0x0A)[0] == 0
    except (OSError, AssertionError, ConnectionError):
        return False
