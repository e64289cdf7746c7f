"""Bootstrap, connection strings, readiness and ping; plus a second server with its own ports and bucket."""

from __future__ import annotations

import warnings
from datetime import timedelta

import pytest

from couchbase.diagnostics import ClusterState, EndpointState, PingState, ServiceType
from couchbase.options import PingOptions, WaitUntilReadyOptions

import settee_server
from sdk_connect import connect


def kv_round_trip(cluster, bucket_name: str, key: str) -> None:
    coll = cluster.bucket(bucket_name).default_collection()
    coll.upsert(key, {"via": key})
    assert coll.get(key).content_as[dict] == {"via": key}
    coll.remove(key)


@pytest.mark.parametrize("template", [
    "couchbase://127.0.0.1:{kv}",
    "couchbase://127.0.0.1:{kv}?enable_tcp_keep_alive=true&network=default",
    "couchbase://127.0.0.1:{kv}=mcd",
    "127.0.0.1:{kv}",
], ids=["explicit-port", "port-and-options", "port-and-mode", "no-scheme"])
def test_connection_string_forms(server, template, key):
    """Every connection-string form the Python SDK accepts for an explicit KV port bootstraps and serves KV."""
    with warnings.catch_warnings():
        # The scheme-less form is accepted with a DeprecationWarning.
        warnings.simplefilter("ignore", DeprecationWarning)
        c = connect(server, connection_string=template.format(kv=server.kv_port))
    try:
        c.wait_until_ready(timedelta(seconds=20), WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
        kv_round_trip(c, "default", key)
    finally:
        c.close()


def test_wait_until_ready_for_kv_and_management(cluster):
    """wait_until_ready for KV and management reaches the ONLINE state (NOOP on 11210-style port, GET / on mgmt)."""
    cluster.wait_until_ready(timedelta(seconds=20),
                             WaitUntilReadyOptions(desired_state=ClusterState.Online,
                                                   service_types=[ServiceType.KeyValue, ServiceType.Management]))
    assert cluster.diagnostics().state == ClusterState.Online


def test_cluster_ping_reports_kv_and_mgmt_ok(server, cluster, bucket):
    """ping answers OK for the KV endpoint (NOOP) and the management endpoint (GET /), on the advertised ports."""
    result = cluster.ping(PingOptions(service_types=[ServiceType.KeyValue, ServiceType.Management],
                                      timeout=timedelta(seconds=10)))
    endpoints = result.endpoints
    assert endpoints.get(ServiceType.KeyValue), endpoints
    assert endpoints.get(ServiceType.Management), endpoints
    for service in (ServiceType.KeyValue, ServiceType.Management):
        for report in endpoints[service]:
            assert report.state == PingState.OK, (service, report)
    assert any(str(server.kv_port) in (r.remote or "") for r in endpoints[ServiceType.KeyValue])
    assert any(str(server.mgmt_port) in (r.remote or "") for r in endpoints[ServiceType.Management])


def test_bucket_ping_reports_kv_ok(bucket):
    """Bucket ping sends NOOP on the bucket's KV connection and gets SUCCESS."""
    result = bucket.ping(PingOptions(service_types=[ServiceType.KeyValue]))
    reports = result.endpoints[ServiceType.KeyValue]
    assert reports and all(r.state == PingState.OK for r in reports)


def test_diagnostics_shows_connected_kv(server, cluster, bucket, collection, key):
    """After traffic, diagnostics lists a connected KV endpoint on the server's KV port."""
    collection.upsert(key, {"v": 1})
    diag = cluster.diagnostics()
    kv = diag.endpoints.get(ServiceType.KeyValue, [])
    assert any(e.state == EndpointState.Connected and str(server.kv_port) in (e.remote or "") for e in kv), kv


def test_second_server_with_other_ports_and_bucket(tmp_path, server, key):
    """A second settee on different free ports with a non-default bucket name serves the SDK, and stops cleanly
    (exit status 0) on SIGTERM."""
    other = settee_server.new_server(tmp_path, bucket="compat2")
    assert {other.kv_port, other.mgmt_port, other.query_port}.isdisjoint(
        {server.kv_port, server.mgmt_port, server.query_port})
    other.start()
    try:
        c = connect(other)
        try:
            c.wait_until_ready(timedelta(seconds=20), WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
            kv_round_trip(c, "compat2", key)
        finally:
            c.close()
    finally:
        code = other.stop()
    assert code == 0, f"settee exited with {code} on SIGTERM; log tail:\n{other.log_tail()}"
