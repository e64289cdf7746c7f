"""Couchbase's statistics REST for a bucket (`/pools/default/buckets/<b>/stats`, and per node under
`.../nodes/<host:port>/stats`), read by the console and couchbase-cli: samples every second at Couchbase's zoom
levels, summed over the cluster's nodes, driven by the Python SDK's traffic on a two-node cluster."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.exceptions import DocumentNotFoundException

from cluster_load import wait_for
from sdk_connect import connect
from cluster_fixture import formed_cluster
from test_cluster import rest

BUCKET = "statsb"
NODES = 2
DOCS = 200


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("bucket-stats"))
    with formed_cluster(base, NODES, BUCKET, bucket_type="couchbase", replicas=0) as servers:
        yield servers


def samples(node, path="", query=""):
    status, body = rest(node, "GET", f"/pools/default/buckets/{BUCKET}{path}/stats{query}")
    assert status == 200, body
    return body["op"]


def test_bucket_stats_sum_the_nodes_and_follow_the_traffic(nodes):
    """After 200 sets, 100 hits and 20 misses, the cluster's minute samples show 200 items, the set, get, hit and
    miss rates add up to the operations done, and each node's own samples add up to the cluster's."""
    cluster = connect(nodes[0])
    cluster.wait_until_ready(timedelta(seconds=30))
    coll = cluster.bucket(BUCKET).default_collection()
    # A rate needs two samples of its total: start once every node has sampled the bucket twice.
    wait_for(lambda: all(samples(nodes[0], f"/nodes/{n.mgmt_addr}")["samples"].get("ops", [None])[-1] is not None
                         for n in nodes), "the bucket to be sampled")
    started_ms = int(time.time() * 1000)
    for i in range(DOCS):
        coll.upsert(f"s-{i}", {"i": i})
    for i in range(100):
        coll.get(f"s-{i}")
    for i in range(20):
        with pytest.raises(DocumentNotFoundException):
            coll.get(f"missing-{i}")

    def settled():
        op = samples(nodes[0])
        items = op["samples"].get("curr_items") or [None]
        return op if items[-1] == DOCS and sum(v or 0 for v in op["samples"]["cmd_get"]) >= 119.5 else None

    op = wait_for(settled, "the samples to show the traffic", timeout=20)
    s = op["samples"]
    assert op["interval"] == 1000 and op["samplesCount"] == 60 and op["isPersistent"] is True
    assert len(s["timestamp"]) == len(s["ops"]) >= 2 and op["lastTStamp"] == s["timestamp"][-1]
    assert all(t2 > t1 for t1, t2 in zip(s["timestamp"], s["timestamp"][1:]))
    total = lambda name: sum(v or 0 for v in s[name])  # noqa: E731 - rates per second over 1 s samples
    assert abs(total("cmd_set") - DOCS) <= 0.1 * DOCS, s["cmd_set"]
    assert abs(total("get_hits") - 100) <= 10 and abs(total("get_misses") - 20) <= 2
    assert abs(total("cmd_get") - 120) <= 12
    assert s["vb_active_num"][-1] == 1024 and s["ep_max_size"][-1] == 2 * 128 * 1024 * 1024
    per_node = [samples(nodes[0], f"/nodes/{n.mgmt_addr}")["samples"] for n in nodes]
    assert sum(p["curr_items"][-1] for p in per_node) == DOCS
    assert all(0 < p["vb_active_num"][-1] < 1024 for p in per_node)
    newer = samples(nodes[1], query=f"?haveTStamp={s['timestamp'][-2]}")
    assert all(t > s["timestamp"][-2] for t in newer["samples"]["timestamp"])
    assert started_ms <= s["timestamp"][-1] <= int(time.time() * 1000)


def test_bucket_stats_refuse_bad_requests(nodes):
    """An unknown zoom is a 400, an unknown bucket or node a 404, and no credentials a 401."""
    status, body = rest(nodes[0], "GET", f"/pools/default/buckets/{BUCKET}/stats?zoom=fortnight")
    assert status == 400 and "zoom" in body["errors"], body
    status, _ = rest(nodes[0], "GET", "/pools/default/buckets/nope/stats")
    assert status == 404
    status, _ = rest(nodes[0], "GET", f"/pools/default/buckets/{BUCKET}/nodes/127.0.0.9:1/stats")
    assert status == 404
    import urllib.error
    import urllib.request
    try:
        urllib.request.urlopen(nodes[0].mgmt_url + f"/pools/default/buckets/{BUCKET}/stats", timeout=10)
        raise AssertionError("answered without credentials")
    except urllib.error.HTTPError as e:
        assert e.code == 401
    hour = samples(nodes[0], query="?zoom=hour")
    assert hour["interval"] == 4000 and hour["samplesCount"] == 900


def test_stats_range_answers_couchbase_7_metric_names(nodes):
    """`/pools/default/stats/range`: one series per node, or one summed over the nodes, with the items written by
    the first test; counters only as rates; names settee does not sample are reported in `errors`."""
    def series(path):
        status, body = rest(nodes[0], "GET", f"/pools/default/stats/range/{path}")
        assert status == 200, body
        return body

    per_node = series(f"kv_curr_items?bucket={BUCKET}&start=-20&step=1")
    assert per_node["errors"] == [] and len(per_node["data"]) == NODES, per_node
    assert {n for d in per_node["data"] for n in d["metric"]["nodes"]} == {n.mgmt_addr for n in nodes}
    assert sum(int(d["values"][-1][1]) for d in per_node["data"]) == DOCS
    summed = series(f"kv_curr_items?bucket={BUCKET}&start=-20&step=5&aggregationFunction=sum")
    [only] = summed["data"]
    assert only["metric"]["name"] == "kv_curr_items" and int(only["values"][-1][1]) == DOCS
    steps = [t for t, _ in only["values"]]
    assert all(b - a == 5 for a, b in zip(steps, steps[1:])) and steps[-1] <= summed["endTimestamp"]
    raw = series(f"kv_ops?bucket={BUCKET}")
    assert raw["data"] == [] and "rate" in raw["errors"][0]["error"], raw
    rates = series(f"kv_ops/rate?bucket={BUCKET}&start=-30&step=1&aggregationFunction=sum")
    assert rates["errors"] == [] and rates["data"][0]["values"], rates
    unknown = series("sys_cpu_utilization_rate")
    assert unknown["data"] == [] and "does not sample" in unknown["errors"][0]["error"]
