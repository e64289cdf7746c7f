#!/usr/bin/env bash
# The backup and restore figures of BENCHMARKS.md (issue 22), from a release build on this machine: one node holding
# ITEMS JSON documents (36-byte UUID keys, 200-byte bodies) in a couchbase bucket, fully flushed to disk; a full
# `settee backup backup`, an incremental one after 1 % of the documents changed, and a restore of both into an
# empty bucket on a second node. Reports wall time, documents/s, archive MB/s and the tool's peak RSS per step.
# Environment: ITEMS (default 1000000), WORK (default a new temporary directory), SETTEE_BIN (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."

ITEMS=${ITEMS:-1000000}
WORK=${WORK:-$(mktemp -d /tmp/settee-bench-backup.XXXXXX)}
CHANGED=$((ITEMS / 100))
QUOTA_MB=$((ITEMS * 700 / 1048576 + 512))
AUTH=(-u Administrator -p password)
if [ -z "${SETTEE_BIN:-}" ]; then
    cargo build --release -p settee-server --features jemalloc --bin settee >&2
    SETTEE_BIN=target/release/settee
fi
BIN=$SETTEE_BIN
mkdir -p "$WORK"
ARCHIVE="$WORK/archive"

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r), commit $(git rev-parse --short HEAD)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "work dir: $WORK; $ITEMS documents, $CHANGED changed before the incremental"

# shellcheck source=scripts/cluster-nodes.sh
. scripts/cluster-nodes.sh
trap stop_all EXIT


# timed NAME DOCS CMD...: runs CMD under /usr/bin/time and prints one table row: wall time, docs/s, and the archive
# bytes per second: those the step wrote (a backup) or, for a restore (archive unchanged), the whole archive read.
timed() {
    local name=$1 docs=$2
    shift 2
    local before after t0 t1 secs
    before=$(du -sb "$ARCHIVE" 2>/dev/null | cut -f1 || echo 0)
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$WORK/rss" "$@" >"$WORK/$name.log" 2>&1
    t1=$(date +%s.%N)
    after=$(du -sb "$ARCHIVE" | cut -f1)
    [ "$after" = "$before" ] && before=0
    secs=$(echo "$t1 - $t0" | bc -l)
    printf '| %s | %d | %.2f s | %.0f docs/s | %.1f MB/s | %.1f MB | %.0f MB peak RSS |\n' \
        "$name" "$docs" "$secs" "$(echo "$docs / $secs" | bc -l)" \
        "$(echo "($after - $before) / $secs / 1000000" | bc -l)" "$(echo "($after - $before) / 1000000" | bc -l)" \
        "$(echo "$(cat "$WORK/rss") / 1024" | bc -l)"
}

start_node 127.0.0.1
start_node 127.0.0.2
for ip in 127.0.0.1 127.0.0.2; do
    curl -sf -u Administrator:password -X POST "http://$ip:8091/pools/default/buckets" \
        -d "name=default&bucketType=couchbase&ramQuota=$QUOTA_MB&replicaNumber=0" >/dev/null
done
sleep 1
"$BIN" bench --spec couchbase://127.0.0.1/default -q -I "$ITEMS" -m 200 -M 200 --json-docs --key-format uuid \
    --populate-only -B 64 -t 2 --connections 2 >/dev/null
queue_empty 127.0.0.1
echo "loaded and flushed $ITEMS documents; load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$BIN" backup config -a "$ARCHIVE" -r r >/dev/null
echo "| step | documents | wall time | documents/s | archive MB/s | archive written or read | tool's memory |"
echo "|---|---|---|---|---|---|---|"
timed full "$ITEMS" "$BIN" backup backup -a "$ARCHIVE" -r r -c http://127.0.0.1:8091 "${AUTH[@]}" --no-progress-bar
"$BIN" bench --spec couchbase://127.0.0.1/default -q -I "$CHANGED" -m 200 -M 200 --json-docs --key-format uuid \
    --populate-only -B 64 -t 2 --connections 2 >/dev/null
queue_empty 127.0.0.1
timed incremental "$CHANGED" "$BIN" backup backup -a "$ARCHIVE" -r r -c http://127.0.0.1:8091 "${AUTH[@]}" --no-progress-bar
timed restore $((ITEMS + CHANGED)) "$BIN" backup restore -a "$ARCHIVE" -r r -c http://127.0.0.2:8091 "${AUTH[@]}" \
    --no-progress-bar
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
count=$(curl -sf -u Administrator:password http://127.0.0.2:8091/pools/default/buckets/default |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["basicStats"]["itemCount"])')
echo "documents in the restored bucket: $count (expected $ITEMS)"
[ "$count" = "$ITEMS" ]
