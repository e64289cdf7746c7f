#!/usr/bin/env python3
"""XDCR throughput on this machine: loads N documents into a 1-node source with `settee bench --populate-only`,
then creates a replication to a 1-node target and times the initial copy until the task shows every document
written and no change left. Prints documents/s and MB/s of values.

Usage: SETTEE_BIN=target/release/settee scripts/xdcr_bench.py [--items N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat" / "python"))

import settee_server  # noqa: E402
from settee_server import PASSWORD, USERNAME, new_server  # noqa: E402
from test_cluster import rest  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--bucket-type", default="couchbase")
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
    finally:
        src.stop()
        dst.stop()


if __name__ == "__main__":
    main()
