//! The engine's side of persistence: the checkpoint (dirty keys in mutation order) that the flusher drains, the
//! persisted seqno it advances, durable writes waiting for it, and loading items back from disk (warmup).
//!
//! The engine does no I/O: the server's flusher and warmup workers move [`ItemSnapshot`]s between these calls and
//! the store.

use settee_types::{Cas, Datatype, OnDisk, Seqno, VbId, VbUuid};

use crate::bucket::Bucket;
use crate::durability_monitor::Prepare;
use crate::error::EngineError;
use crate::item::StoredItem;
use crate::sync_record::SyncWarmup;
use crate::table::Item;
use crate::vbucket::{complete, PersistWaiter};

/// An item as it travels to and from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemSnapshot {
    /// The encoded key (collection prefix included).
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev: u64,
    pub flags: u32,
    pub expiry: u32,
    pub datatype: u8,
    pub deleted: bool,
    /// The value was not read (warmup of keys and metadata only): the item is loaded non-resident.
    pub value_missing: bool,
}

/// What the flusher takes from one vBucket in one round: the latest version of every dirty key, and the seqno up
/// to which everything will be persisted once the batch is on disk.
#[derive(Debug)]
pub struct DirtyBatch {
    pub vb: VbId,
    pub items: Vec<ItemSnapshot>,
    /// For the item at the same index, what the engine knows of its key's version on disk before this batch (the
    /// store then need not look it up).
    pub on_disk: Vec<OnDisk>,
    pub up_to: Seqno,
    pub vbuuid: VbUuid,
    pub max_cas: Cas,
    /// The vBucket's failover log, newest first: (vbuuid, seqno the branch starts at).
    pub failover: Vec<(VbUuid, Seqno)>,
    /// Every prepare at or below this seqno is completed (`VbStateRecord::prepares_completed_to`).
    pub prepares_completed_to: Seqno,
    /// The vBucket was rolled back: the store must drop its records above this seqno before this batch is written
    /// (unless `clear_first` drops everything).
    pub rollback_to: Option<Seqno>,
    /// The vBucket's generation when drained; hand it back to [`Bucket::mark_persisted`].
    pub generation: u64,
    /// The vBucket was emptied since the last round: the store must drop its old copy before this batch is
    /// written (in this round, before the write).
    pub clear_first: bool,
}

/// What became of a vBucket whose batch the store refused ([`Bucket::persistence_refused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The batch belonged to an older generation of the vBucket (it was emptied since): nothing to do, the next
    /// round clears the store's copy.
    Stale,
    /// A replica (or a copy this node does not serve) was emptied: its next round clears the store, and its
    /// replication stream starts over from zero.
    Reset,
    /// An active copy was taken out of service: clients get an error for this vBucket only, until a restart.
    TakenOutOfService,
}

impl Bucket {
    /// Takes the vBucket's checkpoint for the flusher; None when nothing is dirty. A batch may have no items:
    /// a seqno that put nothing in the checkpoint (a prepare committed at once, DCP_SEQNO_ADVANCED) still counts as
    /// persisted once a round passed it.
    ///
    /// Persist-level prepares do not commit here: they commit once their own record is fsynced
    /// ([`Bucket::mark_persisted`]), so their value is never visible before it would survive a crash.
    pub fn drain_dirty(&self, vb: VbId) -> Option<DirtyBatch> {
        let vbucket = self.vbucket(vb)?;
        let mut inner = vbucket.inner.lock();
        let rewrite = inner.clear_on_disk || inner.rollback_on_disk.is_some();
        if inner.dirty.is_empty() && inner.drained_seqno >= inner.high_seqno && !rewrite {
            return None;
        }
        inner.drained_seqno = inner.high_seqno;
        let checkpoint = std::mem::take(&mut inner.dirty);
        let failover = inner.failover.entries().iter().map(|e| (e.uuid, e.seqno)).collect();
        let (up_to, vbuuid, max_cas) = (inner.high_seqno, inner.uuid(), inner.hlc.last());
        let (generation, clear_first) = (inner.generation, std::mem::take(&mut inner.clear_on_disk));
        let prepares_completed_to = inner.prepares_completed_to;
        let rollback_to = inner.rollback_on_disk.take();
        drop(inner);
        self.charge(-(checkpoint.charged_bytes() as isize));
        let (items, on_disk) = checkpoint.into_batch();
        Some(DirtyBatch {
            vb,
            items,
            on_disk,
            up_to,
            vbuuid,
            max_cas,
            failover,
            prepares_completed_to,
            rollback_to,
            generation,
            clear_first,
        })
    }

    /// Called by the flusher once a batch of `generation` is fsynced: advances the persisted seqno, completes the
    /// durable writes it covers, and commits the prepares that were waiting for the active's persistence. A batch
    /// drained before the vBucket was emptied (an older generation) changes nothing: its seqnos are not this
    /// copy's.
    pub fn mark_persisted(&self, vb: VbId, generation: u64, up_to: Seqno) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut ready: Vec<PersistWaiter> = Vec::new();
        {
            let mut inner = vbucket.inner.lock();
            if inner.generation != generation {
                return;
            }
            debug_assert!(up_to <= inner.high_seqno, "persisted seqno beyond the high seqno");
            inner.persisted_seqno = inner.persisted_seqno.max(up_to);
            let persisted = inner.persisted_seqno;
            let waiters = std::mem::take(&mut inner.persist_waiters);
            let (done, waiting): (Vec<_>, Vec<_>) = waiters.into_iter().partition(|(s, _)| *s <= persisted);
            inner.persist_waiters = waiting;
            ready.extend(done.into_iter().map(|(_, w)| w));
            self.commit_ready(&mut inner, &mut ready);
        }
        complete(ready, Ok(()));
    }

    /// The store failed: nothing more can be made durable. Writes get TMPFAIL from now on, every waiting
    /// durable write learns that it is ambiguous (it may or may not be on disk), and prepares that need the
    /// active's disk are aborted.
    pub fn fail_persistence(&self) {
        self.store_failed.store(true, std::sync::atomic::Ordering::Release);
        for v in 0..self.num_vbuckets() {
            let Some(vbucket) = self.vbucket(VbId(v)) else { continue };
            let (mut failed, mut ready) = (Vec::new(), Vec::new());
            {
                let mut inner = vbucket.inner.lock();
                failed.extend(std::mem::take(&mut inner.persist_waiters).into_iter().map(|(_, w)| w));
                if inner.state == crate::VbState::Active {
                    failed.extend(self.discard_prepares(&mut inner, |p| p.level.needs_persistence()));
                    self.commit_ready(&mut inner, &mut ready);
                }
            }
            complete(failed, Err(EngineError::SyncWriteAmbiguous));
            complete(ready, Ok(()));
        }
    }

    /// The store refused the flusher's batch of `vb` (drained at `generation`) for a reason of its own: a record
    /// breaking its rules, or the vBucket damaged on disk. Nothing of the batch was written, and this vBucket
    /// alone pays: a copy that does not lead its durable writes (a replica) is emptied and streams again from
    /// zero; an active or pending one is taken out of service (its waiting durable writes are ambiguous), because
    /// it would keep taking writes that can never be made durable. The rest of the bucket keeps persisting.
    pub fn persistence_refused(&self, vb: VbId, generation: u64) -> Refused {
        let Some(vbucket) = self.vbucket(vb) else { return Refused::Stale };
        let (outcome, freed, waiters) = {
            let mut inner = vbucket.inner.lock();
            if inner.generation != generation {
                return Refused::Stale;
            }
            if inner.state.leads_sync_writes() {
                inner.state = crate::VbState::Failed;
                let mut waiters: Vec<PersistWaiter> =
                    std::mem::take(&mut inner.persist_waiters).into_iter().map(|(_, w)| w).collect();
                waiters.extend(self.drop_sync_writes(&mut inner));
                (Refused::TakenOutOfService, 0, waiters)
            } else {
                let (freed, waiters) = self.reset_locked(&mut inner);
                (Refused::Reset, freed, waiters)
            }
        };
        self.after_reset(vb, outcome == Refused::Reset, freed);
        complete(waiters, Err(EngineError::SyncWriteAmbiguous));
        outcome
    }

    /// Warmup: the vBucket's sync writes found on disk ([`SyncWarmup`], gathered while its records were read): the
    /// prepares still pending go back into the durability monitor (no writer waits for them any more: they
    /// commit when their level is met again, or are aborted or replaced by the active), and the aborts into the
    /// abort log, for DCP backfills.
    pub fn restore_sync_writes(&self, vb: VbId, warm: SyncWarmup) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut prepares: Vec<_> = warm.pending.into_values().collect();
        prepares.sort_unstable_by_key(|(_, item)| item.seqno);
        let mut inner = vbucket.inner.lock();
        inner.prepares_completed_to = inner.prepares_completed_to.max(warm.completed_to);
        for (level, item) in prepares {
            let (key, seqno) = (item.key.clone(), item.seqno);
            if seqno <= warm.completed_to
                || inner.monitor.pending_for(&key).is_some()
                || inner.monitor.prepares_after(seqno).next().is_some()
            {
                continue;
            }
            inner.hlc.observe(item.cas);
            inner.high_seqno = inner.high_seqno.max(seqno);
            let mut stored = stored_of(item);
            stored.resident = true;
            self.charge(stored.footprint(key.len()) as isize);
            inner.monitor.track(seqno, Prepare { key: key.into(), item: stored, level, waiter: None });
        }
        for abort in warm.aborts {
            if inner.aborts.last_seqno().is_some_and(|last| last >= abort.seqno) {
                continue;
            }
            inner.high_seqno = inner.high_seqno.max(abort.seqno);
            let dropped = inner.aborts.push(abort);
            self.charge(dropped.charge);
            if let Some(seqno) = dropped.purged_to {
                inner.purge_seqno = inner.purge_seqno.max(seqno);
            }
        }
        inner.drained_seqno = inner.high_seqno;
    }

    /// Warmup: after a vBucket's items are loaded, continues its seqnos and CAS values from what disk holds
    /// (everything on disk is persisted) and records how many items stayed on disk only (full eviction).
    /// The vBucket keeps the failover log it had on disk; whether the restart starts a new branch of it is decided
    /// when warmup ends ([`Bucket::finish_warmup`]), once the vBucket's role is known.
    pub fn restore_vbucket(
        &self,
        vb: VbId,
        high_seqno: Seqno,
        max_cas: Cas,
        items_on_disk_only: usize,
        failover: &[(VbUuid, Seqno)],
    ) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut inner = vbucket.inner.lock();
        inner.high_seqno = inner.high_seqno.max(high_seqno);
        inner.persisted_seqno = inner.persisted_seqno.max(high_seqno);
        inner.drained_seqno = inner.high_seqno;
        let high = inner.high_seqno;
        inner.overwrites.forget_before(high);
        let (uuid, high) = (inner.uuid(), inner.high_seqno);
        match settee_types::FailoverLog::from_entries(failover.iter().copied()) {
            Some(log) => {
                inner.failover = log;
                inner.restart_uuid = Some(uuid);
            }
            None => inner.failover = settee_types::FailoverLog::new(uuid, high),
        }
        inner.ejected_items += items_on_disk_only;
        // Warmup loaded every key on disk unless some stayed there (full eviction).
        inner.disk_keys_loaded = inner.ejected_items == 0;
        inner.hlc.observe(max_cas);
    }

    /// Warmup is done: every vBucket is loaded. A copy this node leads now (active, or pending for a takeover)
    /// starts a new branch of its history at the seqno it came back with, as Couchbase's actives do after an
    /// unclean shutdown (a stream that followed the old history past that seqno rolls back, since what lay above it
    /// may be lost); a replica keeps its active's history, so its stream resumes where it stopped instead of
    /// starting over. (A copy that becomes active later starts its branch then, as every promotion does.) Nothing
    /// read or wrote the bucket during warmup, so no branch is due earlier. Prepares that are met already (an
    /// active without replicas) commit, then the bucket serves.
    pub fn finish_warmup(&self) {
        for v in 0..self.num_vbuckets() {
            let Some(vbucket) = self.vbucket(VbId(v)) else { continue };
            let mut ready = Vec::new();
            {
                let mut inner = vbucket.inner.lock();
                if let Some(uuid) = inner.restart_uuid.take() {
                    if inner.state.leads_sync_writes() {
                        let high = inner.high_seqno;
                        inner.failover.push(uuid, high);
                    }
                }
                self.commit_ready(&mut inner, &mut ready);
            }
            complete(ready, Ok(()));
        }
        self.set_warming_up(false);
    }

    /// Warmup: puts an item read from disk into the hash table without a new seqno and without marking it dirty.
    pub fn load_item(&self, vb: VbId, item: ItemSnapshot) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut inner = vbucket.inner.lock();
        inner.hlc.observe(item.cas);
        inner.high_seqno = inner.high_seqno.max(item.seqno);
        inner.drained_seqno = inner.high_seqno;
        let key = item.key.clone();
        let delta = inner.load(&key, stored_of(item));
        drop(inner);
        self.charge(delta);
    }
}

/// An item read from disk, as the hash table holds it. A snapshot without a value (warmup of keys only) makes a
/// non-resident item.
pub(crate) fn stored_of(item: ItemSnapshot) -> StoredItem<'static> {
    let resident = !(item.value.is_empty() && item.value_missing);
    StoredItem {
        value: item.value.into(),
        cas: item.cas,
        seqno: item.seqno,
        rev: item.rev,
        flags: item.flags,
        expiry: item.expiry,
        datatype: Datatype(item.datatype),
        deleted: item.deleted,
        locked_until: 0,
        resident,
        referenced: false,
    }
}

/// A document's fields under `key` as the flusher and DCP carry them (a pending prepare's, or a table item's through
/// [`snapshot`]).
pub(crate) fn snapshot_of(key: &[u8], item: &StoredItem<'_>) -> ItemSnapshot {
    ItemSnapshot {
        key: key.to_vec(),
        value: item.value.to_vec(),
        cas: item.cas,
        seqno: item.seqno,
        rev: item.rev,
        flags: item.flags,
        expiry: item.expiry,
        datatype: item.datatype.0,
        deleted: item.deleted,
        value_missing: false,
    }
}

/// An item of the hash table as the flusher and DCP carry it; an ejected value is marked missing.
pub(crate) fn snapshot(item: &Item) -> ItemSnapshot {
    ItemSnapshot { value_missing: !item.resident(), ..snapshot_of(item.key(), &item.to_stored()) }
}
