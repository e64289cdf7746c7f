//! The engine's side of DCP and replication: cursors that read an active vBucket's mutations in seqno order
//! (from the change log, or by a backfill of the hash table), replica vBuckets that apply what their active sends
//! at the seqnos it chose, and the vBucket state changes a cluster map drives.
//!
//! No I/O here: the server's DCP producer and consumer move [`ItemSnapshot`]s between these calls and the wire.

use std::sync::atomic::Ordering;

use settee_types::{FailoverLog, Seqno, VbId, VbUuid};

use crate::bucket::Bucket;
use crate::change_log::CursorId;
use crate::error::EngineError;
use crate::item::ItemView;
use crate::persistence::{snapshot, stored_of, ItemSnapshot};
use crate::vbucket::{ChangeNotifier, VbInner, VbState};

/// One read of a vBucket by a DCP cursor.
#[derive(Debug)]
pub enum DcpRead {
    /// Nothing above the cursor's position yet.
    UpToDate,
    /// A consistent snapshot: once every item is applied, the reader holds the vBucket as of `end`.
    Snapshot(DcpSnapshot),
    /// Items between the cursor's position and `up_to` exist on disk only (full eviction): read them from the
    /// store's seqno index as a disk snapshot ending at `up_to`, then read again from `up_to`.
    FromDisk { up_to: Seqno },
}

#[derive(Debug)]
pub struct DcpSnapshot {
    pub start: Seqno,
    pub end: Seqno,
    /// Read from the change log (a memory snapshot) rather than by a backfill (a disk snapshot).
    pub from_memory: bool,
    /// The latest version of each key changed in the range, in seqno order. An item with `value_missing` was
    /// ejected: its value must be read from the store.
    pub items: Vec<ItemSnapshot>,
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
        })
    }

    /// Opens a cursor on an active vBucket, positioned after `position`.
    pub fn open_cursor(&self, vb: VbId, position: Seqno) -> Result<CursorId, EngineError> {
        let id = self.next_cursor.fetch_add(1, Ordering::Relaxed);
        self.with_vbucket(vb, &[VbState::Active], |inner| {
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

    /// Reads what the cursor has not seen above `after`. Fails with NOT_MY_VBUCKET once the vBucket stops being
    /// active here (the stream ends with "state changed").
    pub fn read_cursor(&self, vb: VbId, cursor: CursorId, after: Seqno) -> Result<DcpRead, EngineError> {
        self.with_vbucket(vb, &[VbState::Active], |inner| {
            let high = inner.high_seqno;
            if after >= high {
                inner.log.advance(cursor, high);
                return Ok(DcpRead::UpToDate);
            }
            let from_memory = inner.log.covers(after);
            if !from_memory && inner.ejected_items > 0 && after < inner.persisted_seqno {
                return Ok(DcpRead::FromDisk { up_to: inner.persisted_seqno });
            }
            let items = if from_memory { read_log(inner, after) } else { backfill(inner, after) };
            inner.log.advance(cursor, high);
            Ok(DcpRead::Snapshot(DcpSnapshot { start: after + 1, end: high, from_memory, items }))
        })
    }

    // ---- replica vBuckets ----

    /// Changes a vBucket's role. A vBucket that becomes active starts a new history (a new vbuuid), as Couchbase
    /// adds a failover-log entry on promotion; durable writes waiting on a vBucket that stops being active learn
    /// that their outcome is unknown.
    pub fn set_vbucket_state(&self, vb: VbId, state: VbState, new_uuid: VbUuid) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let waiters = {
            let mut inner = vbucket.inner.lock();
            if inner.state == state {
                return;
            }
            if state == VbState::Active {
                let high = inner.high_seqno;
                inner.failover.push(new_uuid, high);
            }
            inner.state = state;
            if state != VbState::Active {
                inner.sync_writes.clear();
                std::mem::take(&mut inner.persist_waiters)
            } else {
                Vec::new()
            }
        };
        for (_, w) in waiters {
            w(Err(EngineError::SyncWriteAmbiguous));
        }
    }

    /// A replica adopts the history of the active it follows (the failover log of an accepted stream request).
    pub fn set_failover_log(&self, vb: VbId, log: FailoverLog) {
        if let Some(vbucket) = self.vbucket(vb) {
            let mut inner = vbucket.inner.lock();
            inner.failover = log;
        }
    }

    /// A replica starts receiving the snapshot [start, end].
    pub fn replica_snapshot(&self, vb: VbId, start: Seqno, end: Seqno) -> Result<(), EngineError> {
        self.with_vbucket(vb, &[VbState::Replica, VbState::Pending], |inner| {
            if start > end || end <= inner.high_seqno {
                return Err(EngineError::Invalid("snapshot range"));
            }
            inner.snapshot = (start, end);
            Ok(())
        })
    }

    /// A replica applies one mutation or deletion at the seqno, CAS and revision its active gave it.
    pub fn replica_apply(&self, vb: VbId, item: ItemSnapshot) -> Result<(), EngineError> {
        let delta = self.with_vbucket(vb, &[VbState::Replica, VbState::Pending], |inner| {
            let (start, end) = inner.snapshot;
            if item.seqno <= inner.high_seqno || item.seqno < start || item.seqno > end {
                return Err(EngineError::Invalid("replicated seqno outside the snapshot"));
            }
            inner.hlc.observe(item.cas);
            inner.known_absent.remove(&item.key[..]);
            let key = item.key.clone();
            let mut stored = stored_of(item);
            stored.resident = true;
            let delta = inner.place(&key, stored);
            if inner.dirty.len() == 1 {
                if let Some(notify) = self.dirty_notifier.get() {
                    notify(vb);
                }
            }
            Ok(delta)
        })?;
        self.charge(delta);
        Ok(())
    }

    /// Empties a vBucket (a replica rolled back to zero, or a stale copy dropped); the caller clears the store.
    pub fn reset_vbucket(&self, vb: VbId) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let freed = {
            let mut inner = vbucket.inner.lock();
            let keys: Vec<Box<[u8]>> = inner.table.keys().cloned().collect();
            let freed: usize = keys.iter().map(|k| inner.purge(k)).sum();
            inner.high_seqno = 0;
            inner.persisted_seqno = 0;
            inner.purge_seqno = 0;
            inner.snapshot = (0, 0);
            inner.ejected_items = 0;
            inner.known_absent.clear();
            inner.dirty.clear();
            inner.sync_writes.clear();
            inner.log.reset(0);
            let uuid = inner.uuid();
            inner.failover = FailoverLog::new(uuid, 0);
            freed
        };
        self.charge(-(freed as isize));
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
            Some(item) if !item.resident => Err(EngineError::NeedFetch),
            Some(item) if !item.deleted && !crate::expiry::is_expired(item.expiry, now) => {
                Ok(f(ItemView::of(item, item.cas)))
            }
            None if inner.ejected_items > 0 => Err(EngineError::NeedFetch),
            _ => Err(EngineError::NotFound),
        })
    }

    /// Runs `f` under the vBucket's lock if it is in one of `states`.
    pub(crate) fn with_vbucket<R>(
        &self,
        vb: VbId,
        states: &[VbState],
        f: impl FnOnce(&mut VbInner) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let vbucket = self.vbucket(vb).ok_or(EngineError::NotMyVbucket)?;
        let mut inner = vbucket.inner.lock();
        if inner.state == VbState::Failed {
            return Err(EngineError::VbucketFailed);
        }
        if !states.contains(&inner.state) {
            return Err(EngineError::NotMyVbucket);
        }
        f(&mut inner)
    }
}

/// The latest version of every key the log recorded above `after`: an entry whose key changed again later is
/// skipped here and sent at its later seqno, inside the same snapshot.
fn read_log(inner: &VbInner, after: Seqno) -> Vec<ItemSnapshot> {
    inner
        .log
        .entries_after(after)
        .filter_map(|(seqno, key)| {
            let item = inner.table.get(&key[..])?;
            (item.seqno == *seqno).then(|| with_residency(snapshot(key, item), item.resident))
        })
        .collect()
}

/// Every item above `after` in the hash table, in seqno order.
fn backfill(inner: &VbInner, after: Seqno) -> Vec<ItemSnapshot> {
    let mut items: Vec<ItemSnapshot> = inner
        .table
        .iter()
        .filter(|(_, item)| item.seqno > after)
        .map(|(key, item)| with_residency(snapshot(key, item), item.resident))
        .collect();
    items.sort_unstable_by_key(|i| i.seqno);
    items
}

fn with_residency(mut snap: ItemSnapshot, resident: bool) -> ItemSnapshot {
    snap.value_missing = !resident;
    snap
}
