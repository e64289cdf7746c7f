//! DCP cursors and replica vBuckets driven directly: an active bucket's reads applied to a replica bucket must
//! leave the replica holding exactly what the active holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use settee_types::{ManualClock, VbId};

use crate::{
    Bucket, BucketConfig, BucketKind, DcpRead, DocKey, EngineError, EvictionPolicy, StoreMode, StoreRequest, VbState,
    WriteOptions,
};

const VB: VbId = VbId(5);

fn bucket() -> Bucket {
    let config = BucketConfig {
        name: "b".into(),
        uuid: "00112233445566778899aabbccddeeff".into(),
        kind: BucketKind::Ephemeral,
        ram_quota_bytes: 64 << 20,
        replicas: 1,
        eviction: EvictionPolicy::NoEviction,
        max_ttl: 0,
        flush_enabled: true,
        durability_min_level: None,
    };
    Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000)))
}

fn replica() -> Bucket {
    let b = bucket();
    b.set_vbucket_state(VB, VbState::Replica, 0);
    b
}

fn set(b: &Bucket, key: &str, value: &str) {
    let req = StoreRequest {
        mode: StoreMode::Set,
        value: value.as_bytes(),
        flags: 7,
        expiry: 0,
        opts: WriteOptions::default(),
    };
    b.store(VB, &DocKey::new(0, key.as_bytes()), req).unwrap();
}

fn replica_value(b: &Bucket, key: &str) -> Result<Vec<u8>, EngineError> {
    b.get_replica(VB, &DocKey::new(0, key.as_bytes()), |i| i.body().0.to_vec())
}

/// Reads everything the cursor has not seen and applies it to the replica; returns (from_memory, items) per
/// snapshot.
pub(crate) fn pump(active: &Bucket, cursor: u64, position: &mut u64, replica: &Bucket) -> Vec<(bool, usize)> {
    let mut snapshots = Vec::new();
    loop {
        match active.read_cursor(VB, cursor, *position).unwrap() {
            DcpRead::UpToDate => return snapshots,
            DcpRead::FromDisk { .. } => panic!("an ephemeral bucket has no disk"),
            DcpRead::Snapshot(s) => {
                replica.replica_snapshot(VB, s.start, s.end).unwrap();
                snapshots.push((s.from_memory, s.items.len()));
                for change in s.items {
                    let seqno = change.item.seqno;
                    assert!(seqno > *position && seqno <= s.end, "item outside its snapshot");
                    assert_eq!(replica.replica_apply(VB, change).unwrap(), crate::ReplicaApply::Applied);
                }
                *position = s.end;
            }
        }
    }
}

#[test]
fn a_backfill_then_the_change_log_bring_a_replica_level_with_its_active() {
    let (active, replica) = (bucket(), replica());
    set(&active, "a", "1");
    set(&active, "b", "1");
    set(&active, "a", "2");
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    assert_eq!(pump(&active, cursor, &mut position, &replica), vec![(false, 2)], "backfill: latest of a and b");
    set(&active, "c", "1");
    set(&active, "c", "2");
    active.delete(VB, &DocKey::new(0, b"b"), WriteOptions::default()).unwrap();
    assert_eq!(pump(&active, cursor, &mut position, &replica), vec![(true, 2)], "memory: c deduplicated, b deleted");
    assert_eq!(replica_value(&replica, "a").unwrap(), b"2");
    assert_eq!(replica_value(&replica, "c").unwrap(), b"2");
    assert_eq!(replica_value(&replica, "b"), Err(EngineError::NotFound));
    let (a, r) = (active.stream_info(VB).unwrap(), replica.stream_info(VB).unwrap());
    assert_eq!(a.high_seqno, r.high_seqno, "the replica ends at the active's seqno");
    assert_eq!(active.curr_items(), replica.curr_items());
}

#[test]
fn the_change_log_wakes_its_reader_once_per_batch() {
    let active = bucket();
    let wakeups = Arc::new(AtomicUsize::new(0));
    let w = wakeups.clone();
    active.set_change_notifier(Arc::new(move |vb| {
        assert_eq!(vb, VB);
        w.fetch_add(1, Ordering::Relaxed);
    }));
    let cursor = active.open_cursor(VB, 0).unwrap();
    set(&active, "a", "1");
    set(&active, "b", "1");
    assert_eq!(wakeups.load(Ordering::Relaxed), 1);
    let mut position = 0;
    pump(&active, cursor, &mut position, &replica());
    set(&active, "c", "1");
    assert_eq!(wakeups.load(Ordering::Relaxed), 2);
}

#[test]
fn replicas_refuse_client_writes_and_out_of_order_seqnos() {
    let replica = replica();
    let req = StoreRequest { mode: StoreMode::Set, value: b"x", flags: 0, expiry: 0, opts: WriteOptions::default() };
    assert_eq!(replica.store(VB, &DocKey::new(0, b"k"), req), Err(EngineError::NotMyVbucket));
    let active = bucket();
    set(&active, "k", "v");
    let cursor = active.open_cursor(VB, 0).unwrap();
    let DcpRead::Snapshot(s) = active.read_cursor(VB, cursor, 0).unwrap() else { panic!("expected a snapshot") };
    let item = s.items.into_iter().next().unwrap();
    assert!(replica.replica_apply(VB, item.clone()).is_err(), "no snapshot marker yet");
    replica.replica_snapshot(VB, 1, 1).unwrap();
    replica.replica_apply(VB, item.clone()).unwrap();
    assert!(replica.replica_apply(VB, item).is_err(), "a seqno at or below the high seqno");
    assert_eq!(active.get_replica(VB, &DocKey::new(0, b"k"), |_| ()), Err(EngineError::NotMyVbucket));
}

#[test]
fn a_promoted_replica_takes_writes_with_a_new_history_and_ends_old_cursors() {
    let (active, replica) = (bucket(), replica());
    set(&active, "k", "1");
    let cursor = active.open_cursor(VB, 0).unwrap();
    pump(&active, cursor, &mut 0, &replica);
    let log = active.stream_info(VB).unwrap().failover;
    let old_uuid = log.latest().uuid;
    replica.set_failover_log(VB, log);
    replica.set_vbucket_state(VB, VbState::Active, old_uuid ^ 1);
    set(&replica, "k", "2");
    let info = replica.stream_info(VB).unwrap();
    assert_eq!(info.high_seqno, 2);
    let branches: Vec<(u64, u64)> = info.failover.entries().iter().map(|e| (e.uuid, e.seqno)).collect();
    assert_eq!(branches, vec![(old_uuid ^ 1, 1), (old_uuid, 0)], "promotion adds a branch at the high seqno");
    active.set_vbucket_state(VB, VbState::Replica, 0);
    assert_eq!(active.read_cursor(VB, cursor, 1).unwrap_err(), EngineError::NotMyVbucket);
    active.reset_vbucket(VB);
    assert_eq!(active.stream_info(VB).unwrap().high_seqno, 0);
    assert_eq!(active.curr_items(), 0);
}

/// A replica whose snapshot ends on changes its stream does not carry (an abort whose prepare the stream never
/// sent) still reaches the snapshot's end through SEQNO_ADVANCED, so a takeover waiting for the active's seqno
/// ends; an advance outside the open snapshot or not above the high seqno is refused.
#[test]
fn seqno_advanced_brings_a_replica_to_the_end_of_its_snapshot() {
    let replica = replica();
    replica.replica_snapshot(VB, 1, 3).unwrap();
    let item = |seqno| crate::ItemSnapshot {
        key: b"\0k".to_vec(),
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
    replica.replica_apply(VB, item(1)).unwrap();
    assert!(replica.replica_seqno_advanced(VB, 4).is_err(), "beyond the snapshot");
    replica.replica_seqno_advanced(VB, 3).unwrap();
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, 3);
    assert!(replica.replica_seqno_advanced(VB, 3).is_err(), "not above the high seqno");
    replica.replica_snapshot(VB, 4, 4).unwrap();
    replica.replica_apply(VB, item(4)).unwrap();
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, 4);
}

/// While warmup loads the bucket, a replica vBucket takes no snapshot, change or seqno advance (TMPFAIL): its
/// seqnos are not known yet, and a change applied before warmup loads the vBucket would carry a seqno the store
/// already holds. Once warmup is done the same calls succeed.
#[test]
fn replica_stream_before_warmup_is_refused() {
    let replica = replica();
    replica.set_warming_up(true);
    assert_eq!(replica.replica_snapshot(VB, 1, 1), Err(EngineError::TempFail));
    assert_eq!(replica.replica_seqno_advanced(VB, 1), Err(EngineError::TempFail));
    let active = bucket();
    set(&active, "k", "v");
    let cursor = active.open_cursor(VB, 0).unwrap();
    let DcpRead::Snapshot(s) = active.read_cursor(VB, cursor, 0).unwrap() else { panic!("expected a snapshot") };
    let item = s.items.into_iter().next().unwrap();
    assert_eq!(replica.replica_apply(VB, item.clone()), Err(EngineError::TempFail));
    replica.set_warming_up(false);
    replica.replica_snapshot(VB, 1, 1).unwrap();
    assert_eq!(replica.replica_apply(VB, item), Ok(crate::ReplicaApply::Applied));
}
