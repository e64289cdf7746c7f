#!/usr/bin/env bash
# Runs the fuzz campaign (issue 17 item 4): every target in fuzz/ under libFuzzer for SECONDS each (default 60),
# starting from its seed corpus in fuzz/seeds/<target> and keeping what it finds in fuzz/corpus/<target> (ignored by
# git; copy inputs worth keeping into fuzz/seeds). A crash stops the run with the reproducer under fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Needs the nightly toolchain and cargo-fuzz (installed here when missing: `rustup toolchain install nightly`,
# `cargo install cargo-fuzz --locked`). The seed corpus of the server-side targets also replays in the ordinary
# test suite (`settee_server::fuzzing`), so CI checks those properties on every run without nightly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_EACH="${1:-60}"
shift || true
ALL_TARGETS=(decode_request subdoc_path sql_parse scram_exchange rest_form security_settings)
TARGETS=("${@:-${ALL_TARGETS[@]}}")

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi

for target in "${TARGETS[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    seeds=()
    [ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
    echo "== $target: ${SECONDS_EACH}s"
    log="$(mktemp)"
    # -O: optimised with debug assertions; the sanitizer is cargo-fuzz's default (address).
    if ! cargo +nightly fuzz run -O "$target" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz target $target failed; reproducer (if any) under fuzz/artifacts/$target/" >&2
        exit 1
    fi
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+ +DONE' "$log" || true
    rm -f "$log"
done
