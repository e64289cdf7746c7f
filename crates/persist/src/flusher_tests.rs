//! The flusher round's behaviour on the in-memory store (and fjall where a real fsync matters), moved here from
//! the server's flusher with the round itself.

use std::sync::Arc;

use settee_engine::{Bucket, BucketConfig, BucketKind, DocKey, EvictionPolicy, StoreMode, StoreRequest, WriteOptions};
use settee_store::{MemoryStore, StoreError, VbStore, VbWrite};
use settee_types::{ManualClock, VbId};

use super::{write_round, Part, ROUND_BYTES_TARGET};

const VALUE_BYTES: usize = 100 << 10;

fn bucket() -> Arc<Bucket> {
    let config = BucketConfig {
        name: "p".into(),
        uuid: "0123456789abcdef0123456789abcdef".into(),
        kind: BucketKind::Couchbase,
        ram_quota_bytes: 1 << 30,
        replicas: 0,
        eviction: EvictionPolicy::ValueOnly,
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    Arc::new(Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000))))
}

/// The vBuckets of the server's flusher shard 0 (of two).
fn shard_vbuckets(bucket: &Bucket) -> Vec<VbId> {
    (0..bucket.num_vbuckets()).step_by(2).map(VbId).collect()
}

/// A whole round as the server's flusher runs it: write, fsync, persisted.
fn round(bucket: &Bucket, store: &dyn VbStore, vbuckets: &[VbId], first: usize) -> Result<Option<usize>, StoreError> {
    let Some(written) = write_round(bucket, store, vbuckets, first, ROUND_BYTES_TARGET)? else { return Ok(None) };
    store.sync()?;
    let resume = written.resume;
    written.persisted(bucket);
    Ok(resume)
}

/// Applies one replicated item at `seqno` to the replica vBucket `vb`.
fn replicate(bucket: &Bucket, vb: VbId, key: &str, seqno: u64) {
    bucket.replica_snapshot(vb, seqno, seqno).expect("snapshot");
    let item = settee_engine::ItemSnapshot {
        key: [&[0u8][..], key.as_bytes()].concat(),
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
    bucket.replica_apply(vb, item).expect("apply");
}

fn stored_seqnos(store: &dyn VbStore, vb: VbId) -> Vec<u64> {
    let mut seqnos = Vec::new();
    store.scan_seqnos(vb, 0, u64::MAX, &mut |r| seqnos.push(r.meta.seqno)).expect("scan");
    seqnos
}

/// The failure seen after a restart: a replica vBucket whose checkpoint holds seqno 1 while the store holds a
/// higher one (the engine and the store disagree about it). The store refuses that vBucket's batch; the round
/// still writes and fsyncs the other vBuckets (a persist-level durable write among them succeeds once the next
/// round wrote its commit), the bucket
/// keeps taking writes, and the refused replica is emptied and cleared on disk by the next round. It used to
/// fail the round and turn the whole bucket to TMPFAIL until restart.
#[test]
fn a_vbucket_the_store_refuses_does_not_poison_the_bucket() {
    let bucket = bucket();
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let vbuckets = shard_vbuckets(&bucket);
    let (replica, active) = (vbuckets[1], vbuckets[2]);
    let old = settee_store::conformance::record(b"\0old", b"v", 5, false);
    store.write_batch(replica, &[old]).expect("the old copy on disk");
    bucket.set_vbucket_state(replica, settee_engine::VbState::Replica, 0);
    replicate(&bucket, replica, "new", 1);
    let opts =
        WriteOptions { durability: Some(settee_types::DurabilityLevel::PersistToMajority), ..Default::default() };
    let req = StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts };
    let m = bucket.store(active, &DocKey::new(0, b"durable"), req).expect("durable write");
    let outcome = Arc::new(parking_lot::Mutex::new(None));
    let o = outcome.clone();
    bucket.when_sync_write_completes(active, m.seqno, Box::new(move |r| *o.lock() = Some(r)));

    assert_eq!(
        round(&bucket, store.as_ref(), &vbuckets, 0).expect("a refused vBucket is not the store's failure"),
        None
    );
    assert!(!bucket.store_failed());
    assert_eq!(stored_seqnos(store.as_ref(), active), vec![1], "the other vBuckets of the round were written");
    assert_eq!(bucket.stream_info(replica).expect("info").high_seqno, 0, "the replica starts over");
    round(&bucket, store.as_ref(), &vbuckets, 0).expect("the clearing round");
    assert_eq!(*outcome.lock(), Some(Ok(())), "the prepare committed, and its commit is on disk");
    assert_eq!(stored_seqnos(store.as_ref(), active), vec![1, 2], "the prepare's record and the commit's");
    assert_eq!((stored_seqnos(store.as_ref(), replica), store.high_seqno(replica).expect("high")), (vec![], 0));
    replicate(&bucket, replica, "again", 1);
    round(&bucket, store.as_ref(), &vbuckets, 0).expect("the replica persists again");
    assert_eq!(stored_seqnos(store.as_ref(), replica), vec![1]);
}

/// A replica rolled back to zero while a flusher round that drained its old copy is in flight: that round's
/// records land after the rollback, then the new copy (from seqno 1) arrives. The next round clears the store's
/// copy before writing the new one, so nothing is refused and the store holds the new copy alone; the late
/// round never counted as persisted for the new copy. (The rollback used to clear the store at once, so the
/// late round's records survived and seqno 1 was refused, failing the whole bucket.)
#[test]
fn replica_rolled_back_during_a_flusher_round_persists_again_from_zero() {
    let bucket = bucket();
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let vbuckets = shard_vbuckets(&bucket);
    let vb = vbuckets[3];
    bucket.set_vbucket_state(vb, settee_engine::VbState::Replica, 0);
    for seqno in 1..=5 {
        replicate(&bucket, vb, &format!("old-{seqno}"), seqno);
    }
    let in_flight = Part::of(bucket.drain_dirty(vb).expect("the round in flight drains"));
    bucket.reset_vbucket(vb);
    replicate(&bucket, vb, "new", 1);
    let late = VbWrite { vb, records: &in_flight.records, on_disk: &in_flight.on_disk, state: Some(&in_flight.state) };
    store.write_many(&[late]).expect("the round in flight lands");
    bucket.mark_persisted(vb, in_flight.generation, in_flight.state.high_seqno);
    assert_eq!(bucket.persisted_seqno(vb), Some(0));

    round(&bucket, store.as_ref(), &vbuckets, 0).expect("no record is refused");
    assert_eq!(stored_seqnos(store.as_ref(), vb), vec![1], "only the new copy is on disk");
    assert_eq!(bucket.persisted_seqno(vb), Some(1));
    assert!(!bucket.store_failed());
}

/// Only a refusal of one vBucket's data is local: a failed fsync (or write) of the store still fails the round,
/// which makes the flusher stop the whole bucket (TMPFAIL, durable writes ambiguous), because nothing written
/// since the last good fsync may be called durable.
#[test]
fn a_failed_fsync_still_fails_the_round() {
    let dir = std::env::temp_dir().join(format!("settee-flusher-fsync-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let faults = Arc::new(settee_store::FaultInjector::new());
    let config = settee_store::FjallConfig { faults: Some(faults.clone()), ..Default::default() };
    let store: Arc<dyn VbStore> = Arc::new(settee_store::FjallStore::open_with(&dir, config).expect("open"));
    let bucket = bucket();
    let vbuckets = shard_vbuckets(&bucket);
    let req = StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts: WriteOptions::default() };
    bucket.store(vbuckets[0], &DocKey::new(0, b"k"), req).expect("write");
    faults.fail_next_sync();
    assert!(
        round(&bucket, store.as_ref(), &vbuckets, 0).is_err(),
        "a failed fsync is the store's failure, not one vBucket's"
    );
    assert_eq!(bucket.persisted_seqno(vbuckets[0]), Some(0), "nothing counts as persisted");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

fn stored_records(store: &dyn VbStore, vbuckets: &[VbId]) -> usize {
    let mut n = 0;
    for &vb in vbuckets {
        store
            .scan_keys(vb, false, &mut |_| {
                n += 1;
                true
            })
            .expect("scan");
    }
    n
}

/// A backlog three times the round budget goes to disk in several bounded rounds, each resuming where the last
/// stopped, and in the end every item is stored and every vBucket's persisted seqno is its high seqno.
#[test]
fn backlog_is_flushed_in_bounded_rounds() {
    let bucket = bucket();
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let vbuckets = shard_vbuckets(&bucket);
    let value = vec![b'v'; VALUE_BYTES];
    let items = 3 * ROUND_BYTES_TARGET / VALUE_BYTES;
    for i in 0..items {
        // Two items per vBucket, so a vBucket's part of a round is small beside the budget.
        let vb = vbuckets[i / 2];
        let key = format!("k{i}");
        let req =
            StoreRequest { mode: StoreMode::Set, value: &value, flags: 0, expiry: 0, opts: WriteOptions::default() };
        bucket.store(vb, &DocKey::new(0, key.as_bytes()), req).expect("store");
    }

    let per_round_max = ROUND_BYTES_TARGET / VALUE_BYTES + 2;
    let (mut next, mut rounds, mut stored) = (0, 0, 0);
    loop {
        let resume = round(&bucket, store.as_ref(), &vbuckets, next).expect("round");
        rounds += 1;
        let now = stored_records(store.as_ref(), &vbuckets);
        assert!(now - stored <= per_round_max, "round {rounds} wrote {} items", now - stored);
        stored = now;
        match resume {
            Some(at) => next = at,
            None => break,
        }
    }
    assert!(rounds >= 3, "a backlog of three budgets took {rounds} rounds");
    assert_eq!(stored, items);
    for &vb in &vbuckets[..items / 2] {
        let seqnos = bucket.observe_seqno(vb).expect("observe");
        assert_eq!(seqnos.persisted_seqno, 2, "vBucket {vb:?} is persisted up to its high seqno");
    }
    assert!(round(&bucket, store.as_ref(), &vbuckets, next).expect("idle round").is_none());
}

/// `ep_total_persisted` counts the records a round wrote and fsynced: a key written twice before the round counts
/// once, and nothing counts before the fsync.
#[test]
fn persisted_records_are_counted_once_per_key_and_round() {
    let bucket = bucket();
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let vbuckets = shard_vbuckets(&bucket);
    let persisted = || bucket.stats().total_persisted.load(std::sync::atomic::Ordering::Relaxed);
    let set = |key: &[u8]| {
        let req =
            StoreRequest { mode: StoreMode::Set, value: b"1", flags: 0, expiry: 0, opts: WriteOptions::default() };
        bucket.store(vbuckets[0], &DocKey::new(0, key), req).expect("write");
    };
    set(b"a");
    set(b"a");
    set(b"b");
    let written = write_round(&bucket, store.as_ref(), &vbuckets, 0, ROUND_BYTES_TARGET).unwrap().expect("a round");
    assert_eq!(persisted(), 0, "nothing counts before the fsync");
    store.sync().unwrap();
    written.persisted(&bucket);
    assert_eq!(persisted(), 2);
    set(b"a");
    round(&bucket, store.as_ref(), &vbuckets, 0).unwrap();
    assert_eq!(persisted(), 3);
}
