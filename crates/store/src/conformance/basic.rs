//! Checks that need only fresh stores.

use settee_types::{OnDisk, VbId};

use super::{record, seqno_scan, vb_state, Corruptible};
use crate::{StoreError, VbStore, VbWrite};

pub(super) fn run<S: Corruptible>(make: &impl Fn() -> S) {
    latest_version_wins(&make());
    tombstones_are_kept(&make());
    seqno_scan_skips_superseded_versions(&make());
    vbuckets_are_independent(&make());
    vb_state_round_trips(&make());
    vb_state_is_written_with_its_batch(&make());
    purge_removes_only_tombstones_deleted_before_the_cutoff(&make());
    scan_keys_with_values_visits_latest_versions_in_seqno_order(&make());
    scan_keys_without_values_visits_keys_in_key_order(&make());
    corruption_is_reported_never_returned(&make());
    non_increasing_seqnos_are_rejected_and_nothing_is_written(&make());
    damaged_records_are_rejected_before_they_are_written(&make());
    compaction_keeps_every_live_record(&make());
    clearing_a_vbucket_empties_it_and_leaves_the_others(&make());
    rolling_back_keeps_what_lies_at_or_below_the_seqno(&make());
    known_versions_on_disk_are_retired(&make());
    a_wrong_known_version_is_rejected_in_debug_builds(&make());
    a_refused_part_leaves_every_part_of_the_write_unwritten(&make());
}

/// One refused part (a seqno not above its vBucket's high seqno) fails the whole multi-vBucket write, names its
/// vBucket, and leaves the other parts unwritten, so the writer can write them again without it.
fn a_refused_part_leaves_every_part_of_the_write_unwritten(s: &impl VbStore) {
    let (good, bad) = (VbId(80), VbId(81));
    s.write_batch(bad, &[record(b"x", b"1", 9, false)]).unwrap();
    let (good_records, bad_records) = ([record(b"a", b"1", 1, false)], [record(b"y", b"1", 3, false)]);
    let write = |parts: &[(VbId, &[crate::Record])]| {
        let state = vb_state(1);
        let view: Vec<VbWrite<'_>> =
            parts.iter().map(|(vb, records)| VbWrite { vb: *vb, records, on_disk: &[], state: Some(&state) }).collect();
        s.write_many(&view)
    };
    let refused = write(&[(good, &good_records), (bad, &bad_records)]);
    assert!(matches!(refused, Err(StoreError::Rejected { vb, seqno: 3, .. }) if vb == bad), "{refused:?}");
    assert_eq!((s.get(good, b"a").unwrap(), s.high_seqno(good).unwrap(), s.vb_state(good).unwrap()), (None, 0, None));
    write(&[(good, &good_records)]).unwrap();
    assert_eq!(s.get(good, b"a").unwrap().map(|r| r.meta.seqno), Some(1));
    assert_eq!(s.high_seqno(bad).unwrap(), 9);
}

/// Writes that say what each key had on disk (none, a seqno, a seqno purged since, or unknown) leave every key
/// exactly once in both indexes, at its latest version, in several vBuckets at once.
fn known_versions_on_disk_are_retired(s: &impl VbStore) {
    let (vb, other) = (VbId(12), VbId(13));
    let write = |parts: &[VbWrite<'_>]| s.write_many(parts).unwrap();
    let first = [record(b"a", b"1", 1, false), record(b"b", b"1", 2, false), record(b"t", b"", 3, true)];
    let other_first = [record(b"a", b"x", 1, false)];
    write(&[
        VbWrite { vb, records: &first, on_disk: &[OnDisk::Absent; 3], state: Some(&vb_state(3)) },
        VbWrite { vb: other, records: &other_first, on_disk: &[OnDisk::Absent], state: None },
    ]);
    assert_eq!(s.purge_tombstones(vb, u32::MAX).unwrap(), 1);
    // `t`'s tombstone (seqno 3) was purged after the writer learnt of it; `b` unknown; `c` new; the hint list
    // shorter than the records (the missing one is unknown).
    let second = [record(b"a", b"2", 4, false), record(b"t", b"2", 5, false), record(b"c", b"1", 6, false)];
    let other_second = [record(b"a", b"y", 2, false), record(b"b", b"y", 3, false)];
    write(&[
        VbWrite { vb, records: &second, on_disk: &[OnDisk::At(1), OnDisk::At(3)], state: None },
        VbWrite { vb: other, records: &other_second, on_disk: &[OnDisk::At(1), OnDisk::Absent], state: None },
    ]);
    let third = [record(b"b", b"3", 7, true), record(b"c", b"3", 8, false)];
    write(&[VbWrite { vb, records: &third, on_disk: &[OnDisk::Unknown, OnDisk::At(6)], state: None }]);
    s.sync().unwrap();
    let latest = [(b"a".to_vec(), 4), (b"t".to_vec(), 5), (b"b".to_vec(), 7), (b"c".to_vec(), 8)];
    assert_eq!(seqno_scan(s, vb), latest.to_vec());
    assert_eq!(seqno_scan(s, other), vec![(b"a".to_vec(), 2), (b"b".to_vec(), 3)]);
    let mut by_key = Vec::new();
    s.scan_keys(vb, false, &mut |r| {
        by_key.push((r.key, r.meta.seqno));
        true
    })
    .unwrap();
    by_key.sort();
    let mut expected = latest.to_vec();
    expected.sort();
    assert_eq!(by_key, expected);
    assert_eq!(s.get(vb, b"c").unwrap().unwrap().value, b"3");
    assert!(s.get(vb, b"b").unwrap().unwrap().meta.deleted);
}

/// A hint that contradicts the store (a key said to be new that is on disk, or on disk at another seqno) is a
/// writer's bug that would leave a stale seqno entry: debug builds (every test run) reject the whole write and
/// store nothing. Release builds trust the hint and skip the read, which is the point of it.
fn a_wrong_known_version_is_rejected_in_debug_builds(s: &impl VbStore) {
    if !cfg!(debug_assertions) {
        return;
    }
    let vb = VbId(14);
    s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
    for wrong in [OnDisk::Absent, OnDisk::At(5)] {
        let batch = [record(b"n", b"1", 2, false), record(b"a", b"2", 3, false)];
        let result = s.write_many(&[VbWrite { vb, records: &batch, on_disk: &[OnDisk::Absent, wrong], state: None }]);
        assert!(matches!(result, Err(StoreError::Rejected { seqno: 3, .. })), "{wrong:?}: {result:?}");
    }
    assert_eq!(seqno_scan(s, vb), vec![(b"a".to_vec(), 1)]);
    assert_eq!(s.get(vb, b"n").unwrap(), None);
    assert_eq!(s.high_seqno(vb).unwrap(), 1);
}

/// A replica that must start over clears its vBucket: records, high seqno and state go; other vBuckets stay; the
/// vBucket takes writes from seqno 1 again.
fn clearing_a_vbucket_empties_it_and_leaves_the_others(s: &impl VbStore) {
    let (vb, other) = (VbId(9), VbId(10));
    s.write_batch_with_state(vb, &[record(b"a", b"1", 1, false), record(b"b", b"", 2, true)], Some(&vb_state(2)))
        .unwrap();
    s.write_batch(other, &[record(b"a", b"x", 1, false)]).unwrap();
    assert_eq!(s.clear_vbucket(vb).unwrap(), 2);
    s.sync().unwrap();
    assert_eq!(s.get(vb, b"a").unwrap(), None);
    assert!(seqno_scan(s, vb).is_empty());
    assert_eq!(s.high_seqno(vb).unwrap(), 0);
    assert_eq!(s.vb_state(vb).unwrap(), None);
    assert_eq!(s.get(other, b"a").unwrap().unwrap().value, b"x");
    s.write_batch(vb, &[record(b"c", b"1", 1, false)]).unwrap();
    assert_eq!(seqno_scan(s, vb), vec![(b"c".to_vec(), 1)]);
}

/// A replica rolled back to a seqno keeps its records at or below it and loses those above (in both indexes);
/// its high seqno and state come down to it (failover entries above it dropped); it takes writes above it again.
fn rolling_back_keeps_what_lies_at_or_below_the_seqno(s: &impl VbStore) {
    let (vb, other) = (VbId(14), VbId(15));
    let records = [record(b"a", b"1", 1, false), record(b"b", b"1", 2, false), record(b"c", b"", 3, true)];
    s.write_batch_with_state(vb, &records, Some(&vb_state(3))).unwrap();
    s.write_batch(vb, &[record(b"a", b"2", 4, false)]).unwrap();
    s.write_batch(other, &[record(b"a", b"x", 1, false)]).unwrap();
    assert_eq!(s.rollback_vbucket(vb, 2).unwrap(), 2, "c at 3 and a at 4");
    s.sync().unwrap();
    assert_eq!(seqno_scan(s, vb), vec![(b"b".to_vec(), 2)]);
    assert_eq!((s.get(vb, b"a").unwrap(), s.get(vb, b"c").unwrap()), (None, None));
    assert_eq!(s.high_seqno(vb).unwrap(), 2);
    let state = s.vb_state(vb).unwrap().unwrap();
    assert_eq!((state.high_seqno, state.prepares_completed_to, &state.failover[..]), (2, 1, &[(0xbeef, 0)][..]));
    assert_eq!(s.get(other, b"a").unwrap().unwrap().value, b"x");
    s.write_batch(vb, &[record(b"a", b"3", 3, false)]).unwrap();
    assert_eq!(seqno_scan(s, vb), vec![(b"b".to_vec(), 2), (b"a".to_vec(), 3)]);
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
    s.write_batch(vb, &[record(b"b", b"2", 4, false)]).unwrap();
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 0, 10, &mut |r| seen.push((r.key, r.meta.seqno))).unwrap();
    assert_eq!(seen, vec![(b"a".to_vec(), 3), (b"b".to_vec(), 4)]);
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 3, 3, &mut |r| seen.push(r.meta.seqno)).unwrap();
    assert_eq!(seen, vec![3]);
    let mut seen = Vec::new();
    s.scan_seqnos(vb, 4, 3, &mut |r| seen.push(r.meta.seqno)).unwrap();
    assert!(seen.is_empty(), "an empty range visits nothing");
    let mut seen = Vec::new();
    s.scan_seqnos_while(vb, 0, 10, &mut |r| {
        seen.push(r.meta.seqno);
        false
    })
    .unwrap();
    assert_eq!(seen, vec![3], "a scan stops as soon as the reader has had enough");
}

/// The same key in two vBuckets is two documents.
fn vbuckets_are_independent(s: &impl VbStore) {
    s.write_batch(VbId(10), &[record(b"k", b"ten", 1, false)]).unwrap();
    s.write_batch(VbId(11), &[record(b"k", b"eleven", 1, false)]).unwrap();
    assert_eq!(s.get(VbId(10), b"k").unwrap().unwrap().value, b"ten");
    assert_eq!(s.get(VbId(11), b"k").unwrap().unwrap().value, b"eleven");
    assert_eq!(seqno_scan(s, VbId(12)), vec![]);
    assert_eq!(s.high_seqno(VbId(1023)).unwrap(), 0);
    assert!(s.get(VbId(1024), b"k").is_err(), "vBucket ids stop at 1023");
}

/// A stored vBucket state reads back exactly, and a later one replaces it.
fn vb_state_round_trips(s: &impl VbStore) {
    let vb = VbId(20);
    assert_eq!(s.vb_state(vb).unwrap(), None);
    s.set_vb_state(vb, &vb_state(0)).unwrap();
    assert_eq!(s.vb_state(vb).unwrap(), Some(vb_state(0)));
    s.set_vb_state(vb, &vb_state(9)).unwrap();
    assert_eq!(s.vb_state(vb).unwrap(), Some(vb_state(9)));
    assert_eq!(s.vb_state(VbId(21)).unwrap(), None);
    assert_eq!(s.high_seqno(vb).unwrap(), 0, "a state alone writes no record");
}

/// A state given with a batch is stored with it; a batch without one leaves the last state in place.
fn vb_state_is_written_with_its_batch(s: &impl VbStore) {
    let vb = VbId(22);
    s.write_batch_with_state(vb, &[record(b"a", b"1", 1, false), record(b"b", b"1", 2, false)], Some(&vb_state(2)))
        .unwrap();
    assert_eq!((s.high_seqno(vb).unwrap(), s.vb_state(vb).unwrap()), (2, Some(vb_state(2))));
    s.write_batch(vb, &[record(b"c", b"1", 3, false)]).unwrap();
    assert_eq!((s.high_seqno(vb).unwrap(), s.vb_state(vb).unwrap()), (3, Some(vb_state(2))));
}

/// Purge removes exactly the tombstones deleted before the cutoff, from both indexes, and never lowers the high
/// seqno even when the newest record goes.
fn purge_removes_only_tombstones_deleted_before_the_cutoff(s: &impl VbStore) {
    let vb = VbId(30);
    let batch = [record(b"old", b"", 1, true), record(b"live", b"v", 2, false), record(b"new", b"", 3, true)];
    s.write_batch(vb, &batch).unwrap();
    // Deletion times are 100 and 300: a cutoff of 300 purges only the first (strictly before).
    assert_eq!(s.purge_tombstones(vb, 300).unwrap(), 1);
    assert_eq!(s.get(vb, b"old").unwrap(), None);
    assert!(s.get(vb, b"new").unwrap().unwrap().meta.deleted);
    assert_eq!(seqno_scan(s, vb), vec![(b"live".to_vec(), 2), (b"new".to_vec(), 3)]);
    assert_eq!(s.purge_tombstones(vb, 300).unwrap(), 0, "purging again finds nothing");
    assert_eq!(s.purge_tombstones(vb, u32::MAX).unwrap(), 1);
    assert_eq!(seqno_scan(s, vb), vec![(b"live".to_vec(), 2)]);
    assert_eq!(s.high_seqno(vb).unwrap(), 3, "the purged newest seqno still counts");
    assert!(s.write_batch(vb, &[record(b"x", b"", 3, false)]).is_err(), "seqno 3 stays used");
    assert_eq!(s.purge_tombstones(VbId(31), u32::MAX).unwrap(), 0);
}

/// With values, every key's latest full record comes in seqno order; returning false stops the scan.
fn scan_keys_with_values_visits_latest_versions_in_seqno_order(s: &impl VbStore) {
    let vb = VbId(40);
    let batch = [record(b"b", b"1", 1, false), record(b"a", b"1", 2, false), record(b"c", b"", 3, true)];
    s.write_batch(vb, &batch).unwrap();
    s.write_batch(vb, &[record(b"b", b"2", 4, false)]).unwrap();
    let mut seen = Vec::new();
    s.scan_keys(vb, true, &mut |r| {
        assert!(r.is_intact());
        seen.push((r.key, r.value, r.meta.seqno));
        true
    })
    .unwrap();
    let want = [(b"a", b"1" as &[u8], 2), (b"c", b"", 3), (b"b", b"2", 4)];
    assert_eq!(seen, want.map(|(k, v, seq)| (k.to_vec(), v.to_vec(), seq)).to_vec());
    let mut count = 0;
    s.scan_keys(vb, true, &mut |_| {
        count += 1;
        count < 2
    })
    .unwrap();
    assert_eq!(count, 2);
}

/// Without values, every key comes once in key order with its latest metadata, an empty value and the stored
/// checksum of the full record; returning false stops the scan.
fn scan_keys_without_values_visits_keys_in_key_order(s: &impl VbStore) {
    let vb = VbId(41);
    s.write_batch(vb, &[record(b"b", b"1", 1, false), record(b"a", b"1", 2, false)]).unwrap();
    s.write_batch(vb, &[record(b"b", b"22", 3, false), record(b"c", b"", 4, true)]).unwrap();
    let mut seen = Vec::new();
    s.scan_keys(vb, false, &mut |r| {
        seen.push(r);
        true
    })
    .unwrap();
    let want = [record(b"a", b"1", 2, false), record(b"b", b"22", 3, false), record(b"c", b"", 4, true)];
    assert_eq!(seen.len(), want.len());
    for (got, want) in seen.iter().zip(&want) {
        assert_eq!((&got.key, got.meta, got.crc32c), (&want.key, want.meta, want.crc32c));
        assert!(got.value.is_empty());
    }
    let mut count = 0;
    s.scan_keys(vb, false, &mut |_| {
        count += 1;
        false
    })
    .unwrap();
    assert_eq!(count, 1);
}

/// A damaged record is an error on every read path that reaches it, never a value; its neighbours still read.
fn corruption_is_reported_never_returned(s: &impl Corruptible) {
    let vb = VbId(50);
    s.write_batch(vb, &[record(b"bad", b"value", 1, false), record(b"good", b"value", 2, false)]).unwrap();
    s.corrupt_for_test(vb, b"bad");
    let corrupt = StoreError::Corrupt { vb, seqno: 1 };
    assert_eq!(s.get(vb, b"bad"), Err(corrupt.clone()));
    assert_eq!(s.scan_seqnos(vb, 0, 10, &mut |_| ()), Err(corrupt.clone()));
    assert_eq!(s.scan_keys(vb, true, &mut |_| true), Err(corrupt));
    assert_eq!(s.get(vb, b"good").unwrap().unwrap().value, b"value");
    s.write_batch(VbId(51), &[record(b"empty", b"", 1, true)]).unwrap();
    s.corrupt_for_test(VbId(51), b"empty");
    assert_eq!(s.get(VbId(51), b"empty"), Err(StoreError::Corrupt { vb: VbId(51), seqno: 1 }));
}

/// A seqno at or below the high seqno (or repeated in one batch) rejects the whole batch, which writes nothing.
fn non_increasing_seqnos_are_rejected_and_nothing_is_written(s: &impl VbStore) {
    let vb = VbId(60);
    s.write_batch(vb, &[record(b"a", b"1", 5, false)]).unwrap();
    let stale = [record(b"b", b"1", 6, false), record(b"c", b"1", 5, false)];
    assert!(matches!(s.write_batch(vb, &stale), Err(StoreError::Rejected { seqno: 5, .. })));
    let repeated = [record(b"b", b"1", 7, false), record(b"c", b"1", 7, false)];
    assert!(matches!(s.write_batch_with_state(vb, &repeated, Some(&vb_state(7))), Err(StoreError::Rejected { .. })));
    assert_eq!((s.get(vb, b"b").unwrap(), s.high_seqno(vb).unwrap()), (None, 5));
    assert_eq!(s.vb_state(vb).unwrap(), None, "the state of a rejected batch is not written either");
    s.write_batch(vb, &[record(b"b", b"1", 6, false)]).unwrap();
}

/// A record whose checksum does not match its contents never reaches the store, and the store stays usable.
fn damaged_records_are_rejected_before_they_are_written(s: &impl VbStore) {
    let vb = VbId(61);
    let mut damaged = record(b"a", b"1", 1, false);
    damaged.value = b"2".to_vec();
    assert!(matches!(s.write_batch(vb, &[damaged]), Err(StoreError::Rejected { .. })));
    let long_key = vec![b'k'; crate::KEY_BYTES_MAX + 1];
    assert!(matches!(s.write_batch(vb, &[record(&long_key, b"", 1, false)]), Err(StoreError::Rejected { .. })));
    assert_eq!(s.get(vb, b"a").unwrap(), None);
    s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
    assert_eq!(s.get(vb, b"a").unwrap().unwrap().value, b"1");
}

/// Compaction after updates, deletions and a purge keeps every live record, the remaining tombstones and the
/// seqno order, and the store keeps accepting writes.
fn compaction_keeps_every_live_record(s: &impl VbStore) {
    let vb = VbId(70);
    let big = vec![b'x'; 10_000];
    let mut seqno = 0;
    let mut next = || {
        seqno += 1;
        seqno
    };
    for round in 0..3u8 {
        let batch: Vec<_> = (0..50u8)
            .map(|i| {
                let value = if i % 5 == 0 { big.clone() } else { vec![round; usize::from(i)] };
                record(&[b'k', i], &value, next(), false)
            })
            .collect();
        s.write_batch(vb, &batch).unwrap();
    }
    let deletes: Vec<_> = (0..50u8).step_by(2).map(|i| record(&[b'k', i], b"", next(), true)).collect();
    s.write_batch(vb, &deletes).unwrap();
    s.sync().unwrap();
    let before = seqno_scan(s, vb);
    assert_eq!(s.purge_tombstones(vb, 152 * 100).unwrap(), 1, "only k0's tombstone (seqno 151) is old enough");
    s.compact().unwrap();
    let after = seqno_scan(s, vb);
    assert_eq!(after, before.into_iter().filter(|(_, seqno)| *seqno != 151).collect::<Vec<_>>());
    for i in (1..50u8).step_by(2) {
        let r = s.get(vb, &[b'k', i]).unwrap().unwrap();
        let want = if i % 5 == 0 { big.clone() } else { vec![2; usize::from(i)] };
        assert_eq!((r.value, r.meta.seqno), (want, 100 + u64::from(i) + 1));
    }
    s.write_batch(vb, &[record(b"after", b"1", next(), false)]).unwrap();
    assert_eq!(s.get(vb, b"after").unwrap().unwrap().value, b"1");
}
