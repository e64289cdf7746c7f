#!/usr/bin/env bash
# settee beside memcached on this machine (issue 4): builds the release binary, starts memcached (Debian package,
# installed if missing) and two settee nodes (an ephemeral bucket and a persistent "couchbase" bucket), loads the
# same items into each, then runs identical `settee bench` workloads against the three in alternation for ROUNDS
# rounds and prints ops/s and latency with the settee/memcached ratio (median over rounds). Then p99 at half of
# each target's peak (batch 1, open loop), and the resident memory per item of each target.
#
# Workloads: 100% set, 95/5 get/set, 50/50, 100% get; 200-byte values; batch 1 and batch 50; ITEMS keys.
#
# Every measured run waits until no rustc/cargo process (nor a busy settee or memcached this script did not start)
# is running and the servers are quiet (a persistent bucket keeps flushing and compacting after write-heavy runs),
# and is repeated (up to 3 times) if such a process ran meanwhile, so neither a parallel build or test nor another
# target's background work skews the record.
#
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION [10] seconds per run  WARMUP [1] seconds  ITEMS [1000000]  VALUE_BYTES [200]
#   CLIENT_THREADS [2]  CLIENT_CONNS [4] connections per client thread  MC_THREADS [nproc] memcached threads
#   MEM_ITEMS [1000000] items for the memory measurement (0 skips it): RSS 2 s after the load, and again once the
#                server is quiet plus 20 s (a persistent bucket is still flushing at 2 s)
#   CHURN_SECS [30] seconds of 50–400-byte overwrites after it, then the RSS again (0 skips it)
#   SKIP_LATENCY=1 skips the half-load runs
#   SERVER_CPUS, CLIENT_CPUS  pin the servers / the client to these CPUs (taskset lists, e.g. 1 and 0)
#   SETTEE_WORKERS  settee's tokio worker threads (TOKIO_WORKER_THREADS; default: one per CPU)
#   SETTEE_BIN=path  use this binary instead of building target/release/settee
#   OUT [target/bench/<date>]  where results, tables and charts go
#   BASE_PORT [27100]  ports BASE_PORT..BASE_PORT+62 must be free
#   QUICK=1  a smoke run: 1 round of 2 s, 20,000 items
#   MEMORY_ONLY=1  only the memory-per-item measurement (no throughput rounds)
#   TARGETS ["memcached settee-ephemeral settee-persistent"]  the targets measured, in this order; the memory step
#                also knows settee-ejected: a persistent bucket (value eviction) whose quota is cut to the minimum
#                after the load and the flush, so that the item pager ejects every value; its RSS is measured once
#                the pager is done (the key and metadata of every item stay in memory, the values on disk only);
#                it needs MEM_ITEMS of 1 M or more, so that keys and metadata alone exceed the cut quota's watermark
#   IGNORE_LOAD=1  measure at once even while rustc/cargo or another server runs (resident memory does not depend on
#                the machine's load; throughput does, so leave it unset for the throughput rounds)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ "${QUICK:-0}" = 1 ]; then
    : "${ROUNDS:=1}" "${DURATION:=2}" "${WARMUP:=0.5}" "${ITEMS:=20000}" "${MEM_ITEMS:=20000}" "${CHURN_SECS:=2}"
fi
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-1}"
ITEMS="${ITEMS:-1000000}"
VALUE_BYTES="${VALUE_BYTES:-200}"
CHURN_SECS="${CHURN_SECS:-30}"
CLIENT_THREADS="${CLIENT_THREADS:-2}"
CLIENT_CONNS="${CLIENT_CONNS:-4}"
MC_THREADS="${MC_THREADS:-$(nproc)}"
SERVER_PIN=()
CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
MEM_ITEMS="${MEM_ITEMS:-1000000}"
BASE_PORT="${BASE_PORT:-27100}"
OUT="${OUT:-target/bench/$(date +%Y%m%d-%H%M%S)}"
RAM_MB=$(( ITEMS * 600 / 1048576 + 1024 ))

log() { printf '\n== %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root to run: $*" >&2; return 1; fi
}

ensure_memcached() {
    if ! command -v memcached >/dev/null; then
        log "installing memcached (Debian package)"
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq memcached
    fi
}

# CPU ticks (user + system) used so far by the given processes.
cpu_ticks() {
    local p total=0
    for p in "$@"; do total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
    echo "$total"
}

# Whether something else loads the machine: a compiler, or a busy (over 10% of a CPU) settee or memcached process
# this script did not start (another benchmark or a test run; an idle one left running does not count).
foreign_load() {
    pgrep -x rustc >/dev/null && return 0
    pgrep -x cargo >/dev/null && return 0
    local p foreign=()
    for p in $(pgrep -x settee; pgrep -x memcached); do
        [ "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" = "$$" ] || foreign+=("$p")
    done
    [ ${#foreign[@]} -gt 0 ] || return 1
    local before
    before=$(cpu_ticks "${foreign[@]}")
    sleep 0.5
    [ $(($(cpu_ticks "${foreign[@]}") - before)) -gt $(( $(getconf CLK_TCK) / 20 )) ]
}

# Blocks while something else loads the machine (the measurements share its cores).
wait_idle() {
    [ "${IGNORE_LOAD:-0}" = 1 ] && return 0
    local waited=0
    while foreign_load; do
        [ "$waited" = 0 ] && echo "   (waiting for rustc/cargo or another settee/memcached to finish)" >&2
        waited=1
        sleep 10
    done
}

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$OUT/data-"*
}
trap cleanup EXIT

ensure_memcached
if [ -z "${SETTEE_BIN:-}" ]; then
    log "building settee (release)"
    cargo build --release -p settee-server --features jemalloc
    SETTEE_BIN="$ROOT/target/release/settee"
fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "nproc: $(nproc)"
    echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "memcached: $(memcached -V) with -t $MC_THREADS"
    echo "rustc: $(rustc -V 2>/dev/null || echo unknown)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP ITEMS=$ITEMS VALUE_BYTES=$VALUE_BYTES" \
        "CLIENT_THREADS=$CLIENT_THREADS CLIENT_CONNS=$CLIENT_CONNS MEM_ITEMS=$MEM_ITEMS CHURN_SECS=$CHURN_SECS" \
        "SERVER_CPUS=${SERVER_CPUS:-any} CLIENT_CPUS=${CLIENT_CPUS:-any} SETTEE_WORKERS=${SETTEE_WORKERS:-default}"
} | tee "$OUT/machine.txt"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
    local deadline=$((SECONDS + 60))
    until ! port_free "$1"; do
        [ $SECONDS -lt $deadline ] || { echo "nothing listens on $1 after 60 s" >&2; exit 1; }
        sleep 0.2
    done
}

# start_memcached PORT MEGABYTES -> pid in STARTED_PID
start_memcached() {
    port_free "$1" || { echo "port $1 is busy" >&2; exit 1; }
    local user=()
    [ "$(id -u)" -eq 0 ] && user=(-u root)
    "${SERVER_PIN[@]}" memcached "${user[@]}" -l 127.0.0.1 -p "$1" -U 0 -B binary -m "$2" -t "$MC_THREADS" -c 4096 &
    STARTED_PID=$!
    PIDS+=("$STARTED_PID")
    wait_port "$1"
}

# start_settee NAME KVPORT BUCKET_TYPE -> pid in STARTED_PID
start_settee() {
    local kv=$2
    port_free "$kv" || { echo "port $kv is busy" >&2; exit 1; }
    rm -rf "$OUT/data-$1"
    local workers=()
    [ -n "${SETTEE_WORKERS:-}" ] && workers=(TOKIO_WORKER_THREADS="$SETTEE_WORKERS")
    env "${workers[@]}" SETTEE_LOG=warn "${SERVER_PIN[@]}" "$SETTEE_BIN" server --data-dir "$OUT/data-$1" --host 127.0.0.1 --kv-port "$kv" \
        --mgmt-port $((kv + 1)) --query-port $((kv + 2)) --kv-tls-port 0 --mgmt-tls-port 0 --query-tls-port 0 --bucket-type "$3" --bucket-ram-mb "$RAM_MB" &
    STARTED_PID=$!
    PIDS+=("$STARTED_PID")
    wait_port "$kv"
    wait_port $((kv + 1))
}

bench() { "${CLIENT_PIN[@]}" "$SETTEE_BIN" bench "$@"; }

# Blocks until the servers are quiet (under 5% of a CPU together for a second, at most 60 s): a persistent
# bucket's flusher and store compaction keep working after a write-heavy run, and must not steal CPU from the next
# target's run.
wait_quiet() {
    local deadline=$((SECONDS + 60)) before
    while [ $SECONDS -lt $deadline ]; do
        before=$(cpu_ticks "${PIDS[@]}")
        sleep 1
        [ $(($(cpu_ticks "${PIDS[@]}") - before)) -le $(( $(getconf CLK_TCK) / 20 )) ] && return 0
    done
    echo "   servers still busy after 60 s; measuring anyway" >&2
    echo "servers busy before a run for 60 s" >>"$OUT/contended.txt"
}

# measured FILE ARGS...: one bench run, repeated (up to 3 times) if a compiler ran at the same time.
measured() {
    local file=$1; shift
    local attempt flag="$OUT/.busy"
    for attempt in 1 2 3; do
        wait_idle
        wait_quiet
        rm -f "$flag"
        ( while :; do if foreign_load; then touch "$flag"; fi; sleep 1; done ) &
        local watcher=$!
        bench "$@" --json "$file" --quiet
        kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null || true
        [ -e "$flag" ] && [ "${IGNORE_LOAD:-0}" != 1 ] || return 0
        echo "   something else ran during $(basename "$file"); measuring again ($attempt/3)" >&2
        echo "$(basename "$file") attempt $attempt: rustc/cargo or a foreign settee/memcached ran" >>"$OUT/contended.txt"
    done
    echo "   $(basename "$file"): kept the third attempt although something else ran" >&2
}

ops_per_sec() { python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["run"]["ops_per_sec"]))' "$1"; }

declare -A SPEC
MC_PORT=$BASE_PORT
EPH_KV=$((BASE_PORT + 10))
PER_KV=$((BASE_PORT + 20))
SPEC[memcached]="memcached://127.0.0.1:$MC_PORT"
SPEC[settee-ephemeral]="couchbase://127.0.0.1:$EPH_KV/default"
SPEC[settee-persistent]="couchbase://127.0.0.1:$PER_KV/default"
read -r -a TARGETS <<<"${TARGETS:-memcached settee-ephemeral settee-persistent}"

if [ "${MEMORY_ONLY:-0}" != 1 ]; then
    log "starting memcached and settee (ephemeral, persistent)"
    start_memcached "$MC_PORT" "$RAM_MB"
    start_settee ephemeral "$EPH_KV" ephemeral
    start_settee persistent "$PER_KV" couchbase

    COMMON=(-t "$CLIENT_THREADS" --connections "$CLIENT_CONNS" -I "$ITEMS" -m "$VALUE_BYTES" -M "$VALUE_BYTES")

    log "loading $ITEMS items of $VALUE_BYTES bytes into each target"
    for t in "${TARGETS[@]}"; do
        measured "$OUT/load-$t.json" --spec "${SPEC[$t]}" "${COMMON[@]}" -B 100 --populate-only --label "$t" \
            --case "load $ITEMS items"
    done

    # name|options|description
    CASES=(
        "set100-b1|-r 100 -B 1|100% set, batch 1"
        "get95-b1|-r 5 -B 1|95/5 get/set, batch 1"
        "get50-b1|-r 50 -B 1|50/50 get/set, batch 1"
        "get100-b1|-r 0 -B 1|100% get, batch 1"
        "set100-b50|-r 100 -B 50|100% set, batch 50"
        "get95-b50|-r 5 -B 50|95/5 get/set, batch 50"
        "get50-b50|-r 50 -B 50|50/50 get/set, batch 50"
        "get100-b50|-r 0 -B 50|100% get, batch 50"
    )

    for round in $(seq 1 "$ROUNDS"); do
        log "round $round of $ROUNDS"
        for c in "${CASES[@]}"; do
            IFS='|' read -r name opts desc <<<"$c"
            for t in "${TARGETS[@]}"; do
                echo "   $desc: $t" >&2
                # shellcheck disable=SC2086
                measured "$OUT/r$round-$name-$t.json" --spec "${SPEC[$t]}" "${COMMON[@]}" $opts --no-population \
                    -d "$DURATION" --warmup "$WARMUP" --seed "$round" --label "$t" --case "$desc"
            done
        done
    done

    if [ "${SKIP_LATENCY:-0}" != 1 ]; then
        log "p99 at half of each target's peak (95/5 get/set, batch 1, open loop)"
        for round in $(seq 1 "$ROUNDS"); do
            for t in "${TARGETS[@]}"; do
                peak=$(ops_per_sec "$OUT/r$round-get95-b1-$t.json")
                rate=$(( peak / 2 > 0 ? peak / 2 : 1 ))
                echo "   round $round, $t: $rate ops/s (half of $peak)" >&2
                # One connection per client thread, so the client waits for each send with a microsecond-precise
                # sleep (same number of connections as the peak runs).
                measured "$OUT/r$round-half-$t.json" --spec "${SPEC[$t]}" -t $((CLIENT_THREADS * CLIENT_CONNS)) \
                    --connections 1 -I "$ITEMS" -m "$VALUE_BYTES" -M "$VALUE_BYTES" -r 5 -B 1 --no-population \
                    -d "$DURATION" --warmup "$WARMUP" --seed "$round" --rate-limit "$rate" --label "$t" \
                    --case "95/5, batch 1, at half of the target's peak"
            done
        done
    fi

    log "results (median of $ROUNDS rounds; ratio = target / memcached)"
    bench compare --baseline memcached "$OUT"/r*-*.json --output "$OUT/table.md"
    for c in "${CASES[@]}"; do
        IFS='|' read -r name _ desc <<<"$c"
        bench plot "$OUT/r1-$name-"*.json --output "$OUT/$name.svg" --title "$desc (round 1)" >/dev/null
    done

    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
fi

if [ "$MEM_ITEMS" -gt 0 ]; then
    log "memory per item: $MEM_ITEMS items, 36-byte UUID keys, $VALUE_BYTES-byte values, fresh servers"
    RAM_MB=$(( MEM_ITEMS * 600 / 1048576 + 1024 ))
    rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
    metric() { curl -sf -u Administrator:password "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m {s += $NF} END {print s + 0}'; }
    # eject_every_value KV_PORT ITEMS: waits for the flusher to write every item, cuts the bucket's quota to the
    # minimum (the items' keys and metadata alone then exceed it) and waits until the item pager has ejected every
    # value.
    eject_every_value() {
        local mgmt=$(($1 + 1)) deadline=$((SECONDS + 600))
        python3 scripts/kv_drain.py "$1" >/dev/null
        curl -sf -u Administrator:password -X POST "http://127.0.0.1:$mgmt/pools/default/buckets/default" -d ramQuota=100 >/dev/null
        until [ "$(metric "$mgmt" kv_ep_num_value_ejects)" -ge "$2" ]; do
            [ $SECONDS -lt $deadline ] || { echo "the pager ejected $(metric "$mgmt" kv_ep_num_value_ejects) of $2 values in 600 s" >&2; exit 1; }
            sleep 1
        done
        wait_quiet
    }
    {
        echo "| target | items | RSS before (MiB) | RSS after (MiB) | bytes per item | key + value | overhead per item | RSS once quiet + 20 s (MiB) | overhead per item then | RSS after ${CHURN_SECS} s of 50–400-byte overwrites (MiB) |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    } >"$OUT/memory.md"
    for t in "${TARGETS[@]}"; do
        case $t in
            memcached) start_memcached $((BASE_PORT + 30)) "$RAM_MB"; spec="memcached://127.0.0.1:$((BASE_PORT + 30))" ;;
            settee-ephemeral) start_settee mem-eph $((BASE_PORT + 40)) ephemeral; spec="couchbase://127.0.0.1:$((BASE_PORT + 40))/default" ;;
            settee-persistent) start_settee mem-per $((BASE_PORT + 50)) couchbase; spec="couchbase://127.0.0.1:$((BASE_PORT + 50))/default" ;;
            settee-ejected) start_settee mem-ej $((BASE_PORT + 60)) couchbase; spec="couchbase://127.0.0.1:$((BASE_PORT + 60))/default" ;;
        esac
        pid=$STARTED_PID
        sleep 1
        before=$(rss_kb "$pid")
        measured "$OUT/memory-$t.json" --spec "$spec" -t 2 --connections 2 -B 100 -I "$MEM_ITEMS" --key-format uuid \
            -m "$VALUE_BYTES" -M "$VALUE_BYTES" --populate-only --label "$t" --case "memory"
        sleep 2
        after=$(rss_kb "$pid")
        # A persistent bucket is still flushing 2 s after the load; its steady state comes once it is quiet and the
        # allocator has had time to return freed pages.
        wait_quiet
        if [ "$t" = settee-ejected ]; then
            eject_every_value $((BASE_PORT + 60)) "$MEM_ITEMS"
        fi
        sleep 20
        settled=$(rss_kb "$pid")
        churned=0
        if [ "$CHURN_SECS" -gt 0 ]; then
            # Overwrites with other value sizes: what the allocator keeps once items change size.
            measured "$OUT/churn-$t.json" --spec "$spec" -t 2 --connections 2 -B 50 -I "$MEM_ITEMS" --key-format uuid \
                -m 50 -M 400 -r 100 --no-population -d "$CHURN_SECS" --label "$t" --case "churn"
            sleep 2
            churned=$(rss_kb "$pid")
        fi
        [ "$t" = settee-ejected ] && churned=0  # overwrites there would only meet TMPFAIL
        python3 - "$t" "$MEM_ITEMS" "$before" "$after" "$VALUE_BYTES" "$churned" "$settled" >>"$OUT/memory.md" <<'EOF'
import sys
t, n, before, after, value, churned, settled = sys.argv[1], *map(int, sys.argv[2:])
per = (after - before) * 1024 / n
per_settled = (settled - before) * 1024 / n
kv = 36 + value
churn = f"{churned/1024:.1f}" if churned else "—"
print(f"| {t} | {n} | {before/1024:.1f} | {after/1024:.1f} | {per:.1f} | {kv} | {per - kv:.1f} | {settled/1024:.1f} | "
      f"{per_settled - kv:.1f} | {churn} |")
EOF
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    cat "$OUT/memory.md"
fi

log "done: $OUT (table.md, memory.md, *.svg, one JSON result per run)"
