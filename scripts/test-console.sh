#!/usr/bin/env bash
# Runs the web console's browser tests (tests/console): a real `settee server` on free ports, the official Python
# SDK writing documents, and Debian's Chromium, headless, driven by Playwright (Python), which signs in, reads the
# overview, the charts and the latency view, edits a document and runs queries. About 15 seconds once installed.
#
# On a fresh Debian machine it installs Chromium (`apt-get install chromium`; Playwright's own browser download is
# never used) and the Python requirements into .venv, and builds `settee` (debug) unless SETTEE_BIN is set.
#
# Environment:
#   SETTEE_BIN=path          test this binary instead of building target/debug/settee
#   SETTEE_CHROMIUM=path     another Chromium (default /usr/bin/chromium)
#   SETTEE_CONSOLE_OUT=dir   where the screenshots go (default tests/console/output, ignored by git)
#   PYTEST_ARGS="..."        extra pytest arguments
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '\n== %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root to run: $*" >&2; return 1; fi
}

if [ ! -x "${SETTEE_CHROMIUM:-/usr/bin/chromium}" ]; then
    log "installing Chromium (Debian chromium)"
    command -v apt-get >/dev/null || { echo "no Chromium and no apt-get to install it" >&2; exit 2; }
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium
fi

if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
fi
log "installing the console tests' Python requirements"
.venv/bin/python -m pip install -q -r tests/console/requirements.txt

if [ -z "${SETTEE_BIN:-}" ]; then
    log "building settee (cargo build -p settee-server --bin settee)"
    cargo build -p settee-server --bin settee
    export SETTEE_BIN="$ROOT/target/debug/settee"
fi

log "web console browser tests against $SETTEE_BIN"
# shellcheck disable=SC2086
(cd tests/console && ../../.venv/bin/python -m pytest ${PYTEST_ARGS:-})
