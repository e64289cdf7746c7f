//! A flusher thread: drains the checkpoints of its shard of vBuckets into the store, fsyncs once per round
//! (group commit: every durable write waiting in the round shares the fsync), then advances the persisted
//! seqnos. A failed write or fsync stops persistence for the bucket: writes get TMPFAIL and waiting durable writes
//! are ambiguous, never acknowledged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::Bucket;
use settee_store::{VbStateRecord, VbStore, VbWrite};
use settee_types::VbId;

use super::records::record_of;
use super::FlushSignal;

/// Longest a dirty item waits when no notification comes (expiry tombstones are not notified).
const FLUSH_IDLE_WAIT: Duration = Duration::from_millis(50);
/// A round stops taking vBuckets once it holds this many bytes of keys and values. Every value is copied out of
/// the checkpoint and again into the store's batch, so a round over a whole backlog (a bulk load that outran the
/// disk) held the bucket's data twice more in memory, and made every durable write in it wait for all of it. The
/// vBuckets left over come first in the next round, which starts at once.
const ROUND_BYTES_TARGET: usize = 8 << 20;

pub(crate) struct Flusher {
    pub bucket: Arc<Bucket>,
    pub store: Arc<dyn VbStore>,
    pub signals: Arc<Vec<FlushSignal>>,
    pub stop: Arc<AtomicBool>,
    pub shard: u16,
}

impl Flusher {
    /// The vBuckets this flusher owns.
    fn vbuckets(&self) -> Vec<VbId> {
        (self.shard..self.bucket.num_vbuckets()).step_by(usize::from(super::FLUSHER_SHARDS)).map(VbId).collect()
    }

    pub(crate) fn run(self) {
        super::background::lower_this_thread();
        let vbuckets = self.vbuckets();
        let mut next = 0;
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            match self.round(&vbuckets, next) {
                Ok(Some(resume)) => {
                    next = resume;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(bucket = %self.bucket.name(), error = %e, "persistence failed: bucket refuses writes until restart");
                    self.bucket.fail_persistence();
                    return;
                }
            }
            if stopping {
                return;
            }
            self.signals[usize::from(self.shard)].wait(FLUSH_IDLE_WAIT);
        }
    }

    /// One round: the shard's dirty vBuckets from position `first` on (wrapping), until about
    /// [`ROUND_BYTES_TARGET`] bytes are taken; one commit and one fsync. Returns where the next round must resume
    /// when this one stopped early.
    fn round(&self, vbuckets: &[VbId], first: usize) -> Result<Option<usize>, settee_store::StoreError> {
        let mut flushed = Vec::new();
        let mut parts = Vec::new();
        let mut bytes = 0;
        let mut resume = None;
        for step in 0..vbuckets.len() {
            let at = (first + step) % vbuckets.len();
            if bytes >= ROUND_BYTES_TARGET {
                resume = Some(at);
                break;
            }
            let vb = vbuckets[at];
            let Some(batch) = self.bucket.drain_dirty(vb) else { continue };
            let records: Vec<_> = batch
                .items
                .into_iter()
                .map(|item| {
                    bytes += item.key.len() + item.value.len();
                    record_of(item)
                })
                .collect();
            // The vBucket's counters travel in the same atomic batch, so after a crash they agree with the data.
            let state = VbStateRecord {
                vbuuid: batch.vbuuid,
                high_seqno: batch.up_to,
                max_cas: batch.max_cas,
                failover: batch.failover,
            };
            parts.push((vb, records, batch.on_disk, state));
            flushed.push((vb, batch.up_to));
        }
        if flushed.is_empty() {
            return Ok(None);
        }
        // One commit for the whole round, then one fsync.
        let view: Vec<_> = parts
            .iter()
            .map(|(vb, records, on_disk, state)| VbWrite { vb: *vb, records, on_disk, state: Some(state) })
            .collect();
        self.store.write_many(&view)?;
        self.store.sync()?;
        for (vb, up_to) in flushed {
            self.bucket.mark_persisted(vb, up_to);
        }
        Ok(resume)
    }
}

#[cfg(test)]
mod tests {
    use settee_engine::{BucketConfig, BucketKind, DocKey, EvictionPolicy, StoreMode, StoreRequest, WriteOptions};
    use settee_store::MemoryStore;
    use settee_types::ManualClock;

    use super::*;

    const VALUE_BYTES: usize = 100 << 10;

    fn bucket() -> Arc<Bucket> {
        let config = BucketConfig {
            name: "p".into(),
            uuid: "0123456789abcdef0123456789abcdef".into(),
            kind: BucketKind::Couchbase,
            ram_quota_bytes: 1 << 30,
            replicas: 0,
            eviction: EvictionPolicy::ValueOnly,
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
        };
        Arc::new(Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000))))
    }

    fn stored_records(store: &dyn VbStore, vbuckets: &[VbId]) -> usize {
        let mut n = 0;
        for &vb in vbuckets {
            store
                .scan_keys(vb, false, &mut |_| {
                    n += 1;
                    true
                })
                .expect("scan");
        }
        n
    }

    /// A backlog three times the round budget goes to disk in several bounded rounds, each resuming where the last
    /// stopped, and in the end every item is stored and every vBucket's persisted seqno is its high seqno.
    #[test]
    fn backlog_is_flushed_in_bounded_rounds() {
        let bucket = bucket();
        let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
        let flusher = Flusher {
            bucket: bucket.clone(),
            store: store.clone(),
            signals: Arc::new((0..super::super::FLUSHER_SHARDS).map(|_| FlushSignal::default()).collect()),
            stop: Arc::new(AtomicBool::new(false)),
            shard: 0,
        };
        let vbuckets = flusher.vbuckets();
        let value = vec![b'v'; VALUE_BYTES];
        let items = 3 * ROUND_BYTES_TARGET / VALUE_BYTES;
        for i in 0..items {
            // Two items per vBucket, so a vBucket's part of a round is small beside the budget.
            let vb = vbuckets[i / 2];
            let key = format!("k{i}");
            let req = StoreRequest {
                mode: StoreMode::Set,
                value: &value,
                flags: 0,
                expiry: 0,
                opts: WriteOptions::default(),
            };
            bucket.store(vb, &DocKey::new(0, key.as_bytes()), req).expect("store");
        }

        let per_round_max = ROUND_BYTES_TARGET / VALUE_BYTES + 2;
        let (mut next, mut rounds, mut stored) = (0, 0, 0);
        loop {
            let resume = flusher.round(&vbuckets, next).expect("round");
            rounds += 1;
            let now = stored_records(store.as_ref(), &vbuckets);
            assert!(now - stored <= per_round_max, "round {rounds} wrote {} items", now - stored);
            stored = now;
            match resume {
                Some(at) => next = at,
                None => break,
            }
        }
        assert!(rounds >= 3, "a backlog of three budgets took {rounds} rounds");
        assert_eq!(stored, items);
        for &vb in &vbuckets[..items / 2] {
            let seqnos = bucket.observe_seqno(vb).expect("observe");
            assert_eq!(seqnos.persisted_seqno, 2, "vBucket {vb:?} is persisted up to its high seqno");
        }
        assert!(flusher.round(&vbuckets, next).expect("idle round").is_none());
    }
}
