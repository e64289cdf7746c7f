//! The engine's side of DCP and replication: cursors that read an active vBucket's mutations in seqno order
//! (from the change log, or by a backfill of the hash table), replica vBuckets that apply what their active sends
//! at the seqnos it chose, and the vBucket state changes a cluster map drives.
//!
//! No I/O here: the server's DCP producer and consumer move [`ItemSnapshot`]s between these calls and the wire.

use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use settee_types::{DurabilityLevel, FailoverLog, Seqno, VbId, VbUuid};

use crate::bucket::Bucket;
use crate::change_log::{CursorId, LogKind};
use crate::durability_monitor::Prepare;
use crate::error::EngineError;
use crate::item::ItemView;
use crate::persistence::{snapshot, snapshot_of, ItemSnapshot};
use crate::stats::BucketStats;
use crate::vbucket::{complete, ChangeNotifier, PersistWaiter, VbInner, VbState};

/// One change of a vBucket as DCP carries it: a mutation or deletion, or a step of a sync write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcpChange {
    /// The document (for a commit: as committed, at the commit seqno; for an abort: only the key and the abort
    /// seqno).
    pub item: ItemSnapshot,
    pub kind: ChangeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A mutation or deletion (`item.deleted`), sent to every stream.
    Mutation,
    /// A pending sync write; `item` is the prepared document (a tombstone for a durable delete).
    Prepare(DurabilityLevel),
    /// The prepare at `prepared_seqno` committed. A stream without sync writes sends `item` as a mutation.
    Commit { prepared_seqno: Seqno },
    /// The prepare at `prepared_seqno` was aborted; only streams with sync writes carry it.
    Abort { prepared_seqno: Seqno },
}

impl From<ItemSnapshot> for DcpChange {
    fn from(item: ItemSnapshot) -> DcpChange {
        DcpChange { item, kind: ChangeKind::Mutation }
    }
}

impl DcpChange {
    /// A commit as a replica receives it (DCP_COMMIT carries no document).
    pub fn commit(key: Vec<u8>, prepared_seqno: Seqno, commit_seqno: Seqno) -> DcpChange {
        DcpChange { item: key_only(key, commit_seqno), kind: ChangeKind::Commit { prepared_seqno } }
    }
    /// An abort as a replica receives it.
    pub fn abort(key: Vec<u8>, prepared_seqno: Seqno, abort_seqno: Seqno) -> DcpChange {
        DcpChange { item: key_only(key, abort_seqno), kind: ChangeKind::Abort { prepared_seqno } }
    }
}

fn key_only(key: Vec<u8>, seqno: Seqno) -> ItemSnapshot {
    ItemSnapshot {
        key,
        value: Vec::new(),
        cas: 0,
        seqno,
        rev: 0,
        flags: 0,
        expiry: 0,
        datatype: 0,
        deleted: false,
        value_missing: false,
    }
}

/// What became of a replicated change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaApply {
    Applied,
    /// A commit for a prepare this replica does not hold (it restarted and lost its in-memory prepares): nothing
    /// was applied; the replica cannot know the committed document and must stream the vBucket again.
    MissingPrepare,
}

/// One read of a vBucket by a DCP cursor.
#[derive(Debug)]
pub enum DcpRead {
    /// Nothing above the cursor's position yet.
    UpToDate,
    /// A consistent snapshot: once every item is applied, the reader holds the vBucket as of `end`.
    Snapshot(DcpSnapshot),
    /// Items between the cursor's position and `up_to` exist on disk only (full eviction): read them from the
    /// store's seqno index as a disk snapshot ending at `up_to`, with `prepares` (the pending sync writes and the
    /// aborts a reader at the cursor's position may need, in that range, kept in memory) merged in by seqno, then
    /// read again from `up_to`.
    FromDisk { up_to: Seqno, prepares: Vec<DcpChange> },
}

#[derive(Debug)]
pub struct DcpSnapshot {
    pub start: Seqno,
    pub end: Seqno,
    /// Read from the change log (a memory snapshot) rather than by a backfill (a disk snapshot).
    pub from_memory: bool,
    /// The latest version of each key changed in the range, in seqno order, and the pending prepares. An item
    /// with `value_missing` was ejected: its value must be read from the store.
    pub items: Vec<DcpChange>,
}

/// What a stream request needs to know about a vBucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VbStreamInfo {
    pub state: VbState,
    pub failover: FailoverLog,
    pub high_seqno: Seqno,
    pub purge_seqno: Seqno,
    /// A replica's current snapshot (start, end).
    pub snapshot: (Seqno, Seqno),
    /// The vBucket's generation (see [`Bucket::reset_vbucket`]).
    pub generation: u64,
}

impl Bucket {
    /// Registers the call that wakes DCP streams (once per bucket). It runs under a vBucket lock: it must only
    /// signal, never block or take locks of its own that could be held while calling the engine.
    pub fn set_change_notifier(&self, notify: ChangeNotifier) {
        let _ = self.change_notifier.set(notify);
    }

    pub fn stream_info(&self, vb: VbId) -> Result<VbStreamInfo, EngineError> {
        let vbucket = self.vbucket(vb).ok_or(EngineError::NotMyVbucket)?;
        let inner = vbucket.inner.lock();
        Ok(VbStreamInfo {
            state: inner.state,
            failover: inner.failover.clone(),
            high_seqno: inner.high_seqno,
            purge_seqno: inner.purge_seqno,
            snapshot: inner.snapshot,
            generation: inner.generation,
        })
    }

    /// Opens a cursor on an active vBucket, or a pending one (held for a takeover: clients are refused, streams
    /// still drain it), positioned after `position`.
    pub fn open_cursor(&self, vb: VbId, position: Seqno) -> Result<CursorId, EngineError> {
        let id = self.next_cursor.fetch_add(1, Ordering::Relaxed);
        self.with_vbucket(vb, &[VbState::Active, VbState::Pending], |inner| {
            if inner.on_change.is_none() {
                inner.on_change = self.change_notifier.get().cloned();
            }
            let high = inner.high_seqno;
            inner.log.open_cursor(id, position.min(high), high);
            Ok(id)
        })
    }

    pub fn close_cursor(&self, vb: VbId, cursor: CursorId) {
        if let Some(vbucket) = self.vbucket(vb) {
            vbucket.inner.lock().log.close_cursor(cursor);
        }
    }

    /// Reads what the cursor has not seen above `after`, about `limit_bytes` of keys and values at most (at least one
    /// change): a snapshot whose `end` falls short of the high seqno holds the changes up to `end`, and the next
    /// read from `end` continues it, so neither a backfill of a large vBucket nor a long change log is ever copied
    /// out whole. Fails with NOT_MY_VBUCKET once the vBucket is neither active nor pending here (the stream ends
    /// with "state changed").
    ///
    /// A snapshot read in several pieces is not a point in time: a document changed between two reads is sent at
    /// its new seqno by a later read rather than at its old one by this snapshot.
    pub fn read_cursor(
        &self,
        vb: VbId,
        cursor: CursorId,
        after: Seqno,
        limit_bytes: usize,
    ) -> Result<DcpRead, EngineError> {
        self.with_vbucket(vb, &[VbState::Active, VbState::Pending], |inner| {
            let high = inner.high_seqno;
            if after >= high {
                inner.log.advance(cursor, high);
                return Ok(DcpRead::UpToDate);
            }
            let from_memory = inner.log.covers(after);
            if !from_memory && inner.ejected_items > 0 && after < inner.persisted_seqno {
                let up_to = inner.persisted_seqno;
                let mut prepares: Vec<DcpChange> = inner
                    .monitor
                    .prepares_after(after)
                    .take_while(|(s, _)| **s <= up_to)
                    .map(|(_, p)| prepare_change(p))
                    .collect();
                prepares.extend(aborts_after(inner, after).take_while(|c| c.item.seqno <= up_to));
                return Ok(DcpRead::FromDisk { up_to, prepares });
            }
            let (items, end) =
                if from_memory { read_log(inner, after, limit_bytes) } else { backfill(inner, after, limit_bytes) };
            inner.log.advance(cursor, end);
            Ok(DcpRead::Snapshot(DcpSnapshot { start: after + 1, end, from_memory, items }))
        })
    }

    // ---- replica vBuckets ----

    /// Changes a vBucket's role. A vBucket that becomes active starts a new history (a new vbuuid), as Couchbase
    /// adds a failover-log entry on promotion, and commits the prepares it received as a replica; durable writes
    /// waiting on a vBucket that stops being active learn that their outcome is unknown.
    pub fn set_vbucket_state(&self, vb: VbId, state: VbState, new_uuid: VbUuid) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let (ambiguous, committed): (Vec<PersistWaiter>, Vec<PersistWaiter>) = {
            let mut inner = vbucket.inner.lock();
            if inner.state == state {
                return;
            }
            let was_leading = inner.state.leads_sync_writes();
            inner.state = state;
            if state.leads_sync_writes() && was_leading {
                // Into or out of a takeover hold: the same copy keeps its history and its durable writes.
                (Vec::new(), Vec::new())
            } else if state == VbState::Active {
                if self.is_warming_up() {
                    // Warmup may restore this vBucket's history from disk before or after this promotion: its new
                    // branch starts once, when warmup ends (`finish_warmup`), whichever came first.
                    inner.restart_uuid.get_or_insert(new_uuid);
                } else {
                    let high = inner.high_seqno;
                    inner.failover.push(new_uuid, high);
                }
                (Vec::new(), self.promote_sync_writes(&mut inner))
            } else {
                let mut ambiguous: Vec<PersistWaiter> =
                    std::mem::take(&mut inner.persist_waiters).into_iter().map(|(_, w)| w).collect();
                if was_leading {
                    ambiguous.extend(Self::demote_sync_writes(&mut inner));
                }
                (ambiguous, Vec::new())
            }
        };
        complete(ambiguous, Err(EngineError::SyncWriteAmbiguous));
        complete(committed, Ok(()));
    }

    /// A replica adopts the history of the active it follows (the failover log of an accepted stream request).
    pub fn set_failover_log(&self, vb: VbId, log: FailoverLog) {
        if let Some(vbucket) = self.vbucket(vb) {
            let mut inner = vbucket.inner.lock();
            inner.failover = log;
        }
    }

    /// A replica starts receiving the snapshot [start, end]. Refused (TMPFAIL) while warmup loads the bucket: the
    /// vBucket's seqnos are not known yet, and a change applied now would be overtaken by what warmup loads.
    pub fn replica_snapshot(&self, vb: VbId, start: Seqno, end: Seqno) -> Result<(), EngineError> {
        self.refuse_while_warming_up()?;
        self.with_vbucket(vb, &[VbState::Replica, VbState::Pending], |inner| {
            if start > end || end <= inner.high_seqno {
                return Err(EngineError::Invalid("snapshot range"));
            }
            inner.snapshot = (start, end);
            Ok(())
        })
    }

    /// A replica applies one change at the seqno, CAS and revision its active gave it: a mutation or deletion,
    /// or a sync write's prepare (held aside, invisible to GET_REPLICA), commit (the prepared document installed
    /// at the commit seqno) or abort (the prepare dropped).
    pub fn replica_apply(&self, vb: VbId, change: impl Into<DcpChange>) -> Result<ReplicaApply, EngineError> {
        self.refuse_while_warming_up()?;
        let change = change.into();
        let (delta, applied) = self.with_vbucket(vb, &[VbState::Replica, VbState::Pending], |inner| {
            let (start, end) = inner.snapshot;
            let seqno = change.item.seqno;
            if seqno <= inner.high_seqno || seqno < start || seqno > end {
                return Err(EngineError::Invalid("replicated seqno outside the snapshot"));
            }
            inner.hlc.observe(change.item.cas);
            inner.known_absent.remove(&change.item.key[..]);
            Ok(self.replica_step(inner, change))
        })?;
        self.charge(delta);
        BucketStats::bump(&self.stats.replica_items_received);
        Ok(applied)
    }

    /// A replica's snapshot reached `seqno` through changes its stream does not carry (DCP_SEQNO_ADVANCED: an
    /// abort whose prepare the stream never sent, a change deduplicated away): the vBucket now holds everything up
    /// to `seqno`, so its high seqno moves there, as if the change had been applied. Without this a copy being
    /// built or taking over would wait for a seqno it can never receive.
    pub fn replica_seqno_advanced(&self, vb: VbId, seqno: Seqno) -> Result<(), EngineError> {
        self.refuse_while_warming_up()?;
        self.with_vbucket(vb, &[VbState::Replica, VbState::Pending], |inner| {
            let (start, end) = inner.snapshot;
            if seqno <= inner.high_seqno || seqno < start || seqno > end {
                return Err(EngineError::Invalid("advanced seqno outside the snapshot"));
            }
            inner.high_seqno = seqno;
            // Nothing enters the checkpoint, but the seqno still needs a flusher round to count as persisted.
            if inner.persistent && inner.dirty.is_empty() {
                if let Some(notify) = self.dirty_notifier.get() {
                    notify(vb);
                }
            }
            Ok(())
        })
    }

    /// Empties a vBucket (a replica rolled back to zero, or a stale copy dropped). A persistent bucket's flusher
    /// then clears the store's copy before it writes anything new of the vBucket (see `VbInner::clear_on_disk`),
    /// and the vBucket starts a new generation, so a flusher round drained before the reset leaves the new copy's
    /// persisted seqno alone and a DCP consumer streaming the old copy knows to start again.
    pub fn reset_vbucket(&self, vb: VbId) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let (freed, waiters) = self.reset_locked(&mut vbucket.inner.lock());
        self.after_reset(vb, true, freed);
        complete(waiters, Err(EngineError::SyncWriteAmbiguous));
    }

    /// [`Bucket::reset_vbucket`] under the vBucket's lock; returns the bytes freed and the durable writes whose
    /// outcome is now unknown.
    pub(crate) fn reset_locked(&self, inner: &mut VbInner) -> (usize, Vec<PersistWaiter>) {
        let waiters = self.drop_sync_writes(inner);
        let freed = inner.purge_all();
        self.charge(inner.aborts.clear());
        inner.restart_uuid = None;
        inner.prepares_completed_to = 0;
        inner.overwrites.clear();
        inner.rollback_on_disk = None;
        inner.high_seqno = 0;
        inner.persisted_seqno = 0;
        inner.purge_seqno = 0;
        inner.snapshot = (0, 0);
        inner.ejected_items = 0;
        inner.known_absent.clear();
        inner.drained_seqno = 0;
        inner.log.reset(0);
        let uuid = inner.uuid();
        inner.failover = FailoverLog::new(uuid, 0);
        inner.generation += 1;
        inner.clear_on_disk = inner.persistent;
        (freed, waiters)
    }

    /// What follows a reset once the vBucket's lock is released: the memory given back, the bucket's reset count
    /// moved (DCP consumers compare generations when it moves), the flusher woken to clear the store.
    pub(crate) fn after_reset(&self, vb: VbId, reset: bool, freed: usize) {
        self.charge(-(freed as isize));
        if reset {
            self.resets.fetch_add(1, Ordering::AcqRel);
            if let Some(notify) = self.dirty_notifier.get() {
                notify(vb);
            }
        }
    }

    /// How many times a vBucket of this bucket was emptied: a consumer checks its streams' generations only when
    /// this moved.
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::Acquire)
    }

    /// GET_REPLICA: a read served by a replica vBucket (NOT_MY_VBUCKET anywhere else).
    pub fn get_replica<R>(
        &self,
        vb: VbId,
        key: &crate::DocKey<'_>,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<R, EngineError> {
        self.collection_ttl(key.cid())?;
        let now = self.now_secs();
        self.with_vbucket(vb, &[VbState::Replica], |inner| match inner.table.get(key.encoded()) {
            Some(item) if !item.resident() => Err(EngineError::NeedFetch),
            Some(item) if !item.deleted() && !crate::expiry::is_expired(item.expiry(), now) => {
                Ok(f(ItemView::of(item, item.cas())))
            }
            None if inner.ejected_items > 0 => Err(EngineError::NeedFetch),
            _ => Err(EngineError::NotFound),
        })
    }
}

/// What a reader positioned at `after` needs of the log above it: the newest committed change of each key, and
/// the sync-write steps it can use. The log keeps two kinds of history per key, as Couchbase keeps prepares apart
/// from committed items: an entry is sent when it is still the key's current state of its kind.
/// - a mutation or commit: when the hash table still holds that seqno. A commit whose prepare lies in the range
///   too goes out as a mutation: the reader never saw the prepare;
/// - a prepare: when it is still pending;
/// - an abort: when the reader may hold the prepare (it lies at or below `after`).
///
/// Stops once `limit_bytes` of changes are read; returns them and the seqno of the last log entry it got to (the
/// high seqno when it read everything).
fn read_log(inner: &VbInner, after: Seqno, limit_bytes: usize) -> (Vec<DcpChange>, Seqno) {
    let mut read = Vec::new();
    let mut bytes = 0usize;
    for (seqno, key, kind) in inner.log.entries_after(after) {
        if bytes >= limit_bytes && !read.is_empty() {
            // `seqno` and what follows are left for the next read.
            return (read, seqno - 1);
        }
        if let Some(change) = log_change(inner, after, *seqno, key, *kind) {
            bytes = bytes.saturating_add(change_bytes(&change));
            read.push(change);
        }
    }
    (read, inner.high_seqno)
}

/// The change one log entry stands for, if it is still what a reader at `after` needs (see `read_log`).
fn log_change(inner: &VbInner, after: Seqno, seqno: Seqno, key: &[u8], kind: LogKind) -> Option<DcpChange> {
    match kind {
        LogKind::Mutation | LogKind::Commit { .. } => {
            let item = inner.table.get(key).filter(|i| i.seqno() == seqno)?;
            let kind = match kind {
                LogKind::Commit { prepared } if prepared <= after => ChangeKind::Commit { prepared_seqno: prepared },
                _ => ChangeKind::Mutation,
            };
            Some(DcpChange { item: snapshot(item), kind })
        }
        LogKind::Prepare => inner.monitor.get(seqno).map(prepare_change),
        LogKind::Abort { prepared } => (prepared <= after).then(|| DcpChange::abort(key.to_vec(), prepared, seqno)),
    }
}

/// What a change counts for against a read's limit: its key and value and a frame header's worth of metadata.
fn change_bytes(change: &DcpChange) -> usize {
    entry_bytes(change.item.key.len(), change.item.value.len())
}

fn entry_bytes(key_len: usize, value_len: usize) -> usize {
    key_len.saturating_add(value_len).saturating_add(CHANGE_OVERHEAD_BYTES)
}

/// A DCP mutation's header and extras, roughly: what a change costs beyond its key and value.
const CHANGE_OVERHEAD_BYTES: usize = 56;

/// Every item above `after` in the hash table (as mutations: a reader that held the prepare of a committed one
/// replaces it) and every pending prepare above `after`, in seqno order, as far as the longest seqno-ordered prefix
/// of them that fits `limit_bytes` (at least one). Returns them and the seqno the read got to: one below the first
/// change left out, or the high seqno when none was.
///
/// The hash table is not ordered by seqno, so the prefix is found in a first pass that keeps only (seqno, size)
/// pairs of the smallest seqnos in a bounded heap; only the changes inside it are copied, in a second pass. A large
/// vBucket is therefore read in several passes, each copying about `limit_bytes`.
fn backfill(inner: &VbInner, after: Seqno, limit_bytes: usize) -> (Vec<DcpChange>, Seqno) {
    let table = || inner.table.iter().filter(move |item| item.seqno() > after);
    let prepares = || inner.monitor.prepares_after(after);
    let sizes = table()
        .map(|item| (item.seqno(), entry_bytes(item.key().len(), item.value().len())))
        .chain(prepares().map(|(seqno, p)| (*seqno, entry_bytes(p.key.len(), p.item.value.len()))))
        .chain(aborts_after(inner, after).map(|c| (c.item.seqno, change_bytes(&c))));
    let end = prefix_end(sizes, limit_bytes).unwrap_or(inner.high_seqno);
    let mut items: Vec<DcpChange> = table()
        .filter(|item| item.seqno() <= end)
        .map(|item| snapshot(item).into())
        .chain(prepares().take_while(|(seqno, _)| **seqno <= end).map(|(_, p)| prepare_change(p)))
        .chain(aborts_after(inner, after).take_while(|c| c.item.seqno <= end))
        .collect();
    items.sort_unstable_by_key(|c| c.item.seqno);
    (items, end)
}

/// The last seqno of the longest prefix, in seqno order, of `entries` (given in any order, as (seqno, bytes)) whose
/// bytes stay within `limit_bytes`, keeping at least one entry; None when every entry fits. Holds only the prefix's
/// (seqno, bytes) pairs: the largest is dropped whenever they pass the limit, and nothing at or above a dropped seqno
/// is taken again.
fn prefix_end(entries: impl Iterator<Item = (Seqno, usize)>, limit_bytes: usize) -> Option<Seqno> {
    let mut kept: BinaryHeap<(Seqno, usize)> = BinaryHeap::new();
    let mut kept_bytes = 0usize;
    let mut first_left_out: Option<Seqno> = None;
    for (seqno, bytes) in entries {
        if first_left_out.is_some_and(|cut| seqno >= cut) {
            continue;
        }
        kept.push((seqno, bytes));
        kept_bytes = kept_bytes.saturating_add(bytes);
        while kept_bytes > limit_bytes && kept.len() > 1 {
            let Some((dropped, dropped_bytes)) = kept.pop() else { break };
            kept_bytes -= dropped_bytes;
            first_left_out = Some(first_left_out.map_or(dropped, |cut| cut.min(dropped)));
        }
    }
    first_left_out.map(|cut| cut - 1)
}

/// The aborts above `after` that a reader at `after` may need, oldest first: those of prepares at or below `after`,
/// which the reader may hold (the change log's rule, `log_change`). A backfill reads the hash table, which keeps no
/// trace of an abort, so without these a replica that held a prepare and missed its abort would keep the prepare
/// (and commit it if promoted).
fn aborts_after(inner: &VbInner, after: Seqno) -> impl Iterator<Item = DcpChange> + '_ {
    inner
        .aborts
        .range(after, Seqno::MAX)
        .filter(move |a| a.prepared <= after)
        .map(|a| DcpChange::abort(a.key.to_vec(), a.prepared, a.seqno))
}

/// A pending prepare as DCP carries it (its item holds the prepare's seqno).
fn prepare_change(p: &Prepare) -> DcpChange {
    DcpChange { item: snapshot_of(&p.key, &p.item), kind: ChangeKind::Prepare(p.level) }
}

#[cfg(test)]
mod prefix_tests {
    use super::prefix_end;

    /// What `prefix_end` must answer, by sorting: the seqno before the first entry that no longer fits.
    fn expected(entries: &[(u64, usize)], limit: usize) -> Option<u64> {
        let mut sorted = entries.to_vec();
        sorted.sort_unstable();
        let mut total = 0;
        for (i, (seqno, bytes)) in sorted.iter().enumerate() {
            total += bytes;
            if total > limit && i > 0 {
                return Some(seqno - 1);
            }
        }
        None
    }

    #[test]
    fn the_bounded_heap_finds_the_same_prefix_as_sorting() {
        // Proves the one-pass prefix search against sorting, on shuffled seqnos with mixed sizes (one larger than the
        // limit on its own) and several limits, from a seeded generator.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..200 {
            let n = 1 + (next() % 60) as usize;
            let mut seqnos: Vec<u64> = (1..=n as u64 * 2).filter(|_| next() % 2 == 0).collect();
            seqnos.push(n as u64 * 2 + 1);
            let mut entries: Vec<(u64, usize)> = seqnos.iter().map(|s| (*s, 1 + (next() % 300) as usize)).collect();
            entries[0].1 = 5_000;
            for i in (1..entries.len()).rev() {
                entries.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            for limit in [0, 100, 1_000, 4_000, usize::MAX] {
                let got = prefix_end(entries.iter().copied(), limit);
                assert_eq!(got, expected(&entries, limit), "round {round}, limit {limit}");
            }
        }
    }
}
