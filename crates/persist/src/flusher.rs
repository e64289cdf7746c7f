//! One flusher round, in two halves around the fsync: [`write_round`] drains the checkpoints of a shard's dirty
//! vBuckets and writes them to the store in one commit; once the caller's `sync` succeeded, [`Written::persisted`]
//! advances their persisted seqnos (completing the durable writes waiting for them). Between the two, everything
//! else goes on: the server's flusher thread blocks in the fsync while clients write, and the simulator lands the
//! fsync some simulated milliseconds later.
//!
//! A failed write or fsync is the store's failure (every later call is refused until the store is reopened): the
//! caller stops persistence for the bucket (`Bucket::fail_persistence`). A vBucket whose batch the store refuses
//! (a record breaking its rules, data damaged on disk) costs only that vBucket, never the round.

use settee_engine::{Bucket, DirtyBatch, Refused};
use settee_store::{Record, StoreError, VbStateRecord, VbStore, VbWrite};
use settee_types::{OnDisk, Seqno, VbId};

use crate::records::record_of;

/// A round stops taking vBuckets once it holds this many bytes of keys and values. Every value is copied out of
/// the checkpoint and again into the store's batch, so a round over a whole backlog (a bulk load that outran the
/// disk) held the bucket's data twice more in memory, and made every durable write in it wait for all of it. The
/// vBuckets left over come first in the next round, which starts at once.
pub const ROUND_BYTES_TARGET: usize = 8 << 20;

/// A round written and not yet fsynced.
#[derive(Debug)]
#[must_use = "the round counts as persisted only once the store synced and `persisted` was called"]
pub struct Written {
    /// (vBucket, generation drained, seqno reached) of every part the store took.
    parts: Vec<(VbId, u64, Seqno)>,
    /// The records of those parts.
    records: usize,
    /// Where the next round must resume, when this one stopped at its byte budget.
    pub resume: Option<usize>,
}

impl Written {
    /// How many vBuckets the round wrote.
    pub fn vbuckets(&self) -> usize {
        self.parts.len()
    }

    /// The store synced the round: its vBuckets are persisted up to the seqnos drained.
    pub fn persisted(self, bucket: &Bucket) {
        bucket.stats().total_persisted.fetch_add(self.records as u64, std::sync::atomic::Ordering::Relaxed);
        for (vb, generation, up_to) in self.parts {
            bucket.mark_persisted(vb, generation, up_to);
        }
    }
}

/// The first half of a round: the dirty vBuckets of `vbuckets` from position `first` on (wrapping), until about
/// `round_bytes` bytes are taken, written in one commit (a vBucket emptied or rolled back since its last round
/// loses its old records first). None when nothing was dirty. The caller must `sync` the store before
/// [`Written::persisted`]; an error is one the whole store suffers (a failed write).
pub fn write_round(
    bucket: &Bucket,
    store: &dyn VbStore,
    vbuckets: &[VbId],
    first: usize,
    round_bytes: usize,
) -> Result<Option<Written>, StoreError> {
    let mut parts = Vec::new();
    let mut bytes = 0;
    let mut resume = None;
    for step in 0..vbuckets.len() {
        let at = (first + step) % vbuckets.len();
        if bytes >= round_bytes {
            resume = Some(at);
            break;
        }
        let Some(batch) = bucket.drain_dirty(vbuckets[at]) else { continue };
        bytes += batch.items.iter().map(|i| i.key.len() + i.value.len()).sum::<usize>();
        parts.push(Part::of(batch));
    }
    if parts.is_empty() {
        return Ok(None);
    }
    // A vBucket emptied since its last round loses its old copy on disk first, and one rolled back its records
    // above the seqno it rolled back to (the flusher is the only writer of its data, so a round drained before
    // the reset or the rollback has already landed and goes with the rest).
    let mut kept = Vec::with_capacity(parts.len());
    for part in parts {
        let rewrite = if part.clear_first {
            Some(store.clear_vbucket(part.vb))
        } else {
            part.rollback_to.map(|to| store.rollback_vbucket(part.vb, to))
        };
        match rewrite {
            Some(Err(e)) if is_local(&e) => refused(bucket, &part, &e),
            Some(Err(e)) => return Err(e),
            _ => kept.push(part),
        }
    }
    write(bucket, store, &mut kept)?;
    let parts = kept.iter().map(|p| (p.vb, p.generation, p.state.high_seqno)).collect();
    let records = kept.iter().map(|p| p.records.len()).sum();
    Ok(Some(Written { parts, records, resume }))
}

/// Writes every part in one commit; a part the store refuses is set aside (and dealt with) and the others are
/// written again without it, which the store allows because a refused write writes nothing.
fn write(bucket: &Bucket, store: &dyn VbStore, parts: &mut Vec<Part>) -> Result<(), StoreError> {
    while !parts.is_empty() {
        let view: Vec<_> = parts
            .iter()
            .map(|p| VbWrite { vb: p.vb, records: &p.records, on_disk: &p.on_disk, state: Some(&p.state) })
            .collect();
        let e = match store.write_many(&view) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let at = match &e {
            StoreError::Rejected { vb, .. } | StoreError::Corrupt { vb, .. } => parts.iter().position(|p| p.vb == *vb),
            _ => None,
        };
        let Some(at) = at else { return Err(e) };
        let part = parts.remove(at);
        refused(bucket, &part, &e);
    }
    Ok(())
}

/// Whether `e` concerns one vBucket only (its records broke a rule, or its data on disk is damaged), as opposed to
/// the store as a whole (a failed write or fsync, after which nothing may be called durable).
fn is_local(e: &StoreError) -> bool {
    matches!(e, StoreError::Rejected { .. } | StoreError::Corrupt { .. })
}

/// The store refused `part`: nothing of it was written. Only its vBucket pays (see `Bucket::persistence_refused`):
/// the bucket keeps persisting every other one.
fn refused(bucket: &Bucket, part: &Part, e: &StoreError) {
    let outcome = bucket.persistence_refused(part.vb, part.generation);
    let name = bucket.name();
    match outcome {
        Refused::Stale => {
            tracing::warn!(bucket = %name, vb = part.vb.0, error = %e, "store refused a batch of a vBucket emptied since; dropped")
        }
        Refused::Reset => {
            tracing::error!(bucket = %name, vb = part.vb.0, error = %e, "store refused a replica's batch: the replica is emptied and streams again from zero")
        }
        Refused::TakenOutOfService => {
            tracing::error!(bucket = %name, vb = part.vb.0, error = %e, "store refused an active vBucket's batch: the vBucket is out of service until restart; the rest of the bucket keeps persisting")
        }
    }
}

/// One vBucket's part of a round.
pub(crate) struct Part {
    pub(crate) vb: VbId,
    pub(crate) records: Vec<Record>,
    pub(crate) on_disk: Vec<OnDisk>,
    /// The vBucket's counters, written in the same atomic batch so that after a crash they agree with the data.
    pub(crate) state: VbStateRecord,
    pub(crate) generation: u64,
    clear_first: bool,
    rollback_to: Option<Seqno>,
}

impl Part {
    pub(crate) fn of(batch: DirtyBatch) -> Part {
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
#[path = "flusher_tests.rs"]
mod tests;
