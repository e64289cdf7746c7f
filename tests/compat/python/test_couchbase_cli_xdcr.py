"""The official `couchbase-cli` sets up, lists, pauses, resumes, tunes and deletes an XDCR replication between two
settee nodes (`xdcr-setup`, `xdcr-replicate`), and the documents written on the source reach the target.

Like test_couchbase_cli.py, it needs the CLI prepared by `scripts/test-couchbase-cli.sh PATH` (COUCHBASE_CLI) and
is skipped without it.
"""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta

import pytest

from conditions import wait_until
from sdk_connect import connect
from settee_server import PASSWORD, USERNAME, SetteeServer, new_server
from test_xdcr import task

CLI = os.environ.get("COUCHBASE_CLI", "")
pytestmark = pytest.mark.skipif(
    not CLI, reason="COUCHBASE_CLI is not set: run scripts/test-couchbase-cli.sh PATH-TO-COUCHBASE-CLI-CHECKOUT")


def cli(node: SetteeServer, command: str, *args: str) -> str:
    """Runs `couchbase-cli COMMAND -c NODE -u -p ARGS`, which must exit 0; returns stdout and stderr."""
    done = subprocess.run([CLI, command, "-c", node.mgmt_addr, "-u", USERNAME, "-p", PASSWORD, *args],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"couchbase-cli {command} {' '.join(args)} -> {done.returncode}\n{out}"
    return out


def test_xdcr_setup_and_replicate_drive_a_replication(tmp_path):
    src = new_server(base_dir=tmp_path / "src", bucket_type="couchbase").start()
    dst = new_server(base_dir=tmp_path / "dst", bucket_type="couchbase").start()
    try:
        out = cli(src, "xdcr-setup", "--create", "--xdcr-cluster-name", "dc2", "--xdcr-hostname", dst.mgmt_addr,
                  "--xdcr-username", USERNAME, "--xdcr-password", PASSWORD)
        assert "SUCCESS: Cluster reference created" in out
        listed = cli(src, "xdcr-setup", "--list")
        assert "cluster name: dc2" in listed and f"host name: {dst.mgmt_addr}" in listed, listed
        out = cli(src, "xdcr-replicate", "--create", "--xdcr-cluster-name", "dc2", "--xdcr-from-bucket", "default",
                  "--xdcr-to-bucket", "default")
        assert "SUCCESS: XDCR replication created" in out
        listed = cli(src, "xdcr-replicate", "--list")
        rid = [line.split(":", 1)[1].strip() for line in listed.splitlines() if "stream id:" in line][0]
        assert rid.endswith("/default/default"), listed

        c, d = connect(src), connect(dst)
        c.wait_until_ready(timedelta(seconds=20))
        d.wait_until_ready(timedelta(seconds=20))
        source, target = c.bucket("default").default_collection(), d.bucket("default").default_collection()
        source.upsert("via-cli", {"cli": True})
        wait_until(lambda: target.exists("via-cli").exists, timeout_seconds=30, what="the document on the target")

        assert "SUCCESS: XDCR replication paused" in cli(src, "xdcr-replicate", "--pause", "--xdcr-replicator", rid)
        wait_until(lambda: "status: paused" in cli(src, "xdcr-replicate", "--list"), timeout_seconds=10,
                   what="the CLI to list the replication as paused")
        assert "SUCCESS" in cli(src, "xdcr-replicate", "--resume", "--xdcr-replicator", rid)
        wait_until(lambda: task(src, rid)["status"] == "running", timeout_seconds=10, what="the resume")
        out = cli(src, "xdcr-replicate", "--settings", "--xdcr-replicator", rid, "--checkpoint-interval", "60")
        assert "SUCCESS: XDCR replicator settings updated" in out
        assert '"checkpointInterval": 60' in cli(src, "xdcr-replicate", "--get", "--xdcr-replicator", rid)
        # A filter set through the CLI (it also sends filterSkipRestream and 'true'/'false' switches) applies to
        # the documents written after it.
        out = cli(src, "xdcr-replicate", "--settings", "--xdcr-replicator", rid,
                  "--filter-expression", 'REGEXP_CONTAINS(META().id, "^via")', "--filter-skip-restream",
                  "--filter-deletion", "1")
        assert "SUCCESS: XDCR replicator settings updated" in out
        shown = cli(src, "xdcr-replicate", "--get", "--xdcr-replicator", rid)
        assert "REGEXP_CONTAINS" in shown, shown
        wait_until(lambda: task(src, rid)["status"] == "running", timeout_seconds=10, what="the restart")
        source.upsert("other-key", {"cli": True})
        source.upsert("via-filter", {"cli": True})
        wait_until(lambda: target.exists("via-filter").exists, timeout_seconds=30, what="the filtered-in document")
        assert not target.exists("other-key").exists, "the filter left it out"

        assert "SUCCESS: XDCR replication deleted" in cli(src, "xdcr-replicate", "--delete", "--xdcr-replicator", rid)
        assert "SUCCESS: Cluster reference deleted" in cli(src, "xdcr-setup", "--delete", "--xdcr-cluster-name", "dc2")
        assert "dc2" not in cli(src, "xdcr-setup", "--list")
        c.close()
        d.close()
    finally:
        src.stop()
        dst.stop()
