# Sourced by the cluster benchmark scripts: start settee nodes on 127.0.0.x (default ports, no bucket, data in
# $WORK/<ip>, log in $WORK/<ip>.log) with $BIN, stop them all, and read their /metrics (a sum over nodes, the
# flushers' queues). Callers set BIN and WORK.

PIDS=()

# start_node IP [extra server args...]: starts a node and waits until it answers /pools (it formed or joined) on
# its management port, MGMT_PORT (8091 unless the caller sets it, with --mgmt-port among the args).
start_node() {
    local ip=$1
    shift
    "$BIN" server --data-dir "$WORK/$ip" --host "$ip" --bucket "" "$@" >>"$WORK/$ip.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 600); do
        curl -sf "http://$ip:${MGMT_PORT:-8091}/pools" >/dev/null && return 0
        sleep 0.1
    done
    echo "node $ip did not start" >&2
    exit 1
}

# stop_all: SIGTERM to every node started, then wait for them.
stop_all() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}

# metric_sum NAME IP...: the sum of a /metrics series (every label set) over the nodes at IP... (port 8091).
metric_sum() {
    local name=$1 total=0 v ip
    shift
    for ip in "$@"; do
        v=$(curl -sf -u Administrator:password "http://$ip:8091/metrics" |
            awk -v m="$name" '$1 ~ "^"m {s += $NF} END {print s + 0}')
        total=$(echo "$total + $v" | bc)
    done
    echo "$total"
}

# queue_empty IP...: waits (at most two hours) until the flushers of the nodes at IP... have written every item
# (kv_ep_queue_size 0).
queue_empty() {
    for _ in $(seq 1 7200); do
        [ "$(metric_sum kv_ep_queue_size "$@")" = 0 ] && return 0
        sleep 1
    done
    echo "the flushers of $* did not empty their queues" >&2
    exit 1
}
