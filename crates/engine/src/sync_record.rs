//! How sync writes reach the disk, and how warmup reads them back. A prepare and an abort are records of their
//! own, in the vBucket's seqno order like any mutation (the flusher writes them in the round that drains them),
//! under the document's key in a namespace of their own, as Couchbase keeps prepares apart from committed items:
//! a key's committed version and its latest prepare or abort are two records, and a newer prepare or an abort of
//! the key replaces the older one on disk.
//!
//! Layout (the store sees ordinary records; `docs/on-disk-format.md`):
//! - key: [`SYNC_NAMESPACE`] ‖ the document's encoded key (collection prefix included);
//! - a prepare: value = its durability level (1, 2 or 3) ‖ the prepared document's value; CAS, revision, flags,
//!   expiry, datatype and the deleted flag (a durable delete) are the prepared document's;
//! - an abort: deleted, value = `0x00` ‖ the aborted prepare's seqno (u64, big-endian), expiry = the time of the
//!   abort (so compaction purges it after the tombstone purge age, as Couchbase purges aborts), CAS 0.
//!
//! Warmup reads a vBucket in seqno order: a prepare is still pending unless a committed version of its key with a
//! higher seqno follows it (its commit, or a later write after it completed), or an abort replaced it, or its
//! seqno is at or below the vBucket state's `prepares_completed_to` (a commit's record can be gone: a later delete
//! of the key replaced it and the tombstone purge removed the tombstone, while the prepare's record stays).

use hashbrown::HashMap;
use settee_types::{Datatype, DurabilityLevel, Seqno};

use crate::abort_log::Abort;
use crate::item::StoredItem;
use crate::persistence::ItemSnapshot;

/// The first byte of every prepare's and abort's key: collection id 2, which Couchbase reserves for its
/// durability-prepare namespace and which settee never gives a collection (user collections start at 8), so no
/// document key starts with it.
pub(crate) const SYNC_NAMESPACE: u8 = 0x02;
/// The value tag of an abort (a prepare's is its level, 1 to 3).
const ABORT_TAG: u8 = 0;

/// Whether a stored key belongs to a prepare or an abort rather than to a document.
pub fn is_sync_write_key(key: &[u8]) -> bool {
    key.first() == Some(&SYNC_NAMESPACE)
}

/// The header a prepare's record carries before the prepared value.
pub(crate) fn prepare_header(level: DurabilityLevel) -> [u8; 1] {
    [level as u8]
}

/// An abort as the checkpoint takes it: the item (deleted, no value, the abort's seqno and time) and the header
/// naming the aborted prepare.
pub(crate) fn abort_entry(abort: &Abort) -> (StoredItem<'static>, [u8; 9]) {
    let item = StoredItem {
        value: Default::default(),
        cas: 0,
        seqno: abort.seqno,
        rev: 0,
        flags: 0,
        expiry: abort.time,
        datatype: Datatype::RAW,
        deleted: true,
        locked_until: 0,
        resident: true,
        referenced: false,
    };
    let mut header = [0u8; 9];
    header[0] = ABORT_TAG;
    header[1..].copy_from_slice(&abort.prepared.to_be_bytes());
    (item, header)
}

/// A prepare or an abort read back from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncRecord {
    /// `item` is the prepared document under its own key, its value without the record's tag.
    Prepare { level: DurabilityLevel, item: ItemSnapshot },
    /// The prepare at `prepared` of `key` was aborted at `seqno`, at `time` (Unix seconds).
    Abort { key: Vec<u8>, seqno: Seqno, prepared: Seqno, time: u32 },
}

impl SyncRecord {
    /// Reads a record of the sync-write namespace; None when it is not one, or is malformed (an unknown tag, a
    /// short abort): the caller skips it with a log line.
    pub fn decode(mut item: ItemSnapshot) -> Option<SyncRecord> {
        if !is_sync_write_key(&item.key) {
            return None;
        }
        let key = item.key.split_off(1);
        let (&tag, rest) = item.value.split_first()?;
        if tag == ABORT_TAG {
            let prepared = u64::from_be_bytes(rest.try_into().ok()?);
            return Some(SyncRecord::Abort { key, seqno: item.seqno, prepared, time: item.expiry });
        }
        let level = DurabilityLevel::from_wire(tag)?;
        item.value.remove(0);
        item.key = key;
        Some(SyncRecord::Prepare { level, item })
    }
}

/// What warmup gathers of one vBucket's sync writes while it reads the vBucket in seqno order; handed to
/// [`crate::Bucket::restore_sync_writes`] at the end.
#[derive(Debug, Default)]
pub struct SyncWarmup {
    /// The prepares still pending, by document key.
    pub(crate) pending: HashMap<Vec<u8>, (DurabilityLevel, ItemSnapshot)>,
    /// The aborts, in seqno order.
    pub(crate) aborts: Vec<Abort>,
    /// Records that did not decode.
    pub damaged: u64,
    /// The vBucket state's `prepares_completed_to`: no prepare at or below it is pending.
    pub completed_to: Seqno,
}

impl SyncWarmup {
    /// A record of the sync-write namespace ([`is_sync_write_key`]), read in seqno order.
    pub fn sync_record(&mut self, item: ItemSnapshot) {
        match SyncRecord::decode(item) {
            Some(SyncRecord::Prepare { level, item }) => {
                self.pending.insert(item.key.clone(), (level, item));
            }
            Some(SyncRecord::Abort { key, seqno, prepared, time }) => {
                self.pending.remove(&key);
                self.aborts.push(Abort { seqno, key: key.into(), prepared, time });
            }
            None => self.damaged += 1,
        }
    }

    /// A committed version of `key` (a document record), read after every record of lower seqno: it completes the
    /// key's prepare read before, if any.
    pub fn committed(&mut self, key: &[u8]) {
        if !self.pending.is_empty() {
            self.pending.remove(key);
        }
    }

    /// The prepares found pending.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Checkpoint;
    use settee_types::OnDisk;

    fn prepared(value: &[u8], seqno: Seqno) -> StoredItem<'static> {
        StoredItem {
            value: value.to_vec().into(),
            cas: 77,
            seqno,
            rev: 3,
            flags: 9,
            expiry: 0,
            datatype: Datatype::JSON,
            deleted: false,
            locked_until: 0,
            resident: true,
            referenced: false,
        }
    }

    /// A prepare and an abort go through the checkpoint as records of their own namespace and decode back to
    /// what was written; a document record or a damaged one does not decode.
    #[test]
    fn prepares_and_aborts_round_trip_through_the_checkpoint() {
        let mut cp = Checkpoint::default();
        cp.push_sync(b"\0k", &prepared(b"{\"a\":1}", 5), &prepare_header(DurabilityLevel::PersistToMajority));
        let abort = Abort { seqno: 6, key: b"\0j".as_slice().into(), prepared: 4, time: 1_700 };
        let (item, header) = abort_entry(&abort);
        cp.push_sync(&abort.key, &item, &header);
        cp.push(b"\0k", &prepared(b"doc", 7), OnDisk::Unknown);
        let (items, _) = cp.into_batch();
        assert_eq!(items.iter().map(|i| is_sync_write_key(&i.key)).collect::<Vec<_>>(), vec![true, true, false]);
        let Some(SyncRecord::Prepare { level, item }) = SyncRecord::decode(items[0].clone()) else { panic!() };
        assert_eq!(level, DurabilityLevel::PersistToMajority);
        assert_eq!(
            (item.key.as_slice(), item.value.as_slice(), item.seqno, item.cas),
            (&b"\0k"[..], &b"{\"a\":1}"[..], 5, 77)
        );
        assert_eq!(
            SyncRecord::decode(items[1].clone()),
            Some(SyncRecord::Abort { key: b"\0j".to_vec(), seqno: 6, prepared: 4, time: 1_700 })
        );
        assert_eq!(SyncRecord::decode(items[2].clone()), None);
        let mut damaged = items[1].clone();
        damaged.value.pop();
        assert_eq!(SyncRecord::decode(damaged), None);
    }

    /// Warmup's rule: a prepare stays pending unless a committed version of its key or an abort follows it.
    #[test]
    fn warmup_keeps_only_prepares_nothing_completed() {
        let record = |key: &[u8], seqno, level: DurabilityLevel| {
            let mut cp = Checkpoint::default();
            cp.push_sync(key, &prepared(b"v", seqno), &prepare_header(level));
            cp.into_batch().0.remove(0)
        };
        let mut w = SyncWarmup::default();
        w.sync_record(record(b"\0a", 1, DurabilityLevel::Majority));
        w.sync_record(record(b"\0b", 2, DurabilityLevel::Majority));
        w.sync_record(record(b"\0c", 3, DurabilityLevel::Majority));
        w.committed(b"\0a");
        let abort = Abort { seqno: 4, key: b"\0b".as_slice().into(), prepared: 2, time: 0 };
        let (item, header) = abort_entry(&abort);
        let mut cp = Checkpoint::default();
        cp.push_sync(&abort.key, &item, &header);
        w.sync_record(cp.into_batch().0.remove(0));
        assert_eq!(w.pending.keys().cloned().collect::<Vec<_>>(), vec![b"\0c".to_vec()]);
        assert_eq!(w.aborts, vec![abort]);
    }
}
