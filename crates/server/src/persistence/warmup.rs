//! Warmup on its thread: `settee_persist::warmup::load` timed and logged.

use std::time::Instant;

use settee_engine::Bucket;
use settee_store::VbStore;

/// What warmup did, for the log and the benchmark record.
#[derive(Clone, Copy, Debug, Default)]
pub struct WarmupReport {
    pub items: u64,
    pub values: u64,
    /// Sync writes found pending on disk, back in the durability monitor.
    pub prepares: u64,
    pub seconds: f64,
}

pub(crate) fn run(bucket: &Bucket, store: &dyn VbStore) -> WarmupReport {
    let started = Instant::now();
    let warmed = settee_persist::load(bucket, store);
    let seconds = started.elapsed().as_secs_f64();
    let report = WarmupReport { items: warmed.items, values: warmed.values, prepares: warmed.prepares, seconds };
    let rate = report.items as f64 / report.seconds.max(1e-9);
    tracing::info!(bucket = %bucket.name(), items = report.items, values = report.values, prepares = report.prepares, seconds = report.seconds, items_per_sec = rate as u64, "warmup complete");
    report
}
