//! Persistence and eviction seen from the engine: checkpoints, persisted seqnos, durable-write waiters,
//! SYNC_WRITE_IN_PROGRESS, ejection and background fetch, warmup loading.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use settee_types::{DurabilityLevel, ManualClock, OnDisk, VbId};

use crate::VbState;

use crate::{
    Bucket, BucketConfig, BucketKind, DocKey, EngineError, EvictionPolicy, ItemSnapshot, StoreMode, StoreRequest,
    Watermark, WriteOptions,
};

fn persistent(quota: u64, eviction: EvictionPolicy) -> Bucket {
    let config = BucketConfig {
        name: "p".into(),
        uuid: "0123456789abcdef0123456789abcdef".into(),
        kind: BucketKind::Couchbase,
        ram_quota_bytes: quota,
        replicas: 0,
        eviction,
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000)))
}

fn write(
    b: &Bucket,
    key: &[u8],
    value: &[u8],
    durability: Option<DurabilityLevel>,
) -> Result<crate::MutationResult, EngineError> {
    let opts = WriteOptions { durability, ..Default::default() };
    b.store(VbId(0), &DocKey::new(0, key), StoreRequest { mode: StoreMode::Set, value, flags: 0, expiry: 0, opts })
}

/// Writes `items` values of 10,000 bytes to vBucket 0 and persists each (drain and mark, as a flusher keeping up
/// does: the checkpoint's copy is charged until drained), so the pager may eject them.
fn write_persisted(b: &Bucket, items: usize) {
    let value = vec![b'v'; 10_000];
    for i in 0..items {
        write(b, format!("k{i}").as_bytes(), &value, None).unwrap();
        let batch = b.drain_dirty(VbId(0)).unwrap();
        b.mark_persisted(VbId(0), batch.generation, batch.up_to);
    }
}

/// The flusher's view: a drained checkpoint holds each key once at its latest version, and `up_to` is the high
/// seqno; marking it persisted moves the persisted seqno.
#[test]
fn checkpoint_drains_latest_versions() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    write(&b, b"a", b"1", None).unwrap();
    write(&b, b"b", b"1", None).unwrap();
    write(&b, b"a", b"2", None).unwrap();
    let batch = b.drain_dirty(VbId(0)).unwrap();
    let got: Vec<(&[u8], &[u8], u64)> = batch.items.iter().map(|i| (&i.key[1..], &i.value[..], i.seqno)).collect();
    assert_eq!(got, vec![(&b"b"[..], &b"1"[..], 2), (&b"a"[..], &b"2"[..], 3)]);
    assert_eq!(batch.up_to, 3);
    assert!(b.drain_dirty(VbId(0)).is_none());
    assert_eq!(b.observe_seqno(VbId(0)).unwrap().persisted_seqno, 0);
    b.mark_persisted(VbId(0), 0, 3);
    assert_eq!(b.observe_seqno(VbId(0)).unwrap().persisted_seqno, 3);
}

/// The checkpoint's copy of a mutation is charged to the bucket until the flusher takes it, and the drained batch
/// is that copy even when the key changed in memory since (a GET_LOCKED CAS is not a mutation).
#[test]
fn checkpoint_copies_are_charged_until_drained() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let before = b.mem_used();
    write(&b, b"a", &[b'v'; 1000], None).unwrap();
    let dirty = b.mem_used() - before;
    b.get_locked(VbId(0), &DocKey::new(0, b"a"), 10, |_| ()).unwrap();
    let batch = b.drain_dirty(VbId(0)).unwrap();
    let clean = b.mem_used() - before;
    assert!(dirty >= clean + 1000 + 2, "the copy ({dirty} B charged dirty, {clean} B clean)");
    assert_eq!((batch.items.len(), batch.items[0].value.len(), batch.items[0].seqno), (1, 1000, 1));
}

/// Writes to a collection dropped before the flusher took them never reach the disk; a write to another
/// collection in the same checkpoint does.
#[test]
fn writes_of_a_dropped_collection_are_not_drained() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let ((), _) = b.edit_manifest(|m| m.create_collection("_default", "c", None, false).map(|_| ())).unwrap();
    let (_, cid) = b.resolve_collection("_default.c").unwrap();
    let opts = WriteOptions::default();
    let req = |value| StoreRequest { mode: StoreMode::Set, value, flags: 0, expiry: 0, opts };
    b.store(VbId(0), &DocKey::new(cid, b"gone"), req(b"1")).unwrap();
    write(&b, b"kept", b"2", None).unwrap();
    b.edit_manifest(|m| m.drop_collection("_default", "c")).unwrap();
    let batch = b.drain_dirty(VbId(0)).unwrap();
    let keys: Vec<&[u8]> = batch.items.iter().map(|i| &i.key[1..]).collect();
    assert_eq!(keys, vec![&b"kept"[..]]);
    assert_eq!(batch.up_to, 2);
}

/// A persist-level durable write on one node is a prepare: it holds its key (SYNC_WRITE_IN_PROGRESS for the next
/// writer) and stays invisible until the round that writes its record is fsynced; then it commits (readers see
/// it, the key is free), the next round writes the commit, and its writer hears of success once that one is on
/// disk. The regression of issue 21 item 5.2: the prepare used to commit, and its value to be readable, as soon as
/// a round took the vBucket, before any fsync, so a crash could take back a value a reader had seen.
#[test]
fn a_persist_level_value_is_invisible_until_its_prepare_is_on_disk() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    write(&b, b"d", b"0", None).unwrap();
    let m = write(&b, b"d", b"1", Some(DurabilityLevel::PersistToMajority)).unwrap();
    assert!(m.sync_write);
    assert_eq!(write(&b, b"d", b"2", None), Err(EngineError::SyncWriteInProgress));
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    b.when_sync_write_completes(
        VbId(0),
        m.seqno,
        Box::new(move |r| {
            assert_eq!(r, Ok(()));
            d.fetch_add(1, Ordering::SeqCst);
        }),
    );
    let read = |b: &Bucket| b.get(VbId(0), &DocKey::new(0, b"d"), |i| i.body().0.to_vec()).unwrap();
    assert_eq!(read(&b), b"0", "the prepare is not visible");
    let first = b.drain_dirty(VbId(0)).unwrap();
    assert_eq!(read(&b), b"0", "a round took the prepare, but it is not on disk yet");
    let records: Vec<_> = first.items.iter().map(|i| (crate::is_sync_write_key(&i.key), i.seqno)).collect();
    assert_eq!(
        records,
        vec![(false, m.seqno - 1), (true, m.seqno)],
        "the round writes the first value and the prepare's record"
    );
    b.mark_persisted(VbId(0), first.generation, first.up_to);
    assert_eq!(read(&b), b"1", "committed once the prepare is on disk");
    assert_eq!(done.load(Ordering::SeqCst), 0, "the commit is not on disk yet");
    let second = b.drain_dirty(VbId(0)).unwrap();
    let committed: Vec<_> = second.items.iter().filter(|i| !crate::is_sync_write_key(&i.key)).collect();
    assert_eq!(committed.len(), 1);
    assert_eq!(committed[0].value, b"1", "the next round writes the commit");
    assert_eq!((committed[0].seqno, committed[0].cas), (m.seqno + 1, m.cas), "the commit keeps the prepare's CAS");
    assert_eq!(second.prepares_completed_to, m.seqno);
    b.mark_persisted(VbId(0), second.generation, second.up_to);
    assert_eq!(done.load(Ordering::SeqCst), 1);
    assert!(write(&b, b"d", b"2", None).is_ok());
}

/// When the store fails, waiting durable writes are told they are ambiguous and new writes get TMPFAIL.
#[test]
fn store_failure_makes_waiters_ambiguous() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let m = write(&b, b"d", b"1", Some(DurabilityLevel::MajorityAndPersistActive)).unwrap();
    let outcome = Arc::new(parking_lot::Mutex::new(None));
    let o = outcome.clone();
    b.when_sync_write_completes(VbId(0), m.seqno, Box::new(move |r| *o.lock() = Some(r)));
    b.fail_persistence();
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    assert_eq!(b.pending_prepares(VbId(0)), 0, "the prepare that needed the disk is aborted");
    assert_eq!(write(&b, b"x", b"1", None), Err(EngineError::TempFail));
}

/// Ephemeral buckets still refuse persist levels.
#[test]
fn ephemeral_buckets_refuse_persist_levels() {
    let mut b = persistent(64 << 20, EvictionPolicy::NoEviction);
    b = {
        let mut c = b.config();
        c.kind = BucketKind::Ephemeral;
        Bucket::new(c, Arc::new(ManualClock::new(1)))
    };
    assert_eq!(
        write(&b, b"k", b"v", Some(DurabilityLevel::PersistToMajority)),
        Err(EngineError::DurabilityInvalidLevel)
    );
}

/// Past the high watermark the pager ejects persisted values (never dirty ones); reading an ejected value asks
/// for a fetch, and completing the fetch makes it readable again.
#[test]
fn value_eviction_and_background_fetch() {
    let b = persistent(1 << 20, EvictionPolicy::ValueOnly);
    let value = vec![b'v'; 10_000];
    let mut drained = Vec::new();
    for i in 0..95 {
        write(&b, format!("k{i}").as_bytes(), &value, None).unwrap();
        // The flusher takes each write at once, but none is on disk until its round is marked persisted.
        drained.extend(b.drain_dirty(VbId(0)).unwrap().items);
    }
    assert!(b.over_high_watermark());
    assert_eq!(b.run_item_pager(), 0, "nothing is persisted yet, so nothing may be ejected");
    b.mark_persisted(VbId(0), 0, 95);
    assert!(b.run_item_pager() > 0);
    assert!(!b.over_high_watermark());
    let ejected =
        (0..95).find(|i| b.get(VbId(0), &DocKey::new(0, format!("k{i}").as_bytes()), |_| ()).is_err()).unwrap();
    let key = DocKey::new(0, format!("k{ejected}").as_bytes());
    assert_eq!(b.get(VbId(0), &key, |_| ()), Err(EngineError::NeedFetch));
    let on_disk = drained.into_iter().find(|i| i.key == key.encoded()).unwrap();
    b.complete_fetch(VbId(0), key.encoded(), Some(on_disk));
    assert_eq!(b.get(VbId(0), &key, |i| i.body().0.len()).unwrap(), 10_000);
    assert!(b.resident_ratio() < 100);
}

/// The watermarks move (as fractions of the quota, low always below high) and the pager follows them: memory
/// under the default high watermark is left alone until the high watermark is lowered beneath it.
#[test]
fn watermarks_move_and_the_pager_follows() {
    let quota = 1 << 20;
    let b = persistent(quota, EvictionPolicy::ValueOnly);
    assert_eq!(b.watermark_ratios(), (0.75, 0.85));
    assert_eq!(b.watermark_bytes(), (quota * 3 / 4, quota * 85 / 100));
    write_persisted(&b, 60);
    assert!(!b.over_high_watermark());
    assert_eq!(b.run_item_pager(), 0);

    for (which, ratio) in [(Watermark::High, 0.0), (Watermark::High, 1.01), (Watermark::Low, f64::NAN)] {
        assert!(matches!(b.set_watermark(which, ratio), Err(EngineError::Invalid(_))), "{which:?} {ratio}");
    }
    assert!(matches!(b.set_watermark(Watermark::High, 0.5), Err(EngineError::Invalid(_))), "under the low one");
    assert!(matches!(b.set_watermark(Watermark::Low, 0.9), Err(EngineError::Invalid(_))), "over the high one");
    assert_eq!(b.watermark_ratios(), (0.75, 0.85), "refusals change nothing");

    b.set_watermark(Watermark::Low, 0.2).unwrap();
    b.set_watermark(Watermark::High, 0.4).unwrap();
    assert_eq!(b.watermark_bytes(), (quota / 5, quota * 2 / 5));
    assert!(b.over_high_watermark());
    assert!(b.run_item_pager() > 0);
    assert!(b.mem_used() <= quota / 5, "the pager stops under the low watermark, not before");
}

/// A write larger than the room above the high watermark is refused with TMPFAIL, and that refusal itself makes
/// the pager run (memory is under the high watermark, so nothing else would): the retried write then fits.
#[test]
fn a_write_refused_for_memory_makes_the_pager_run() {
    let quota = 1 << 20;
    let b = persistent(quota, EvictionPolicy::ValueOnly);
    write_persisted(&b, 60);
    assert!(!b.over_high_watermark());
    assert_eq!(b.run_item_pager(), 0, "under the high watermark and nothing refused");
    let big = vec![b'b'; 500_000];
    assert_eq!(write(&b, b"big", &big, None), Err(EngineError::TempFail));
    assert!(b.over_high_watermark(), "the refusal wakes the pager");
    assert!(b.run_item_pager() > 0);
    assert!(!b.over_high_watermark());
    write(&b, b"big", &big, None).unwrap();
}

/// Under full eviction whole items go; a miss must ask the disk before answering, and a key the disk does not
/// have either is then NOT_FOUND.
#[test]
fn full_eviction_fetches_before_answering_a_miss() {
    let b = persistent(1 << 20, EvictionPolicy::FullEviction);
    write_persisted(&b, 95);
    assert!(b.run_item_pager() > 0);
    assert_eq!(b.curr_items(), 95, "ejected items still count");
    let missing = DocKey::new(0, b"never-written");
    assert_eq!(b.get(VbId(0), &missing, |_| ()), Err(EngineError::NeedFetch));
    b.complete_fetch(VbId(0), missing.encoded(), None);
    assert_eq!(b.get(VbId(0), &missing, |_| ()), Err(EngineError::NotFound));
}

/// Warmup loads items without marking them dirty and continues seqnos and CAS values after what disk holds;
/// an item loaded without its value is fetched on access.
#[test]
fn warmup_loading() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let snap = |key: &[u8], seqno, with_value: bool| ItemSnapshot {
        key: DocKey::new(0, key).encoded().to_vec(),
        value: if with_value { b"disk".to_vec() } else { Vec::new() },
        cas: 5_000_000_000_000_000_000,
        seqno,
        rev: 1,
        flags: 0,
        expiry: 0,
        datatype: 0,
        deleted: false,
        value_missing: !with_value,
    };
    b.load_item(VbId(0), snap(b"a", 7, true));
    b.load_item(VbId(0), snap(b"b", 9, false));
    b.restore_vbucket(VbId(0), 9, 5_000_000_000_000_000_000, 0, &[(0xaaa, 4), (0xbbb, 0)]);
    b.finish_warmup();
    assert!(b.drain_dirty(VbId(0)).is_none());
    // The history on disk survives, with a branch for the restart at the restored high seqno (the vBucket is
    // active when warmup ends).
    let info = b.stream_info(VbId(0)).unwrap();
    let branches: Vec<(u64, u64)> = info.failover.entries().iter().map(|e| (e.uuid, e.seqno)).collect();
    assert_eq!(&branches[1..], &[(0xaaa, 4), (0xbbb, 0)]);
    assert_eq!(branches[0].1, 9);
    assert_eq!(b.get(VbId(0), &DocKey::new(0, b"a"), |i| i.body().0.to_vec()).unwrap(), b"disk");
    assert_eq!(b.get(VbId(0), &DocKey::new(0, b"b"), |_| ()), Err(EngineError::NeedFetch));
    let m = write(&b, b"c", b"new", None).unwrap();
    assert_eq!(m.seqno, 10);
    assert!(m.cas > 5_000_000_000_000_000_000);
    assert_eq!(m.vbuuid, branches[0].0, "mutation tokens carry the newest branch");
    let batch = b.drain_dirty(VbId(0)).unwrap();
    assert_eq!(batch.failover, branches, "the flusher persists the whole log");
}

/// The regression of a CI failure (`persistence::data_survives_a_restart`, about one run in many): a restarted
/// node's map made a vBucket active while warmup ran, after warmup had restored the vBucket's failover log, and
/// the promotion added a branch of its own beside the restart's: two new branches at the same seqno instead of
/// one. During warmup a promotion leaves the new branch to the end of warmup.
#[test]
fn a_vbucket_made_active_during_warmup_gets_one_new_branch() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    b.set_vbucket_state(VbId(0), VbState::Dead, 0);
    b.set_warming_up(true);
    b.restore_vbucket(VbId(0), 4, 1, 0, &[(0xbbb, 0)]);
    b.set_vbucket_state(VbId(0), VbState::Active, 0xccc);
    b.finish_warmup();
    let info = b.stream_info(VbId(0)).unwrap();
    let branches: Vec<(u64, u64)> = info.failover.entries().iter().map(|e| (e.uuid, e.seqno)).collect();
    assert_eq!(branches.len(), 2, "one branch for the restart on the history from disk: {branches:x?}");
    assert_eq!((branches[0].1, branches[1]), (4, (0xbbb, 0)));
    // A promotion after warmup starts its branch, as every promotion does.
    b.set_vbucket_state(VbId(0), VbState::Replica, 0);
    b.set_vbucket_state(VbId(0), VbState::Active, 0xddd);
    assert_eq!(b.stream_info(VbId(0)).unwrap().failover.latest().uuid, 0xddd);
}

/// Each drained item says what its key has on disk before the round, so the store need not read it: nothing for a
/// key new since warmup, the version warmup loaded or a round took, and for a key changed twice in one round what
/// its first change knew. Unknown before warmup, and for keys missing from the table once it dropped one.
#[test]
fn drains_say_what_each_key_has_on_disk() {
    let vb = VbId(0);
    let drain = |b: &Bucket| {
        let batch = b.drain_dirty(vb).unwrap();
        b.mark_persisted(vb, batch.generation, batch.up_to);
        let keys = batch.items.iter().map(|i| String::from_utf8(i.key[1..].to_vec()).unwrap());
        keys.zip(batch.on_disk).collect::<Vec<_>>()
    };
    let at = |key: &str, on_disk| (key.to_owned(), on_disk);

    let cold = persistent(64 << 20, EvictionPolicy::ValueOnly);
    write(&cold, b"x", b"1", None).unwrap();
    assert_eq!(drain(&cold), [at("x", OnDisk::Unknown)], "no warmup: the disk may hold anything");

    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let loaded = ItemSnapshot {
        key: DocKey::new(0, b"a").encoded().to_vec(),
        value: b"disk".to_vec(),
        cas: 1,
        seqno: 7,
        rev: 1,
        flags: 0,
        expiry: 0,
        datatype: 0,
        deleted: false,
        value_missing: false,
    };
    b.load_item(vb, loaded);
    b.restore_vbucket(vb, 7, 1, 0, &[]);
    write(&b, b"a", b"1", None).unwrap(); // 8
    write(&b, b"n", b"1", None).unwrap(); // 9
    write(&b, b"n", b"2", None).unwrap(); // 10
    write(&b, b"a", b"2", None).unwrap(); // 11
    assert_eq!(drain(&b), [at("n", OnDisk::Absent), at("a", OnDisk::At(7))]);
    write(&b, b"a", b"3", None).unwrap(); // 12
    b.delete(vb, &DocKey::new(0, b"n"), WriteOptions::default()).unwrap(); // 13
    assert_eq!(drain(&b), [at("a", OnDisk::At(11)), at("n", OnDisk::At(10))]);

    // Purging n's tombstone from memory leaves the disk's copy: a key the table lacks may now be on disk.
    b.run_expiry_pager(0);
    assert_eq!(b.get(vb, &DocKey::new(0, b"n"), |_| ()), Err(EngineError::NotFound));
    write(&b, b"n", b"3", None).unwrap();
    write(&b, b"a", b"4", None).unwrap();
    assert_eq!(drain(&b), [at("n", OnDisk::Unknown), at("a", OnDisk::At(12))]);
}

/// Regression: on a persistent bucket with no replicas, a majority write is complete in memory; it neither waits
/// for the flusher nor holds its key. It is still a prepare and a commit (two seqnos), and the reply carries the
/// prepare's seqno.
#[test]
fn majority_does_not_wait_for_disk() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let m = write(&b, b"m", b"1", Some(DurabilityLevel::Majority)).unwrap();
    assert!(!m.sync_write);
    assert_eq!(m.seqno, 1);
    assert_eq!(b.vbucket(VbId(0)).unwrap().high_seqno(), 2);
    assert!(write(&b, b"m", b"2", Some(DurabilityLevel::Majority)).is_ok());
}

/// A replica item written into a persistent bucket's vBucket `vb` at `seqno` (one-item snapshot).
fn replicate(b: &Bucket, vb: VbId, key: &[u8], seqno: u64) {
    b.replica_snapshot(vb, seqno, seqno).unwrap();
    let item = ItemSnapshot {
        key: [&[0u8][..], key].concat(),
        value: b"v".to_vec(),
        cas: seqno,
        seqno,
        rev: 1,
        flags: 0,
        expiry: 0,
        datatype: 0,
        deleted: false,
        value_missing: false,
    };
    b.replica_apply(vb, item).unwrap();
}

/// A flusher round drained before a replica was rolled back to zero lands after the reset: its seqnos belong to
/// the old copy, so marking it persisted leaves the new copy's persisted seqno alone (it used to move it past the
/// high seqno), and the next round first clears the store's copy, then writes the new generation from seqno 1.
#[test]
fn a_round_drained_before_a_rollback_does_not_count_for_the_new_copy() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let vb = VbId(3);
    b.set_vbucket_state(vb, crate::VbState::Replica, 0);
    for seqno in 1..=5 {
        replicate(&b, vb, format!("old-{seqno}").as_bytes(), seqno);
    }
    let in_flight = b.drain_dirty(vb).unwrap();
    assert!(!in_flight.clear_first);
    b.reset_vbucket(vb);
    replicate(&b, vb, b"new", 1);
    b.mark_persisted(vb, in_flight.generation, in_flight.up_to);
    assert_eq!(b.persisted_seqno(vb), Some(0), "the old copy's round is not the new copy's");
    let next = b.drain_dirty(vb).unwrap();
    assert!(next.clear_first, "the store's old copy goes before the new one is written");
    assert_eq!((next.up_to, next.items.len()), (1, 1));
    assert_ne!(next.generation, in_flight.generation);
    b.mark_persisted(vb, next.generation, next.up_to);
    assert_eq!(b.persisted_seqno(vb), Some(1));
    assert!(b.drain_dirty(vb).is_none(), "the clear was taken once");
}

/// A vBucket whose batch the store refused costs that vBucket only: a replica is emptied (its store copy cleared
/// by the next round) and an active one is taken out of service with its durable writes ambiguous; a refusal of a
/// batch from before a reset changes nothing. The bucket keeps taking writes elsewhere.
#[test]
fn a_refused_batch_costs_only_its_vbucket() {
    let b = persistent(64 << 20, EvictionPolicy::ValueOnly);
    let replica = VbId(3);
    b.set_vbucket_state(replica, crate::VbState::Replica, 0);
    replicate(&b, replica, b"r", 1);
    let batch = b.drain_dirty(replica).unwrap();
    assert_eq!(b.persistence_refused(replica, batch.generation), crate::Refused::Reset);
    assert_eq!(b.stream_info(replica).unwrap().high_seqno, 0);
    assert!(b.drain_dirty(replica).unwrap().clear_first);
    assert_eq!(b.persistence_refused(replica, batch.generation), crate::Refused::Stale);

    let m = write(&b, b"d", b"1", Some(DurabilityLevel::PersistToMajority)).unwrap();
    let outcome = Arc::new(parking_lot::Mutex::new(None));
    let o = outcome.clone();
    b.when_sync_write_completes(VbId(0), m.seqno, Box::new(move |r| *o.lock() = Some(r)));
    let batch = b.drain_dirty(VbId(0)).unwrap();
    assert_eq!(b.persistence_refused(VbId(0), batch.generation), crate::Refused::TakenOutOfService);
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    assert_eq!(write(&b, b"d", b"2", None), Err(EngineError::VbucketFailed));
    assert!(!b.store_failed());
    let other = WriteOptions::default();
    let req = StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts: other };
    b.store(VbId(1), &DocKey::new(0, b"elsewhere"), req).unwrap();
}
