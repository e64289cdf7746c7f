#!/usr/bin/env bash
# Runs the black-box checker (tests/jepsen, issue 21 item 3) RUNS times for SECONDS of faults each: a cluster of
# real `settee server` processes on 127.0.0.11.., the official Go SDK (gocb) reading, writing and CAS-ing 16 keys
# with majority and persistToMajority durability, while a nemesis scheduled from the seed kills, pauses, fails over
# (hard, graceful, automatic), recovers (delta, full), rebalances nodes in and out, swaps them and partitions the
# network. Each run checks for lost acknowledged writes, stale reads, linearizability violations (porcupine),
# replica divergence and failed recoveries; a failed run prints its seed (which repeats its schedule) and the
# failing key's history, and keeps its logs under $TMPDIR/settee-jepsen. The last line, JEPSEN-TOTAL, sums the runs
# (JSON); the exit status is non-zero if any run failed.
#
# Partitions need root (the test re-executes itself in a private network namespace); without it the runs go on
# without partitions and say so.
#
# Usage: scripts/jepsen.sh [runs (default 10)] [seconds of faults per run (default 300)] [first seed (default: the time)]
# Environment: SETTEE_BIN=path tests that binary instead of building target/debug/settee;
#   SETTEE_JEPSEN_NODES (default 4 processes), SETTEE_JEPSEN_MEMBERS (default 3 of them form the cluster).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS="${1:-10}"
SECONDS_PER_RUN="${2:-300}"
SEED="${3:-$(date +%s)}"

if [ -z "${SETTEE_BIN:-}" ]; then
    cargo build -p settee-server --bin settee
    export SETTEE_BIN="$ROOT/target/debug/settee"
fi
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
# A run lasts its faults plus formation, healing and checks (about a minute), and the linearizability search.
TIMEOUT=$(( RUNS * (SECONDS_PER_RUN + 300) ))
cd tests/jepsen
SETTEE_JEPSEN_RUNS="$RUNS" SETTEE_JEPSEN_SECONDS="$SECONDS_PER_RUN" SETTEE_JEPSEN_SEED="$SEED" \
    exec go test -count=1 -v -run TestBlackBox -timeout "${TIMEOUT}s" .
