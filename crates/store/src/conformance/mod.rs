//! The behaviour every [`VbStore`] must have. Implementations call [`run_all`] from their tests with a factory
//! for empty stores; persistent ones call [`run_all_persistent`] as well, which also closes and reopens stores.
//!
//! Each check writes to its own vBuckets of a fresh store and panics (with the check's name in the backtrace) on
//! the first difference from the contract documented on [`VbStore`].

mod basic;
mod persistent;

use std::path::Path;

use settee_types::VbId;

use crate::{FjallStore, MemoryStore, Record, RecordMeta, VbStateRecord, VbStore};

/// What the suite needs beyond [`VbStore`]: a way to damage a stored record as a bad disk would.
pub trait Corruptible: VbStore {
    /// Changes the stored bytes of `key`'s current record without fixing its checksum.
    fn corrupt_for_test(&self, vb: VbId, key: &[u8]);
}

impl Corruptible for MemoryStore {
    fn corrupt_for_test(&self, vb: VbId, key: &[u8]) {
        MemoryStore::corrupt_for_test(self, vb, key);
    }
}

impl Corruptible for FjallStore {
    fn corrupt_for_test(&self, vb: VbId, key: &[u8]) {
        FjallStore::corrupt_for_test(self, vb, key);
    }
}

/// A record whose metadata derives from its seqno; a tombstone's deletion time (`expiry`) is `seqno * 100`.
pub fn record(key: &[u8], value: &[u8], seqno: u64, deleted: bool) -> Record {
    let expiry = if deleted { u32::try_from(seqno * 100).unwrap_or(u32::MAX) } else { 0 };
    let meta = RecordMeta { cas: seqno * 1000, seqno, rev: seqno, flags: 7, expiry, datatype: 0, deleted };
    Record::new(key.to_vec(), value.to_vec(), meta)
}

/// A vBucket state whose fields derive from `high_seqno`.
pub fn vb_state(high_seqno: u64) -> VbStateRecord {
    VbStateRecord {
        vbuuid: 0xfeed_0000 + high_seqno,
        high_seqno,
        max_cas: high_seqno * 1000,
        failover: vec![(0xfeed_0000 + high_seqno, high_seqno), (0xbeef, 0)],
        prepares_completed_to: high_seqno / 2,
    }
}

/// Every check that needs only fresh stores.
pub fn run_all<S: Corruptible>(make: impl Fn() -> S) {
    basic::run(&make);
}

/// [`run_all`] on stores opened in fresh directories under `root`, then the checks that close and reopen a store
/// (`open` is called again on the same directory after the previous store is dropped).
pub fn run_all_persistent<S: Corruptible>(root: &Path, open: impl Fn(&Path) -> S) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let fresh_dir = || root.join(format!("store-{}", next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    run_all(|| open(&fresh_dir()));
    persistent::run(&fresh_dir, &open);
}

/// `(key, seqno)` of every record a seqno scan over everything returns.
fn seqno_scan<S: VbStore>(s: &S, vb: VbId) -> Vec<(Vec<u8>, u64)> {
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 0, u64::MAX, &mut |r| seen.push((r.key, r.meta.seqno))).unwrap();
    seen
}
