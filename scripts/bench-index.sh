#!/usr/bin/env bash
# Secondary indexes under load (issue 16). Builds the release binary, starts one settee node (a couchbase bucket by
# default, so that index snapshots reach the disk), loads ITEMS YCSB records (`settee bench --workload e
# --populate-only`, which also creates the primary index), then:
#   build   CREATE INDEX bench_field0 ON default(field0) over the loaded records: seconds until /api/v1/stats says
#           online with every record, documents/s, the server's CPU per document, and per entry the index's
#           memory_used and disk_size (its snapshot) from /api/v1/stats (the primary index's too);
#   then ROUNDS times:
#   lookups `--query field-eq` (the document fetched) and `--query field-eq-covered` (answered from the index),
#           and YCSB E (its scans use the primary index's order);
#   writes  WRITE_ITEMS YCSB inserts into a fresh collection with 0, 1 and 3 secondary indexes on it (field0,
#           field1, field2; the order rotates per round): KV inserts/s, seconds until every index holds every record
#           (the indexed rate), and the server's CPU per write over both; the collection is dropped afterwards;
#   rplus   point lookups by field0 (covered) with request_plus, then not_bounded, each while a second client
#           updates the records at WRITE_RATE ops/s (YCSB A: 50 % reads, 50 % updates): request_plus's extra wait.
# Every run records the server's CPU time, its peak RSS, the machine's busy/steal share and load average; a summary
# (medians over rounds) is printed at the end and written to $OUT/summary.md.
#
# Each run first waits until no rustc/cargo (nor a busy settee this script did not start) runs; a run during which
# one started anyway is listed in $OUT/contended.txt and marked with * in the summary.
#
# Environment (defaults in brackets):
#   ITEMS [1000000] YCSB records  FIELD_COUNT [10] FIELD_LENGTH [100] record shape (4 and 38: ~200-byte documents)
#   ROUNDS [3]  DURATION [15] seconds per lookup run  WARMUP [1]  CLIENT_THREADS [2]  CLIENT_CONNS [2]
#   WRITE_ITEMS [ITEMS] inserts per write run  WRITE_RATE [20000] ops/s of the rplus runs' write client
#   STEPS ["build lookups writes rplus"] which parts to run  BUCKET_TYPE [couchbase] or ephemeral
#   INDEX_QUOTA_MB [4096] --index-memory-quota-mb  SETTEE_BIN=path  use this binary instead of building it
#   OUT [target/bench/index-<date>]  BASE_PORT [27400] (uses BASE_PORT..BASE_PORT+2)
#   IDLE_WAIT_MAX [600] seconds a run waits for rustc/cargo to finish before it measures anyway (marked *)
#   QUICK=1  a smoke run: 1 round of 3 s, 20,000 records
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ "${QUICK:-0}" = 1 ]; then
    : "${ROUNDS:=1}" "${DURATION:=3}" "${WARMUP:=0.5}" "${ITEMS:=20000}" "${WRITE_RATE:=2000}"
fi
ITEMS="${ITEMS:-1000000}"
FIELD_COUNT="${FIELD_COUNT:-10}"
FIELD_LENGTH="${FIELD_LENGTH:-100}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-1}"
CLIENT_THREADS="${CLIENT_THREADS:-2}"
CLIENT_CONNS="${CLIENT_CONNS:-2}"
WRITE_ITEMS="${WRITE_ITEMS:-$ITEMS}"
WRITE_RATE="${WRITE_RATE:-20000}"
STEPS="${STEPS:-build lookups writes rplus}"
BUCKET_TYPE="${BUCKET_TYPE:-couchbase}"
INDEX_QUOTA_MB="${INDEX_QUOTA_MB:-4096}"
BASE_PORT="${BASE_PORT:-27400}"
IDLE_WAIT_MAX="${IDLE_WAIT_MAX:-600}"
OUT="${OUT:-target/bench/index-$(date +%Y%m%d-%H%M%S)}"
DOC_BYTES=$((FIELD_COUNT * (FIELD_LENGTH + 12) + 2))
# The loaded records, one write run's collection at a time, and the item table's overhead per item.
RAM_MB=$(( (ITEMS + WRITE_ITEMS) * (DOC_BYTES + 400) / 1048576 + 1024 ))

# shellcheck source=scripts/bench-common.sh
. "$ROOT/scripts/bench-common.sh"
has_step() { [[ " $STEPS " == *" $1 "* ]]; }

{
    machine_info
    echo "settings: ITEMS=$ITEMS FIELD_COUNT=$FIELD_COUNT FIELD_LENGTH=$FIELD_LENGTH ROUNDS=$ROUNDS DURATION=$DURATION" \
        "WARMUP=$WARMUP CLIENT_THREADS=$CLIENT_THREADS CLIENT_CONNS=$CLIENT_CONNS WRITE_ITEMS=$WRITE_ITEMS" \
        "WRITE_RATE=$WRITE_RATE BUCKET_TYPE=$BUCKET_TYPE RAM_MB=$RAM_MB INDEX_QUOTA_MB=$INDEX_QUOTA_MB STEPS=\"$STEPS\""
} | tee "$OUT/machine.txt"

log "starting settee ($BUCKET_TYPE bucket, ${RAM_MB} MiB, index quota ${INDEX_QUOTA_MB} MiB)"
start_settee --bucket-type "$BUCKET_TYPE" --bucket-ram-mb "$RAM_MB" --index-memory-quota-mb "$INDEX_QUOTA_MB"
SHAPE=(--field-count "$FIELD_COUNT" --field-length "$FIELD_LENGTH")
CONNS=(-t "$CLIENT_THREADS" --connections "$CLIENT_CONNS")
bench() { "$SETTEE_BIN" bench "$@"; }
AUTH=(-u Administrator:password)

# sql STATEMENT: runs a statement through the query service, prints the answer; fails on an error status.
sql() {
    curl -sf "${AUTH[@]}" "http://127.0.0.1:$QUERY/query/service" --data-urlencode "statement=$1" \
        --data-urlencode "timeout=1800s"
}
# stats: the node's index statistics (/api/v1/stats) as one JSON object.
stats() { curl -sf "${AUTH[@]}" "http://127.0.0.1:$QUERY/api/v1/stats"; }
# caught_up ITEMS NAME...: whether each named index ("bucket:index" or "bucket:scope:coll:index") is online,
# holds ITEMS entries and has nothing pending.
caught_up() {
    local n=$1; shift
    stats | python3 -c '
import json, sys
s, n, names = json.load(sys.stdin), int(sys.argv[1]), sys.argv[2:]
ok = all(x in s and s[x]["index_state"] == "online" and s[x]["items_count"] == n and s[x]["num_docs_pending"] == 0
         for x in names)
sys.exit(0 if ok else 1)' "$n" "$@"
}

# measure NAME CMD...: runs CMD with the server's CPU time, peak RSS and the machine's load around it.
measure() {
    local name=$1; shift
    wait_idle
    local flag="$OUT/.busy-$name"
    rm -f "$flag"
    ( while :; do if foreign_load; then touch "$flag"; fi; sleep 1; done ) &
    local watcher=$!
    ( peak=0; while :; do r=$(rss_kb "$SERVER"); [ "$r" -gt "$peak" ] && { peak=$r; echo "$peak" >"$OUT/.rss-$name"; }; sleep 0.2; done ) &
    local sampler=$!
    local load rss0 t0 t1 m0 m1 w0 w1
    load=$(cut -d' ' -f1 /proc/loadavg)
    rss0=$(rss_kb "$SERVER")
    m0=$(machine_jiffies)
    t0=$(cpu_ticks "$SERVER")
    w0=$(date +%s.%N)
    "$@"
    w1=$(date +%s.%N)
    t1=$(cpu_ticks "$SERVER")
    m1=$(machine_jiffies)
    kill "$watcher" "$sampler" 2>/dev/null; wait "$watcher" "$sampler" 2>/dev/null || true
    local contended=0
    if [ -e "$flag" ]; then
        contended=1
        echo "$name: rustc/cargo or a foreign settee ran during it" >>"$OUT/contended.txt"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" $((t1 - t0)) "$rss0" \
        "$(cat "$OUT/.rss-$name" 2>/dev/null || echo "$rss0")" "$contended" "$load" "$m0" "$m1" \
        "$(python3 -c "print(round($w1 - $w0, 3))")" >>"$OUT/runs.tsv"
    rm -f "$flag" "$OUT/.rss-$name"
}

run() { local name=$1; shift; measure "$name" bench --spec "$SPEC" "$@" --json "$OUT/$name.json" --quiet; }

# build_index NAME KEY ITEMS KEYSPACE STATNAME: CREATE INDEX, then waits until the index holds every record.
build_index() {
    sql "CREATE INDEX \`$1\` ON $4($2)" >/dev/null
    until caught_up "$3" "$5"; do sleep 0.1; done
}

: >"$OUT/runs.tsv"
log "loading $ITEMS YCSB records (KV inserts), then the primary index"
rss_empty=$(rss_kb "$SERVER")
measure load bench --spec "$SPEC" --workload e -I "$ITEMS" "${SHAPE[@]}" -t 2 --connections 4 -B 100 \
    --populate-only --json "$OUT/load.json"
rss_loaded=$(rss_kb "$SERVER")
printf 'RSS empty %s KiB, after %s records and the primary index %s KiB\n' "$rss_empty" "$ITEMS" "$rss_loaded" \
    | tee "$OUT/memory.txt" >&2

if has_step build; then
    log "CREATE INDEX bench_field0 over $ITEMS records"
    measure build build_index bench_field0 field0 "$ITEMS" default default:bench_field0
    sleep 2
    stats >"$OUT/stats-after-build.json"
    # A snapshot is written when an index comes online; give it time to land, then read the sizes again.
    sleep 10
    stats >"$OUT/stats-after-build-10s.json"
    echo "RSS after the field0 index $(rss_kb "$SERVER") KiB" | tee -a "$OUT/memory.txt" >&2
fi

Q=(-n -I "$ITEMS" "${SHAPE[@]}" "${CONNS[@]}" --warmup "$WARMUP" -d "$DURATION")

# write_run ROUND K: WRITE_ITEMS inserts into a fresh collection with K secondary indexes, until they are indexed.
write_run() {
    local round=$1 k=$2 coll="w$k-r$1" names=()
    curl -sf "${AUTH[@]}" -X POST \
        "http://127.0.0.1:$MGMT/pools/default/buckets/default/scopes/_default/collections" -d name="$coll" >/dev/null
    sleep 1
    local i
    for ((i = 0; i < k; i++)); do
        sql "CREATE INDEX \`w_field$i\` ON \`default\`.\`_default\`.\`$coll\`(field$i)" >/dev/null
        names+=("default:_default:$coll:w_field$i")
    done
    if [ "$k" -gt 0 ]; then until caught_up 0 "${names[@]}"; do sleep 0.1; done; fi
    measure "r$round-write-$k" write_and_index "$OUT/r$round-write-$k.json" "$coll" "${names[@]}"
    curl -sf "${AUTH[@]}" -X DELETE \
        "http://127.0.0.1:$MGMT/pools/default/buckets/default/scopes/_default/collections/$coll" >/dev/null
    sleep 3
}
# write_and_index JSON COLLECTION INDEX...: the inserts, then the wait until every index holds them.
write_and_index() {
    local json=$1 coll=$2; shift 2
    bench --spec "$SPEC" --collection "_default.$coll" --workload a -I "$WRITE_ITEMS" "${SHAPE[@]}" -t 2 \
        --connections 4 -B 100 --populate-only --json "$json" --quiet
    if [ $# -gt 0 ]; then until caught_up "$WRITE_ITEMS" "$@"; do sleep 0.1; done; fi
}

for round in $(seq 1 "$ROUNDS"); do
    log "round $round of $ROUNDS"
    if has_step lookups; then
        echo "   field lookups (not covered, covered) and YCSB E" >&2
        run "r$round-field-eq" "${Q[@]}" --query field-eq --seed "$round" --case "query field-eq"
        run "r$round-field-eq-covered" "${Q[@]}" --query field-eq-covered --seed "$round" --case "query field-eq-covered"
        run "r$round-e" "${Q[@]}" --workload e --seed "$round" --case "ycsb-e" --timeout 120
    fi
    if has_step writes; then
        echo "   inserts with 0, 1, 3 secondary indexes" >&2
        case $((round % 3)) in 1) order="0 1 3" ;; 2) order="1 3 0" ;; *) order="3 0 1" ;; esac
        for k in $order; do write_run "$round" "$k"; done
    fi
    if has_step rplus; then
        echo "   request_plus and not_bounded lookups beside $WRITE_RATE writes/s" >&2
        for c in request_plus not_bounded; do
            bench --spec "$SPEC" --workload a -n -I "$ITEMS" "${SHAPE[@]}" -t 1 --connections 1 -B 16 \
                --rate-limit "$WRITE_RATE" -d "$(python3 -c "print($DURATION + $WARMUP + 4)")" --seed "$round" \
                --json "$OUT/r$round-rplus-$c-writes.json" --quiet &
            BG=$!
            sleep 2
            run "r$round-rplus-$c" "${Q[@]}" --query field-eq-covered --scan-consistency "$c" --seed "$round" \
                --case "field-eq-covered $c beside writes"
            wait "$BG" || echo "   the write client failed" >&2
            BG=""
        done
    fi
done
stats >"$OUT/stats-end.json"

log "summary (median of $ROUNDS rounds)"
python3 "$ROOT/scripts/bench-index-summary.py" "$OUT" "$ROUNDS" "$(getconf CLK_TCK)" "$ITEMS" "$WRITE_ITEMS" \
    | tee "$OUT/summary.md"
[ -e "$OUT/contended.txt" ] && { echo "contended runs:"; cat "$OUT/contended.txt"; }
log "done: $OUT (summary.md, runs.tsv, one JSON result per run, stats-*.json)"
