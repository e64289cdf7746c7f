#!/usr/bin/env bash
# The flusher's CPU per persisted write (BENCHMARKS.md, issue 20 item 4), on one couchbase-bucket node:
#   1. load ITEMS new keys (36-byte UUID keys, 200-byte values), wait until the disk write queue is empty;
#   2. load ITEMS more new keys (a key prefix "b"; the heap and fjall's memtables are warm by now), drain;
#   3. DURATION seconds of overwrites of the first ITEMS keys, 4 connections x 64 in flight, drain.
# For each: the CPU time of the threads named flusher-* (utime + stime from /proc/<pid>/task/<tid>/stat; time
# blocked in fsync is not CPU) and of the whole server, divided by the writes the client made. In 1 and 2 every
# write is a new key, so each is persisted exactly once: that is the figure per persisted write. In 3 the checkpoint
# keeps only the latest version of a key per round, so fewer records than writes reach the disk and the figure is
# per client write (how many depends on the write rate); a binary with STAT ep_total_persisted also gets a line
# per persisted record.
# PERF_SECS > 0 also records `perf record -g --call-graph dwarf` of the flusher threads during case 2 into
# $WORK/perf.data.
# Environment: SETTEE_BIN (default target/release/settee, built with jemalloc), ITEMS (1000000), DURATION (10),
#   WORK (a new temporary directory), KV_PORT (21510; mgmt +1, query +2), PERF_SECS (0).
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=$(pwd)
ITEMS=${ITEMS:-1000000}
DURATION=${DURATION:-10}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-flusher.XXXXXX)}
BASE_PORT=${KV_PORT:-21510}
PERF_SECS=${PERF_SECS:-0}
PERF_PID=""
OUT=$WORK IDLE_WAIT_MAX=0
# shellcheck source=bench-common.sh
. scripts/bench-common.sh
start_settee --bucket-type couchbase --bucket-ram-mb 8192
PID=$SERVER BIN=$SETTEE_BIN

# Waits until the disk write queue (STAT ep_queue_size) is empty and the last round is fsynced, then prints STAT
# ep_total_persisted (records the flusher wrote; 0 from a binary without it).
drain() { python3 scripts/kv_drain.py "$KV" --persisted; }
# CPU ticks of the flusher threads, and of the whole process.
flusher_ticks() {
    local t=0 f d
    for d in /proc/"$PID"/task/*; do
        case "$(cat "$d/comm")" in flusher*)
            read -r -a f <"$d/stat"
            t=$((t + f[13] + f[14]));;
        esac
    done
    echo "$t"
}
bench() { "$BIN" bench --spec "couchbase://127.0.0.1:$KV/default" -q -m 200 -M 200 -t 2 --connections 2 -B 64 "$@"; }
# CASE JSON F0 S0 T0 P0 P1: one line of figures for the writes in JSON since the marks (P: ep_total_persisted).
report() {
    python3 - "$1" "$2" "$3" "$(flusher_ticks)" "$4" "$(cpu_ticks "$PID")" "$5" "$(date +%s.%N)" "$(getconf CLK_TCK)" \
        "$6" "$7" <<'PY'
import json, sys
case, path, f0, f1, s0, s1, t0, t1, hz, p0, p1 = sys.argv[1:]
run = json.load(open(path))
p = run["run"] or run["load"]
n = p["ops"]
flusher = (int(f1) - int(f0)) / int(hz)
server = (int(s1) - int(s0)) / int(hz)
load = open("/proc/loadavg").read().split()[0]
print(f"{case}: {n} writes ({p['ops_per_sec']:,.0f}/s from the client), flusher threads {flusher:.2f} s CPU = "
      f"{1e6 * flusher / n:.2f} us per write, server {1e6 * server / n:.2f} us per write, "
      f"{n / (float(t1) - float(t0)):,.0f} writes/s until the queue was empty; load average {load}")
records = int(p1) - int(p0)
if records > 0:
    print(f"   {records} records persisted: flusher {1e6 * flusher / records:.2f} us per persisted record")
PY
}

echo "machine: $(nproc) vCPUs, $(uname -r); binary $BIN; $(date -u +%FT%TZ)"
P0=$(drain)
F0=$(flusher_ticks) S0=$(cpu_ticks "$PID") T0=$(date +%s.%N)
bench -I "$ITEMS" --key-format uuid --populate-only --json "$WORK/load.json"
P1=$(drain)
report "1. $ITEMS new keys" "$WORK/load.json" "$F0" "$S0" "$T0" "$P0" "$P1"

if [ "$PERF_SECS" != 0 ]; then
    TIDS=$(for d in /proc/"$PID"/task/*; do case "$(cat "$d/comm")" in flusher*) basename "$d";; esac; done | paste -sd,)
    perf record -F 999 -g --call-graph dwarf,16384 -t "$TIDS" -o "$WORK/perf.data" -- sleep "$PERF_SECS" \
        >/dev/null 2>&1 &
    PERF_PID=$!
fi
F0=$(flusher_ticks) S0=$(cpu_ticks "$PID") T0=$(date +%s.%N)
bench -I "$ITEMS" --key-format uuid --key-prefix b --populate-only --json "$WORK/load2.json"
P2=$(drain)
report "2. $ITEMS more new keys" "$WORK/load2.json" "$F0" "$S0" "$T0" "$P1" "$P2"
[ -n "${PERF_PID:-}" ] && wait "$PERF_PID"

F0=$(flusher_ticks) S0=$(cpu_ticks "$PID") T0=$(date +%s.%N)
bench -I "$ITEMS" --key-format uuid -r 100 --duration "$DURATION" --no-population --json "$WORK/overwrite.json"
P3=$(drain)
report "3. overwrites for $DURATION s (per client write)" "$WORK/overwrite.json" "$F0" "$S0" "$T0" "$P2" "$P3"
