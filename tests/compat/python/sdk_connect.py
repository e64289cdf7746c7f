"""How the suite opens SDK connections: one place for the authenticator, timeouts and connection string."""

from __future__ import annotations

from datetime import timedelta

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from settee_server import PASSWORD, USERNAME, SetteeServer

KV_TIMEOUT = timedelta(seconds=5)
# Short enough that a hanging management call fails the test instead of the whole run.
MANAGEMENT_TIMEOUT = timedelta(seconds=20)
CONNECT_TIMEOUT = timedelta(seconds=10)


def cluster_options(username: str = USERNAME, password: str = PASSWORD, **kwargs) -> ClusterOptions:
    timeouts = ClusterTimeoutOptions(kv_timeout=KV_TIMEOUT, kv_durable_timeout=timedelta(seconds=10),
                                     management_timeout=MANAGEMENT_TIMEOUT, connect_timeout=CONNECT_TIMEOUT,
                                     bootstrap_timeout=CONNECT_TIMEOUT)
    return ClusterOptions(PasswordAuthenticator(username, password), timeout_options=timeouts, **kwargs)


def connect(server: SetteeServer, username: str = USERNAME, password: str = PASSWORD,
            connection_string: str | None = None, **kwargs) -> Cluster:
    """A new `Cluster` on `server` (the caller closes it)."""
    return Cluster(connection_string or server.connection_string, cluster_options(username, password, **kwargs))
