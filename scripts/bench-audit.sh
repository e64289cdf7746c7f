#!/usr/bin/env bash
# Audit overhead (issue 17, item 3; BENCHMARKS.md "Audit overhead"): one release node, an ephemeral bucket, and the
# same `settee bench` run with audit off, on with its defaults (document events off), and on with every document
# event on (each GET and SET writes an event). Rounds alternate the three settings. Usage: scripts/bench-audit.sh
# [rounds] [seconds]; results in target/bench/audit/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ROUNDS=${1:-2}
SECS=${2:-10}
SETTEE_BIN=${SETTEE_BIN:-target/release/settee}
OUT=target/bench/audit
IDLE_WAIT_MAX=0
BASE_PORT=27210
rm -rf "$OUT"
# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh
start_settee --bucket default --bucket-type ephemeral --bucket-ram-mb 1024
BIN=$SETTEE_BIN
DATA="$OUT/data"
until curl -sf -u Administrator:password http://127.0.0.1:$MGMT/pools/default >/dev/null; do sleep 0.2; done
metrics() { curl -sf -u Administrator:password http://127.0.0.1:$MGMT/metrics | grep '^settee_audit' || true; }
busy() { pgrep -x rustc >/dev/null && echo "rustc ran during round $r" >>"$OUT/contended.txt" || true; }
audit() { curl -sf -u Administrator:password -X POST http://127.0.0.1:$MGMT/settings/audit "$@" >/dev/null; }
run() { # label batch populate
  "$BIN" bench --spec couchbase://127.0.0.1:$KV/default -t 2 --connections 4 -I 100000 -m 200 -M 200 -r 5 -B "$2" \
    $3 -d "$SECS" --warmup 1 --seed 1 --label "$1" --case "95/5 get/set, batch $2" --json "$OUT/r$r-$1-b$2.json" --quiet
}
r=0; run populate 1 ""
for r in $(seq 1 "$ROUNDS"); do
  for b in 1 50; do
    audit -d auditdEnabled=false
    busy
    run audit-off "$b" --no-population
    audit -d auditdEnabled=true -d disabled=20485,20488,20489,20490,20491
    run audit-on "$b" --no-population
    audit -d auditdEnabled=true -d disabled=
    run audit-data "$b" --no-population
    metrics >"$OUT/r$r-audit-data-b$b.metrics.txt"
  done
done
audit -d auditdEnabled=false
busy
ls "$DATA/logs" | wc -l >"$OUT/log-files.txt" || true
du -sh "$DATA/logs" >>"$OUT/log-files.txt" || true
metrics >"$OUT/metrics.txt"
