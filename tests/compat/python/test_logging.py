"""A node's log: `--log-format json` writes one JSON object per line, and `POST /settings/logLevel` changes the
filter while the node runs (administrators only): a filter of `warn` silences the INFO line a bucket creation
writes, `info` brings it back, and an invalid filter is refused without changing anything."""

from __future__ import annotations

import json
import time

import pytest

import settee_server
from test_cluster import rest


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    server = settee_server.new_server(tmp_path_factory.mktemp("logging"), extra=["--log-format", "json"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def log_lines(node) -> list[dict]:
    lines = node.log_path.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def created(node, bucket: str) -> bool:
    """Whether the log has the INFO line of `bucket`'s creation."""
    return any(e["fields"].get("message") == "bucket created" and e["fields"].get("bucket") == bucket
               for e in log_lines(node))


def create_bucket(node, name: str):
    status, body = rest(node, "POST", "/pools/default/buckets",
                        {"name": name, "bucketType": "ephemeral", "ramQuota": 100})
    assert status == 202, body
    time.sleep(0.5)


def test_json_lines_and_a_filter_changed_at_run_time(node):
    entries = log_lines(node)
    assert entries and all({"timestamp", "level", "fields", "target"} <= e.keys() for e in entries), entries[:3]
    status, body = rest(node, "GET", "/settings/logLevel")
    assert status == 200 and body["filter"] == "info,openraft=error", body
    status, body = rest(node, "POST", "/settings/logLevel", {"filter": "warn"})
    assert status == 200 and body == {"filter": "warn"}, body
    create_bucket(node, "quiet")
    assert not created(node, "quiet"), "INFO written under a warn filter"
    status, body = rest(node, "POST", "/settings/logLevel", {"filter": "info,settee_server::kv=debug"})
    assert status == 200, body
    create_bucket(node, "loud")
    assert created(node, "loud")
    assert rest(node, "GET", "/settings/logLevel")[1] == {"filter": "info,settee_server::kv=debug"}


def test_invalid_filters_are_refused_and_change_nothing(node):
    status, body = rest(node, "POST", "/settings/logLevel", {"filter": "info,=[broken"})
    assert status == 400 and "filter" in body["errors"], body
    status, body = rest(node, "POST", "/settings/logLevel", {})
    assert status == 400, body
    assert rest(node, "GET", "/settings/logLevel")[1]["filter"] != "info,=[broken"
