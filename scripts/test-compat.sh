#!/usr/bin/env bash
# Runs settee's SDK compatibility suites: the official Python SDK (couchbase 4.6.3, tests/compat/python) and the
# official Go SDK (gocb v2.11.1, tests/compat/go), each against its own `settee server` started on free ports, then
# one short run of the black-box checker (tests/jepsen: a cluster of real processes under faults, gocb as client).
# Afterwards, if Couchbase's default ports (11210/8091/8093) are free, a short smoke run repeats a subset of both
# suites on the default ports with a port-less connection string.
#
# On a fresh Debian machine it installs what it needs (python3-venv, Go from Debian's packages), creates
# .venv with the Python requirements, downloads the Go modules, and builds `settee` (debug) unless SETTEE_BIN is set.
#
# Environment:
#   SETTEE_BIN=path                  test this binary instead of building target/debug/settee
#   SETTEE_COMPAT_SKIP_DEFAULT_PORTS=1  skip the default-port smoke run
#   SETTEE_COMPAT_SKIP_JEPSEN=1       skip the black-box checker's short run (tests/jepsen)
#   PYTEST_ARGS="..."                extra pytest arguments (e.g. "-k subdoc -x")
#   GO_TEST_ARGS="..."               extra `go test` arguments (e.g. "-run TestKV")
#   PYCBC_LOG_LEVEL=debug / GOCB_VERBOSE=1  SDK debug logging
# Exit status: non-zero if any suite failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"


log() { printf '\n== %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root to run: $*" >&2; return 1; fi
}

apt_install() {
    command -v apt-get >/dev/null || { echo "missing $*, and no apt-get to install it" >&2; return 1; }
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@"
}

ensure_python() {
    if ! command -v python3 >/dev/null; then apt_install python3 python3-venv python3-pip; fi
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then apt_install python3-venv; fi
    if [ ! -x .venv/bin/python ]; then
        log "creating .venv"
        python3 -m venv .venv
    fi
    log "installing Python requirements"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r tests/compat/python/requirements.txt
}

ensure_go() {
    if ! command -v go >/dev/null; then
        # Debian's Go is older than gocb needs; GOTOOLCHAIN=auto then fetches the go.mod toolchain through the
        # Go module proxy, the only Go source this project's machines reach.
        log "installing Go (Debian golang-go)"
        apt_install golang-go ca-certificates
    fi
    export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
    log "downloading Go modules ($(go version))"
    (cd tests/compat/go && go mod download)
    (cd tests/jepsen && go mod download)
}

ensure_prometheus() {
    # test_prometheus.py scrapes a node with a real Prometheus server (Debian's package; the test skips without it).
    if ! command -v prometheus >/dev/null && [ ! -x /usr/bin/prometheus ]; then
        log "installing Prometheus (Debian prometheus)"
        apt_install prometheus || echo "prometheus not installed: test_prometheus.py will skip" >&2
    fi
}

ensure_settee() {
    if [ -n "${SETTEE_BIN:-}" ]; then
        [ -x "$SETTEE_BIN" ] || { echo "SETTEE_BIN=$SETTEE_BIN is not executable" >&2; exit 2; }
        SETTEE_BIN="$(cd "$(dirname "$SETTEE_BIN")" && pwd)/$(basename "$SETTEE_BIN")"
        export SETTEE_BIN
        return
    fi
    if ! command -v cargo >/dev/null; then
        if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
            echo "no Rust toolchain (cargo) found: install one with rustup first" >&2
            exit 2
        fi
    fi
    log "building settee (cargo build -p settee-server)"
    cargo build -p settee-server
    export SETTEE_BIN="$ROOT/target/debug/settee"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure_python
ensure_go
ensure_prometheus
ensure_settee

failures=()

log "Python suite (couchbase 4.6.3) against $SETTEE_BIN"
# shellcheck disable=SC2086
if ! (cd tests/compat/python && ../../../.venv/bin/python -m pytest ${PYTEST_ARGS:-}); then
    failures+=("python")
fi

log "Python suite again on a persistent (couchbase) bucket"
# shellcheck disable=SC2086
# (the cluster, rebalance, chaos, index recovery and XDCR suites create their own buckets, whatever the suite's
# type: the first pass already ran them)
if ! (cd tests/compat/python && SETTEE_COMPAT_BUCKET_TYPE=couchbase ../../../.venv/bin/python -m pytest \
        --ignore=test_persistence.py --ignore=test_cluster.py --ignore=test_rebalance.py --ignore=test_chaos.py \
        --ignore=test_query_cluster.py --ignore=test_index_recovery.py --ignore=test_rbac_matrix.py \
        --ignore=test_security_settings.py --ignore=test_cli_rest.py --ignore=test_mixed_versions.py --ignore=test_xdcr.py \
        --ignore=test_xdcr_tls.py --ignore=test_xdcr_faults.py ${PYTEST_ARGS:-}); then
    failures+=("python-couchbase-bucket")
fi

log "Go suite (gocb v2.11.1) against $SETTEE_BIN"
# shellcheck disable=SC2086
if ! (cd tests/compat/go && go test -count=1 -timeout 20m ${GO_TEST_ARGS:-} ./...); then
    failures+=("go")
fi

if [ -z "${SETTEE_COMPAT_SKIP_JEPSEN:-}" ]; then
    # One short run of the black-box checker (about 1.5 minutes): faults for SETTEE_JEPSEN_SECONDS (60), a fresh
    # seed each time (printed; SETTEE_JEPSEN_SEED repeats one). scripts/jepsen.sh runs long ones. Every fault kind
    # is in (SETTEE_JEPSEN_OMIT can leave some out).
    log "black-box checker (tests/jepsen): one short run"
    if ! (cd tests/jepsen && SETTEE_JEPSEN_SECONDS="${SETTEE_JEPSEN_SECONDS:-60}" \
            SETTEE_JEPSEN_OMIT="${SETTEE_JEPSEN_OMIT-}" go test -count=1 -timeout 10m \
            -run 'TestBlackBox|TestCheck' .); then
        failures+=("jepsen")
    fi
fi

if [ -z "${SETTEE_COMPAT_SKIP_DEFAULT_PORTS:-}" ]; then
    if port_free 11210 && port_free 8091 && port_free 8093; then
        log "default-port smoke run (11210/8091/8093, couchbase://127.0.0.1)"
        if ! (cd tests/compat/python && SETTEE_COMPAT_DEFAULT_PORTS=1 ../../../.venv/bin/python -m pytest -q \
                test_kv.py test_connection.py -k "not second_server"); then
            failures+=("python-default-ports")
        fi
        if ! (cd tests/compat/go && SETTEE_COMPAT_DEFAULT_PORTS=1 go test -count=1 -timeout 5m \
                -run 'TestUpsert|TestInsert|TestExists|TestConnectionStringForms|TestBucketWaitUntilReadyAndPing|TestKVInNonDefaultCollection' ./...); then
            failures+=("go-default-ports")
        fi
    else
        log "default ports busy: skipping the default-port smoke run"
    fi
fi

if [ "${#failures[@]}" -gt 0 ]; then
    log "FAILED: ${failures[*]}"
    exit 1
fi
log "all compatibility suites passed"
