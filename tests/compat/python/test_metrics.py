"""`GET /metrics` (Prometheus text) on the management port, driven by the Python SDK's traffic and user manager."""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
import uuid
from typing import Dict, Optional, Tuple

from couchbase.exceptions import DocumentNotFoundException
from couchbase.management.users import Role, User

from conditions import wait_until
from settee_server import BUCKET, PASSWORD, USERNAME

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (\S+)$')


def scrape(server, credentials: Optional[Tuple[str, str]] = (USERNAME, PASSWORD)) -> Tuple[int, str]:
    """GET /metrics with `credentials` (None: none); returns (status, body)."""
    headers = {}
    if credentials:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    request = urllib.request.Request(server.mgmt_url + "/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def parse(text: str) -> Dict[str, float]:
    """Every sample line as `name{labels}` -> value; fails on a line that is neither a sample nor HELP/TYPE."""
    samples = {}
    for line in filter(None, text.splitlines()):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not an exposition line: {line!r}"
        samples[line.rsplit(" ", 1)[0]] = float(match.group(4))
    return samples


def test_metrics_follow_sdk_traffic(server, collection):
    # Proves a scrape parses as exposition text and kv_ops/kv_curr_items move with the SDK's upserts, hits and misses.
    status, text = scrape(server)
    assert status == 200
    before = parse(text)
    keys = [f"metrics_{uuid.uuid4().hex[:8]}_{i}" for i in range(3)]
    for k in keys:
        collection.upsert(k, {"n": 1})
    collection.get(keys[0])
    try:
        collection.get("metrics_absent_" + uuid.uuid4().hex)
    except DocumentNotFoundException:
        pass
    after = parse(scrape(server)[1])

    def moved(series: str) -> float:
        return after[series] - before[series]

    assert moved(f'kv_ops{{bucket="{BUCKET}",op="set"}}') >= 3
    assert moved(f'kv_ops{{bucket="{BUCKET}",op="get",result="hit"}}') >= 1
    assert moved(f'kv_ops{{bucket="{BUCKET}",op="get",result="miss"}}') >= 1
    assert after[f'kv_curr_items{{bucket="{BUCKET}"}}'] >= 3
    assert after["kv_curr_connections"] >= 1
    assert after['sysproc_mem_resident{proc="settee"}'] > 0


def test_metrics_need_the_stats_privilege(server, cluster):
    # Proves no credentials get 401, a data role 403, and external_stats_reader (Couchbase's scraping role) 200.
    assert scrape(server, None)[0] == 401
    users = cluster.users()
    scraper, reader = f"scraper_{uuid.uuid4().hex[:6]}", f"reader_{uuid.uuid4().hex[:6]}"
    users.upsert_user(User(username=scraper, password="password1", roles=[Role(name="external_stats_reader")]))
    users.upsert_user(User(username=reader, password="password1", roles=[Role(name="data_reader", bucket=BUCKET)]))
    try:
        wait_until(lambda: scrape(server, (scraper, "password1"))[0] == 200, timeout_seconds=10, what="scraper may scrape")
        assert scrape(server, (reader, "password1"))[0] == 403
    finally:
        users.drop_user(scraper)
        users.drop_user(reader)
