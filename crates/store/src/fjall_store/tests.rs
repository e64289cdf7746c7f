use std::sync::Arc;

use settee_types::VbId;

use super::{layout, FjallConfig, FjallStore};
use crate::conformance::{self, record};
use crate::{FaultInjector, StoreError, VbStore};

fn open(dir: &std::path::Path) -> FjallStore {
    FjallStore::open(dir).expect("open store")
}

/// The fjall store passes the whole conformance suite, including the checks that close and reopen it.
#[test]
fn fjall_store_conforms() {
    let root = tempfile::tempdir().unwrap();
    conformance::run_all_persistent(root.path(), open);
}

/// A damaged key-index entry is corruption on every path that reads it (get, metadata scan, purge, writes to it).
#[test]
fn damaged_key_index_entry_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let vb = VbId(3);
    s.write_batch(vb, &[record(b"k", b"v", 1, true)]).unwrap();
    let kk = layout::key_index_key(vb, b"k");
    let mut entry = s.by_key.get(&kk).unwrap().unwrap().to_vec();
    entry[10] ^= 0x80;
    s.by_key.insert(&kk, entry).unwrap();
    let corrupt = StoreError::Corrupt { vb, seqno: 0 };
    assert_eq!(s.get(vb, b"k"), Err(corrupt.clone()));
    assert_eq!(s.scan_keys(vb, false, &mut |_| true), Err(corrupt.clone()));
    assert_eq!(s.purge_tombstones(vb, u32::MAX), Err(corrupt.clone()));
    assert_eq!(s.write_batch(vb, &[record(b"k", b"v", 2, false)]), Err(corrupt));
    assert!(!s.is_poisoned(), "corruption is not a failed write");
}

/// A key index entry whose seqno entry is missing, or holds another key's record, is corruption, not a miss.
#[test]
fn key_index_pointing_at_the_wrong_record_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let vb = VbId(4);
    s.write_batch(vb, &[record(b"a", b"1", 1, false), record(b"b", b"2", 2, false)]).unwrap();
    s.by_seqno.remove(layout::seqno_index_key(vb, 1)).unwrap();
    assert_eq!(s.get(vb, b"a"), Err(StoreError::Corrupt { vb, seqno: 1 }));
    let b_entry = s.by_key.get(layout::key_index_key(vb, b"b")).unwrap().unwrap();
    let kk = layout::key_index_key(vb, b"a");
    let (meta, crc) = layout::decode_key_entry(&layout::key_index_key(vb, b"b"), &b_entry).unwrap();
    let forged = crate::Record { key: b"a".to_vec(), value: Vec::new(), meta, crc32c: crc };
    s.by_key.insert(&kk, layout::encode_key_entry(&kk, &forged)).unwrap();
    assert_eq!(s.get(vb, b"a"), Err(StoreError::Corrupt { vb, seqno: 2 }), "seqno 2 holds key b, not a");
}

/// After an injected write failure every call is refused as poisoned, nothing of the failed batch is stored, and
/// reopening clears the poison with earlier synced data intact.
#[test]
fn failed_write_poisons_until_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let config = FjallConfig { faults: Some(faults.clone()), ..FjallConfig::default() };
    let vb = VbId(9);
    {
        let s = FjallStore::open_with(dir.path(), config.clone()).unwrap();
        s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
        s.sync().unwrap();
        faults.fail_next_write();
        assert!(matches!(s.write_batch(vb, &[record(b"b", b"1", 2, false)]), Err(StoreError::Io(_))));
        assert!(s.is_poisoned());
        assert_eq!(s.write_batch(vb, &[record(b"c", b"1", 3, false)]), Err(StoreError::Poisoned));
        assert_eq!(s.sync(), Err(StoreError::Poisoned));
        assert_eq!(s.get(vb, b"a"), Err(StoreError::Poisoned));
        assert_eq!(s.high_seqno(vb), Err(StoreError::Poisoned));
        assert_eq!(s.scan_keys(vb, true, &mut |_| true), Err(StoreError::Poisoned));
        assert_eq!(s.compact(), Err(StoreError::Poisoned));
    }
    let s = FjallStore::open_with(dir.path(), config).unwrap();
    assert_eq!(s.get(vb, b"a").unwrap().unwrap().value, b"1");
    assert_eq!((s.get(vb, b"b").unwrap(), s.high_seqno(vb).unwrap()), (None, 1));
}

/// A store over `dir` whose faults the test injects.
fn open_with_faults(dir: &std::path::Path) -> (FjallStore, Arc<FaultInjector>) {
    let faults = Arc::new(FaultInjector::new());
    let store = FjallStore::open_with(dir, FjallConfig { faults: Some(faults.clone()), ..Default::default() });
    (store.unwrap(), faults)
}

/// A failed sync poisons the store: the caller is told, and no later write can be mistaken for durable.
#[test]
fn failed_sync_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = open_with_faults(dir.path());
    s.write_batch(VbId(1), &[record(b"a", b"1", 1, false)]).unwrap();
    faults.fail_next_sync();
    assert!(matches!(s.sync(), Err(StoreError::Io(_))));
    assert_eq!(s.write_batch(VbId(1), &[record(b"b", b"1", 2, false)]), Err(StoreError::Poisoned));
    assert_eq!(s.sync(), Err(StoreError::Poisoned));
}

/// A failed document read (a key's record, a scan of the seqno index) is an I/O error for that call only: nothing
/// is poisoned and the next read finds the data.
#[test]
fn failed_read_fails_once_and_poisons_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = open_with_faults(dir.path());
    let vb = VbId(3);
    s.write_batch(vb, &[record(b"a", b"1", 1, false), record(b"b", b"2", 2, false)]).unwrap();
    faults.fail_next_read();
    assert!(matches!(s.get(vb, b"a"), Err(StoreError::Io(_))));
    assert_eq!(s.get(vb, b"a").unwrap().unwrap().value, b"1");
    faults.fail_next_read();
    assert!(matches!(s.scan_seqnos_while(vb, 1, 2, &mut |_| true), Err(StoreError::Io(_))));
    let mut seen = Vec::new();
    s.scan_seqnos_while(vb, 1, 2, &mut |r| {
        seen.push(r.meta.seqno);
        true
    })
    .unwrap();
    assert_eq!(seen, vec![1, 2]);
    assert!(!s.is_poisoned());
    s.write_batch(vb, &[record(b"c", b"3", 3, false)]).unwrap();
}

/// A second store cannot open a directory that is already open (fjall's lock), so two writers never share it.
#[test]
fn second_open_of_the_same_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());
    assert!(matches!(FjallStore::open(dir.path()), Err(StoreError::Io(_))));
}

/// A store written by a different format version is refused instead of misread.
#[test]
fn unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.vb_meta.insert(layout::FORMAT_KEY, [layout::FORMAT_VERSION + 1]).unwrap();
    }
    assert!(matches!(FjallStore::open(dir.path()), Err(StoreError::Io(msg)) if msg.contains("format")));
}

/// A record above its vBucket's persisted high seqno cannot come from a complete batch: after a reopen that
/// vBucket is out of service (every call on it is `Corrupt`), and the other vBuckets still serve.
#[test]
fn record_above_the_high_seqno_takes_its_vbucket_out_of_service() {
    let dir = tempfile::tempdir().unwrap();
    let vb = VbId(12);
    {
        let s = open(dir.path());
        s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
        s.write_batch(VbId(13), &[record(b"a", b"1", 1, false)]).unwrap();
        let r = record(b"z", b"1", 5, false);
        let sk = layout::seqno_index_key(vb, 5);
        s.by_seqno.insert(sk, layout::encode_seqno_entry(&sk, &r)).unwrap();
    }
    let s = open(dir.path());
    let corrupt = StoreError::Corrupt { vb, seqno: 0 };
    assert_eq!(s.get(vb, b"a"), Err(corrupt.clone()));
    assert_eq!(s.high_seqno(vb), Err(corrupt.clone()));
    assert_eq!(s.write_batch(vb, &[record(b"b", b"1", 6, false)]), Err(corrupt));
    assert_eq!(s.get(VbId(13), b"a").unwrap().unwrap().value, b"1");
}

/// A damaged high seqno entry takes only its vBucket out of service.
#[test]
fn damaged_high_seqno_entry_takes_its_vbucket_out_of_service() {
    let dir = tempfile::tempdir().unwrap();
    let vb = VbId(14);
    {
        let s = open(dir.path());
        s.write_batch(vb, &[record(b"a", b"1", 1, false)]).unwrap();
        s.write_batch(VbId(15), &[record(b"a", b"1", 1, false)]).unwrap();
        let hk = layout::high_seqno_key(vb);
        let mut entry = layout::encode_high_seqno(&hk, 1);
        entry[12] ^= 1;
        s.vb_meta.insert(hk, entry).unwrap();
    }
    let s = open(dir.path());
    assert_eq!(s.scan_keys(vb, true, &mut |_| true), Err(StoreError::Corrupt { vb, seqno: 0 }));
    assert_eq!(s.high_seqno(VbId(15)), Ok(1));
}

/// Reads racing a writer that keeps superseding the same keys never fail and never return a mismatched version:
/// a get reads the key index and the record from one snapshot, so the entry it follows cannot vanish under it.
#[test]
fn reads_racing_writes_see_whole_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let vb = VbId(21);
    let key = |seqno: u64| format!("k{}", seqno % 8).into_bytes();
    let value = |seqno: u64| seqno.to_be_bytes().repeat(8);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for first in (1..=4000u64).step_by(8) {
                let batch: Vec<_> =
                    (first..first + 8).map(|seqno| record(&key(seqno), &value(seqno), seqno, false)).collect();
                s.write_batch(vb, &batch).unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        let mut reads = 0u64;
        while !done.load(std::sync::atomic::Ordering::Acquire) || reads == 0 {
            for k in 0..8u64 {
                if let Some(r) = s.get(vb, &key(k)).unwrap() {
                    assert_eq!((r.key, r.value), (key(r.meta.seqno), value(r.meta.seqno)));
                }
                reads += 1;
            }
        }
    });
}

/// A sync with nothing committed since the last fsync has nothing to make durable and does not fsync (the
/// injected fault stays armed); every write path (records, vBucket state, tombstone purge, vBucket removal) counts,
/// so the sync after each of them does fsync and meets the fault.
#[test]
fn sync_fsyncs_only_when_something_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let vb = VbId(2);
    type Write<'a> = (&'a str, &'a dyn Fn(&FjallStore));
    let writes: [Write; 4] = [
        ("records", &|s| s.write_batch(vb, &[record(b"a", b"1", s.high_seqno(vb).unwrap() + 1, false)]).unwrap()),
        ("vBucket state", &|s| s.set_vb_state(vb, &conformance::vb_state(s.high_seqno(vb).unwrap())).unwrap()),
        ("purge", &|s| assert!(s.purge_tombstones(vb, u32::MAX).unwrap() >= 1)),
        ("vBucket removal", &|s| assert!(s.clear_vbucket(vb).unwrap() >= 1)),
    ];
    for (what, write) in writes {
        let faults = Arc::new(FaultInjector::new());
        let config = FjallConfig { faults: Some(faults.clone()), ..Default::default() };
        let s = FjallStore::open_with(dir.path(), config).unwrap();
        s.write_batch(vb, &[record(b"t", b"", s.high_seqno(vb).unwrap() + 1, true)]).unwrap();
        s.sync().unwrap();
        faults.fail_next_sync();
        s.sync().expect("nothing committed since the last fsync: no fsync, no fault");
        write(&s);
        assert!(matches!(s.sync(), Err(StoreError::Io(_))), "{what}: the sync after it must fsync");
    }
}

/// fjall's memory follows the bucket's quota, between 8 MiB and its 64 MiB defaults.
#[test]
fn fjall_memory_follows_the_quota() {
    let mib = 1 << 20;
    let sizes = |quota: u64| {
        let c = FjallConfig::for_quota(quota);
        (c.memtable_bytes / mib, c.cache_bytes / mib)
    };
    assert_eq!(sizes(16 * mib), (8, 8));
    assert_eq!(sizes(256 * mib), (16, 32));
    assert_eq!(sizes(512 * mib), (32, 64));
    assert_eq!(sizes(1024 * mib), (64, 64));
    assert_eq!(sizes(100 * 1024 * mib), (64, 64));
}
