#!/usr/bin/env bash
# The persistence figures of BENCHMARKS.md (issue 3), from a release build on this machine:
#   1. the disk's sequential write bandwidth (dd with fdatasync), for comparison;
#   2. sustained persisted writes/s: 200-byte SETs with persistToMajority (each acknowledged after its fsync) and
#      the same load without durability;
#   3. persistToMajority latency (p50/p99) at a moderate, rate-limited load;
#   4. warmup: load ITEMS items (36-byte UUID keys, 200-byte values), stop cleanly, restart, and read the warmup
#      rate from the log and the resident memory per item after warmup.
# Cases 2b and 4 also report the flusher threads' CPU per write and the persisted rate including the drain (writes
# divided by the time from the first write until the disk write queue is empty).
# Environment: ITEMS (default 10000000), DURATION seconds per throughput case (default 20), WORK (a directory on
# the disk to measure; default a new temporary one), RAM_MB bucket quota (default 8192, so every value stays
# resident after warmup), SETTEE_BIN (a binary to measure instead of building target/release/settee; for A/B runs).
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-10000000}
DURATION=${DURATION:-20}
RAM_MB=${RAM_MB:-8192}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-persist.XXXXXX)}
KV=21310 MGMT=21391 QUERY=21393

if [ -n "${SETTEE_BIN:-}" ]; then
    BIN=$SETTEE_BIN
else
    cargo build --release -p settee-server --features jemalloc --bin settee >&2
    BIN=target/release/settee
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r), commit $(git rev-parse --short HEAD)"
echo "work dir: $WORK ($(df -h "$WORK" | awk 'NR==2{print $1}'))"

echo "== 1. disk sequential write bandwidth (dd bs=1M count=1024 conv=fdatasync)"
dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1
rm -f "$WORK/dd.bin"

PID=""
start() {
    "$BIN" server --data-dir "$WORK/data" --kv-port $KV --mgmt-port $MGMT --query-port $QUERY --kv-tls-port 0 --mgmt-tls-port 0 --query-tls-port 0 \
        --bucket-type couchbase --bucket-ram-mb "$RAM_MB" >>"$WORK/settee.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        curl -sf -u Administrator:password "http://127.0.0.1:$MGMT/pools" >/dev/null && return 0
        sleep 0.1
    done
    echo "settee did not start" >&2
    exit 1
}
stop() {
    kill -TERM "$PID"
    wait "$PID" || true
}
# Waits until the disk write queue (STAT ep_queue_size over the binary protocol) is empty, so that one case's
# backlog does not land in the next case's latencies.
drain() { python3 scripts/kv_drain.py "$KV"; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$PID/status"; }
# CPU seconds used so far by the server's flusher threads (utime + stime of the threads named flusher-*).
flusher_cpu() {
    local ticks=0 f
    for d in /proc/"$PID"/task/*; do
        case "$(cat "$d/comm")" in flusher*)
            read -r -a f <"$d/stat"
            # Fields 14 and 15 (utime, stime); comm has no spaces here, so the split is plain.
            ticks=$((ticks + f[13] + f[14]));;
        esac
    done
    echo "$ticks $(getconf CLK_TCK)" | awk '{printf "%.2f", $1 / $2}'
}
now() { date +%s.%N; }
# "flusher: X s CPU, Y us per write; persisted Z writes/s including the drain" for WRITES writes between two marks.
persisted_rate() {
    awk -v writes="$1" -v c0="$2" -v c1="$3" -v t0="$4" -v t1="$5" 'BEGIN {
        printf "flusher threads: %.2f s CPU, %.2f us per write; persisted %.0f writes/s from the first write until the queue was empty\n",
            c1 - c0, (c1 - c0) * 1e6 / writes, writes / (t1 - t0) }'
}
writes_of() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); p = r["run"] or r["load"]; print(p["ops"])' "$1"; }
bench() { "$BIN" bench --spec "couchbase://127.0.0.1:$KV/default" -q "$@"; }
summary() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["run"] or r["load"]
l = p["latency_us"]
print(f'{p["ops_per_sec"]:.0f} ops/s, errors {p["errors"]}, p50 {l["p50"]:.0f} us, p99 {l["p99"]:.0f} us, p99.9 {l["p99_9"]:.0f} us')
PY
}

rm -rf "$WORK/data"
start
COMMON=(-I 1000000 -m 200 -M 200 -r 100 -t 2 --connections 2 --duration "$DURATION" --no-population)
echo "== 2a. persisted writes: persistToMajority, 200-byte values, 4 connections x 64 in flight"
bench "${COMMON[@]}" -B 64 --durability persistToMajority --json "$WORK/persist.json"
summary "$WORK/persist.json"
drain
echo "== 2b. the same load without durability (acknowledged from memory)"
C0=$(flusher_cpu) T0=$(now)
bench "${COMMON[@]}" -B 64 --json "$WORK/plain.json"
summary "$WORK/plain.json"
drain
persisted_rate "$(writes_of "$WORK/plain.json")" "$C0" "$(flusher_cpu)" "$T0" "$(now)"
echo "== 3. persistToMajority latency at a moderate load (2,000 writes/s, one request in flight per connection)"
bench -I 1000000 -m 200 -M 200 -r 100 -t 2 --connections 2 --duration "$DURATION" --no-population -B 1 \
    --rate-limit 2000 --durability persistToMajority --json "$WORK/latency.json"
summary "$WORK/latency.json"
stop

echo "== 4. warmup of $ITEMS items (36-byte UUID keys, 200-byte values)"
rm -rf "$WORK/data"
start
BASE_KB=$(rss_kb)
C0=$(flusher_cpu) T0=$(now)
bench -I "$ITEMS" -m 200 -M 200 --key-format uuid --populate-only -B 64 -t 2 --connections 2 --json "$WORK/load.json"
summary "$WORK/load.json"
drain
persisted_rate "$ITEMS" "$C0" "$(flusher_cpu)" "$T0" "$(now)"
stop
: >"$WORK/settee.log"
start
for _ in $(seq 1 6000); do
    grep -q "warmup complete" "$WORK/settee.log" && break
    sleep 0.1
done
grep "warmup complete" "$WORK/settee.log" | sed 's/\x1b\[[0-9;]*m//g'
AFTER_KB=$(rss_kb)
python3 - "$BASE_KB" "$AFTER_KB" "$ITEMS" <<'PY'
import sys
base, after, items = (int(x) for x in sys.argv[1:])
per_item = (after - base) * 1024 / items
print(f"RSS {base} kB empty -> {after} kB after warmup: {per_item:.1f} bytes per item, "
      f"{per_item - 236:.1f} bytes of overhead beyond the 36-byte key and 200-byte value")
PY
stop
echo "disk: $(du -sh "$WORK/data" | cut -f1) in $WORK/data"
