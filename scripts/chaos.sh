#!/usr/bin/env bash
# Runs the recovery schedule of issue 21 (tests/compat/python/chaos.py) N times against real `settee server`
# processes: three nodes with one replica, majority writes and CAS on 16 keys, SIGKILL + auto-failover + restart +
# delta recovery, graceful failover + full recovery, a swap rebalance. Each run checks that every node keeps
# answering and that no acknowledged write is lost; the logs of failed runs are kept under
# $TMPDIR/settee-chaos-failures/seed-<seed>. A summary (JSON) ends the output; the exit status is non-zero if any
# run failed.
#
# Usage: scripts/chaos.sh [runs (default 10)] [first seed (default: the time)]
# Environment: SETTEE_BIN=path tests that binary instead of building target/debug/settee.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS="${1:-10}"
SEED="${2:-$(date +%s)}"

if [ -z "${SETTEE_BIN:-}" ]; then
    cargo build -p settee-server --bin settee
    export SETTEE_BIN="$ROOT/target/debug/settee"
fi
[ -x .venv/bin/python ] || { echo "no .venv: run scripts/test-compat.sh once to create it" >&2; exit 2; }
cd tests/compat/python
exec ../../../.venv/bin/python chaos.py "$RUNS" "$SEED"
