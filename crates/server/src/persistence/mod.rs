//! Persistence workers for Couchbase buckets: the flusher threads that drain the engine's checkpoints into the
//! store with one fsync per round (group commit), background fetches of ejected items, the item pager, and warmup.
//! The engine does no I/O; these workers move `ItemSnapshot`s between it and the `VbStore`.

mod background;
mod fetch;
mod flusher;
mod records;
#[cfg(test)]
mod restart_tests;
mod warmup;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use settee_engine::Bucket;
use settee_store::{FaultInjector, VbStore};

pub use fetch::fetch_item;
pub(crate) use records::disk_changes;
pub(crate) use settee_persist::snapshot_of;

/// Flusher threads per bucket; each owns the vBuckets `vb % FLUSHER_SHARDS == shard`.
pub const FLUSHER_SHARDS: u16 = 2;

/// Wakes flusher threads when a checkpoint becomes non-empty.
#[derive(Default)]
pub(crate) struct FlushSignal {
    pending: Mutex<bool>,
    cv: Condvar,
}

impl FlushSignal {
    pub(crate) fn notify(&self) {
        *self.pending.lock() = true;
        self.cv.notify_all();
    }
    /// Waits for a notification or the timeout; returns whether one came.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut p = self.pending.lock();
        if !*p {
            self.cv.wait_for(&mut p, timeout);
        }
        std::mem::replace(&mut *p, false)
    }
}

/// The running persistence of one bucket.
pub struct Persistence {
    pub store: Arc<dyn VbStore>,
    pub dir: PathBuf,
    /// The store's file-system seam: tests switch on a full disk or a failing fsync through it.
    pub faults: Arc<FaultInjector>,
    /// One per flusher shard: a shared flag would let one shard's thread consume the other's wake-up, leaving a
    /// durable write to wait for the idle timeout.
    signals: Arc<Vec<FlushSignal>>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Persistence {
    /// Opens the bucket's store, loads it (warmup runs in the background; the bucket answers TMPFAIL until it
    /// finishes, then `warmed` is called) and starts the flushers.
    pub fn start(
        bucket: Arc<Bucket>,
        dir: &Path,
        warmed: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<Arc<Persistence>> {
        std::fs::create_dir_all(dir)?;
        let faults = Arc::new(FaultInjector::new());
        let store = records::open_store(dir, bucket.config().ram_quota_bytes, faults.clone())?;
        // fjall's flush and compaction workers, started by the open, are background work as the flushers are.
        background::lower_threads_named("fjall:");
        let p = Arc::new(Persistence {
            store,
            dir: dir.to_path_buf(),
            faults,
            signals: Arc::new((0..FLUSHER_SHARDS).map(|_| FlushSignal::default()).collect()),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
        });
        let signals = p.signals.clone();
        bucket.set_dirty_notifier(Arc::new(move |vb| signals[usize::from(vb.0 % FLUSHER_SHARDS)].notify()));
        bucket.set_warming_up(true);
        let mut threads = p.threads.lock();
        let (b, store) = (bucket.clone(), p.store.clone());
        let name = bucket.name();
        let flushers_after_warmup = p.clone();
        threads.push(std::thread::Builder::new().name(format!("warmup-{name}")).spawn(move || {
            warmup::run(&b, store.as_ref());
            flushers_after_warmup.start_flushers(b);
            warmed();
        })?);
        drop(threads);
        Ok(p)
    }

    fn start_flushers(self: &Arc<Self>, bucket: Arc<Bucket>) {
        let mut threads = self.threads.lock();
        for shard in 0..FLUSHER_SHARDS {
            let ctx = flusher::Flusher {
                bucket: bucket.clone(),
                store: self.store.clone(),
                signals: self.signals.clone(),
                stop: self.stop.clone(),
                shard,
            };
            match std::thread::Builder::new().name(format!("flusher-{shard}")).spawn(move || ctx.run()) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start a flusher thread");
                    bucket.fail_persistence();
                }
            }
        }
    }

    /// Compaction: purges tombstones deleted more than `purge_age_secs` ago from every vBucket on disk, then lets the
    /// store reclaim the space of superseded versions and purged records. Blocking; run it off the async workers.
    pub fn compact(&self, bucket: &Bucket, purge_age_secs: u32) -> Result<u64, settee_store::StoreError> {
        let started = std::time::Instant::now();
        let before = self.store.disk_bytes();
        // Tombstones deleted at or before `now - purge_age` go.
        let cutoff = bucket.now_secs().saturating_sub(purge_age_secs).saturating_add(1);
        let mut purged = 0;
        for v in 0..bucket.num_vbuckets() {
            purged += self.store.purge_tombstones(settee_types::VbId(v), cutoff)?;
        }
        self.store.compact()?;
        tracing::info!(
            bucket = %bucket.name(),
            purged,
            disk_bytes_before = before,
            disk_bytes_after = self.store.disk_bytes(),
            seconds = started.elapsed().as_secs_f64(),
            "compaction complete"
        );
        Ok(purged)
    }

    /// Flushes what is dirty, stops the workers and waits for them.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for s in self.signals.iter() {
            s.notify();
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }
}
