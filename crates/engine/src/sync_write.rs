//! Sync writes (Couchbase's durable writes) in the engine. A write with a durability level becomes a *prepare*: it
//! takes a seqno and goes to the change log (DCP streams with sync writes send it as DCP_PREPARE) and to the
//! vBucket's [`DurabilityMonitor`], but not to the hash table, so readers keep seeing the previous value and other
//! writers of the key get SYNC_WRITE_IN_PROGRESS. Once its level's requirement is met it *commits*: a new seqno,
//! the value installed (and dirty for the flusher), a commit in the change log. If its writer gives up (timeout)
//! it is *aborted*: a new seqno, an abort in the change log, nothing installed.
//!
//! The requirement (see `durability_monitor.rs`) counts the replicas' DCP_SEQNO_ACKNOWLEDGED, which the server
//! feeds to [`Bucket::seqno_acknowledged`], for the chain the cluster gives [`Bucket::set_replication_chain`].
//!
//! Prepares and aborts are persisted like mutations, on the active and on the replicas (`sync_record.rs`), and
//! warmup restores the prepares still pending, as Couchbase does.
//!
//! Persist levels: "persisted" means the prepare's own record is fsynced (the active's persisted seqno reaches it;
//! a replica acknowledges a persist-level prepare only after its own flush). Only then does the prepare commit, so
//! the value becomes visible (KV reads, DCP, query) only once it survives a crash: a crash after that finds the
//! prepare on disk and commits it again. The writer is told success once the commit itself is on the active's
//! disk too: two flusher rounds, as Couchbase's fsync of the prepare and then of the commit.

use settee_types::{DurabilityLevel, Seqno, VbId};

use crate::abort_log::Abort;
use crate::bucket::Bucket;
use crate::change_log::LogKind;
use crate::durability_monitor::{Outcome, Prepare};
use crate::error::EngineError;
use crate::item::{DocKey, StoredItem};
use crate::ops::MutationResult;
use crate::persistence::stored_of;
use crate::replication::{ChangeKind, DcpChange, ReplicaApply};
use crate::sync_record::{abort_entry, prepare_header};
use crate::vbucket::{complete, PersistWaiter, VbInner};

impl Bucket {
    // ---- the public API: topology, acknowledgements, writers ----

    /// The replicas of the active vBucket `vb` in chain order, as node ids; `None` is a copy that does not exist
    /// now (Couchbase's -1). A durable write needs a majority of the configured copies (replicas + 1) among the
    /// active and the `Some` entries, else DURABILITY_IMPOSSIBLE; until this is called no replica is known.
    /// Acknowledgements of nodes that left the chain are forgotten.
    pub fn set_replication_chain(&self, vb: VbId, replicas: &[Option<u64>]) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut ready = Vec::new();
        {
            let mut inner = vbucket.inner.lock();
            inner.monitor.set_chain(replicas);
            self.commit_ready(&mut inner, &mut ready);
        }
        complete(ready, Ok(()));
    }

    /// The replica node `replica` holds every prepare of `vb` up to `prepared_seqno` (its DCP_SEQNO_ACKNOWLEDGED).
    /// Commits, in seqno order, whatever is now satisfied. An acknowledgement from a node that is not in the
    /// vBucket's chain, or for a vBucket that is not active here, is ignored.
    pub fn seqno_acknowledged(&self, vb: VbId, replica: u64, prepared_seqno: Seqno) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut ready = Vec::new();
        {
            let mut inner = vbucket.inner.lock();
            if !inner.state.leads_sync_writes() {
                return;
            }
            // A replica cannot hold what was never prepared; a larger number is a confused peer.
            let seqno = prepared_seqno.min(inner.high_seqno);
            if !inner.monitor.ack(replica, seqno) {
                return;
            }
            self.commit_ready(&mut inner, &mut ready);
        }
        complete(ready, Ok(()));
    }

    /// Whether durable writes of `vb` are still under way here: prepares not yet committed or aborted, or commits
    /// whose writers wait for the disk. A takeover waits for none before the vBucket changes hands.
    pub fn sync_writes_in_flight(&self, vb: VbId) -> bool {
        self.vbucket(vb).is_some_and(|v| {
            let inner = v.inner.lock();
            !inner.monitor.is_empty() || !inner.persist_waiters.is_empty()
        })
    }

    /// Aborts the pending prepare at `prepared_seqno` (its writer timed out or went away): an abort takes a seqno
    /// and goes to the change log, and the key is free again. False when there is nothing to abort: the prepare
    /// already committed (or was aborted), or the vBucket is no longer active here.
    pub fn abort_prepare(&self, vb: VbId, prepared_seqno: Seqno) -> bool {
        let Some(vbucket) = self.vbucket(vb) else { return false };
        let mut ready = Vec::new();
        let waiter = {
            let mut inner = vbucket.inner.lock();
            if !inner.state.leads_sync_writes() {
                return false;
            }
            let Some(prepare) = inner.monitor.remove(prepared_seqno) else { return false };
            let waiter = self.abort_tracked(&mut inner, prepared_seqno, prepare);
            // Later prepares no longer wait behind this one.
            self.commit_ready(&mut inner, &mut ready);
            waiter
        };
        complete(waiter, Err(EngineError::SyncWriteAmbiguous));
        complete(ready, Ok(()));
        true
    }

    /// Calls `waiter` once the durable write whose prepare took `prepared_seqno` is complete: Ok when it committed
    /// and its level is met (for persist levels, the commit is on the active's disk); SYNC_WRITE_AMBIGUOUS when it
    /// was aborted, the vBucket stopped being active, the store failed, or the write is unknown.
    pub fn when_sync_write_completes(&self, vb: VbId, prepared_seqno: Seqno, waiter: PersistWaiter) {
        let Some(vbucket) = self.vbucket(vb) else { return waiter(Err(EngineError::SyncWriteAmbiguous)) };
        let mut inner = vbucket.inner.lock();
        if !inner.state.leads_sync_writes() {
            drop(inner);
            return waiter(Err(EngineError::SyncWriteAmbiguous));
        }
        let waiter = match inner.monitor.set_waiter(prepared_seqno, waiter) {
            Ok(()) => return,
            Err(waiter) => waiter,
        };
        let outcome = match inner.monitor.take_unclaimed(prepared_seqno) {
            Some(Outcome::PersistAt(commit)) if inner.persisted_seqno < commit => {
                inner.persist_waiters.push((commit, waiter));
                return;
            }
            Some(_) => Ok(()),
            None => Err(EngineError::SyncWriteAmbiguous),
        };
        drop(inner);
        waiter(outcome);
    }

    /// Everything up to this seqno of `vb` is on disk (for a memory-only bucket: the high seqno), whatever the
    /// vBucket's state. A replica acknowledges persist-level prepares by it.
    pub fn persisted_seqno(&self, vb: VbId) -> Option<Seqno> {
        Some(self.vbucket(vb)?.inner.lock().durable_seqno())
    }

    /// The prepares `vb` holds, in seqno order, with their levels: a replica re-acknowledges them when its stream
    /// to the active is opened again (the acknowledgements sent on the old connection may have been lost).
    pub fn held_prepares(&self, vb: VbId) -> Vec<(Seqno, DurabilityLevel)> {
        let Some(vbucket) = self.vbucket(vb) else { return Vec::new() };
        let inner = vbucket.inner.lock();
        inner.monitor.prepares_after(0).map(|(seqno, p)| (*seqno, p.level)).collect()
    }

    /// Prepares pending in `vb` (tests and stats).
    pub fn pending_prepares(&self, vb: VbId) -> usize {
        self.vbucket(vb).map_or(0, |v| v.inner.lock().monitor.len())
    }

    // ---- the write path ----

    /// Every write checks this first: a key with a pending prepare is busy.
    pub(crate) fn check_sync_write(inner: &VbInner, key: &DocKey<'_>) -> Result<(), EngineError> {
        match inner.monitor.pending_for(key.encoded()) {
            Some(_) => Err(EngineError::SyncWriteInProgress),
            None => Ok(()),
        }
    }

    /// Installs a mutation the operation built, or for a durable write (`level`) records it as a prepare.
    pub(crate) fn apply_mutation(
        &self,
        inner: &mut VbInner,
        key: &DocKey<'_>,
        item: StoredItem<'_>,
        level: Option<DurabilityLevel>,
    ) -> MutationResult {
        let cas = item.cas;
        let (seqno, sync_write) = match level {
            None => (self.install_committed(inner, key.encoded(), item, LogKind::Mutation), false),
            Some(level) => self.prepare(inner, key.encoded(), item, level),
        };
        MutationResult { vb: inner.vb, cas, seqno, vbuuid: inner.uuid(), sync_write }
    }

    /// Puts a committed document in the hash table at the next seqno; returns that seqno.
    fn install_committed(&self, inner: &mut VbInner, key: &[u8], mut item: StoredItem<'_>, kind: LogKind) -> Seqno {
        item.seqno = inner.next_seqno();
        let delta = inner.place(key, item, kind);
        self.charge(delta);
        self.notify_dirty(inner);
        inner.high_seqno
    }

    /// Records a prepare at the next seqno; returns it, and whether it is pending. One that is satisfied already
    /// (majority with no replicas configured) and has nothing before it commits at once.
    fn prepare(
        &self,
        inner: &mut VbInner,
        key: &[u8],
        mut item: StoredItem<'_>,
        level: DurabilityLevel,
    ) -> (Seqno, bool) {
        let seqno = inner.next_seqno();
        item.seqno = seqno;
        self.charge(item.footprint(key.len()) as isize);
        inner.advance(seqno, key, LogKind::Prepare);
        let copies = self.configured_copies();
        if inner.monitor.is_empty() && inner.monitor.is_satisfied(seqno, level, copies, inner.durable_seqno()) {
            // Nothing to wait for: only the commit needs to reach the disk, but the prepare's seqno still needs a
            // flusher round to count as persisted.
            self.flush_seqno(inner);
            self.commit_prepare(inner, key, item, seqno);
            return (seqno, false);
        }
        self.persist_sync_step(inner, key, &item, &prepare_header(level));
        inner.monitor.track(seqno, Prepare { key: key.into(), item: item.into_owned(), level, waiter: None });
        (seqno, true)
    }

    /// Commits a prepare taken out of the monitor: its document goes into the hash table at a new seqno with the
    /// prepare's CAS. Returns the commit seqno.
    fn commit_prepare(&self, inner: &mut VbInner, key: &[u8], item: StoredItem<'_>, prepared: Seqno) -> Seqno {
        self.charge(-(item.footprint(key.len()) as isize));
        completed(inner, prepared);
        self.install_committed(inner, key, item, LogKind::Commit { prepared })
    }

    /// Commits, in seqno order, every prepare whose requirement is met, if the vBucket is active (only an active
    /// commits); collects the waiters to call with Ok once the lock is released. A persist-level write's waiter
    /// moves to the persist waiters of its commit seqno instead: the writer hears of success only once the
    /// committed document is on disk.
    pub(crate) fn commit_ready(&self, inner: &mut VbInner, ready: &mut Vec<PersistWaiter>) {
        if inner.monitor.is_empty() || !inner.state.leads_sync_writes() {
            return;
        }
        let active_persisted = inner.durable_seqno();
        for (seqno, p) in inner.monitor.take_ready(self.configured_copies(), active_persisted) {
            let commit = self.commit_prepare(inner, &p.key, p.item, seqno);
            let wait_for_disk = inner.persistent && p.level.needs_persistence();
            match (p.waiter, wait_for_disk) {
                (Some(w), false) => ready.push(w),
                (Some(w), true) => inner.persist_waiters.push((commit, w)),
                (None, false) => inner.monitor.record_unclaimed(seqno, Outcome::Committed),
                (None, true) => inner.monitor.record_unclaimed(seqno, Outcome::PersistAt(commit)),
            }
        }
    }

    /// Records the abort of a prepare already taken out of the monitor; returns its waiter.
    fn abort_tracked(&self, inner: &mut VbInner, prepared: Seqno, p: Prepare) -> Option<PersistWaiter> {
        self.charge(-p.footprint());
        completed(inner, prepared);
        let seqno = inner.next_seqno();
        inner.advance(seqno, &p.key, LogKind::Abort { prepared });
        let abort = Abort { seqno, key: p.key, prepared, time: self.now_secs() };
        self.record_abort(inner, abort);
        p.waiter
    }

    /// Keeps an abort (its seqno taken and logged): in the vBucket's abort log for DCP backfills, and for the disk.
    pub(crate) fn record_abort(&self, inner: &mut VbInner, abort: Abort) {
        let (item, header) = abort_entry(&abort);
        self.persist_sync_step(inner, &abort.key, &item, &header);
        let dropped = inner.aborts.push(abort);
        self.charge(dropped.charge);
        if let Some(seqno) = dropped.purged_to {
            inner.purge_seqno = inner.purge_seqno.max(seqno);
        }
    }

    /// A sync write's step (a prepare, or an abort) goes to a persistent vBucket's checkpoint as a record of its
    /// own (see `sync_record.rs`), so a restart finds the prepares still pending and knows what was aborted.
    fn persist_sync_step(&self, inner: &mut VbInner, key: &[u8], item: &StoredItem<'_>, header: &[u8]) {
        if !inner.persistent {
            return;
        }
        let charged = inner.dirty.push_sync(key, item, header);
        self.charge(charged as isize);
        self.notify_dirty(inner);
    }

    /// Settles the prepares `doomed` selects because they can no longer complete (the store failed) or their
    /// documents are going away (flush, a dropped collection): an active vBucket aborts them, a replica forgets
    /// them. Returns their waiters, whose writes are ambiguous.
    pub(crate) fn discard_prepares(
        &self,
        inner: &mut VbInner,
        doomed: impl Fn(&Prepare) -> bool,
    ) -> Vec<PersistWaiter> {
        let seqnos: Vec<Seqno> = inner.monitor.prepares_after(0).filter(|(_, p)| doomed(p)).map(|(s, _)| *s).collect();
        let mut waiters = Vec::new();
        for seqno in seqnos {
            let Some(p) = inner.monitor.remove(seqno) else { continue };
            if inner.state.leads_sync_writes() {
                waiters.extend(self.abort_tracked(inner, seqno, p));
            } else {
                self.charge(-p.footprint());
                waiters.extend(p.waiter);
            }
        }
        waiters
    }

    /// A seqno that puts nothing in the checkpoint (a prepare committed at once) still needs a flusher round before it
    /// counts as persisted: wake the flusher unless the checkpoint already did.
    fn flush_seqno(&self, inner: &VbInner) {
        if inner.persistent && inner.dirty.is_empty() {
            self.wake_flusher(inner.vb);
        }
    }

    /// A committed change made the checkpoint non-empty: wake the flusher that owns the vBucket.
    fn notify_dirty(&self, inner: &VbInner) {
        if inner.dirty.len() == 1 {
            self.wake_flusher(inner.vb);
        }
    }

    fn wake_flusher(&self, vb: VbId) {
        if let Some(notify) = self.dirty_notifier.get() {
            notify(vb);
        }
    }

    // ---- state changes ----

    /// The vBucket stops being active: the writers still waiting learn that their outcome is unknown; the
    /// prepares stay, as a replica holds them, for the new active to commit or abort.
    pub(crate) fn demote_sync_writes(inner: &mut VbInner) -> Vec<PersistWaiter> {
        inner.monitor.clear_acks();
        inner.monitor.take_waiters()
    }

    /// A replica becomes active (failover): every prepare it holds reached it, so any of them may have been
    /// acknowledged to its writer; all commit now, in seqno order. One that was never acknowledged survives too,
    /// which is allowed: its writer saw a timeout or an ambiguous reply.
    pub(crate) fn promote_sync_writes(&self, inner: &mut VbInner) -> Vec<PersistWaiter> {
        let mut waiters = Vec::new();
        for (seqno, p) in inner.monitor.take_all() {
            self.commit_prepare(inner, &p.key, p.item, seqno);
            waiters.extend(p.waiter);
        }
        waiters
    }

    /// Drops every prepare (the vBucket is emptied); returns the waiters, whose writes are now ambiguous.
    pub(crate) fn drop_sync_writes(&self, inner: &mut VbInner) -> Vec<PersistWaiter> {
        let mut waiters = inner.monitor.take_waiters();
        for (_, p) in inner.monitor.take_all() {
            self.charge(-p.footprint());
            waiters.extend(p.waiter);
        }
        waiters
    }

    // ---- replica vBuckets ----

    /// Applies one replicated change to a replica vBucket (the caller checked its seqno against the snapshot).
    /// Returns the change in charged bytes, or [`ReplicaApply::MissingPrepare`] (and changes nothing) for a commit
    /// of a prepare this replica does not hold.
    pub(crate) fn replica_step(&self, inner: &mut VbInner, change: DcpChange) -> (isize, ReplicaApply) {
        let DcpChange { mut item, kind } = change;
        // The key moves out of the snapshot: `stored_of` does not read it.
        let key = std::mem::take(&mut item.key);
        let seqno = item.seqno;
        let mut delta = 0;
        match kind {
            ChangeKind::Mutation => {
                // The active completed whatever prepare this replica held for the key (the change log kept only
                // the newest change of the key).
                delta += self.drop_replica_prepare(inner, &key);
                let mut stored = stored_of(item);
                stored.resident = true;
                delta += inner.place(&key, stored, LogKind::Mutation);
                self.notify_dirty(inner);
            }
            ChangeKind::Prepare(level) => {
                delta += self.drop_replica_prepare(inner, &key);
                let mut stored = stored_of(item);
                stored.resident = true;
                delta += stored.footprint(key.len()) as isize;
                inner.advance(seqno, &key, LogKind::Prepare);
                self.persist_sync_step(inner, &key, &stored, &prepare_header(level));
                inner.monitor.track(seqno, Prepare { key: key.into(), item: stored, level, waiter: None });
            }
            ChangeKind::Commit { prepared_seqno } => {
                if inner.monitor.pending_for(&key) != Some(prepared_seqno) {
                    return (0, ReplicaApply::MissingPrepare);
                }
                let Some(p) = inner.monitor.remove(prepared_seqno) else { return (0, ReplicaApply::MissingPrepare) };
                delta -= p.footprint();
                completed(inner, prepared_seqno);
                let mut committed = p.item;
                committed.seqno = seqno;
                delta += inner.place(&key, committed, LogKind::Commit { prepared: prepared_seqno });
                self.notify_dirty(inner);
            }
            ChangeKind::Abort { prepared_seqno } => {
                if inner.monitor.pending_for(&key) == Some(prepared_seqno) {
                    delta += self.drop_replica_prepare(inner, &key);
                }
                inner.advance(seqno, &key, LogKind::Abort { prepared: prepared_seqno });
                let abort = Abort { seqno, key: key.into(), prepared: prepared_seqno, time: self.now_secs() };
                self.record_abort(inner, abort);
            }
        }
        (delta, ReplicaApply::Applied)
    }

    /// Forgets the replica's prepare of `key`, if any; returns the bytes released (negative).
    fn drop_replica_prepare(&self, inner: &mut VbInner, key: &[u8]) -> isize {
        match inner.monitor.remove_key(key) {
            Some((seqno, p)) => {
                completed(inner, seqno);
                -p.footprint()
            }
            None => 0,
        }
    }
}

/// The prepare at `seqno` left the monitor completed (committed, aborted, or replaced on a replica by the active's
/// later change of its key): when no prepare below it is still pending, every prepare up to it is completed, and
/// the vBucket's `prepares_completed_to` (persisted with its state, read by warmup) moves up to it.
fn completed(inner: &mut VbInner, seqno: Seqno) {
    let lowest_pending = inner.monitor.prepares_after(0).next().map(|(s, _)| *s);
    if lowest_pending.is_none_or(|lowest| lowest > seqno) {
        inner.prepares_completed_to = inner.prepares_completed_to.max(seqno);
    }
}
