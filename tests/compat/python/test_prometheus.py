"""A real Prometheus server (Debian's prometheus package, installed by scripts/test-compat.sh) scraping a node's
`/metrics` with Basic auth, as docs/operations.md configures it (issue 18, item 1): the scrape succeeds and
Couchbase's metric names, with their labels, answer PromQL queries."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, free_ports

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_scrapes_couchbase_metric_names(server: SetteeServer, collection, tmp_path: Path):
    """Proves a Prometheus 2.x server scrapes the node (target health `up` = 1) and that kv_curr_items,
    kv_ops{op,result} and kv_cmd_duration_seconds answer with the bucket label and the documents just written."""
    if not Path(PROMETHEUS).exists():
        pytest.skip("no prometheus binary (scripts/test-compat.sh installs Debian's prometheus package)")
    for i in range(20):
        collection.upsert(f"prometheus-{i}", {"i": i})
        collection.get(f"prometheus-{i}")
    (tmp_path / "password").write_text(PASSWORD)
    (tmp_path / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: settee
    metrics_path: /metrics
    basic_auth:
      username: {USERNAME}
      password_file: {tmp_path / "password"}
    static_configs:
      - targets: ["{server.mgmt_addr}"]
""")
    port = free_ports(1)[0]
    log = open(tmp_path / "prometheus.log", "wb")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        items = []
        while time.monotonic() < deadline:
            try:
                up = query(port, 'up{job="settee"}')
                items = query(port, "kv_curr_items")
                if up and up[0]["value"][1] == "1" and items:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert items, f"no kv_curr_items scraped; prometheus log: {(tmp_path / 'prometheus.log').read_text()[-2000:]}"
        buckets = {sample["metric"].get("bucket"): float(sample["value"][1]) for sample in items}
        assert buckets.get(BUCKET, 0) >= 20, buckets
        sets = query(port, 'kv_ops{op="set"}')
        assert sets and all("bucket" in s["metric"] for s in sets), sets
        latency = query(port, 'kv_cmd_duration_seconds_count{opcode="GET"}')
        assert latency and float(latency[0]["value"][1]) >= 20, latency
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
