# Sourced by the cluster benchmark scripts: start settee nodes on 127.0.0.x (default ports, no bucket, data in
# $WORK/<ip>, log in $WORK/<ip>.log) with $BIN, and stop them all. Callers set BIN and WORK.

PIDS=()

# start_node IP [extra server args...]: starts a node and waits until it answers /pools (it formed or joined).
start_node() {
    local ip=$1
    shift
    "$BIN" server --data-dir "$WORK/$ip" --host "$ip" --bucket "" "$@" >>"$WORK/$ip.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 600); do
        curl -sf "http://$ip:8091/pools" >/dev/null && return 0
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
