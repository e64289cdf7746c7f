//! The behaviour every [`VbStore`] must have. Implementations call [`run_all`] from their tests with a factory
//! for empty stores.

use settee_types::VbId;

use crate::{Record, RecordMeta, VbStore};

pub fn record(key: &[u8], value: &[u8], seqno: u64, deleted: bool) -> Record {
    let meta = RecordMeta { cas: seqno * 1000, seqno, rev: seqno, flags: 7, expiry: 0, datatype: 0, deleted };
    Record::new(key.to_vec(), value.to_vec(), meta)
}

pub fn run_all<S: VbStore>(make: impl Fn() -> S) {
    latest_version_wins(&make());
    tombstones_are_kept(&make());
    seqno_scan_skips_superseded_versions(&make());
    vbuckets_are_independent(&make());
}

/// A later write of a key replaces the earlier one for reads, and the high seqno follows.
fn latest_version_wins(s: &impl VbStore) {
    let vb = VbId(0);
    s.write_batch(vb, &[record(b"a", b"1", 1, false), record(b"a", b"2", 2, false)]).unwrap();
    s.sync().unwrap();
    assert_eq!(s.get(vb, b"a").unwrap().unwrap().value, b"2");
    assert_eq!(s.high_seqno(vb).unwrap(), 2);
    assert_eq!(s.get(vb, b"missing").unwrap(), None);
}

/// A deletion is stored as a tombstone record, not as the absence of the key.
fn tombstones_are_kept(s: &impl VbStore) {
    let vb = VbId(1);
    s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
    s.write_batch(vb, &[record(b"a", b"", 2, true)]).unwrap();
    let r = s.get(vb, b"a").unwrap().unwrap();
    assert!(r.meta.deleted && r.value.is_empty());
}

/// A seqno scan returns each key once, at its latest seqno, in seqno order, within the range.
fn seqno_scan_skips_superseded_versions(s: &impl VbStore) {
    let vb = VbId(2);
    let batch = [record(b"a", b"1", 1, false), record(b"b", b"1", 2, false), record(b"a", b"2", 3, false)];
    s.write_batch(vb, &batch).unwrap();
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 0, 10, &mut |r| seen.push((r.key, r.meta.seqno))).unwrap();
    assert_eq!(seen, vec![(b"b".to_vec(), 2), (b"a".to_vec(), 3)]);
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 3, 3, &mut |r| seen.push(r.meta.seqno)).unwrap();
    assert_eq!(seen, vec![3]);
}

/// The same key in two vBuckets is two documents.
fn vbuckets_are_independent(s: &impl VbStore) {
    s.write_batch(VbId(10), &[record(b"k", b"ten", 1, false)]).unwrap();
    s.write_batch(VbId(11), &[record(b"k", b"eleven", 1, false)]).unwrap();
    assert_eq!(s.get(VbId(10), b"k").unwrap().unwrap().value, b"ten");
    assert_eq!(s.get(VbId(11), b"k").unwrap().unwrap().value, b"eleven");
}
