#!/usr/bin/env bash
# Metrics cost (issue 18; BENCHMARKS.md "Metrics cost"): one release node, an ephemeral bucket, and the same
# `settee bench` run with nothing scraping /metrics and with a scrape every second (as a Prometheus server at a 1 s
# interval would), batch 1 and 50, rounds alternating; then the scrape time of /metrics with 10 buckets of 1,024
# vBuckets each holding documents. Usage: scripts/bench-metrics.sh [rounds] [seconds]; results in
# target/bench/metrics/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ROUNDS=${1:-3}
SECS=${2:-10}
SETTEE_BIN=${SETTEE_BIN:-target/release/settee}
OUT=target/bench/metrics
IDLE_WAIT_MAX=0
BASE_PORT=27310
rm -rf "$OUT"
# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh
start_settee --bucket default --bucket-type ephemeral --bucket-ram-mb 1024
BIN=$SETTEE_BIN
AUTH=Administrator:password
until curl -sf -u $AUTH http://127.0.0.1:$MGMT/pools/default >/dev/null; do sleep 0.2; done
busy() { pgrep -x rustc >/dev/null && echo "rustc ran during round $r" >>"$OUT/contended.txt" || true; }
run() { # label batch populate
  "$BIN" bench --spec couchbase://127.0.0.1:$KV/default -t 2 --connections 4 -I 100000 -m 200 -M 200 -r 5 -B "$2" \
    $3 -d "$SECS" --warmup 1 --seed 1 --label "$1" --case "95/5 get/set, batch $2" --json "$OUT/r$r-$1-b$2.json" --quiet
}
scrape_loop() { while true; do curl -sf -u $AUTH -o /dev/null http://127.0.0.1:$MGMT/metrics; sleep 1; done; }
r=0; run populate 1 ""
for r in $(seq 1 "$ROUNDS"); do
  for b in 1 50; do
    busy
    run no-scrape "$b" --no-population
    scrape_loop & BG=$!
    run scrape-1s "$b" --no-population
    kill $BG; wait $BG 2>/dev/null || true; BG=
  done
done
# Ten buckets of 1,024 vBuckets: nine more, 20,000 documents in each of the ten.
for i in $(seq 1 9); do
  curl -sf -u $AUTH -X POST http://127.0.0.1:$MGMT/pools/default/buckets \
    -d name=b$i -d bucketType=ephemeral -d ramQuota=256 >/dev/null
done
sleep 3
for i in $(seq 1 9); do
  until "$BIN" bench --spec couchbase://127.0.0.1:$KV/b$i -t 1 --connections 1 -I 20000 -m 200 -M 200 --populate-only \
      --quiet >/dev/null 2>&1; do sleep 1; done
done
for n in $(seq 1 20); do
  curl -sf -u $AUTH -o "$OUT/metrics.txt" -w '%{time_total}\n' http://127.0.0.1:$MGMT/metrics >>"$OUT/scrape-seconds.txt"
done
wc -c <"$OUT/metrics.txt" >"$OUT/metrics-bytes.txt"
grep -c '^kv_' "$OUT/metrics.txt" >"$OUT/metrics-kv-lines.txt" || true
echo "done: $OUT"
