//! Sync writes across a restart, with the real engine, flusher and warmup over an in-memory store: a bucket writes
//! and flushes, then a fresh bucket warms up from the same store, as a restarted node does.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;
use settee_engine::{
    Bucket, BucketConfig, BucketKind, DcpChange, DocKey, EngineError, EvictionPolicy, ItemSnapshot, ReplicaApply,
    StoreMode, StoreRequest, VbState, WriteOptions,
};
use settee_store::{MemoryStore, VbStore};
use settee_types::{DurabilityLevel, FailoverLog, ManualClock, VbId};

use super::flusher::Flusher;
use super::FlushSignal;

/// Shard 0 of the flusher owns the even vBuckets.
const VB: VbId = VbId(0);

pub(crate) fn bucket(replicas: u8) -> Arc<Bucket> {
    let config = BucketConfig {
        name: "r".into(),
        uuid: "0123456789abcdef0123456789abcdef".into(),
        kind: BucketKind::Couchbase,
        ram_quota_bytes: 1 << 30,
        replicas,
        eviction: EvictionPolicy::ValueOnly,
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    Arc::new(Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000))))
}

/// One flusher round over the shard that owns [`VB`].
pub(crate) fn flush(bucket: &Arc<Bucket>, store: &Arc<dyn VbStore>) {
    let flusher = Flusher {
        bucket: bucket.clone(),
        store: store.clone(),
        signals: Arc::new((0..super::FLUSHER_SHARDS).map(|_| FlushSignal::default()).collect()),
        stop: Arc::new(AtomicBool::new(false)),
        shard: 0,
    };
    let vbuckets: Vec<VbId> =
        (0..bucket.num_vbuckets()).step_by(usize::from(super::FLUSHER_SHARDS)).map(VbId).collect();
    let mut next = 0;
    while let Some(resume) = flusher.round(&vbuckets, next).expect("round") {
        next = resume;
    }
}

/// A fresh bucket warmed up from `store`, its vBucket [`VB`] in `state` before warmup ends (as a restarted
/// node's map puts it while warmup runs).
pub(crate) fn restart(store: &Arc<dyn VbStore>, replicas: u8, state: VbState) -> Arc<Bucket> {
    let bucket = bucket(replicas);
    bucket.set_vbucket_state(VB, state, 0);
    bucket.set_warming_up(true);
    super::warmup::run(&bucket, store.as_ref());
    bucket
}

pub(crate) fn key(k: &str) -> Vec<u8> {
    [&[0u8][..], k.as_bytes()].concat()
}

fn item(k: &str, value: &[u8], seqno: u64) -> ItemSnapshot {
    ItemSnapshot {
        key: key(k),
        value: value.to_vec(),
        cas: seqno,
        seqno,
        rev: 1,
        flags: 0,
        expiry: 0,
        datatype: 0,
        deleted: false,
        value_missing: false,
    }
}

fn replica_value(bucket: &Bucket, k: &str) -> Result<Vec<u8>, EngineError> {
    bucket.get_replica(VB, &DocKey::new(0, k.as_bytes()), |i| i.value.to_vec())
}

fn durable_set(bucket: &Bucket, k: &str, value: &[u8], level: DurabilityLevel) -> u64 {
    let opts = WriteOptions { durability: Some(level), ..Default::default() };
    let req = StoreRequest { mode: StoreMode::Set, value, flags: 0, expiry: 0, opts };
    let m = bucket.store(VB, &DocKey::new(0, k.as_bytes()), req).expect("durable write");
    assert!(m.sync_write, "the write waits for its level");
    m.seqno
}

fn active_value(bucket: &Bucket, k: &str) -> Result<Vec<u8>, EngineError> {
    bucket.get(VB, &DocKey::new(0, k.as_bytes()), |i| i.value.to_vec())
}

/// The regression of issue 21 item 5.1 on the replica side: a replica that restarted used to have lost its
/// prepares (they lived in memory only), so the commit of one made it empty the vBucket and stream it again from
/// zero; and its warmup started a history branch of its own, so its stream request named a vbuuid its active
/// never had, and it rolled back to zero anyway. Now the prepare is on disk: the restarted replica holds it, the
/// commit applies, and the replica keeps its active's history, so its stream resumes.
#[test]
fn a_restarted_replica_keeps_its_prepares_and_its_active_history() {
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let replica = bucket(1);
    replica.set_vbucket_state(VB, VbState::Replica, 0);
    let mut active_log = FailoverLog::new(0xA, 0);
    active_log.push(0xB, 1);
    replica.set_failover_log(VB, active_log.clone());
    replica.replica_snapshot(VB, 1, 2).expect("snapshot");
    replica.replica_apply(VB, item("plain", b"1", 1)).expect("mutation");
    let prepare = DcpChange {
        item: item("durable", b"\"prepared\"", 2),
        kind: settee_engine::ChangeKind::Prepare(DurabilityLevel::PersistToMajority),
    };
    replica.replica_apply(VB, prepare).expect("prepare");
    flush(&replica, &store);
    assert_eq!(replica.persisted_seqno(VB), Some(2));

    let replica = restart(&store, 1, VbState::Replica);
    assert_eq!(replica.held_prepares(VB), vec![(2, DurabilityLevel::PersistToMajority)], "the prepare survived");
    let info = replica.stream_info(VB).expect("info");
    assert_eq!((info.high_seqno, &info.failover), (2, &active_log), "no history branch of the replica's own");
    assert_eq!(replica_value(&replica, "durable"), Err(EngineError::NotFound), "a prepare stays invisible");

    replica.replica_snapshot(VB, 3, 3).expect("snapshot");
    let commit = DcpChange::commit(key("durable"), 2, 3);
    assert_eq!(replica.replica_apply(VB, commit), Ok(ReplicaApply::Applied), "the commit finds its prepare");
    assert_eq!(replica_value(&replica, "durable").as_deref(), Ok(&b"\"prepared\""[..]));
    assert_eq!(replica_value(&replica, "plain").as_deref(), Ok(&b"1"[..]));
}

/// An active that restarts with a durable write still pending keeps the prepare (invisible, its key busy) and
/// commits it once its replica acknowledges it again, as the replica's reopened stream does; it used to lose it.
/// The active starts a new history branch at the seqno it came back with.
#[test]
fn a_restarted_active_commits_its_pending_prepare_once_acknowledged() {
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let active = bucket(1);
    active.set_replication_chain(VB, &[Some(2)]);
    let before = active.stream_info(VB).expect("info").failover;
    let seqno = durable_set(&active, "k", b"\"v\"", DurabilityLevel::Majority);
    flush(&active, &store);

    let active = restart(&store, 1, VbState::Active);
    assert_eq!(active.held_prepares(VB), vec![(seqno, DurabilityLevel::Majority)]);
    let after = active.stream_info(VB).expect("info").failover;
    assert_eq!((&after.entries()[1..], after.latest().seqno), (before.entries(), seqno), "a branch at the restart");
    assert_eq!(active_value(&active, "k"), Err(EngineError::NotFound));
    let opts = WriteOptions::default();
    let req = StoreRequest { mode: StoreMode::Set, value: b"other", flags: 0, expiry: 0, opts };
    assert_eq!(active.store(VB, &DocKey::new(0, b"k"), req).err(), Some(EngineError::SyncWriteInProgress));
    active.set_replication_chain(VB, &[Some(2)]);
    active.seqno_acknowledged(VB, 2, seqno);
    assert_eq!(active_value(&active, "k").as_deref(), Ok(&b"\"v\""[..]), "committed after the acknowledgement");
    assert_eq!(active.pending_prepares(VB), 0);
}

/// An aborted prepare stays aborted across a restart: its abort reached the disk after it and replaced it, so
/// warmup does not bring it back.
#[test]
fn an_aborted_prepare_stays_aborted_after_a_restart() {
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let active = bucket(1);
    active.set_replication_chain(VB, &[Some(2)]);
    let seqno = durable_set(&active, "k", b"\"v\"", DurabilityLevel::Majority);
    flush(&active, &store);
    let outcome = Arc::new(Mutex::new(None));
    let o = outcome.clone();
    active.when_sync_write_completes(VB, seqno, Box::new(move |r| *o.lock() = Some(r)));
    assert!(active.abort_prepare(VB, seqno));
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    flush(&active, &store);

    let active = restart(&store, 1, VbState::Active);
    assert!(active.held_prepares(VB).is_empty(), "the aborted prepare did not come back");
    assert_eq!(active.stream_info(VB).expect("info").high_seqno, seqno + 1);
    assert_eq!(active_value(&active, "k"), Err(EngineError::NotFound));
}

/// A committed prepare stays committed across a restart even when its commit's record is gone: a later delete of
/// the key replaced the commit's record and the tombstone purge removed the tombstone, while the prepare's own
/// record stayed. Warmup used to find that lone prepare record and revive the write as pending (its key busy, a
/// ghost commit when a replica next acknowledged it); the vBucket state's `prepares_completed_to` now covers it.
#[test]
fn a_committed_prepare_does_not_come_back_after_its_tombstone_is_purged() {
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let active = bucket(1);
    active.set_replication_chain(VB, &[Some(2)]);
    let seqno = durable_set(&active, "k", b"\"v\"", DurabilityLevel::Majority);
    flush(&active, &store);
    active.seqno_acknowledged(VB, 2, seqno);
    assert_eq!(active_value(&active, "k").as_deref(), Ok(&b"\"v\""[..]), "committed");
    active.delete(VB, &DocKey::new(0, b"k"), WriteOptions::default()).expect("delete");
    flush(&active, &store);
    assert_eq!(store.purge_tombstones(VB, u32::MAX).expect("purge"), 1, "the tombstone went");

    let active = restart(&store, 1, VbState::Active);
    assert!(active.held_prepares(VB).is_empty(), "the committed prepare did not come back");
    assert_eq!(active_value(&active, "k"), Err(EngineError::NotFound));
    let opts = WriteOptions::default();
    let req = StoreRequest { mode: StoreMode::Set, value: b"new", flags: 0, expiry: 0, opts };
    assert!(active.store(VB, &DocKey::new(0, b"k"), req).is_ok(), "the key is not busy");
}

/// A persistent replica rolled back (issue 21 item 5.4) removes from the store the records above the seqno it
/// rolled back to, before it writes anything new, and a restart then finds exactly what it kept, with a history
/// it can resume from.
#[test]
fn a_rolled_back_replica_keeps_on_disk_what_lies_below_and_nothing_above() {
    let store: Arc<dyn VbStore> = Arc::new(MemoryStore::default());
    let replica = bucket(1);
    replica.set_vbucket_state(VB, VbState::Replica, 0);
    let log = FailoverLog::new(0xA, 0);
    replica.set_failover_log(VB, log.clone());
    replica.replica_snapshot(VB, 1, 4).expect("snapshot");
    for (k, seqno) in [("x", 1), ("y", 2), ("a", 3), ("b", 4)] {
        replica.replica_apply(VB, item(k, b"1", seqno)).expect("mutation");
    }
    flush(&replica, &store);
    replica.replica_snapshot(VB, 5, 6).expect("snapshot");
    replica.replica_apply(VB, item("a", b"2", 5)).expect("mutation");
    replica.replica_apply(VB, item("d", b"1", 6)).expect("mutation");
    flush(&replica, &store);

    assert_eq!(replica.rollback_replica(VB, 4), 2, "below a's replaced version at 3");
    flush(&replica, &store);
    let mut seqnos = Vec::new();
    store.scan_seqnos(VB, 0, u64::MAX, &mut |r| seqnos.push(r.meta.seqno)).expect("scan");
    assert_eq!((seqnos, store.high_seqno(VB).expect("high")), (vec![1, 2], 2));
    assert_eq!(replica.persisted_seqno(VB), Some(2));

    let replica = restart(&store, 1, VbState::Replica);
    let info = replica.stream_info(VB).expect("info");
    assert_eq!((info.high_seqno, &info.failover), (2, &log));
    assert_eq!(replica_value(&replica, "y").as_deref(), Ok(&b"1"[..]));
    for gone in ["a", "b", "d"] {
        assert_eq!(replica_value(&replica, gone), Err(EngineError::NotFound), "{gone}");
    }
}
