"""A formed cluster for module fixtures: `count` real nodes on 127.0.0.1.. joined to the first, rebalanced, with one
bucket created, stopped (and their directories left to pytest) afterwards."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Sequence

import settee_server
from cluster_load import wait_for
from test_cluster import pool_nodes, rest, wait_rebalanced


@contextmanager
def formed_cluster(base: Path, count: int, bucket: str, bucket_type: str = "couchbase", replicas: int = 1,
                   extra: Sequence[str] = ()) -> Iterator[List[settee_server.SetteeServer]]:
    servers = settee_server.cluster_servers(base, count)
    for s in servers:
        s.extra.extend(extra)
    for s in servers[1:]:
        s.join = servers[0].mgmt_addr
    try:
        for s in servers:
            s.start()
        known = ",".join(f"ns_1@127.0.0.{i + 1}" for i in range(count))
        wait_for(lambda: len(pool_nodes(servers[0])) == count, "every node to join")
        status, body = rest(servers[0], "POST", "/controller/rebalance", {"knownNodes": known, "ejectedNodes": ""})
        assert status == 200, body
        wait_rebalanced(servers[0])
        status, body = rest(servers[0], "POST", "/pools/default/buckets",
                            {"name": bucket, "bucketType": bucket_type, "ramQuota": 128, "replicaNumber": replicas})
        assert status == 202, body
        yield servers
    finally:
        settee_server.stop_all(servers)
