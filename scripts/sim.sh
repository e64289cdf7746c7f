#!/usr/bin/env bash
# Long deterministic-simulation runs: scripts/sim.sh [seeds] [first seed] [fault seconds] [--persistent ...]
# Builds settee-sim in release and runs the seeds; a failing seed prints its summary and the history of the first
# key found not linearizable, and `settee-sim <seed> 1 <fault seconds>` repeats it exactly.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-1000}"
first="${2:-0}"
secs="${3:-20}"
shift $(( $# < 3 ? $# : 3 ))
cargo build --release -q -p settee-sim --bin settee-sim
exec ./target/release/settee-sim "$first" "$seeds" "$secs" "$@"
