#!/usr/bin/env bash
# A real rolling upgrade, not run in CI (it builds a second settee, in a target directory seeded with hard links
# to this checkout's: minutes and a few GB when only the workspace's crates differ): builds OLD_COMMIT in its own worktree and target directory, forms a three-node cluster on it with the
# Python SDK writing (`majority` upserts and reads), and runs `settee cluster rolling-restart --binary NEW` to this
# checkout's debug build (or $NEW_BIN). Passes when the restart succeeds, no acknowledged write is lost and every
# node then reports the same metadata version (GET /settee/cluster/versions). See docs/operations.md "Upgrading
# across settee versions" for the oldest OLD_COMMIT this can pass from.
#
# Usage: scripts/upgrade-test.sh OLD_COMMIT   (KEEP=1 keeps the old build in $WORK; WORK defaults to a temp dir)
set -euo pipefail

old_commit=${1:?usage: scripts/upgrade-test.sh OLD_COMMIT}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-$(mktemp -d -t settee-upgrade-XXXXXX)}
new_bin=${NEW_BIN:-$repo/target/debug/settee}

cleanup() {
    if [[ "${KEEP:-0}" != 1 ]]; then
        git -C "$repo" worktree remove --force "$work/old" 2>/dev/null || true
        rm -rf "$work"
    fi
}
trap cleanup EXIT

echo "== df before"; df -h / | tail -1
if [[ -z "${NEW_BIN:-}" ]]; then
    echo "== building this checkout ($(git -C "$repo" rev-parse --short HEAD))"
    (cd "$repo" && cargo build -p settee-server --bin settee)
fi
echo "== building $old_commit in $work/old"
git -C "$repo" worktree add --detach "$work/old" "$old_commit" >/dev/null
# Seeded with hard links to this checkout's build outputs, so that only what differs (the workspace's own crates,
# any dependency that changed) is compiled again.
if [[ -d "$repo/target/debug" && "${SEED_TARGET:-1}" == 1 ]]; then
    mkdir -p "$work/old-target"
    cp -al "$repo/target/debug" "$work/old-target/debug"
fi
(cd "$work/old" && CARGO_TARGET_DIR="$work/old-target" cargo build -p settee-server --bin settee)

# rolling-restart --binary takes an executable in the running binary's directory: both side by side.
mkdir -p "$work/bin"
cp "$work/old-target/debug/settee" "$work/bin/settee-old"
cp "$new_bin" "$work/bin/settee-new"
rm -rf "$work/old-target"
echo "== upgrading a loaded three-node cluster from $old_commit to $new_bin"
SETTEE_BIN="$work/bin/settee-old" "$repo/.venv/bin/python" "$repo/scripts/rolling_restart_bench.py" \
    --threads 2 --rate 50 --before 10 --binary "$work/bin/settee-new" --check
