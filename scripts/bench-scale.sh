#!/usr/bin/env bash
# Issue 20, item 2 (the seeds' scale): ITEMS documents (36-byte UUID keys, 200-byte values) in a couchbase bucket
# with value eviction whose quota holds about half of the values; the load rate, RSS and disk size once flushed,
# the warmup time after a restart, then a latency table in the shape of Criteo's: for each set rate in RATES, an
# open-loop run of DURATION seconds at READ_PCT reads (uniform keys) giving the ops/s reached, p50/p95/p99/p99.9,
# the TMPFAIL answers, the largest disk write queue and the largest RSS seen. NODES=2 runs the same on two nodes
# with one replica (127.0.0.1 and 127.0.0.2, default ports).
# Environment: ITEMS (100000000), RATES (set rates, "20000 40000 60000 80000 100000"), READ_PCT (95), DURATION (30),
# NODES (1), WORK (a new temporary directory), SETTEE_BIN (default: a release build with jemalloc).
# Needs about ITEMS x 260 B of RAM per node (the quota, about 1.1 x it in RSS) and ITEMS x 370 B of disk (20 M items:
# 4,966 MiB, 7.3 GB); 100 M items want a machine with 32 GiB of RAM and 64 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-100000000}
RATES=${RATES:-20000 40000 60000 80000 100000}
READ_PCT=${READ_PCT:-95}
DURATION=${DURATION:-30}
NODES=${NODES:-1}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-scale.XXXXXX)}
# Key, metadata and half of each value, at the bucket's high watermark (85 %).
QUOTA_MB=$((ITEMS * (36 + 56 + 100) * 100 / 85 / 1048576 + 256))
if [ -z "${SETTEE_BIN:-}" ]; then
    cargo build --release -p settee-server --features jemalloc --bin settee >&2
    SETTEE_BIN=target/release/settee
fi
BIN=$SETTEE_BIN
mkdir -p "$WORK"
IPS=(127.0.0.1)
[ "$NODES" = 2 ] && IPS+=(127.0.0.2)
SPEC="couchbase://127.0.0.1/default"

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r), commit $(git rev-parse --short HEAD)"
echo "$ITEMS items, $NODES node(s), quota $QUOTA_MB MiB per node (value eviction); load average $(cut -d' ' -f1-3 /proc/loadavg)"

# shellcheck source=scripts/cluster-nodes.sh
. scripts/cluster-nodes.sh
trap stop_all EXIT
resident_pct() { # the active vBuckets' resident ratio on the first node, in percent
    curl -sf -u Administrator:password http://127.0.0.1:8091/metrics |
        awk '/^kv_vb_perc_mem_resident_ratio.*state="active"/ {printf "%.0f", $NF * 100}'
}
rss_mb() { # the sum of the nodes' RSS in MiB
    local kb=0
    for p in "${PIDS[@]}"; do kb=$((kb + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done
    echo $((kb / 1024))
}
start_all() {
    start_node 127.0.0.1
    [ "$NODES" = 2 ] && start_node 127.0.0.2 --join 127.0.0.1:8091
    return 0
}

start_all
if [ "$NODES" = 2 ]; then
    curl -sf -u Administrator:password -X POST http://127.0.0.1:8091/controller/rebalance \
        -d 'knownNodes=ns_1@127.0.0.1,ns_1@127.0.0.2' >/dev/null
    sleep 5
fi
curl -sf -u Administrator:password -X POST http://127.0.0.1:8091/pools/default/buckets -d "name=default" \
    -d "bucketType=couchbase&ramQuota=$QUOTA_MB&replicaNumber=$((NODES - 1))&evictionPolicy=valueOnly" >/dev/null
sleep 2

t0=$(date +%s.%N)
# The loader retries TMPFAIL as the SDKs do: the quota fills with values the disk has not taken yet.
"$BIN" bench --spec "$SPEC" -q -I "$ITEMS" -m 200 -M 200 --key-format uuid --populate-only -B 64 -t 2 \
    --connections 2 --retry-tmpfail --timeout 600 --json "$WORK/load.json" >/dev/null
t1=$(date +%s.%N)
queue_empty "${IPS[@]}"
t2=$(date +%s.%N)
printf 'load: %.0f items/s acknowledged (%.1f s), %.0f items/s on disk (%.1f s to the empty queue)\n' \
    "$(echo "$ITEMS / ($t1 - $t0)" | bc -l)" "$(echo "$t1 - $t0" | bc -l)" \
    "$(echo "$ITEMS / ($t2 - $t0)" | bc -l)" "$(echo "$t2 - $t0" | bc -l)"
python3 - "$WORK/load.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["load"]
print(f"load: {l['ops']:,} writes, {l['retries']:,} retried after TMPFAIL, {l['errors']:,} errors {l.get('errors_by_kind', {})}")
PY
echo "after the load: RSS $(rss_mb) MiB, disk $(du -sm "$WORK" | cut -f1) MB, resident ratio $(resident_pct) %; load average $(cut -d' ' -f1-3 /proc/loadavg)"

stop_all
start_all
for _ in $(seq 1 3600); do
    done_nodes=$(cat "$WORK"/127.0.0.*.log | grep -c "warmup complete" || true)
    [ "$done_nodes" -ge $((NODES * 2)) ] && break
    sleep 1
done
echo "warmup after restart: $(sed 's/\x1b\[[0-9;]*m//g' "$WORK/127.0.0.1.log" | grep "warmup complete" | tail -1 | grep -o 'items=.*')"
echo "after warmup: RSS $(rss_mb) MiB"

echo
echo "| set rate asked | ops/s reached | sets/s | p50 | p95 | p99 | p99.9 | TMPFAIL | largest disk queue | largest RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rate in $RATES; do
    total=$((rate * 100 / (100 - READ_PCT)))
    "$BIN" bench --spec "$SPEC" -q -I "$ITEMS" -m 200 -M 200 --key-format uuid --no-population \
        -r $((100 - READ_PCT)) -t 2 --connections 1 -B 32 --rate-limit "$total" --duration "$DURATION" \
        --json "$WORK/rate-$rate.json" >/dev/null &
    bench=$!
    qmax=0 rmax=0
    while kill -0 "$bench" 2>/dev/null; do
        q=$(metric_sum kv_ep_queue_size "${IPS[@]}") r=$(rss_mb)
        [ "$(echo "$q > $qmax" | bc)" = 1 ] && qmax=$q
        [ "$r" -gt "$rmax" ] && rmax=$r
        sleep 1
    done
    wait "$bench" || true
    python3 - "$WORK/rate-$rate.json" "$rate" "$qmax" "$rmax" "$READ_PCT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
lat = r["latency_us"]
sets = r["operations"].get("set", {}).get("ops_per_sec", 0)
tmp = sum(v for k, v in r.get("errors_by_kind", {}).items() if "TMPFAIL" in k)
ms = lambda us: f"{us / 1000:.2f} ms"
print(f"| {int(sys.argv[2]):,} | {r['ops_per_sec']:,.0f} | {sets:,.0f} | {ms(lat['p50'])} | {ms(lat['p95'])} | "
      f"{ms(lat['p99'])} | {ms(lat['p99_9'])} | {tmp:,} | {int(float(sys.argv[3])):,} | {int(sys.argv[4]):,} MiB |")
PY
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
