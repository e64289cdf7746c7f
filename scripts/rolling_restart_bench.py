#!/usr/bin/env python3
"""The rolling-restart figures of BENCHMARKS.md (issue 22): a three-node cluster with a couchbase bucket with one
replica, a steady load from the official Python SDK (`--threads` threads, each paced to `--rate` operations per
second over its own keys: an upsert with durability `majority`, then a read of another of its keys) from
`--before` seconds before `settee cluster rolling-restart` until it ends. Reports the command's total time, the
client's p50/p99/max before and during the restart (reads and writes apart), the operations and errors counted,
and the acknowledged writes that do not read back afterwards (each key's last acknowledged value must still be
there).

Usage: SETTEE_BIN=target/release/settee scripts/rolling_restart_bench.py [--threads 4] [--rate 100] [--keys 1000]

An upgrade (`scripts/upgrade-test.sh`): SETTEE_BIN is the old build the cluster starts on, `--binary NEW` the
build `rolling-restart --binary` moves it to (same directory as SETTEE_BIN; its `settee cluster` runs the
restart), and `--check` exits 1 unless the restart succeeded with no acknowledged write lost and every node then
reads the same metadata version.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat" / "python"))

import settee_server  # noqa: E402
from cluster_fixture import formed_cluster  # noqa: E402
from sdk_connect import connect  # noqa: E402
from settee_server import PASSWORD, USERNAME  # noqa: E402
from couchbase.durability import DurabilityLevel, ServerDurability  # noqa: E402
from couchbase.exceptions import CouchbaseException  # noqa: E402
from couchbase.options import GetOptions, UpsertOptions  # noqa: E402

BUCKET = "rolling"
TIMEOUT = timedelta(seconds=10)


class Load:
    """`threads` paced clients; every operation's (start time, kind, latency s) is kept, errors counted by name."""

    def __init__(self, coll, threads: int, rate: float, keys: int):
        self.coll, self.rate, self.keys_per_thread = coll, rate, max(1, keys // threads)
        self.samples: list[list[tuple[float, str, float]]] = [[] for _ in range(threads)]
        self.acked: list[dict[str, int]] = [{} for _ in range(threads)]
        self.errors = Counter()
        self.first_errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(threads)]

    def run(self, t: int):
        write = UpsertOptions(timeout=TIMEOUT, durability=ServerDurability(DurabilityLevel.MAJORITY))
        read = GetOptions(timeout=TIMEOUT)
        samples, acked, n = self.samples[t], self.acked[t], self.keys_per_thread
        period, i, next_at = 1.0 / self.rate, 0, time.monotonic()
        while not self.stop.is_set():
            key = f"t{t}-{i % n}"
            began = time.monotonic()
            try:
                self.coll.upsert(key, {"i": i, "pad": "x" * 200}, write)
                acked[key] = i
                samples.append((began, "write", time.monotonic() - began))
            except CouchbaseException as e:
                self.error(e)
            other = f"t{t}-{(i * 7 + 3) % n}"
            if other in acked:
                began = time.monotonic()
                try:
                    if self.coll.get(other, read).content_as[dict]["i"] < acked[other]:
                        self.errors["StaleRead"] += 1
                    samples.append((began, "read", time.monotonic() - began))
                except CouchbaseException as e:
                    self.error(e)
            i += 1
            next_at += period
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_at = time.monotonic()  # behind: no burst to catch up

    def error(self, e: CouchbaseException):
        self.errors[type(e).__name__] += 1
        if len(self.first_errors) < 10:
            self.first_errors.append(f"{time.monotonic():.1f} {type(e).__name__}: {str(e)[:300]}")

    def between(self, start: float, end: float, kind: str) -> list[float]:
        return sorted(lat for s in self.samples for (at, k, lat) in s if k == kind and start <= at < end)


def pct(values: list[float], p: float) -> str:
    if not values:
        return "-"
    return f"{values[min(len(values) - 1, int(len(values) * p))] * 1000:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rate", type=float, default=100.0, help="iterations (a write and a read) per second per thread")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--before", type=float, default=20.0, help="seconds of load before the restart starts")
    ap.add_argument("--binary", help="upgrade: the binary every node runs after the restart (rolling-restart --binary)")
    ap.add_argument("--check", action="store_true", help="exit 1 on a failed restart, a lost write, mixed versions")
    a = ap.parse_args()
    binary = settee_server.settee_binary()
    base = Path(tempfile.mkdtemp(prefix="settee-rolling-bench-"))
    print(f"binary {binary}; work dir {base}")
    with formed_cluster(base, 3, BUCKET, bucket_type="couchbase", replicas=1) as nodes:
        cluster = connect(nodes[0])
        cluster.wait_until_ready(timedelta(seconds=30))
        coll = cluster.bucket(BUCKET).default_collection()
        load = Load(coll, a.threads, a.rate, a.keys)
        for t in load.threads:
            t.start()
        time.sleep(a.before)
        began = time.monotonic()
        cli = a.binary or str(binary)
        upgrade = ["--binary", a.binary] if a.binary else []
        done = subprocess.run([cli, "cluster", "rolling-restart", "-c", nodes[0].mgmt_addr,
                               "-u", USERNAME, "-p", PASSWORD] + upgrade, capture_output=True, text=True, timeout=1800)
        ended = time.monotonic()
        load.stop.set()
        for t in load.threads:
            t.join(timeout=30)
        print(done.stdout, done.stderr)
        lost = 0
        for acked in load.acked:
            for key, i in acked.items():
                if coll.get(key, GetOptions(timeout=TIMEOUT)).content_as[dict]["i"] < i:
                    lost += 1
        first = min(s[0][0] for s in load.samples if s)
        print(f"rolling restart: exit {done.returncode}, {ended - began:.1f} s")
        print(f"load: {a.threads} threads x {a.rate:g} iterations/s (a majority upsert and a get each), "
              f"{sum(len(x) for x in load.acked)} keys written")
        print(f"{'phase':8} {'op':6} {'count':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for phase, (start, end) in (("before", (first + 2, began)), ("during", (began, ended))):
            for kind in ("write", "read"):
                v = load.between(start, end, kind)
                print(f"{phase:8} {kind:6} {len(v):7d} {pct(v, 0.5):>8} {pct(v, 0.99):>8} "
                      f"{(v[-1] * 1000 if v else 0):8.1f}")
        print(f"client errors: {dict(load.errors)} (first: {load.first_errors})")
        print(f"acknowledged writes lost: {lost}")
        cluster.close()
        versions = [rest_json(n, "/settee/cluster/versions") for n in nodes]
        print(f"metadata versions after: {versions}")
        if a.check:
            seen = {v.get("clusterMetaVersion") if isinstance(v, dict) else None for v in versions}
            if done.returncode != 0 or lost or len(seen) != 1 or None in seen:
                sys.exit(f"upgrade check failed: exit {done.returncode}, {lost} writes lost, versions {seen}")


def rest_json(node, path: str):
    """GET `path` on `node` as the administrator: the decoded body, or the error as text."""
    import base64
    import json
    import urllib.request
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(node.mgmt_url + path, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.loads(r.read())
    except Exception as e:  # noqa: BLE001 (reported, not handled)
        return f"{path}: {e}"


if __name__ == "__main__":
    main()
