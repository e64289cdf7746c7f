//! Simulated clusters under faults, seed after seed. `SIM_SEEDS` (default 200) and `SIM_FIRST_SEED` (default 0)
//! choose the seeds; `scripts/sim.sh` runs many more in a release build.

use std::time::Duration;

use settee_sim::{Report, Sim, SimConfig};

fn run(seed: u64, fault_secs: u64) -> Report {
    let mut cfg = SimConfig::new(seed);
    cfg.fault_phase = Duration::from_secs(fault_secs);
    Sim::new(cfg).run()
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn seeds_keep_every_acknowledged_write_and_converge() {
    // Proves that under crashes, partitions, delays, clock jumps and rebalances (in, out, swap: the real
    // rebalance state machine with takeovers), one fault at a time as `majority` promises to survive, every key's
    // history stays linearizable (no acknowledged write lost, no stale read), the
    // DESIGN §5 invariants hold at every step, and the cluster recovers to equal active and replica copies.
    let first = env("SIM_FIRST_SEED", 0);
    let count = env("SIM_SEEDS", 200);
    let mut failed = Vec::new();
    let (mut faults, mut rebalanced, mut failed_over) = (0, 0, 0);
    for seed in first..first + count {
        let report = run(seed, 10);
        faults += report.faults.values().sum::<u64>();
        rebalanced += report.counters.get("rebalances finished").copied().unwrap_or(0);
        failed_over += report.counters.get("automatic failovers").copied().unwrap_or(0);
        if !report.ok() {
            failed.push(report.summary());
        }
    }
    assert!(faults > count, "the nemesis injected only {faults} faults in {count} runs");
    assert!(rebalanced > 0 && failed_over > 0, "{rebalanced} rebalances and {failed_over} failovers in {count} runs");
    assert!(failed.is_empty(), "{} of {count} seeds found anomalies:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn a_seed_repeats_its_run_exactly() {
    // Proves a run is a function of its seed alone: the same seed gives the same operations, faults and
    // decisions, so any failing seed reproduces.
    let a = run(11, 6).summary();
    let b = run(11, 6).summary();
    assert_eq!(a, b);
    assert_ne!(a, run(12, 6).summary());
}

#[test]
fn seeds_that_found_driver_bugs_stay_clean() {
    // Proves the seeds that once failed stay clean: 1, 6, 7, 8 and 9 lost acknowledged writes when a restarted
    // node's vBuckets came up active (the engine's default) before the metadata said otherwise, and replicas
    // streaming from it were rolled back to zero; 5230 and 5543 never recovered when the nemesis struck again while
    // a vBucket outside the simulated ones still lacked a copy (two failures at once); 5 and 220 lost acknowledged
    // writes when a stopped rebalance was run again while a node applied the metadata late (its seqno report counted
    // for a copy about to be emptied); 1383 hung on a node failed over under a move.
    for seed in [1, 5, 6, 7, 8, 9, 220, 1383, 5230, 5543] {
        let report = run(seed, 20);
        assert!(report.ok(), "{}", report.summary());
    }
}

#[test]
fn a_memory_only_node_restarted_before_failover_is_reprovisioned_and_loses_nothing() {
    // Proves auto-reprovision: killed nodes restarted before the cluster fails them over come back empty, have
    // the cluster promote their replicas before anything of theirs is active, get copies again by a rebuild, and
    // no acknowledged write is lost. Without reprovision (the build before it), the same seeds lose writes: the
    // empty copies come up active and roll their replicas back to zero, which the checker reports. The seeds are
    // the first ones whose schedule restarts a node early and loses writes without reprovision.
    // Seeds 8 and 27 never recovered when the nemesis struck again right after a restart, before the restarted
    // node had reported what it holds (the leader still saw its copies from before the crash); 20130 (at 20 s of
    // faults) when a restarted node proposed its reprovision twice and the second undid a recovery's rebalance.
    for (seed, fault_secs) in [(8, 10), (27, 10), (20130, 20)] {
        let mut cfg = SimConfig::new(seed);
        cfg.fault_phase = Duration::from_secs(fault_secs);
        cfg.restart_before_failover = true;
        let report = Sim::new(cfg).run();
        assert!(report.ok(), "{}", report.summary());
    }
    let mut checked = 0;
    for seed in 0..60 {
        let mut cfg = SimConfig::new(seed);
        cfg.fault_phase = Duration::from_secs(10);
        cfg.restart_before_failover = true;
        cfg.reprovision = false;
        let without = Sim::new(cfg.clone()).run();
        if without.ok() {
            continue;
        }
        assert!(without.anomalies.iter().any(|a| a.contains("not linearizable")), "{}", without.summary());
        cfg.reprovision = true;
        let with = Sim::new(cfg).run();
        assert!(with.ok(), "{}", with.summary());
        assert!(with.counters.get("auto-reprovisions").copied().unwrap_or(0) > 0, "{}", with.summary());
        checked += 1;
        if checked == 2 {
            return;
        }
    }
    panic!("only {checked} of the first 60 seeds restarted a node early and lost writes without reprovision");
}

#[test]
fn persistent_seeds_keep_every_acknowledged_write_and_converge() {
    // Proves the same of a persistent bucket, where each node has a disk that outlives its crashes (keeping what
    // it synced and a prefix of the rest), warms up from it, and takes back only the actives no replica is ahead
    // on; clients write at `majority`, `majorityAndPersistActive` and `persistToMajority`; the nemesis adds failed
    // writes and fsyncs, full, slow and stalled disks, and kills restarted before failover. `SIM_PERSISTENT_SEEDS`
    // (default 100) chooses how many.
    let first = env("SIM_FIRST_SEED", 0);
    let count = env("SIM_PERSISTENT_SEEDS", 100);
    let mut failed = Vec::new();
    let (mut warmups, mut disk_faults, mut persistence_failures) = (0, 0, 0);
    for seed in first..first + count {
        let mut cfg = SimConfig::new(seed);
        cfg.fault_phase = Duration::from_secs(10);
        cfg.persistent = true;
        let report = Sim::new(cfg).run();
        warmups += report.counters.get("warmups").copied().unwrap_or(0);
        persistence_failures += report.counters.get("persistence failures").copied().unwrap_or(0);
        disk_faults += report.faults.iter().filter(|(f, _)| f.starts_with("disk")).map(|(_, n)| n).sum::<u64>();
        if !report.ok() {
            failed.push(report.summary());
        }
    }
    assert!(warmups > count, "{warmups} warmups in {count} runs");
    assert!(disk_faults > 0 && persistence_failures > 0, "{disk_faults} disk faults, {persistence_failures} failures");
    assert!(failed.is_empty(), "{} of {count} seeds found anomalies:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn a_persistent_node_restarted_before_failover_hands_over_what_its_replicas_are_ahead_on() {
    // Proves the take-back (the black-box checker's finding 2, now under simulation): a node killed while its disk
    // stalled comes back from disk without the `majority` writes it had acknowledged since; restarted before the
    // cluster fails it over, it must hand the vBuckets its replicas are ahead on over to them before it serves.
    // Without the take-back (the build before it) such seeds lose acknowledged writes, which the checker reports;
    // with it they lose none. Seeds 32 and 39 did so when written (17 of the first 300 lose writes without it); a
    // change to the schedules may move the losses to other seeds, so the first two found are used.
    let mut checked = 0;
    for seed in [32, 39].into_iter().chain(0..200) {
        let mut cfg = SimConfig::new(seed);
        cfg.fault_phase = Duration::from_secs(20);
        cfg.persistent = true;
        cfg.takeback = false;
        let without = Sim::new(cfg.clone()).run();
        if without.ok() {
            continue;
        }
        assert!(without.anomalies.iter().any(|a| a.contains("not linearizable")), "{}", without.summary());
        cfg.takeback = true;
        let with = Sim::new(cfg).run();
        assert!(with.ok(), "{}", with.summary());
        let handed = with.counters.get("take-backs handing vBuckets to replicas ahead").copied().unwrap_or(0);
        assert!(handed > 0, "{}", with.summary());
        checked += 1;
        if checked == 2 {
            return;
        }
    }
    panic!("only {checked} of the first 200 persistent seeds lost writes without the take-back");
}
