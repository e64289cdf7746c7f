"""One run of the recovery schedule of issue 21 (see `chaos.py`): SIGKILL and auto-failover, restart and delta
recovery, graceful failover and full recovery, a swap rebalance, all under `majority` writes and CAS updates;
afterwards every node answers and no acknowledged write is lost. `scripts/chaos.sh N` runs it N times."""

from __future__ import annotations

import os
from pathlib import Path

import chaos


def test_crash_failover_recovery_and_swap_keep_every_node_answering(tmp_path: Path):
    seed = int(os.environ.get("SETTEE_CHAOS_SEED", "0")) or int.from_bytes(os.urandom(4), "big")
    print(f"\nchaos seed {seed} (SETTEE_CHAOS_SEED={seed} repeats the schedule's choices)")
    outcome = chaos.Chaos(tmp_path, seed).run()
    assert outcome.problems == [], f"seed {seed}: {outcome.problems}; logs in {tmp_path}"
