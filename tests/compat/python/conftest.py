"""Session fixtures: one `settee server` per pytest session, and SDK handles onto it.

Set SETTEE_BIN to test a prebuilt binary; set SETTEE_COMPAT_DEFAULT_PORTS=1 to run the server on Couchbase's default
ports (11210/8091/8093) and connect with a port-less connection string. By default every port is chosen free, so the
usual run already exercises non-default ports. PYCBC_LOG_LEVEL=debug (read by the SDK at import) turns on its logging.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest

import settee_server
from sdk_connect import connect
from settee_server import SetteeServer


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> SetteeServer:
    """The session's settee process: free ports (or the defaults), a fresh data dir, stopped with SIGTERM at the end."""
    base = Path(tmp_path_factory.mktemp("settee"))
    srv = settee_server.new_server(base, default_ports=settee_server.use_default_ports())
    srv.start()
    print(f"\nsettee: kv={srv.kv_port} mgmt={srv.mgmt_port} query={srv.query_port} log={srv.log_path}")
    yield srv
    code = srv.stop()
    if code not in (0, -15):
        print(f"\nsettee exited with {code}; log tail:\n{srv.log_tail()}")


@pytest.fixture(scope="session")
def cluster(server) -> Cluster:
    """The administrator's `Cluster`, connected with `couchbase://127.0.0.1:K` and ready for KV."""
    c = connect(server)
    c.wait_until_ready(timedelta(seconds=20))
    yield c
    c.close()


@pytest.fixture(scope="session")
def bucket(cluster):
    return cluster.bucket(settee_server.BUCKET)


@pytest.fixture(scope="session")
def collection(bucket):
    """The `default` bucket's default collection."""
    return bucket.default_collection()


@pytest.fixture(scope="session")
def binary(collection):
    return collection.binary()


@pytest.fixture
def key(request) -> str:
    """A document key unique to this test invocation."""
    return f"{request.node.name[:60]}-{uuid.uuid4().hex[:12]}"
