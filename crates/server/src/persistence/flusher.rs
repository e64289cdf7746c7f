//! A flusher thread: drains the checkpoints of its shard of vBuckets into the store, fsyncs once per round
//! (group commit: every durable write waiting in the round shares the fsync), then advances the persisted
//! seqnos. A failed write or fsync stops persistence for the bucket: writes get TMPFAIL and waiting durable writes
//! are ambiguous, never acknowledged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::Bucket;
use settee_store::{VbStateRecord, VbStore};
use settee_types::VbId;

use super::records::record_of;
use super::FlushSignal;

/// Longest a dirty item waits when no notification comes (expiry tombstones are not notified).
const FLUSH_IDLE_WAIT: Duration = Duration::from_millis(50);

pub(crate) struct Flusher {
    pub bucket: Arc<Bucket>,
    pub store: Arc<dyn VbStore>,
    pub signals: Arc<Vec<FlushSignal>>,
    pub stop: Arc<AtomicBool>,
    pub shard: u16,
}

impl Flusher {
    pub(crate) fn run(self) {
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            if let Err(e) = self.round() {
                tracing::error!(bucket = %self.bucket.name(), error = %e, "persistence failed: bucket refuses writes until restart");
                self.bucket.fail_persistence();
                return;
            }
            if stopping {
                return;
            }
            self.signals[usize::from(self.shard)].wait(FLUSH_IDLE_WAIT);
        }
    }

    /// One round: every dirty vBucket of the shard, one fsync.
    fn round(&self) -> Result<(), settee_store::StoreError> {
        let mut flushed = Vec::new();
        let mut parts = Vec::new();
        for v in (self.shard..self.bucket.num_vbuckets()).step_by(usize::from(super::FLUSHER_SHARDS)) {
            let vb = VbId(v);
            let Some(batch) = self.bucket.drain_dirty(vb) else { continue };
            let records: Vec<_> = batch.items.into_iter().map(record_of).collect();
            // The vBucket's counters travel in the same atomic batch, so after a crash they agree with the data.
            let state = VbStateRecord {
                vbuuid: batch.vbuuid,
                high_seqno: batch.up_to,
                max_cas: batch.max_cas,
                failover: batch.failover,
            };
            parts.push((vb, records, state));
            flushed.push((vb, batch.up_to));
        }
        if flushed.is_empty() {
            return Ok(());
        }
        // One commit for the whole round, then one fsync.
        let view: Vec<_> = parts.iter().map(|(vb, records, state)| (*vb, &records[..], Some(state))).collect();
        self.store.write_many(&view)?;
        self.store.sync()?;
        for (vb, up_to) in flushed {
            self.bucket.mark_persisted(vb, up_to);
        }
        Ok(())
    }
}
