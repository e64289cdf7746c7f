# Sourced by scripts/bench-query.sh, bench-index.sh, bench-audit.sh and bench-metrics.sh: measuring one settee node
# on a machine other engineers share. Callers set ROOT, OUT, IDLE_WAIT_MAX and (optionally) SETTEE_BIN before sourcing it.

log() { printf '\n== %s\n' "$*" >&2; }

# Jiffies of the whole machine: "busy steal total" from /proc/stat (steal: time the hypervisor gave our vCPUs to
# someone else, which this VM's process list cannot show).
machine_jiffies() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, $9, t}' /proc/stat; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# Whether process $1 was started by this script (its parent or grandparent is this shell).
ours() {
    local parent
    parent=$(awk '{print $4}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ "$parent" = "$$" ] || [ "$(awk '{print $4}' "/proc/$parent/stat" 2>/dev/null)" = "$$" ]
}

# Whether a compiler, or a busy (over 5% of a CPU) settee this script did not start, loads the machine.
foreign_load() {
    pgrep -x rustc >/dev/null && return 0
    pgrep -x cargo >/dev/null && return 0
    local p before after
    for p in $(pgrep -x settee); do
        ours "$p" && continue
        before=$(cpu_ticks "$p")
        sleep 0.5
        after=$(cpu_ticks "$p")
        [ $((after - before)) -gt $(( $(getconf CLK_TCK) / 40 )) ] && return 0
    done
    return 1
}

# Blocks while something else loads the machine, at most IDLE_WAIT_MAX seconds (other engineers build often).
wait_idle() {
    local deadline=$((SECONDS + IDLE_WAIT_MAX)) announced=0
    while foreign_load; do
        if [ $SECONDS -ge $deadline ]; then
            echo "   (still busy after ${IDLE_WAIT_MAX} s; measuring anyway)" >&2
            return 0
        fi
        [ "$announced" = 0 ] && echo "   (waiting for rustc/cargo or another settee to finish)" >&2
        announced=1
        sleep 10
    done
}

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SERVER=""
BG=""
cleanup() {
    [ -n "$BG" ] && kill "$BG" 2>/dev/null || true
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$OUT/data"
}
trap cleanup EXIT

if [ -z "${SETTEE_BIN:-}" ]; then
    log "building settee (release)"
    cargo build --release -p settee-server --features jemalloc
    SETTEE_BIN="$ROOT/target/release/settee"
fi

# The machine and build a run measured on (the caller adds its settings line).
machine_info() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "nproc: $(nproc)"
    echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "rustc: $(rustc -V 2>/dev/null || echo unknown)"
}

# start_settee [server args...]: starts one node on 127.0.0.1 at BASE_PORT..BASE_PORT+2 (TLS ports off), data in
# $OUT/data, log in $OUT/server.log; sets KV, MGMT, QUERY, SERVER and SPEC, and waits until it answers.
start_settee() {
    KV=$BASE_PORT MGMT=$((BASE_PORT + 1)) QUERY=$((BASE_PORT + 2))
    local p
    for p in $KV $MGMT $QUERY; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is busy" >&2; exit 1; fi
    done
    rm -rf "$OUT/data"
    SETTEE_LOG=warn "$SETTEE_BIN" server --data-dir "$OUT/data" --host 127.0.0.1 --kv-port "$KV" --mgmt-port "$MGMT" \
        --query-port "$QUERY" --kv-tls-port 0 --mgmt-tls-port 0 --query-tls-port 0 "$@" >"$OUT/server.log" 2>&1 &
    SERVER=$!
    for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$MGMT") 2>/dev/null && break; sleep 0.2; done
    SPEC="couchbase://127.0.0.1:$KV/default"
}
