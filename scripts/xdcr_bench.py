#!/usr/bin/env python3
"""XDCR throughput on this machine: loads N documents into a 1-node source with `settee bench --populate-only`,
then creates a replication to a 1-node target and times the initial copy until the task shows every document
written and no change left (documents/s and MB/s of values); then writes `--latency-samples` documents one at a
time through the Python SDK and times each from the source's acknowledgement to the first successful read of
the document on the target (polled back to back), reporting p50 and p99.

Usage: SETTEE_BIN=target/release/settee scripts/xdcr_bench.py [--items N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat" / "python"))

import settee_server  # noqa: E402
from settee_server import PASSWORD, USERNAME, new_server  # noqa: E402
from test_cluster import rest  # noqa: E402
from sdk_connect import connect  # noqa: E402
from couchbase.exceptions import DocumentNotFoundException  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--bucket-type", default="couchbase")
    ap.add_argument("--latency-samples", type=int, default=500)
    ap.add_argument("--kv-rounds", type=int, default=0,
                    help="then alternate N times a 10 s write-heavy `settee bench` run on the source with the "
                         "replication running and paused, and print the source's ops/s in each")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="settee-xdcr-bench-"))
    src = new_server(base_dir=root / "src", bucket_type=a.bucket_type, ram_mb=2048).start()
    dst = new_server(base_dir=root / "dst", bucket_type=a.bucket_type, ram_mb=2048).start()
    try:
        spec = f"couchbase://127.0.0.1:{src.kv_port}/default"
        subprocess.run([str(settee_server.settee_binary()), "bench", "-U", spec, "--populate-only", "-I", str(a.items),
                        "-m", str(a.size), "-M", str(a.size), "-t", "2"], check=True, capture_output=True)
        status, body = rest(src, "POST", "/pools/default/remoteClusters",
                            {"name": "dst", "hostname": dst.mgmt_addr, "username": USERNAME, "password": PASSWORD})
        assert status == 200, body
        started = time.monotonic()
        status, body = rest(src, "POST", "/controller/createReplication",
                            {"fromBucket": "default", "toCluster": "dst", "toBucket": "default",
                             "replicationType": "continuous"})
        assert status == 200, body
        rid = body["id"]
        while True:
            _, tasks = rest(src, "GET", "/pools/default/tasks")
            t = [x for x in tasks if x.get("type") == "xdcr" and x["id"] == rid][0]
            if t["docsWritten"] >= a.items and t["changesLeft"] == 0:
                break
            if time.monotonic() - started > 600:
                raise SystemExit(f"not done after 600 s: {t}")
            time.sleep(0.05)
        secs = time.monotonic() - started
        print(f"items={a.items} value_bytes={a.size} bucket={a.bucket_type} seconds={secs:.2f} "
              f"docs_per_s={a.items / secs:.0f} MB_per_s={a.items * a.size / secs / 1e6:.1f} task={t}")
        latencies = write_to_visible(src, dst, a.latency_samples)
        if latencies:
            p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
            print(f"write_to_visible samples={len(latencies)} p50_ms={p(0.5):.2f} p99_ms={p(0.99):.2f} "
                  f"max_ms={latencies[-1] * 1000:.2f}")
        for round_ in range(a.kv_rounds):
            for paused in ("false", "true"):
                status, body = rest(src, "POST", "/settings/replications/" + rid.replace("/", "%2F"),
                                    {"pauseRequested": paused})
                assert status == 200, body
                want = "paused" if paused == "true" else "running"
                while [x for x in rest(src, "GET", "/pools/default/tasks")[1]
                       if x.get("type") == "xdcr"][0]["status"] != want:
                    time.sleep(0.1)
                out = root / f"kv-{round_}-{paused}.json"
                subprocess.run([str(settee_server.settee_binary()), "bench", "-U", spec, "-n", "-I", str(a.items),
                                "-m", str(a.size), "-M", str(a.size), "-r", "50", "-t", "2", "-d", "10",
                                "--json", str(out)], check=True, capture_output=True)
                result = json.loads(out.read_text())
                run = result["run"]
                t = [x for x in rest(src, "GET", "/pools/default/tasks")[1] if x.get("type") == "xdcr"][0]
                print(f"kv round={round_} replication={'paused' if paused == 'true' else 'running'} "
                      f"ops_per_s={run['ops_per_sec']:.0f} errors={run['errors']} docs_written={t['docsWritten']}")
    finally:
        src.stop()
        dst.stop()


def write_to_visible(src, dst, samples: int) -> list:
    """Seconds from each write's acknowledgement on the source to its first successful read on the target, sorted."""
    cs, cd = connect(src), connect(dst)
    source = cs.bucket("default").default_collection()
    target = cd.bucket("default").default_collection()
    out = []
    for i in range(samples):
        key = f"latency-{i}"
        source.upsert(key, {"i": i})
        t0 = time.monotonic()
        while True:
            try:
                target.get(key)
                break
            except DocumentNotFoundException:
                if time.monotonic() - t0 > 30:
                    raise SystemExit(f"{key} not visible after 30 s")
        out.append(time.monotonic() - t0)
    cs.close()
    cd.close()
    return sorted(out)


if __name__ == "__main__":
    main()
