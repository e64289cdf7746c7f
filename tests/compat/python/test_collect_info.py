"""`settee cluster collect-info` (issue 18, item 5) against a real node: one ZIP with the cluster's and each node's
views, the buckets' statistics, settings, timings and metrics, and the node's log file, readable by any unzip,
with no password inside."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from settee_server import BUCKET, PASSWORD, USERNAME, SetteeServer, settee_binary


def test_collect_info_bundles_every_node_view_and_the_log(server: SetteeServer, collection, tmp_path: Path):
    """Proves the bundle holds the summary (this node, the default bucket, no failed call), the node's own files
    (server info, metrics text, timings), the bucket's statistics history, cluster settings and the log file given,
    and that the administrator's password appears nowhere in it."""
    collection.upsert("collect-info-doc", {"x": 1})
    out = tmp_path / "bundle.zip"
    done = subprocess.run([str(settee_binary()), "cluster", "collect-info", "-c", server.mgmt_addr, "-u", USERNAME,
                           "-p", PASSWORD, "--output", str(out), "--log-file", str(server.log_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        names = set(z.namelist())
        summary = json.loads(z.read("collect-info.json"))
        assert summary["failures"] == [], summary["failures"]
        assert summary["nodes"] and BUCKET in summary["buckets"]
        node_dir = "node_" + summary["nodes"][0].replace(":", "_")
        for name in ("nodes_self.json", "pools_default.json", "metrics.txt", "settee_timings.json",
                     f"bucket_{BUCKET}_stats_hour.json"):
            assert f"{node_dir}/{name}" in names, (name, sorted(names))
        assert b"kv_curr_items" in z.read(f"{node_dir}/metrics.txt")
        assert "cluster/settings_security.json" in names and "cluster/pools_default_buckets.json" in names
        assert f"logs/{server.log_path.name}" in names
        for name in names:
            assert PASSWORD.encode() not in z.read(name) or name.startswith("logs/"), f"the password is in {name}"
