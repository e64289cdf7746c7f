#!/usr/bin/env bash
# The project's test command (README "Run the tests"). Installs what the tests need, then runs every suite:
# formatting, the Rust workspace tests (unit, wire, property), and the official-SDK compatibility suites against a
# real `settee server` process, and the web console in a real headless browser.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== build the settee binary (debug) for the process and SDK tests"
cargo build --locked -p settee-server --bin settee
export SETTEE_BIN="$PWD/target/debug/settee"

echo "== memcached (the settee bench tests drive a real one)"
command -v memcached || (apt-get update -qq && apt-get install -y -qq memcached)

echo "== rust workspace tests"
cargo test --locked --workspace

echo "== web console in a headless browser (Chromium + Playwright)"
scripts/test-console.sh

echo "== official SDK compatibility suites"
scripts/test-compat.sh
