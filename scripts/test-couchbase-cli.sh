#!/usr/bin/env bash
# Runs the official couchbase-cli against a 3-node settee cluster (tests/compat/python/test_couchbase_cli.py),
# node-to-node encryption on a 2-node one (test_couchbase_cli_n2n.py) and
# its XDCR commands between two nodes (test_couchbase_cli_xdcr.py).
#
#   scripts/test-couchbase-cli.sh PATH [PYTEST ARGS...]
#
# PATH is a local copy of https://github.com/couchbase/couchbase-cli: a clone (plain or bare), from which the pinned
# tag is exported, or a directory that already holds that version's files (cbmgr.py, couchbase-cli). couchbase-cli
# is not published on PyPI, npm or the Go proxy, and the CI machine cannot reach GitHub, so the regular test run
# (scripts/test.sh) skips this suite; run this script where a copy exists. It prepares .couchbase-cli/ (ignored by
# git): the exported sources, a virtualenv with the CLI's Python dependencies from PyPI, a cb_version.py naming the
# version (the CLI warns otherwise) and a wrapper, then runs the suite with COUCHBASE_CLI pointing at the wrapper.
# Nothing of couchbase-cli is committed to this repository. SETTEE_BIN tests that binary instead of a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."

CLI_TAG="${COUCHBASE_CLI_TAG:-v7.6.7}"
src="${1:?usage: scripts/test-couchbase-cli.sh PATH-TO-COUCHBASE-CLI-CHECKOUT [pytest args]}"
shift
work="$PWD/.couchbase-cli"
rm -rf "$work/src"
mkdir -p "$work/src"

if git --git-dir="$src" rev-parse --verify -q "$CLI_TAG^{commit}" >/dev/null 2>&1; then
    git --git-dir="$src" archive "$CLI_TAG" | tar -x -C "$work/src"
elif git -C "$src" rev-parse --verify -q "$CLI_TAG^{commit}" >/dev/null 2>&1; then
    git -C "$src" archive "$CLI_TAG" | tar -x -C "$work/src"
elif [ -f "$src/cbmgr.py" ] && [ -f "$src/couchbase-cli" ]; then
    echo "note: $src is not a git checkout with tag $CLI_TAG; using its files as they are" >&2
    cp -R "$src"/. "$work/src"/
else
    echo "error: $src holds neither tag $CLI_TAG of couchbase-cli nor its files (cbmgr.py, couchbase-cli)" >&2
    exit 2
fi
version="${CLI_TAG#v}"
echo "VERSION = \"${version}-0000-enterprise\"" > "$work/src/cb_version.py"

if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
fi
# The CLI's runtime imports (its Pipfile pins versions for Python 3.9; these resolve for the Python at hand).
"$work/venv/bin/pip" install -q requests pem cryptography pyopenssl requests-toolbelt pycryptodome

cat > "$work/couchbase-cli" <<EOF
#!/usr/bin/env bash
exec "$work/venv/bin/python" "$work/src/couchbase-cli" "\$@"
EOF
chmod +x "$work/couchbase-cli"

if [ -z "${SETTEE_BIN:-}" ]; then
    cargo build -p settee-server --bin settee
    export SETTEE_BIN="$PWD/target/debug/settee"
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install -q -r tests/compat/python/requirements.txt
fi
export COUCHBASE_CLI="$work/couchbase-cli"
export COUCHBASE_CLI_VERSION="$version"
cd tests/compat/python
exec ../../../.venv/bin/python -m pytest test_couchbase_cli.py test_couchbase_cli_xdcr.py test_couchbase_cli_n2n.py -v -s "$@"
