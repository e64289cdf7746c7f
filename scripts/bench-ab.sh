#!/usr/bin/env bash
# A/B comparison of two settee binaries on one workload: starts a node of each (an ephemeral bucket, or BUCKET_TYPE), loads ITEMS items into
# both, then runs the workload against A and B in alternation, ROUNDS times, and prints per run the ops/s, p50 and
# p99 latency and the server's CPU time per operation (user + system from /proc, warm-up included).
#
# Usage: scripts/bench-ab.sh BIN_A BIN_B [settee bench options for the workload, e.g. -r 5 -B 1]
# Environment: ROUNDS [3]  DURATION [10]  ITEMS [1000000]  BASE_PORT [28500] (uses BASE_PORT..BASE_PORT+102)
#              BUCKET_TYPE [ephemeral] or couchbase (persistent: the flusher's CPU then counts in the server's)
set -euo pipefail
A=$1 B=$2
shift 2
ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-10}" ITEMS="${ITEMS:-1000000}" BASE_PORT="${BASE_PORT:-28500}"
BUCKET_TYPE="${BUCKET_TYPE:-ephemeral}"
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

start() { # BIN PORT
    SETTEE_LOG=warn "$1" server --data-dir "$WORK/data-$2" --host 127.0.0.1 --kv-port "$2" --mgmt-port $(($2 + 1)) \
        --query-port $(($2 + 2)) --kv-tls-port 0 --mgmt-tls-port 0 --query-tls-port 0 --bucket-type "$BUCKET_TYPE" --bucket-ram-mb 2000 >"$WORK/log-$2" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$(($2 + 1))") 2>/dev/null && return 0; sleep 0.1; done
    echo "node on $2 did not start" >&2
    exit 1
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

PORTS=("$BASE_PORT" $((BASE_PORT + 100)))
start "$A" "${PORTS[0]}"
start "$B" "${PORTS[1]}"
sleep 1
for p in "${PORTS[@]}"; do
    "$A" bench --spec "couchbase://127.0.0.1:$p/default" -t 2 --connections 2 -B 100 -I "$ITEMS" -m 200 -M 200 \
        --populate-only --quiet >/dev/null
done
for r in $(seq "$ROUNDS"); do
    for i in 0 1; do
        p=${PORTS[$i]} pid=${PIDS[$i]} name=$([ "$i" = 0 ] && echo A || echo B)
        t0=$(ticks "$pid")
        "$A" bench --spec "couchbase://127.0.0.1:$p/default" -t 2 --connections 4 -I "$ITEMS" -m 200 -M 200 \
            --no-population -d "$DURATION" --warmup 1 --seed 1 "$@" --json "$WORK/r$r-$name.json" --quiet >/dev/null
        t1=$(ticks "$pid")
        python3 - "$WORK/r$r-$name.json" "$name" "$r" $((t1 - t0)) <<'PY'
import json, os, sys
run = json.load(open(sys.argv[1]))["run"]
ticks = int(sys.argv[4])
cpu_us = ticks / os.sysconf("SC_CLK_TCK") * 1e6
lat = run["latency_us"]
print(f"round {sys.argv[3]} {sys.argv[2]}: {run['ops_per_sec']:,.0f} ops/s  p50 {lat['p50']:.0f} µs  "
      f"p99 {lat['p99']:.0f} µs  server CPU {cpu_us / run['ops']:.2f} µs/op  errors {run['errors']}")
PY
    done
done
