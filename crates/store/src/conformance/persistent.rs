//! Checks that close a store and open it again on the same directory.

use std::path::{Path, PathBuf};

use settee_types::VbId;

use super::{record, seqno_scan, vb_state, Corruptible};
use crate::StoreError;

pub(super) fn run<S: Corruptible>(fresh_dir: &impl Fn() -> PathBuf, open: &impl Fn(&Path) -> S) {
    everything_synced_survives_reopen(&fresh_dir(), open);
    high_seqno_survives_reopen_after_its_record_is_purged(&fresh_dir(), open);
    corruption_is_still_detected_after_reopen(&fresh_dir(), open);
    compacted_store_reopens_with_the_same_contents(&fresh_dir(), open);
}

/// Records, tombstones, vBucket states and high seqnos written and synced read back the same after a reopen, and
/// the reopened store keeps enforcing increasing seqnos from the persisted high seqno.
fn everything_synced_survives_reopen<S: Corruptible>(dir: &Path, open: &impl Fn(&Path) -> S) {
    let (a, b) = (VbId(0), VbId(1023));
    {
        let s = open(dir);
        s.write_batch_with_state(a, &[record(b"k1", b"v1", 1, false), record(b"k2", b"v2", 2, false)], None).unwrap();
        s.write_batch_with_state(a, &[record(b"k1", b"", 3, true)], Some(&vb_state(3))).unwrap();
        s.write_batch(b, &[record(b"k1", b"other", 7, false)]).unwrap();
        s.set_vb_state(b, &vb_state(7)).unwrap();
        s.sync().unwrap();
    }
    let s = open(dir);
    assert_eq!((s.high_seqno(a).unwrap(), s.high_seqno(b).unwrap()), (3, 7));
    assert_eq!((s.vb_state(a).unwrap(), s.vb_state(b).unwrap()), (Some(vb_state(3)), Some(vb_state(7))));
    assert_eq!(s.get(a, b"k1").unwrap(), Some(record(b"k1", b"", 3, true)));
    assert_eq!(s.get(a, b"k2").unwrap(), Some(record(b"k2", b"v2", 2, false)));
    assert_eq!(s.get(b, b"k1").unwrap(), Some(record(b"k1", b"other", 7, false)));
    assert_eq!(seqno_scan(&s, a), vec![(b"k2".to_vec(), 2), (b"k1".to_vec(), 3)]);
    assert!(matches!(s.write_batch(a, &[record(b"k3", b"v", 3, false)]), Err(StoreError::Rejected { .. })));
    s.write_batch(a, &[record(b"k3", b"v", 4, false)]).unwrap();
}

/// Purging the vBucket's newest record does not lower its high seqno, before or after a reopen.
fn high_seqno_survives_reopen_after_its_record_is_purged<S: Corruptible>(dir: &Path, open: &impl Fn(&Path) -> S) {
    let vb = VbId(5);
    {
        let s = open(dir);
        s.write_batch(vb, &[record(b"a", b"1", 1, false), record(b"b", b"", 2, true)]).unwrap();
        assert_eq!(s.purge_tombstones(vb, u32::MAX).unwrap(), 1);
        s.sync().unwrap();
    }
    let s = open(dir);
    assert_eq!(s.high_seqno(vb).unwrap(), 2);
    assert_eq!(seqno_scan(&s, vb), vec![(b"a".to_vec(), 1)]);
}

/// A record damaged on disk is still reported as corrupt after a reopen: the checksum lives with the data.
fn corruption_is_still_detected_after_reopen<S: Corruptible>(dir: &Path, open: &impl Fn(&Path) -> S) {
    let vb = VbId(6);
    {
        let s = open(dir);
        s.write_batch(vb, &[record(b"bad", b"value", 1, false), record(b"good", b"value", 2, false)]).unwrap();
        s.corrupt_for_test(vb, b"bad");
        s.sync().unwrap();
    }
    let s = open(dir);
    assert_eq!(s.get(vb, b"bad"), Err(StoreError::Corrupt { vb, seqno: 1 }));
    assert_eq!(s.get(vb, b"good").unwrap().unwrap().value, b"value");
}

/// A store compacted after updates, deletions and a purge reopens with exactly the contents it had.
fn compacted_store_reopens_with_the_same_contents<S: Corruptible>(dir: &Path, open: &impl Fn(&Path) -> S) {
    let vb = VbId(7);
    let before = {
        let s = open(dir);
        let writes: Vec<_> = (1..=200u64).map(|i| record(format!("k{}", i % 50).as_bytes(), b"v", i, false)).collect();
        s.write_batch(vb, &writes).unwrap();
        let deletes: Vec<_> = (0..10u64).map(|i| record(format!("k{i}").as_bytes(), b"", 201 + i, true)).collect();
        s.write_batch(vb, &deletes).unwrap();
        s.purge_tombstones(vb, 206 * 100).unwrap();
        s.compact().unwrap();
        s.sync().unwrap();
        seqno_scan(&s, vb)
    };
    assert_eq!(before.len(), 45, "50 keys, 5 tombstones purged");
    let s = open(dir);
    assert_eq!(seqno_scan(&s, vb), before);
    assert_eq!(s.high_seqno(vb).unwrap(), 210);
}
