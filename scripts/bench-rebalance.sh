#!/usr/bin/env bash
# The rebalance figures of BENCHMARKS.md (issue 6), from a release build on this machine: one node holding ITEMS
# items (36-byte UUID keys, 200-byte values) in a couchbase bucket with 1 replica; two more nodes join and a
# rebalance spreads the bucket over the three while a rate-limited client (RATE ops/s, 50/50 get/set) runs.
# Reports the rebalance time, the items and MB the new copies received per second (against dd and a loopback
# socket copy measured in the same run), and the client's per-second p99 before and during the rebalance.
# Environment: ITEMS (default 1000000), RATE (default 5000), MOVES (rebalanceMovesPerNode; default: the server's,
# 4), WORK (default a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-1000000}
RATE=${RATE:-5000}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-rebalance.XXXXXX)}
BIN=target/release/settee
ADMIN=(-u Administrator:password)
QUOTA_MB=$(( ITEMS * 700 / 1048576 + 512 ))

cargo build --release -p settee-server --features jemalloc --bin settee >&2
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r), commit $(git rev-parse --short HEAD)"
echo "work dir: $WORK; $ITEMS items; client at $RATE ops/s"
echo -n "disk (dd bs=1M count=1024 conv=fdatasync): "
dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 | awk -F, '{print $NF}'
rm -f "$WORK/dd.bin"
echo -n "loopback (1 GiB through one TCP connection): "
python3 - <<'PY'
import socket, threading, time
N, CHUNK = 1 << 30, 1 << 20
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def sink():
    c, _ = srv.accept(); got = 0
    while got < N:
        got += len(c.recv(CHUNK))
t = threading.Thread(target=sink); t.start()
s = socket.create_connection(srv.getsockname()); buf = b"x" * CHUNK; t0 = time.time()
for _ in range(N // CHUNK):
    s.sendall(buf)
t.join(); print(f"{N / (time.time() - t0) / 1e6:.0f} MB/s")
PY

# shellcheck source=scripts/cluster-nodes.sh
. scripts/cluster-nodes.sh
trap stop_all EXIT
items_on() { curl -sf "${ADMIN[@]}" "http://$1:8091/pools/default" | python3 -c \
    'import json,sys; print(next(n["interestingStats"]["curr_items"] for n in json.load(sys.stdin)["nodes"] if n["thisNode"]))'; }

start_node 127.0.0.1
curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/pools/default/buckets \
    -d "name=default&bucketType=couchbase&ramQuota=$QUOTA_MB&replicaNumber=1" >/dev/null
sleep 1
"$BIN" bench --spec couchbase://127.0.0.1/default -q -I "$ITEMS" -m 200 -M 200 --key-format uuid --populate-only \
    -B 64 -t 2 --connections 2 --json "$WORK/load.json" >/dev/null
echo "loaded $(items_on 127.0.0.1) items on one node"
start_node 127.0.0.2 --join 127.0.0.1:8091
start_node 127.0.0.3 --join 127.0.0.1:8091

BEFORE=10
"$BIN" bench --spec couchbase://127.0.0.1/default -q -I "$ITEMS" -m 200 -M 200 --key-format uuid --no-population \
    -r 50 -t 2 --connections 1 -B 1 --rate-limit "$RATE" --duration 600 --json "$WORK/client.json" >/dev/null &
CLIENT=$!
CLIENT_START=$(date +%s.%N)
sleep "$BEFORE"
if [ -n "${MOVES:-}" ]; then
    curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/settings/rebalance -d "rebalanceMovesPerNode=$MOVES" >/dev/null
fi
echo "rebalanceMovesPerNode: $(curl -sf "${ADMIN[@]}" http://127.0.0.1:8091/settings/rebalance)"
REB_START=$(date +%s.%N)
curl -sf "${ADMIN[@]}" -X POST http://127.0.0.1:8091/controller/rebalance \
    -d 'knownNodes=ns_1@127.0.0.1,ns_1@127.0.0.2,ns_1@127.0.0.3&ejectedNodes=' >/dev/null
while curl -sf "${ADMIN[@]}" http://127.0.0.1:8091/pools/default/tasks | grep -q '"status":"running"'; do sleep 0.2; done
REB_END=$(date +%s.%N)
curl -sf "${ADMIN[@]}" http://127.0.0.1:8091/pools/default/tasks
echo
sleep 5
kill -INT "$CLIENT" 2>/dev/null || true
wait "$CLIENT" 2>/dev/null || true
MOVED=$(( $(items_on 127.0.0.2) + $(items_on 127.0.0.3) ))
python3 - "$WORK/client.json" "$CLIENT_START" "$REB_START" "$REB_END" "$MOVED" <<'PY'
import json, sys, statistics
path, c0, r0, r1, moved = sys.argv[1], *map(float, sys.argv[2:5]), int(sys.argv[5])
secs = r1 - r0
print(f"rebalance: {secs:.1f} s; new copies received {moved} items = {moved / secs:,.0f} items/s, "
      f"{moved * 236 / secs / 1e6:.1f} MB/s of keys and values")
try:
    run = json.load(open(path))["run"]
except (OSError, ValueError, KeyError, TypeError):
    print("client result missing"); sys.exit(0)
before = [t["p99_us"] for t in run["timeline"] if t["t_s"] + c0 < r0 and t["ops"]]
during = [t["p99_us"] for t in run["timeline"] if r0 <= t["t_s"] + c0 <= r1 and t["ops"]]
for name, xs in (("before", before), ("during", during)):
    if xs:
        print(f"client p99 per second {name}: median {statistics.median(xs):.0f} us, max {max(xs):.0f} us ({len(xs)} s)")
print(f"client errors: {run['errors']} {run['errors_by_kind']}; retries: {run.get('retries', 0)}")
PY
