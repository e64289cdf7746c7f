//! Runs simulated clusters seed after seed: `settee-sim [first seed] [count] [fault seconds]`. Prints each run's
//! summary (in full for a run with anomalies: its seed repeats it) and the totals; exits 1 if any run found an
//! anomaly. `--restart-before-failover` restarts killed nodes before the cluster fails them over;
//! `--no-reprovision` models the build before auto-reprovision (restarted memory-only nodes serve empty copies);
//! `--persistent` simulates a persistent bucket (disks, warmup, every durability level, disk faults);
//! `--no-takeback` models the build before a restarted persistent node compared its actives with their replicas.

use std::time::{Duration, Instant};

use settee_sim::{Sim, SimConfig};

fn main() {
    let early_restarts = std::env::args().any(|a| a == "--restart-before-failover");
    let no_reprovision = std::env::args().any(|a| a == "--no-reprovision");
    let persistent = std::env::args().any(|a| a == "--persistent");
    let no_takeback = std::env::args().any(|a| a == "--no-takeback");
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let first = args.first().copied().unwrap_or(0);
    let count = args.get(1).copied().unwrap_or(100);
    let secs = args.get(2).copied().unwrap_or(20);
    let started = Instant::now();
    let (mut failed, mut simulated, mut ops, mut faults) = (Vec::new(), Duration::ZERO, 0u64, 0u64);
    for seed in first..first + count {
        let mut cfg = SimConfig::new(seed);
        cfg.fault_phase = Duration::from_secs(secs);
        cfg.restart_before_failover = early_restarts;
        cfg.reprovision = !no_reprovision;
        cfg.persistent = persistent;
        cfg.takeback = !no_takeback;
        let report = Sim::new(cfg).run();
        simulated += report.simulated;
        ops += report.ops.values().sum::<u64>();
        faults += report.faults.values().sum::<u64>();
        if report.ok() {
            println!("{}", report.summary());
        } else {
            println!("FAILED {}", report.summary());
            failed.push(seed);
        }
    }
    let wall = started.elapsed();
    println!(
        "{count} seeds from {first}: {} failed {failed:?}; {ops} operations, {faults} faults, {simulated:?} simulated in {wall:?} ({:.1} seeds per minute)",
        failed.len(),
        count as f64 * 60.0 / wall.as_secs_f64().max(0.001)
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
