//! A flusher thread: drains the checkpoints of its shard of vBuckets into the store, fsyncs once per round
//! (group commit: every durable write waiting in the round shares the fsync), then advances the persisted
//! seqnos. A failed write or fsync stops persistence for the bucket: writes get TMPFAIL and waiting durable writes
//! are ambiguous, never acknowledged. A vBucket whose batch the store refuses (a record breaking its rules, data
//! damaged on disk) costs only that vBucket, never the bucket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::{Bucket, DirtyBatch, Refused};
use settee_store::{Record, StoreError, VbStateRecord, VbStore, VbWrite};
use settee_types::{OnDisk, VbId};

use super::records::record_of;
use super::FlushSignal;

/// A round's fsync that takes this long is logged as a slow disk.
const SLOW_FSYNC_WARN: Duration = Duration::from_secs(1);

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
    /// when this one stopped early. An error is one the whole store suffers (a failed write or fsync); a vBucket
    /// the store refuses alone is dealt with here (see [`Flusher::refused`]) and the rest of the round goes on.
    pub(super) fn round(&self, vbuckets: &[VbId], first: usize) -> Result<Option<usize>, StoreError> {
        let mut parts = Vec::new();
        let mut bytes = 0;
        let mut resume = None;
        for step in 0..vbuckets.len() {
            let at = (first + step) % vbuckets.len();
            if bytes >= ROUND_BYTES_TARGET {
                resume = Some(at);
                break;
            }
            let Some(batch) = self.bucket.drain_dirty(vbuckets[at]) else { continue };
            bytes += batch.items.iter().map(|i| i.key.len() + i.value.len()).sum::<usize>();
            parts.push(Part::of(batch));
        }
        if parts.is_empty() {
            return Ok(None);
        }
        // A vBucket emptied since its last round loses its old copy on disk first, and one rolled back its records
        // above the seqno it rolled back to (this thread is the only writer of its data, so a round drained before
        // the reset or the rollback has already landed and goes with the rest).
        let mut kept = Vec::with_capacity(parts.len());
        for part in parts {
            let rewrite = if part.clear_first {
                Some(self.store.clear_vbucket(part.vb))
            } else {
                part.rollback_to.map(|to| self.store.rollback_vbucket(part.vb, to))
            };
            match rewrite {
                Some(Err(e)) if Self::is_local(&e) => self.refused(&part, &e),
                Some(Err(e)) => return Err(e),
                _ => kept.push(part),
            }
        }
        self.write(&mut kept)?;
        let fsync_started = std::time::Instant::now();
        self.store.sync()?;
        let fsync = fsync_started.elapsed();
        if fsync >= SLOW_FSYNC_WARN {
            // A slow disk: durable writes wait (and time out as ambiguous), the checkpoints grow up to the quota.
            tracing::warn!(bucket = %self.bucket.name(), fsync_ms = fsync.as_millis() as u64, vbuckets = kept.len(), "slow disk: a flusher round's fsync took over a second");
        }
        for part in kept {
            self.bucket.mark_persisted(part.vb, part.generation, part.state.high_seqno);
        }
        Ok(resume)
    }

    /// Writes every part in one commit; a part the store refuses is set aside (and dealt with) and the others are
    /// written again without it, which the store allows because a refused write writes nothing.
    fn write(&self, parts: &mut Vec<Part>) -> Result<(), StoreError> {
        while !parts.is_empty() {
            let view: Vec<_> = parts
                .iter()
                .map(|p| VbWrite { vb: p.vb, records: &p.records, on_disk: &p.on_disk, state: Some(&p.state) })
                .collect();
            let e = match self.store.write_many(&view) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let at = match &e {
                StoreError::Rejected { vb, .. } | StoreError::Corrupt { vb, .. } => {
                    parts.iter().position(|p| p.vb == *vb)
                }
                _ => None,
            };
            let Some(at) = at else { return Err(e) };
            let part = parts.remove(at);
            self.refused(&part, &e);
        }
        Ok(())
    }

    /// Whether `e` concerns one vBucket only (its records broke a rule, or its data on disk is damaged), as
    /// opposed to the store as a whole (a failed write or fsync, after which nothing may be called durable).
    fn is_local(e: &StoreError) -> bool {
        matches!(e, StoreError::Rejected { .. } | StoreError::Corrupt { .. })
    }

    /// The store refused `part`: nothing of it was written. Only its vBucket pays (see
    /// `Bucket::persistence_refused`): the bucket keeps persisting every other one.
    fn refused(&self, part: &Part, e: &StoreError) {
        let outcome = self.bucket.persistence_refused(part.vb, part.generation);
        let bucket = self.bucket.name();
        match outcome {
            Refused::Stale => {
                tracing::warn!(%bucket, vb = part.vb.0, error = %e, "store refused a batch of a vBucket emptied since; dropped")
            }
            Refused::Reset => {
                tracing::error!(%bucket, vb = part.vb.0, error = %e, "store refused a replica's batch: the replica is emptied and streams again from zero")
            }
            Refused::TakenOutOfService => {
                tracing::error!(%bucket, vb = part.vb.0, error = %e, "store refused an active vBucket's batch: the vBucket is out of service until restart; the rest of the bucket keeps persisting")
            }
        }
    }
}

/// One vBucket's part of a round.
struct Part {
    vb: VbId,
    records: Vec<Record>,
    on_disk: Vec<OnDisk>,
    /// The vBucket's counters, written in the same atomic batch so that after a crash they agree with the data.
    state: VbStateRecord,
    generation: u64,
    clear_first: bool,
    rollback_to: Option<settee_types::Seqno>,
}

impl Part {
    fn of(batch: DirtyBatch) -> Part {
        let state = VbStateRecord {
            vbuuid: batch.vbuuid,
            high_seqno: batch.up_to,
            max_cas: batch.max_cas,
            failover: batch.failover,
            prepares_completed_to: batch.prepares_completed_to,
        };
        Part {
            vb: batch.vb,
            records: batch.items.into_iter().map(record_of).collect(),
            on_disk: batch.on_disk,
            state,
            generation: batch.generation,
            clear_first: batch.clear_first,
            rollback_to: batch.rollback_to,
        }
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
            conflict_resolution: Default::default(),
        };
        Arc::new(Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000))))
    }

    fn flusher(bucket: &Arc<Bucket>, store: &Arc<dyn VbStore>, shard: u16) -> Flusher {
        Flusher {
            bucket: bucket.clone(),
            store: store.clone(),
            signals: Arc::new((0..super::super::FLUSHER_SHARDS).map(|_| FlushSignal::default()).collect()),
            stop: Arc::new(AtomicBool::new(false)),
            shard,
        }
    }

    /// Applies one replicated item at `seqno` to the replica vBucket `vb`.
    fn replicate(bucket: &Bucket, vb: VbId, key: &str, seqno: u64) {
        bucket.replica_snapshot(vb, seqno, seqno).expect("snapshot");
        let item = settee_engine::ItemSnapshot {
            key: [&[0u8][..], key.as_bytes()].concat(),
            value: b"v".to_vec(),
            cas: seqno,
            seqno,
            rev: 1,
            flags: 0,
            expiry: 0,
            datatype: 0,
            deleted: false,
            value_missing: false,
        };
        bucket.replica_apply(vb, item).expect("apply");
    }

    fn stored_seqnos(store: &dyn VbStore, vb: VbId) -> Vec<u64> {
        let mut seqnos = Vec::new();
        store.scan_seqnos(vb, 0, u64::MAX, &mut |r| seqnos.push(r.meta.seqno)).expect("scan");
        seqnos
    }

    /// The failure seen after a restart: a replica vBucket whose checkpoint holds seqno 1 while the store holds a
    /// higher one (the engine and the store disagree about it). The store refuses that vBucket's batch; the round
    /// still writes and fsyncs the other vBuckets (a persist-level durable write among them succeeds once the next
    /// round wrote its commit), the bucket
    /// keeps taking writes, and the refused replica is emptied and cleared on disk by the next round. It used to
    /// fail the round and turn the whole bucket to TMPFAIL until restart.
    #[test]
    fn a_vbucket_the_store_refuses_does_not_poison_the_bucket() {
        let bucket = bucket();
        let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
        let flusher = flusher(&bucket, &store, 0);
        let vbuckets = flusher.vbuckets();
        let (replica, active) = (vbuckets[1], vbuckets[2]);
        let old = settee_store::conformance::record(b"\0old", b"v", 5, false);
        store.write_batch(replica, &[old]).expect("the old copy on disk");
        bucket.set_vbucket_state(replica, settee_engine::VbState::Replica, 0);
        replicate(&bucket, replica, "new", 1);
        let opts =
            WriteOptions { durability: Some(settee_types::DurabilityLevel::PersistToMajority), ..Default::default() };
        let req = StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts };
        let m = bucket.store(active, &DocKey::new(0, b"durable"), req).expect("durable write");
        let outcome = Arc::new(parking_lot::Mutex::new(None));
        let o = outcome.clone();
        bucket.when_sync_write_completes(active, m.seqno, Box::new(move |r| *o.lock() = Some(r)));

        assert_eq!(flusher.round(&vbuckets, 0).expect("a refused vBucket is not the store's failure"), None);
        assert!(!bucket.store_failed());
        assert_eq!(stored_seqnos(store.as_ref(), active), vec![1], "the other vBuckets of the round were written");
        assert_eq!(bucket.stream_info(replica).expect("info").high_seqno, 0, "the replica starts over");
        flusher.round(&vbuckets, 0).expect("the clearing round");
        assert_eq!(*outcome.lock(), Some(Ok(())), "the prepare committed, and its commit is on disk");
        assert_eq!(stored_seqnos(store.as_ref(), active), vec![1, 2], "the prepare's record and the commit's");
        assert_eq!((stored_seqnos(store.as_ref(), replica), store.high_seqno(replica).expect("high")), (vec![], 0));
        replicate(&bucket, replica, "again", 1);
        flusher.round(&vbuckets, 0).expect("the replica persists again");
        assert_eq!(stored_seqnos(store.as_ref(), replica), vec![1]);
    }

    /// A replica rolled back to zero while a flusher round that drained its old copy is in flight: that round's
    /// records land after the rollback, then the new copy (from seqno 1) arrives. The next round clears the store's
    /// copy before writing the new one, so nothing is refused and the store holds the new copy alone; the late
    /// round never counted as persisted for the new copy. (The rollback used to clear the store at once, so the
    /// late round's records survived and seqno 1 was refused, failing the whole bucket.)
    #[test]
    fn replica_rolled_back_during_a_flusher_round_persists_again_from_zero() {
        let bucket = bucket();
        let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
        let flusher = flusher(&bucket, &store, 0);
        let vbuckets = flusher.vbuckets();
        let vb = vbuckets[3];
        bucket.set_vbucket_state(vb, settee_engine::VbState::Replica, 0);
        for seqno in 1..=5 {
            replicate(&bucket, vb, &format!("old-{seqno}"), seqno);
        }
        let in_flight = Part::of(bucket.drain_dirty(vb).expect("the round in flight drains"));
        bucket.reset_vbucket(vb);
        replicate(&bucket, vb, "new", 1);
        let late =
            VbWrite { vb, records: &in_flight.records, on_disk: &in_flight.on_disk, state: Some(&in_flight.state) };
        store.write_many(&[late]).expect("the round in flight lands");
        bucket.mark_persisted(vb, in_flight.generation, in_flight.state.high_seqno);
        assert_eq!(bucket.persisted_seqno(vb), Some(0));

        flusher.round(&vbuckets, 0).expect("no record is refused");
        assert_eq!(stored_seqnos(store.as_ref(), vb), vec![1], "only the new copy is on disk");
        assert_eq!(bucket.persisted_seqno(vb), Some(1));
        assert!(!bucket.store_failed());
    }

    /// Only a refusal of one vBucket's data is local: a failed fsync (or write) of the store still fails the round,
    /// which makes the flusher stop the whole bucket (TMPFAIL, durable writes ambiguous), because nothing written
    /// since the last good fsync may be called durable.
    #[test]
    fn a_failed_fsync_still_fails_the_round() {
        let dir = std::env::temp_dir().join(format!("settee-flusher-fsync-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let faults = Arc::new(settee_store::FaultInjector::new());
        let config = settee_store::FjallConfig { faults: Some(faults.clone()), ..Default::default() };
        let store: Arc<dyn VbStore> = Arc::new(settee_store::FjallStore::open_with(&dir, config).expect("open"));
        let bucket = bucket();
        let flusher = flusher(&bucket, &store, 0);
        let vbuckets = flusher.vbuckets();
        let req =
            StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts: WriteOptions::default() };
        bucket.store(vbuckets[0], &DocKey::new(0, b"k"), req).expect("write");
        faults.fail_next_sync();
        assert!(flusher.round(&vbuckets, 0).is_err(), "a failed fsync is the store's failure, not one vBucket's");
        assert_eq!(bucket.persisted_seqno(vbuckets[0]), Some(0), "nothing counts as persisted");
        drop(flusher);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
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
