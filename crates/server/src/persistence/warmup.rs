//! Warmup on its thread: `settee_persist::warmup::load` timed and logged.

use std::time::Instant;

use settee_engine::Bucket;
use settee_store::VbStore;

pub(crate) fn run(bucket: &Bucket, store: &dyn VbStore) {
    let started = Instant::now();
    let settee_persist::Warmed { items, values, prepares } = settee_persist::load(bucket, store);
    let seconds = started.elapsed().as_secs_f64();
    let items_per_sec = (items as f64 / seconds.max(1e-9)) as u64;
    tracing::info!(bucket = %bucket.name(), items, values, prepares, seconds, items_per_sec, "warmup complete");
}
