//! The checkpoint of a persistent vBucket: every mutation not yet handed to the flusher, copied when it is made.
//!
//! A mutation's key and value are appended to one growing buffer while the request still has them in cache, with
//! their metadata beside. The checkpoint used to hold only the keys, and the flusher looked each one up in the hash
//! table when it drained them: with a million items that lookup missed the cache on nearly every key (the
//! control bytes, the slot, the item), and cost as much CPU as the request path's own lookups — half of the
//! flusher's time under overwrites (BENCHMARKS.md, "The checkpoint holds the records"). Taking copies also lets the
//! flusher sort out a drained checkpoint (one record per key) after the vBucket's lock is released.
//!
//! The copies are charged to the bucket's memory until the flusher takes them, so a load that outruns the disk is
//! refused for memory (TMPFAIL) instead of growing without bound.

use hashbrown::HashMap;

use settee_types::{Cas, OnDisk, Seqno};

use crate::item::StoredItem;
use crate::persistence::ItemSnapshot;

/// One mutation: where its key and value are in the buffer, and its metadata.
#[derive(Debug)]
struct Entry {
    start: usize,
    key_len: u32,
    value_len: u32,
    cas: Cas,
    seqno: Seqno,
    rev: u64,
    flags: u32,
    expiry: u32,
    datatype: u8,
    deleted: bool,
    /// What the mutation knew of its key's version on disk.
    on_disk: OnDisk,
}

/// Memory charged per entry beyond its key and value.
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

#[derive(Debug, Default)]
pub(crate) struct Checkpoint {
    /// Key then value of each entry, back to back.
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// Keys dropped from the hash table without a mutation (a purge) while entries of theirs waited here, with the
    /// seqno of the dropped version: those entries are not written.
    purged: Vec<(Box<[u8]>, Seqno)>,
}

impl Checkpoint {
    /// Appends a mutation of `key` (its seqno assigned); returns the bytes charged for it.
    pub(crate) fn push(&mut self, key: &[u8], item: &StoredItem<'_>, on_disk: OnDisk) -> usize {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(&item.value);
        self.entries.push(Entry {
            start,
            // Keys are at most 255 bytes and values under 4 GiB (the engine refuses larger ones first).
            key_len: key.len() as u32,
            value_len: item.value.len() as u32,
            cas: item.cas,
            seqno: item.seqno,
            rev: item.rev,
            flags: item.flags,
            expiry: item.expiry,
            datatype: item.datatype.0,
            deleted: item.deleted,
            on_disk,
        });
        ENTRY_BYTES + key.len() + item.value.len()
    }

    /// Appends a sync write's step (a prepare, or an abort: see `sync_record.rs`) as a record of its own: its key in
    /// the sync-write namespace, `header` (the record's tag) before its value. Returns the bytes charged for it.
    pub(crate) fn push_sync(&mut self, key: &[u8], item: &StoredItem<'_>, header: &[u8]) -> usize {
        let start = self.bytes.len();
        self.bytes.push(crate::sync_record::SYNC_NAMESPACE);
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(header);
        self.bytes.extend_from_slice(&item.value);
        let (key_len, value_len) = (key.len() + 1, header.len() + item.value.len());
        self.entries.push(Entry {
            start,
            // As in `push`: keys are short, values under 4 GiB.
            key_len: key_len as u32,
            value_len: value_len as u32,
            cas: item.cas,
            seqno: item.seqno,
            rev: item.rev,
            flags: item.flags,
            expiry: item.expiry,
            datatype: item.datatype.0,
            deleted: item.deleted,
            // The store looks up the previous record of the key (a prepare or an abort of an earlier sync write).
            on_disk: OnDisk::Unknown,
        });
        ENTRY_BYTES + key_len + value_len
    }

    /// Mutations waiting (a key written twice counts twice).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes charged for what the checkpoint holds.
    pub(crate) fn charged_bytes(&self) -> usize {
        self.bytes.len() + self.entries.len() * ENTRY_BYTES
    }

    /// `key`'s version at `seqno` left the hash table without a mutation: its entries up to `seqno` must not
    /// reach the disk. Only needed for a version newer than the last drain (older ones have no entries here).
    pub(crate) fn purged(&mut self, key: &[u8], seqno: Seqno) {
        self.purged.push((key.into(), seqno));
    }

    fn key(&self, e: &Entry) -> &[u8] {
        &self.bytes[e.start..e.start + e.key_len as usize]
    }
    fn value(&self, e: &Entry) -> &[u8] {
        let at = e.start + e.key_len as usize;
        &self.bytes[at..at + e.value_len as usize]
    }

    /// The latest version of each key, in the order of those versions' seqnos, and for each what the disk held
    /// before this checkpoint: what the key's oldest entry knew (a later one replaced a version that was not on
    /// disk yet).
    pub(crate) fn into_batch(self) -> (Vec<ItemSnapshot>, Vec<OnDisk>) {
        let mut purged: HashMap<&[u8], Seqno> = HashMap::new();
        for (key, seqno) in &self.purged {
            let at = purged.entry(&key[..]).or_default();
            *at = (*at).max(*seqno);
        }
        let mut items = Vec::with_capacity(self.entries.len());
        let mut on_disk = Vec::with_capacity(self.entries.len());
        let mut seen: HashMap<&[u8], usize> = HashMap::with_capacity(self.entries.len());
        // Newest first, so each key is written once, at its latest version.
        for e in self.entries.iter().rev() {
            let key = self.key(e);
            if purged.get(key).is_some_and(|s| e.seqno <= *s) {
                continue;
            }
            let at = *seen.entry(key).or_insert_with(|| {
                items.push(ItemSnapshot {
                    key: key.to_vec(),
                    value: self.value(e).to_vec(),
                    cas: e.cas,
                    seqno: e.seqno,
                    rev: e.rev,
                    flags: e.flags,
                    expiry: e.expiry,
                    datatype: e.datatype,
                    deleted: e.deleted,
                    value_missing: false,
                });
                on_disk.push(OnDisk::Unknown);
                items.len() - 1
            });
            on_disk[at] = e.on_disk;
        }
        items.reverse();
        on_disk.reverse();
        (items, on_disk)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use settee_types::Datatype;

    use super::*;

    fn item(value: &[u8], seqno: Seqno) -> StoredItem<'_> {
        StoredItem {
            value: Cow::Borrowed(value),
            cas: seqno * 10,
            seqno,
            rev: seqno,
            flags: 7,
            expiry: 0,
            datatype: Datatype::JSON,
            deleted: false,
            locked_until: 0,
            resident: true,
            referenced: false,
        }
    }

    /// Each key once, at its latest version, ordered by those versions, with the oldest entry's knowledge of the
    /// disk; the charge covers keys and values.
    #[test]
    fn latest_version_of_each_key() {
        let mut cp = Checkpoint::default();
        let mut charged = 0;
        charged += cp.push(b"a", &item(b"1", 1), OnDisk::At(0));
        charged += cp.push(b"b", &item(b"2", 2), OnDisk::Absent);
        charged += cp.push(b"a", &item(b"33", 3), OnDisk::Unknown);
        charged += cp.push(b"c", &item(b"4", 4), OnDisk::Unknown);
        assert_eq!((cp.len(), cp.charged_bytes()), (4, charged));
        assert_eq!(charged, 4 * ENTRY_BYTES + 4 + 5);
        let (items, on_disk) = cp.into_batch();
        let got: Vec<_> = items.iter().map(|i| (i.key.clone(), i.value.clone(), i.seqno, i.cas)).collect();
        assert_eq!(
            got,
            vec![
                (b"b".to_vec(), b"2".to_vec(), 2, 20),
                (b"a".to_vec(), b"33".to_vec(), 3, 30),
                (b"c".to_vec(), b"4".to_vec(), 4, 40)
            ]
        );
        assert_eq!(on_disk, vec![OnDisk::Absent, OnDisk::At(0), OnDisk::Unknown]);
        assert!(items.iter().all(|i| i.flags == 7 && i.datatype == Datatype::JSON.0 && !i.value_missing));
    }

    /// A purge drops the entries up to the purged version; a mutation after it is written, knowing nothing of the
    /// disk.
    #[test]
    fn purged_versions_are_not_written() {
        let mut cp = Checkpoint::default();
        cp.push(b"a", &item(b"1", 1), OnDisk::At(0));
        cp.push(b"b", &item(b"2", 2), OnDisk::Absent);
        cp.purged(b"a", 1);
        cp.purged(b"b", 2);
        cp.push(b"b", &item(b"3", 3), OnDisk::Unknown);
        let (items, on_disk) = cp.into_batch();
        assert_eq!(items.iter().map(|i| (i.key.clone(), i.seqno)).collect::<Vec<_>>(), vec![(b"b".to_vec(), 3)]);
        assert_eq!(on_disk, vec![OnDisk::Unknown]);
    }
}
