#!/usr/bin/env bash
# The query service under load (issue 15). Builds the release binary, starts one settee node (ephemeral bucket),
# loads ITEMS YCSB records (`settee bench --workload e --populate-only`, which also creates the primary index and
# waits until it holds every record), then, ROUNDS times:
#   1. YCSB E through the query service: 95% range scans as SQL++ (`... WHERE META(d).id >= $1 ORDER BY META(d).id
#      LIMIT $2`, lengths uniform 1..100), 5% KV inserts;
#   2. point lookups by `USE KEYS $1` and by `WHERE META(d).id = $1`, beside the same reads over KV (GET, batch 1,
#      same connections): the query path's cost per document;
#   3. pages of the primary index (`LIMIT 100 OFFSET x`, x uniform over the records) and `SELECT COUNT(*)`;
#   4. KV 95/5 get/set (200-byte values, their own collection `_default.kv`) at batch 1 and 50, alone, then while a
#      second client runs point lookups, then while it runs range scans: whether queries starve KV.
# Every run records the server's CPU time per operation and its peak resident memory (VmRSS sampled every 0.2 s);
# a summary table (median over rounds) is printed at the end and written to $OUT/summary.md.
#
# Each run first waits until no rustc/cargo (nor a busy settee this script did not start) runs; a run during which
# one started anyway is listed in $OUT/contended.txt and marked with * in the summary (not repeated: the slow query
# runs would make repeating expensive on a shared machine).
#
# Environment (defaults in brackets):
#   ITEMS [1000000] YCSB records  ROUNDS [3]  DURATION [15] seconds per run  WARMUP [1] seconds
#   SLOW_DURATION [30] seconds for the runs of slow queries (YCSB E, pages), so that they collect more samples
#   CLIENT_THREADS [2]  CLIENT_CONNS [2] connections per client thread (a query connection has one request in flight)
#   QUERY_TIMEOUT [120] seconds a query may take (scans and pages read far more than they return; see BENCHMARKS.md)
#   KV_ITEMS [100000] keys of the KV runs of step 4  BG_CONNS [2] connections of step 4's query client
#   SETTEE_BIN=path  use this binary instead of building target/release/settee
#   OUT [target/bench/query-<date>]  BASE_PORT [27300] (uses BASE_PORT..BASE_PORT+2)
#   IDLE_WAIT_MAX [600] seconds a run waits for rustc/cargo to finish before it measures anyway (marked *)
#   QUICK=1  a smoke run: 1 round of 3 s, 20,000 records
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ "${QUICK:-0}" = 1 ]; then
    : "${ROUNDS:=1}" "${DURATION:=3}" "${SLOW_DURATION:=3}" "${WARMUP:=0.5}" "${ITEMS:=20000}" "${KV_ITEMS:=10000}"
fi
ITEMS="${ITEMS:-1000000}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-15}"
SLOW_DURATION="${SLOW_DURATION:-30}"
WARMUP="${WARMUP:-1}"
CLIENT_THREADS="${CLIENT_THREADS:-2}"
CLIENT_CONNS="${CLIENT_CONNS:-2}"
QUERY_TIMEOUT="${QUERY_TIMEOUT:-120}"
KV_ITEMS="${KV_ITEMS:-100000}"
BG_CONNS="${BG_CONNS:-2}"
BASE_PORT="${BASE_PORT:-27300}"
IDLE_WAIT_MAX="${IDLE_WAIT_MAX:-600}"
OUT="${OUT:-target/bench/query-$(date +%Y%m%d-%H%M%S)}"
# YCSB records are ~1.1 KB; the rest is the item table, the primary index and the KV collection.
RAM_MB=$(( ITEMS * 3000 / 1048576 + KV_ITEMS * 600 / 1048576 + 1024 ))

# shellcheck source=scripts/bench-common.sh
. "$ROOT/scripts/bench-common.sh"

{
    machine_info
    echo "settings: ITEMS=$ITEMS ROUNDS=$ROUNDS DURATION=$DURATION SLOW_DURATION=$SLOW_DURATION WARMUP=$WARMUP CLIENT_THREADS=$CLIENT_THREADS" \
        "CLIENT_CONNS=$CLIENT_CONNS QUERY_TIMEOUT=$QUERY_TIMEOUT KV_ITEMS=$KV_ITEMS BG_CONNS=$BG_CONNS RAM_MB=$RAM_MB"
} | tee "$OUT/machine.txt"

log "starting settee (ephemeral bucket, ${RAM_MB} MiB)"
start_settee --bucket-type ephemeral --bucket-ram-mb "$RAM_MB"
CONNS=(-t "$CLIENT_THREADS" --connections "$CLIENT_CONNS")
bench() { "$SETTEE_BIN" bench "$@"; }

# run NAME ARGS...: one measured bench run with the server's CPU time and peak RSS around it.
run() {
    local name=$1; shift
    wait_idle
    local flag="$OUT/.busy-$name"
    rm -f "$flag"
    ( while :; do if foreign_load; then touch "$flag"; fi; sleep 1; done ) &
    local watcher=$!
    ( peak=0; while :; do r=$(rss_kb "$SERVER"); [ "$r" -gt "$peak" ] && { peak=$r; echo "$peak" >"$OUT/.rss-$name"; }; sleep 0.2; done ) &
    local sampler=$!
    local load rss0 t0 t1
    load=$(cut -d' ' -f1 /proc/loadavg)
    rss0=$(rss_kb "$SERVER")
    local m0 m1
    m0=$(machine_jiffies)
    t0=$(cpu_ticks "$SERVER")
    bench --spec "$SPEC" "$@" --json "$OUT/$name.json" --quiet
    t1=$(cpu_ticks "$SERVER")
    m1=$(machine_jiffies)
    kill "$watcher" "$sampler" 2>/dev/null; wait "$watcher" "$sampler" 2>/dev/null || true
    local contended=0
    if [ -e "$flag" ]; then
        contended=1
        echo "$name: rustc/cargo or a foreign settee ran during it" >>"$OUT/contended.txt"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" $((t1 - t0)) "$rss0" \
        "$(cat "$OUT/.rss-$name" 2>/dev/null || echo "$rss0")" "$contended" "$load" "$m0" "$m1" >>"$OUT/runs.tsv"
    rm -f "$flag" "$OUT/.rss-$name"
}

: >"$OUT/runs.tsv"
log "loading $ITEMS YCSB records (KV inserts), then the primary index"
rss_empty=$(rss_kb "$SERVER")
t_load=$SECONDS
bench --spec "$SPEC" --workload e -I "$ITEMS" -t 2 --connections 4 -B 100 --populate-only \
    --json "$OUT/load.json" >"$OUT/load.txt" 2>&1
tail -4 "$OUT/load.txt" >&2
echo "load + index: $((SECONDS - t_load)) s; $(grep -h 'primary index' "$OUT/load.txt" || true)" | tee "$OUT/index.txt" >&2
rss_loaded=$(rss_kb "$SERVER")
printf 'RSS empty %s KiB, after %s records and the primary index %s KiB\n' "$rss_empty" "$ITEMS" "$rss_loaded" \
    | tee "$OUT/memory.txt" >&2
curl -sf -u Administrator:password -X POST "http://127.0.0.1:$MGMT/pools/default/buckets/default/scopes/_default/collections" \
    -d name=kv >/dev/null
sleep 1
bench --spec "$SPEC" --collection _default.kv -I "$KV_ITEMS" -m 200 -M 200 -t 2 --connections 2 -B 100 \
    --populate-only --quiet

Q=(-n -I "$ITEMS" "${CONNS[@]}" --warmup "$WARMUP" --timeout "$QUERY_TIMEOUT")
KVRUN=(--collection _default.kv -n -I "$KV_ITEMS" -m 200 -M 200 -r 5 "${CONNS[@]}" -d "$DURATION" --warmup "$WARMUP")
for round in $(seq 1 "$ROUNDS"); do
    log "round $round of $ROUNDS"
    echo "   1. YCSB E" >&2
    run "r$round-e" "${Q[@]}" -d "$SLOW_DURATION" --workload e --seed "$round" --case "ycsb-e"
    echo "   2. point lookups: KV GET, USE KEYS, META().id" >&2
    run "r$round-kv-get" -n -I "$ITEMS" --key-format ycsb -r 0 -B 1 "${CONNS[@]}" -d "$DURATION" --warmup "$WARMUP" \
        --seed "$round" --case "kv get, batch 1"
    run "r$round-use-keys" "${Q[@]}" -d "$DURATION" --query use-keys --seed "$round" --case "query use-keys"
    run "r$round-meta-id" "${Q[@]}" -d "$DURATION" --query meta-id --seed "$round" --case "query meta-id"
    echo "   3. pages (LIMIT 100 OFFSET x) and COUNT(*)" >&2
    run "r$round-page" "${Q[@]}" -d "$SLOW_DURATION" --query page --seed "$round" --case "query page"
    run "r$round-count" "${Q[@]}" -d "$DURATION" --query count --seed "$round" --case "query count"
    echo "   4. KV alone and beside a query client" >&2
    for b in 1 50; do
        run "r$round-kv-b$b-alone" "${KVRUN[@]}" -B "$b" --seed "$round" --case "kv 95/5 batch $b alone"
        for q in use-keys scan; do
            "$SETTEE_BIN" bench --spec "$SPEC" --query "$q" -n -I "$ITEMS" -t 1 --connections "$BG_CONNS" \
                -d "$(python3 -c "print($DURATION + $WARMUP + 3)")" --timeout "$QUERY_TIMEOUT" --seed "$round" \
                --json "$OUT/r$round-kv-b$b-with-$q-queries.json" --quiet &
            BG=$!
            sleep 2
            run "r$round-kv-b$b-with-$q" "${KVRUN[@]}" -B "$b" --seed "$round" --case "kv 95/5 batch $b with $q"
            wait "$BG" || echo "   the $q client failed" >&2
            BG=""
        done
    done
done

log "summary (median of $ROUNDS rounds)"
python3 - "$OUT" "$ROUNDS" "$(getconf CLK_TCK)" <<'EOF' | tee "$OUT/summary.md"
import json, os, statistics, sys
out, rounds, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for line in open(os.path.join(out, "runs.tsv")):
    name, ticks, rss0, rss_max, contended, load, m0, m1 = line.rstrip("\n").split("\t")
    (b0, s0, t0), (b1, s1, t1) = map(int, m0.split()), map(int, m1.split())
    runs[name] = dict(ticks=int(ticks), rss0=int(rss0), rss_max=int(rss_max), contended=contended == "1", load=load,
                      busy=(b1 - b0) / max(t1 - t0, 1), steal=(s1 - s0) / max(t1 - t0, 1))

def result(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path))["run"] if os.path.exists(path) else None

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def fmt(x, digits=0):
    return "—" if x is None else f"{x:,.{digits}f}"

def rate(x):
    # Slow queries run at a fraction of one per second: keep a decimal there.
    return fmt(x, 2 if x is not None and x < 10 else 0)

rows = [
    ("1. YCSB E (all ops)", "e", None), ("1. YCSB E scans", "e", "scan"), ("1. YCSB E inserts (KV)", "e", "insert"),
    ("2. KV GET, batch 1", "kv-get", None), ("2. query USE KEYS", "use-keys", None),
    ("2. query META().id =", "meta-id", None),
    ("3. query LIMIT 100 OFFSET x", "page", None), ("3. query COUNT(*)", "count", None),
    ("4. KV 95/5 batch 1, alone", "kv-b1-alone", None), ("4. KV 95/5 batch 1, with lookups", "kv-b1-with-use-keys", None),
    ("4. KV 95/5 batch 1, with scans", "kv-b1-with-scan", None),
    ("4. KV 95/5 batch 50, alone", "kv-b50-alone", None), ("4. KV 95/5 batch 50, with lookups", "kv-b50-with-use-keys", None),
    ("4. KV 95/5 batch 50, with scans", "kv-b50-with-scan", None),
    ("4. (second client) lookups beside batch 1", "kv-b1-with-use-keys-queries", None),
    ("4. (second client) scans beside batch 1", "kv-b1-with-scan-queries", None),
    ("4. (second client) lookups beside batch 50", "kv-b50-with-use-keys-queries", None),
    ("4. (second client) scans beside batch 50", "kv-b50-with-scan-queries", None),
]
print("| run | ops/s (min–max) | p50 µs | p99 µs | rows/query | server CPU µs/op | peak RSS MiB | errors | machine busy / steal |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for label, key, op in rows:
    rates, p50, p99, rows_per, cpu, rss, errors, marks = [], [], [], [], [], [], 0, ""
    busy, steal = [], []
    for r in range(1, rounds + 1):
        name = f"r{r}-{key}"
        res = result(name)
        if res is None:
            continue
        part = res["operations"].get(op) if op else res
        if part is None:
            continue
        rates.append(part["ops_per_sec"])
        p50.append(part["latency_us"]["p50"])
        p99.append(part["latency_us"]["p99"])
        errors += part["errors"]
        if op is None and res["operations"]:
            total_rows = sum(o.get("rows", 0) for o in res["operations"].values())
            rows_per.append(total_rows / max(res["ops"], 1) if total_rows else None)
        elif op:
            rows_per.append(part.get("rows", 0) / max(part["ops"], 1) if part.get("rows") else None)
        meta = runs.get(name)
        if meta:
            # Server CPU per operation over the whole run (warm-up included), for runs with one client only.
            if "with" not in key and op is None:
                cpu.append(meta["ticks"] / tck * 1e6 / max(res["ops"], 1))
            rss.append(meta["rss_max"] / 1024)
            busy.append(meta["busy"] * 100)
            steal.append(meta["steal"] * 100)
            if meta["contended"]:
                marks = "*"
    if not rates:
        continue
    spread = f" ({rate(min(rates))}–{rate(max(rates))})" if len(rates) > 1 else ""
    print(f"| {label}{marks} | {rate(med(rates))}{spread} | {fmt(med(p50))} | {fmt(med(p99))} | "
          f"{fmt(med(rows_per), 1)} | {fmt(med(cpu), 1)} | {fmt(med(rss))} | {errors} | "
          f"{fmt(med(busy))} % / {fmt(med(steal), 1)} % |")
EOF
cat "$OUT/memory.txt" "$OUT/index.txt"
[ -e "$OUT/contended.txt" ] && { echo "contended runs:"; cat "$OUT/contended.txt"; }
log "done: $OUT (summary.md, runs.tsv, one JSON result per run)"
