#!/usr/bin/env bash
# The replication figures of BENCHMARKS.md (issue 5), from a release build on this machine:
#   1. two nodes (127.0.0.1 and 127.0.0.2, one process each), bucket `default` (couchbase, 1 replica);
#      writes of 200-byte values with no durability, `majority` and `persistToMajority`: ops/s, p50/p99, and the
#      CPU time both servers spent per replicated write (user + sys from /proc, divided by the writes done);
#   2. three nodes with auto-failover at its 5 s minimum: SIGKILL one under a write load and report the time until
#      every key can be written again (tests/compat/python/test_cluster.py measures the same in CI).
# Environment: DURATION seconds per case (default 20), WORK (default a new temporary directory), BUCKET_TYPE
# (couchbase, the default, or ephemeral: replication without persistence; persistToMajority is skipped then).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20}
BUCKET_TYPE=${BUCKET_TYPE:-couchbase}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-cluster.XXXXXX)}
BIN=target/release/settee
ADMIN=(-u Administrator:password)

cargo build --release -p settee-server --features jemalloc --bin settee >&2
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r), commit $(git rev-parse --short HEAD)"
mkdir -p "$WORK"
echo "work dir: $WORK"

# shellcheck source=scripts/cluster-nodes.sh
. scripts/cluster-nodes.sh
trap stop_all EXIT
cpu_ticks() { # sum of utime+stime over the node processes
    local t=0
    for p in "${PIDS[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}
bench() { "$BIN" bench --spec "couchbase://127.0.0.1/default" -q "$@"; }
summary() { # json file, cpu ticks used
    python3 - "$1" "$2" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["run"] or r["load"]
l = p["latency_us"]
ops = p["ops"] if "ops" in p else p["ops_per_sec"] * p["seconds"]
cpu_s = int(sys.argv[2]) / int(sys.argv[3])
per_cpu = ops / cpu_s if cpu_s else float("inf")
print(f'{p["ops_per_sec"]:.0f} writes/s, errors {p["errors"]}, p50 {l["p50"]:.0f} us, p99 {l["p99"]:.0f} us; '
      f'server CPU {cpu_s:.1f} s for {ops:.0f} writes = {1e6 * cpu_s / max(ops, 1):.1f} us/write '
      f'({per_cpu:.0f} replicated writes/s per vCPU)')
PY
}
form_cluster() { # number of nodes
    start_node 127.0.0.1
    for i in $(seq 2 "$1"); do start_node "127.0.0.$i" --join 127.0.0.1:8091; done
    local known
    known=$(seq -s, -f "ns_1@127.0.0.%g" 1 "$1")
    curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/controller/rebalance -d "knownNodes=$known&ejectedNodes=" >/dev/null
    while curl -sf "${ADMIN[@]}" http://127.0.0.1:8091/pools/default/tasks | grep -q '"status":"running"'; do sleep 0.2; done
    curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/pools/default/buckets \
        -d "name=default&bucketType=$BUCKET_TYPE&ramQuota=2048&replicaNumber=1" >/dev/null
    sleep 2
}

echo "== 1. two nodes, one replica, $BUCKET_TYPE bucket: 200-byte writes, 2 threads x 2 connections"
form_cluster 2
COMMON=(-I 100000 -m 200 -M 200 -r 100 -t 2 --connections 2 --duration "$DURATION" --no-population)
CASES=("none:-B 16" "majority:-B 16")
[ "$BUCKET_TYPE" = ephemeral ] || CASES+=("persistToMajority:-B 16")
for case in "${CASES[@]}"; do
    level=${case%%:*}
    batch=${case#*:}
    args=("${COMMON[@]}")
    # shellcheck disable=SC2206
    args+=($batch)
    [ "$level" != none ] && args+=(--durability "$level")
    before=$(cpu_ticks)
    bench "${args[@]}" --json "$WORK/$level.json"
    after=$(cpu_ticks)
    echo -n "$level ($batch): "
    summary "$WORK/$level.json" $((after - before))
done
stop_all
rm -rf "${WORK:?}"/127.0.0.*

echo "== 2. three nodes, auto-failover after 5 s: time from SIGKILL to every key writable again"
form_cluster 3
curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/settings/autoFailover -d 'enabled=true&timeout=5' >/dev/null
.venv/bin/python - <<'PY'
import threading, time, os, signal, subprocess
from datetime import timedelta
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException
from couchbase.options import ClusterOptions, UpsertOptions
c = Cluster("couchbase://127.0.0.1", ClusterOptions(PasswordAuthenticator("Administrator", "password")))
c.wait_until_ready(timedelta(seconds=20))
coll = c.bucket("default").default_collection()
last_error, stop = [0.0], threading.Event()
def writer():
    i = 0
    while not stop.is_set():
        try:
            coll.upsert(f"k{i % 1000}", {"i": i}, UpsertOptions(timeout=timedelta(seconds=1)))
        except CouchbaseException:
            last_error[0] = time.monotonic()
        i += 1
t = threading.Thread(target=writer); t.start()
time.sleep(3)
pid = int(subprocess.check_output(["pgrep", "-f", "data-dir .*127.0.0.3"]).split()[0])
os.kill(pid, signal.SIGKILL)
killed = time.monotonic()
while time.monotonic() - max(last_error[0], killed) < 5:
    time.sleep(0.1)
stop.set(); t.join()
print(f"writes failed for {max(last_error[0], killed) - killed:.1f} s after SIGKILL (auto-failover timeout 5 s)")
PY
