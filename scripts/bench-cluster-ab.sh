#!/usr/bin/env bash
# A/B comparison of two settee binaries on replicated writes (the two-node sibling of scripts/bench-ab.sh): forms
# one two-node cluster per binary (one replica, both running for the whole comparison, idle while the other is
# measured), then runs the same write load against A and B in alternation, ROUNDS times, once per durability
# level, and prints per run the writes/s, p50/p99 and the CPU time both servers of that cluster spent per write
# (user + system from /proc, divided by the writes the bench counted), with the machine's load average; on a
# couchbase bucket also the part of it spent by the flusher threads and by fjall's workers (memtable flushes,
# compaction), both nodes together.
#
# Usage: scripts/bench-cluster-ab.sh BIN_A BIN_B [extra settee bench options]
# Environment: BUCKET_TYPE [ephemeral] (or couchbase)  LEVELS ["none majority"]  ROUNDS [3]  DURATION [10]
#   BATCH [16] (requests in flight per connection: 4 connections)
#   BASE_PORT [29000] (cluster A uses BASE_PORT..+5 on 127.0.0.21-22, cluster B BASE_PORT+10..+15 on 127.0.0.23-24)
set -euo pipefail
A=$1 B=$2
shift 2
BUCKET_TYPE="${BUCKET_TYPE:-ephemeral}" LEVELS="${LEVELS:-none majority}" ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}" BASE_PORT="${BASE_PORT:-29000}"
WORK=$(mktemp -d /tmp/settee-bench-cluster-ab.XXXXXX)
ADMIN=(-u Administrator:password)
declare -A NODE_PIDS
# shellcheck source=scripts/cluster-nodes.sh
. "$(dirname "$0")/cluster-nodes.sh"
trap 'stop_all; rm -rf "$WORK"' EXIT

start_at() { # BIN IP KV_PORT [extra server args]: a node on KV_PORT..KV_PORT+2, TLS ports off
    local bin=$1 ip=$2 kv=$3
    shift 3
    BIN=$bin MGMT_PORT=$((kv + 1)) SETTEE_LOG=warn start_node "$ip" --kv-port "$kv" --mgmt-port $((kv + 1)) \
        --query-port $((kv + 2)) --kv-tls-port 0 --mgmt-tls-port 0 --query-tls-port 0 "$@"
    NODE_PIDS[$ip]=${PIDS[-1]}
}
form_cluster() { # BIN IP1 IP2 KV_PORT1 KV_PORT2
    local bin=$1 ip1=$2 ip2=$3 kv1=$4 kv2=$5 mgmt
    mgmt="http://$ip1:$((kv1 + 1))"
    start_at "$bin" "$ip1" "$kv1"
    start_at "$bin" "$ip2" "$kv2" --join "$ip1:$((kv1 + 1))"
    curl -sf "${ADMIN[@]}" -X POST "$mgmt/controller/rebalance" \
        -d "knownNodes=ns_1@$ip1,ns_1@$ip2&ejectedNodes=" >/dev/null
    while curl -sf "${ADMIN[@]}" "$mgmt/pools/default/tasks" | grep -q '"status":"running"'; do sleep 0.2; done
    curl -sf "${ADMIN[@]}" -X POST "$mgmt/pools/default/buckets" \
        -d "name=default&bucketType=$BUCKET_TYPE&ramQuota=2048&replicaNumber=1" >/dev/null
}
ticks() { # sum of utime+stime over the given pids
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}

# Ticks of the threads named flusher* and fjall* of the given pids: "FLUSHER FJALL".
persistence_ticks() {
    local f=0 w=0 p d st
    for p in "$@"; do
        for d in /proc/"$p"/task/*; do
            case "$(cat "$d/comm")" in
                flusher*) read -r -a st <"$d/stat"; f=$((f + st[13] + st[14]));;
                fjall*) read -r -a st <"$d/stat"; w=$((w + st[13] + st[14]));;
            esac
        done
    done
    echo "$f $w"
}

form_cluster "$A" 127.0.0.21 127.0.0.22 "$BASE_PORT" $((BASE_PORT + 3))
form_cluster "$B" 127.0.0.23 127.0.0.24 $((BASE_PORT + 10)) $((BASE_PORT + 13))
sleep 3
echo "machine: $(nproc) vCPUs, $(uname -r); bucket $BUCKET_TYPE; A=$A B=$B; $(date -u +%FT%TZ)"
COMMON=(-I 100000 -m 200 -M 200 -r 100 -t 2 --connections 2 -B "${BATCH:-16}" --duration "$DURATION" --no-population)
for r in $(seq "$ROUNDS"); do
    for level in $LEVELS; do
        for name in A B; do
            if [ "$name" = A ]; then ip1=127.0.0.21 ip2=127.0.0.22 kv=$BASE_PORT; else
                ip1=127.0.0.23 ip2=127.0.0.24 kv=$((BASE_PORT + 10)); fi
            pids=("${NODE_PIDS[$ip1]}" "${NODE_PIDS[$ip2]}")
            args=("${COMMON[@]}" "$@")
            [ "$level" != none ] && args+=(--durability "$level")
            t0=$(ticks "${pids[@]}")
            read -r f0 w0 < <(persistence_ticks "${pids[@]}")
            "$A" bench --spec "couchbase://$ip1:$kv/default" -q "${args[@]}" --json "$WORK/r$r-$level-$name.json" \
                >/dev/null
            t1=$(ticks "${pids[@]}")
            read -r f1 w1 < <(persistence_ticks "${pids[@]}")
            python3 - "$WORK/r$r-$level-$name.json" "$name" "$r" "$level" $((t1 - t0)) $((f1 - f0)) $((w1 - w0)) <<'PY'
import json, os, sys
run = json.load(open(sys.argv[1]))["run"]
hz = os.sysconf("SC_CLK_TCK")
cpu_s = int(sys.argv[5]) / hz
flusher_s, fjall_s = int(sys.argv[6]) / hz, int(sys.argv[7]) / hz
ops = run["ops"]
lat = run["latency_us"]
load = open("/proc/loadavg").read().split()[0]
print(f"round {sys.argv[3]} {sys.argv[4]:9} {sys.argv[2]}: {run['ops_per_sec']:>8,.0f} writes/s  p50 {lat['p50']:>5.0f} µs  "
      f"p99 {lat['p99']:>6.0f} µs  server CPU {1e6 * cpu_s / max(ops, 1):5.1f} µs/write "
      f"({ops / cpu_s if cpu_s else 0:>7,.0f} per vCPU)  errors {run['errors']}  load {load}"
      + (f"  of which flushers {1e6 * flusher_s / max(ops, 1):.2f}, fjall workers {1e6 * fjall_s / max(ops, 1):.2f} µs/write"
         if flusher_s or fjall_s else ""))
PY
        done
    done
done
