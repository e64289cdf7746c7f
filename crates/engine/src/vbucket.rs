//! Hot path: one vBucket, an in-memory hash table of items behind a mutex held for microseconds.

use parking_lot::Mutex;
use settee_types::{Cas, FailoverLog, OnDisk, Seqno, VbId, VbUuid};

use crate::abort_log::AbortLog;
use crate::change_log::{ChangeLog, LogKind};
use crate::checkpoint::Checkpoint;
use crate::durability_monitor::DurabilityMonitor;
use crate::hlc::Hlc;
use crate::item::StoredItem;
use crate::rollback::OverwriteLog;
use crate::table::ItemTable;

/// The role this node plays for a vBucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VbState {
    Active,
    Replica,
    Pending,
    Dead,
    /// Taken out of service after its stored data failed a checksum: requests get EINTERNAL rather than data that
    /// might be wrong.
    Failed,
}

impl VbState {
    /// Whether this copy runs the vBucket's durable writes: an active one, or one held pending for a takeover
    /// (it takes no new writes, but the prepares it already made still commit or abort here).
    pub fn leads_sync_writes(self) -> bool {
        matches!(self, VbState::Active | VbState::Pending)
    }
}

/// Seqnos reported by OBSERVE_SEQNO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedSeqnos {
    pub vbuuid: VbUuid,
    pub persisted_seqno: Seqno,
    pub current_seqno: Seqno,
}

pub struct VBucket {
    pub(crate) id: VbId,
    pub(crate) inner: Mutex<VbInner>,
}

/// Called once when a durable write's persistence completes (Ok) or can no longer complete (Err).
pub type PersistWaiter = Box<dyn FnOnce(Result<(), crate::EngineError>) + Send>;

pub(crate) struct VbInner {
    pub vb: VbId,
    pub state: VbState,
    /// Whether mutations are queued for the flusher (Couchbase buckets) or live in memory only.
    pub persistent: bool,
    /// The checkpoint: copies of the mutations not yet handed to the flusher, in mutation order, each with what the
    /// mutation knew of the key's version on disk: the seqno of the flushed item it replaced, `Absent` for a key new
    /// on disk ([`VbInner::disk_keys_in_table`]), else `Unknown` (an unflushed item it replaced has an earlier entry
    /// here, and the flusher takes the oldest entry's knowledge).
    pub dirty: Checkpoint,
    /// Warmup loaded every key the disk holds for this vBucket (none stayed on disk only).
    pub disk_keys_loaded: bool,
    /// The table dropped a key without a mutation (a purge, an eviction of the whole item, a reset): the disk may
    /// hold keys the table lacks until the next warmup.
    pub keys_dropped: bool,
    /// Every mutation up to this seqno is on disk and fsynced.
    pub persisted_seqno: Seqno,
    /// The high seqno when the flusher last drained the checkpoint: a seqno above it with nothing dirty (a prepare
    /// committed at once, DCP_SEQNO_ADVANCED) still needs a flusher round to count as persisted.
    pub drained_seqno: Seqno,
    /// Durable writes waiting for `persisted_seqno` to reach their seqno.
    pub persist_waiters: Vec<(Seqno, PersistWaiter)>,
    /// Sync writes in flight (prepares): a second write to such a key gets SYNC_WRITE_IN_PROGRESS.
    pub monitor: DurabilityMonitor,
    /// The aborts of sync writes, for DCP backfills (see `abort_log.rs`).
    pub aborts: AbortLog,
    /// Warmup restored this vBucket's history from disk and has not yet decided whether the restart starts a new
    /// branch of it: the vbuuid such a branch takes ([`crate::Bucket::finish_warmup`]).
    pub restart_uuid: Option<VbUuid>,
    /// Every prepare at or below this seqno is completed (prepares commit in seqno order; an abort replaces its
    /// prepare's record on disk): persisted with the vBucket's state so that warmup does not revive a prepare
    /// whose commit's record is gone (see `sync_record.rs`).
    pub prepares_completed_to: Seqno,
    /// The versions this vBucket's writes replaced, for a rollback (see `rollback.rs`).
    pub overwrites: OverwriteLog,
    pub table: ItemTable,
    pub high_seqno: Seqno,
    /// The vBucket's history branches, newest first: a new entry each time it becomes active.
    pub failover: FailoverLog,
    pub hlc: Hlc,
    /// Items that are not tombstones.
    pub live_items: usize,
    /// Live items ejected whole (full eviction): they exist on disk only.
    pub ejected_items: usize,
    /// Keys a background fetch found on neither memory nor disk (full eviction), each consumed by the retried
    /// operation.
    pub known_absent: hashbrown::HashSet<Box<[u8]>>,
    /// Recent mutations for DCP streams (empty unless a stream has a cursor here).
    pub log: ChangeLog,
    /// Told (under this lock, so it must only signal) when the change log gets entries its readers have not seen.
    pub on_change: Option<ChangeNotifier>,
    /// A replica's current DCP snapshot (start, end): it is consistent once `high_seqno` reaches `end`.
    pub snapshot: (Seqno, Seqno),
    /// The highest seqno of a tombstone purged from this vBucket.
    pub purge_seqno: Seqno,
    /// Grows each time the vBucket is emptied ([`crate::Bucket::reset_vbucket`]): a flusher round that drained
    /// an older generation must not move the persisted seqno of this one, and a DCP consumer whose stream was
    /// opened on an older generation must stream the vBucket again.
    pub generation: u64,
    /// The vBucket was emptied in memory but the store may still hold its old copy: the flusher clears it on disk
    /// before it writes anything of the new generation (it is the only writer of the vBucket's data, so a round
    /// already in flight lands first and is cleared with the rest).
    pub clear_on_disk: bool,
    /// The vBucket was rolled back to this seqno in memory: the flusher removes the store's records above it before
    /// it writes anything of the new generation (as for `clear_on_disk`).
    pub rollback_on_disk: Option<Seqno>,
}

/// Calls every waiter with `outcome` (no vBucket lock may be held).
pub(crate) fn complete(waiters: impl IntoIterator<Item = PersistWaiter>, outcome: Result<(), crate::EngineError>) {
    for w in waiters {
        w(outcome.clone());
    }
}

/// Wakes the DCP streams of a bucket when a vBucket has new mutations.
pub type ChangeNotifier = std::sync::Arc<dyn Fn(VbId) + Send + Sync>;

impl VBucket {
    pub(crate) fn new(id: VbId, uuid: VbUuid, persistent: bool) -> VBucket {
        VBucket {
            id,
            inner: Mutex::new(VbInner {
                vb: id,
                state: VbState::Active,
                persistent,
                dirty: Checkpoint::default(),
                disk_keys_loaded: false,
                keys_dropped: false,
                persisted_seqno: 0,
                drained_seqno: 0,
                persist_waiters: Vec::new(),
                monitor: DurabilityMonitor::default(),
                aborts: AbortLog::default(),
                restart_uuid: None,
                prepares_completed_to: 0,
                overwrites: OverwriteLog::default(),
                table: ItemTable::default(),
                high_seqno: 0,
                failover: FailoverLog::new(uuid, 0),
                hlc: Hlc::default(),
                live_items: 0,
                ejected_items: 0,
                known_absent: hashbrown::HashSet::new(),
                log: ChangeLog::default(),
                on_change: None,
                snapshot: (0, 0),
                purge_seqno: 0,
                generation: 0,
                clear_on_disk: false,
                rollback_on_disk: None,
            }),
        }
    }
    pub fn id(&self) -> VbId {
        self.id
    }
    pub fn state(&self) -> VbState {
        self.inner.lock().state
    }
    pub fn set_state(&self, state: VbState) {
        self.inner.lock().state = state;
    }
    pub fn high_seqno(&self) -> Seqno {
        self.inner.lock().high_seqno
    }
    pub fn uuid(&self) -> VbUuid {
        self.inner.lock().uuid()
    }
    pub fn persisted_seqno(&self) -> Seqno {
        self.inner.lock().persisted_seqno
    }
    /// Mutations waiting for the flusher (the disk write queue).
    pub fn dirty_len(&self) -> usize {
        self.inner.lock().dirty.len()
    }
}

impl VbInner {
    /// The vbuuid of the current history branch (what mutation tokens carry).
    pub(crate) fn uuid(&self) -> VbUuid {
        self.failover.latest().uuid
    }

    /// The CAS and seqno the next mutation will get. The seqno is only taken by [`VbInner::install`], so a
    /// mutation that fails after asking leaves no gap.
    pub(crate) fn next_cas(&mut self, now_nanos: u64) -> Cas {
        self.hlc.next(now_nanos)
    }
    pub(crate) fn next_seqno(&self) -> Seqno {
        self.high_seqno + 1
    }

    /// Puts `item` under `key` as the next mutation, returning the change in charged bytes.
    pub(crate) fn install(&mut self, key: &[u8], mut item: StoredItem<'_>) -> isize {
        item.seqno = self.next_seqno();
        self.place(key, item, LogKind::Mutation)
    }

    /// Puts `item` under `key` at the seqno it carries (above the high seqno), recorded in the change log as
    /// `kind`: a new mutation, the commit of a prepare, or a change a replica receives from its active. Returns
    /// the change in charged bytes.
    pub(crate) fn place(&mut self, key: &[u8], item: StoredItem<'_>, kind: LogKind) -> isize {
        self.advance(item.seqno, key, kind);
        if self.ejected_items > 0 {
            self.known_absent.remove(key);
        }
        let (delta, replaced) = self.put(key, &item);
        if let Some(old) = replaced {
            self.overwrites.record(item.seqno, old);
        }
        if !self.persistent {
            return delta;
        }
        // A replaced version at or below the drained seqno is on disk or in a flusher round already taken: every
        // mutation enters the checkpoint and a drain takes all of it, and what warmup and fetches load is a version
        // from disk (a drain took it, or warmup moved the drained seqno past it). A newer one has an earlier entry
        // here, whose knowledge the flusher takes.
        let on_disk = match replaced {
            Some(seqno) if seqno <= self.drained_seqno => OnDisk::At(seqno),
            Some(_) => OnDisk::Unknown,
            None if self.disk_keys_in_table() => OnDisk::Absent,
            None => OnDisk::Unknown,
        };
        delta + self.dirty.push(key, &item, on_disk) as isize
    }

    /// Every key with a version on disk has an item in the table, so a key missing from it is new on disk.
    fn disk_keys_in_table(&self) -> bool {
        self.disk_keys_loaded && !self.keys_dropped
    }

    /// Puts a packed item in the table in place of any under its key; returns the change in charged bytes, and the
    /// seqno of the item it replaced.
    fn put(&mut self, key: &[u8], item: &StoredItem<'_>) -> (isize, Option<Seqno>) {
        let new_bytes = item.footprint(key.len()) as isize;
        let now_live = !item.deleted;
        match self.table.insert(key, item) {
            Some(old) => {
                match (old.deleted(), now_live) {
                    (true, true) => self.live_items += 1,
                    (false, false) => self.live_items -= 1,
                    _ => {}
                }
                (new_bytes - old.footprint() as isize, Some(old.seqno()))
            }
            None => {
                if now_live {
                    self.live_items += 1;
                }
                (new_bytes, None)
            }
        }
    }

    /// Moves the high seqno to `seqno` for a change of `key` and records it for DCP readers. A change that is not
    /// put in the hash table (a prepare, an abort) calls this alone.
    pub(crate) fn advance(&mut self, seqno: Seqno, key: &[u8], kind: LogKind) {
        assert!(seqno > self.high_seqno, "seqnos must increase ({seqno} after {})", self.high_seqno);
        self.high_seqno = seqno;
        if self.log.record(seqno, key, kind) {
            if let Some(notify) = &self.on_change {
                notify(self.vb);
            }
        }
    }

    /// The seqno up to which this vBucket's data is as durable as it will get: the persisted seqno, or for a
    /// memory-only bucket the high seqno.
    pub(crate) fn durable_seqno(&self) -> Seqno {
        if self.persistent {
            self.persisted_seqno
        } else {
            self.high_seqno
        }
    }

    /// Puts an item read from disk in place as it is (no new seqno, not dirty); returns the change in charged bytes.
    pub(crate) fn load(&mut self, key: &[u8], item: StoredItem<'_>) -> isize {
        self.put(key, &item).0
    }

    /// Drops every item without new seqnos (a flush of a memory-only bucket, a vBucket emptied), as [`VbInner::purge`]
    /// of each would, and gives back the table's memory; returns the bytes released.
    pub(crate) fn purge_all(&mut self) -> usize {
        self.keys_dropped = true;
        let checkpoint = std::mem::take(&mut self.dirty).charged_bytes();
        let table = std::mem::take(&mut self.table);
        let tombstones = table.iter().filter(|i| i.deleted()).map(|i| i.seqno());
        self.purge_seqno = tombstones.fold(self.purge_seqno, Seqno::max);
        self.live_items = 0;
        checkpoint + table.iter().map(|i| i.footprint()).sum::<usize>()
    }

    /// Drops every item above `seqno` without a trace (a rollback); returns the bytes released.
    pub(crate) fn remove_above(&mut self, seqno: Seqno) -> usize {
        self.keys_dropped = true;
        let doomed = self.table.keys_where(|i| i.seqno() > seqno);
        let mut freed = 0;
        for key in doomed {
            if let Some(old) = self.table.remove(&key) {
                if !old.deleted() {
                    self.live_items -= 1;
                }
                freed += old.footprint();
            }
        }
        freed
    }

    /// Drops an item without a new seqno (tombstone purge, collection drop); returns the bytes released.
    pub(crate) fn purge(&mut self, key: &[u8]) -> usize {
        // The disk may still hold the key; from now on a key missing from the table may be on disk.
        self.keys_dropped = true;
        match self.table.remove(key) {
            Some(old) => {
                if old.seqno() > self.drained_seqno {
                    self.dirty.purged(key, old.seqno());
                }
                if old.deleted() {
                    // A stream resuming below this seqno could miss the deletion: it must start over.
                    self.purge_seqno = self.purge_seqno.max(old.seqno());
                } else {
                    self.live_items -= 1;
                }
                old.footprint()
            }
            None => 0,
        }
    }
}
