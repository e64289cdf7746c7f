#!/usr/bin/env bash
# TLS cost (issue 17; BENCHMARKS.md "TLS cost"): one release node with its TLS ports on, an ephemeral bucket, and the
# same `settee bench` mix (95/5 get/set, 200-byte values) over couchbase:// (plain KV port) and couchbases:// (the
# KV TLS port, the node's CA), batch 1 and 50, rounds alternating; then full TLS handshakes per second on the KV TLS
# port (`openssl s_time -new`), and the node's resident memory with 1,000 idle connections open, plain then TLS.
# Usage: scripts/bench-tls.sh [rounds] [seconds]; results in target/bench/tls/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ROUNDS=${1:-3}
SECS=${2:-10}
OUT=target/bench/tls
IDLE_WAIT_MAX=0
BASE_PORT=27410
rm -rf "$OUT"
# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh
KV=$BASE_PORT MGMT=$((BASE_PORT + 1)) QUERY=$((BASE_PORT + 2))
KV_TLS=$((BASE_PORT + 3)) MGMT_TLS=$((BASE_PORT + 4)) QUERY_TLS=$((BASE_PORT + 5))
SETTEE_LOG=warn "$SETTEE_BIN" server --data-dir "$OUT/data" --host 127.0.0.1 --kv-port "$KV" --mgmt-port "$MGMT" \
    --query-port "$QUERY" --kv-tls-port "$KV_TLS" --mgmt-tls-port "$MGMT_TLS" --query-tls-port "$QUERY_TLS" \
    --bucket default --bucket-type ephemeral --bucket-ram-mb 1024 >"$OUT/server.log" 2>&1 &
SERVER=$!
AUTH=Administrator:password
until curl -sf -u $AUTH "http://127.0.0.1:$MGMT/pools/default" >/dev/null; do sleep 0.2; done
curl -sf -u $AUTH "http://127.0.0.1:$MGMT/pools/default/certificate" >"$OUT/ca.pem"
machine_info >"$OUT/machine.txt"
busy() { pgrep -x rustc >/dev/null && echo "rustc ran during round $r" >>"$OUT/contended.txt" || true; }
run() { # label spec batch populate
    "$SETTEE_BIN" bench --spec "$2" --cacert "$OUT/ca.pem" -t 2 --connections 4 -I 100000 -m 200 -M 200 -r 5 \
        -B "$3" $4 -d "$SECS" --warmup 1 --seed 1 --label "$1" --case "95/5 get/set, batch $3" \
        --json "$OUT/r$r-$1-b$3.json" --quiet
}
PLAIN="couchbase://127.0.0.1:$KV/default"
TLS="couchbases://127.0.0.1:$KV_TLS/default"
r=0; run populate "$PLAIN" 1 ""
for r in $(seq 1 "$ROUNDS"); do
    for b in 1 50; do
        busy
        run plain "$PLAIN" "$b" --no-population
        run tls "$TLS" "$b" --no-population
    done
done
# Full handshakes (no session resumption) per second, from one openssl client for 10 s.
openssl s_time -connect "127.0.0.1:$KV_TLS" -new -time 10 -CAfile "$OUT/ca.pem" 2>&1 \
    | grep -E 'connections in|connections/user sec' >"$OUT/handshakes.txt" || true
# Resident memory with 1,000 idle connections, plain then TLS (each TLS one handshaken).
python3 - "$SERVER" "$KV" "$KV_TLS" "$OUT/ca.pem" >"$OUT/connection-memory.txt" <<'PY'
import socket, ssl, sys, time
pid, kv, kv_tls, ca = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def hold(n, wrap):
    before = rss_kb(); socks = []
    for _ in range(n):
        socks.append(wrap(socket.create_connection(("127.0.0.1", kv_tls if wrap is not plain else kv))))
    time.sleep(2); after = rss_kb()
    for s in socks: s.close()
    time.sleep(2)
    return before, after
plain = lambda s: s
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
tls = lambda s: ctx.wrap_socket(s)
for name, wrap in (("plain", plain), ("tls", tls)):
    before, after = hold(1000, wrap)
    print(f"{name}: rss {before} kB -> {after} kB with 1000 connections: {(after - before) * 1024 / 1000:.0f} bytes each")
PY
echo "done: $OUT"
