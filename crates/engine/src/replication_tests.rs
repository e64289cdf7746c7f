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
        conflict_resolution: Default::default(),
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
    pump_in_pieces(active, cursor, position, replica, usize::MAX)
}

/// As `pump`, each read limited to about `limit_bytes`.
fn pump_in_pieces(
    active: &Bucket,
    cursor: u64,
    position: &mut u64,
    replica: &Bucket,
    limit_bytes: usize,
) -> Vec<(bool, usize)> {
    let mut snapshots = Vec::new();
    loop {
        match active.read_cursor(VB, cursor, *position, limit_bytes).unwrap() {
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
    let DcpRead::Snapshot(s) = active.read_cursor(VB, cursor, 0, usize::MAX).unwrap() else {
        panic!("expected a snapshot")
    };
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
    assert_eq!(active.read_cursor(VB, cursor, 1, usize::MAX).unwrap_err(), EngineError::NotMyVbucket);
    active.reset_vbucket(VB);
    assert_eq!(active.stream_info(VB).unwrap().high_seqno, 0);
    assert_eq!(active.curr_items(), 0);
}

/// 100-byte values, so a limit of `n * 200` bytes reads about `n` documents.
fn set_sized(b: &Bucket, key: &str, fill: char) {
    set(b, key, &fill.to_string().repeat(100));
}

#[test]
fn item_counts_keep_replica_copies_apart_from_active_items() {
    // Proves curr_items as Couchbase reports it counts active vBuckets only: a replica's items are counted as
    // replica items, and the total covers both.
    let (active, replica) = (bucket(), replica());
    for i in 0..5 {
        set(&active, &format!("k{i}"), "v");
    }
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    pump_in_pieces(&active, cursor, &mut position, &replica, 1 << 20);
    assert_eq!(active.item_counts(), crate::ItemCounts { active: 5, replica: 0, pending: 0, total: 5 });
    assert_eq!(replica.item_counts(), crate::ItemCounts { active: 0, replica: 5, pending: 0, total: 5 });
    let summary = replica.summary();
    assert_eq!((summary.vbuckets.replica, summary.vbuckets.active), (1, u64::from(replica.num_vbuckets()) - 1));
}

#[test]
fn a_large_backfill_is_read_in_bounded_pieces_that_together_hold_everything() {
    // Regression (issue 17): a backfill copied a whole vBucket at once, so every stalled DCP consumer held a vBucket
    // in memory. Proves a backfill read with a 1,000-byte limit comes in several disk snapshots of a few documents
    // each, in seqno order, and that the replica ends up with exactly what the active holds.
    let (active, replica) = (bucket(), replica());
    for i in 0..60 {
        set_sized(&active, &format!("k{i}"), 'a');
    }
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    let snapshots = pump_in_pieces(&active, cursor, &mut position, &replica, 1_000);
    assert!(snapshots.len() >= 10, "read in pieces: {snapshots:?}");
    assert!(snapshots.iter().all(|(from_memory, items)| !from_memory && *items <= 7), "{snapshots:?}");
    assert_eq!(snapshots.iter().map(|(_, n)| n).sum::<usize>(), 60);
    assert_eq!(replica.curr_items(), 60);
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, active.stream_info(VB).unwrap().high_seqno);
}

#[test]
fn documents_changed_during_a_piecewise_backfill_arrive_at_their_new_seqno() {
    // Proves the one liberty a piecewise backfill takes: a document changed between two pieces is skipped by the
    // backfill and sent at its new seqno afterwards, so the replica still ends with every latest value, whether the
    // change hit a piece already sent or one still to come.
    let (active, replica) = (bucket(), replica());
    for i in 0..30 {
        set_sized(&active, &format!("k{i}"), 'a');
    }
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    let DcpRead::Snapshot(first) = active.read_cursor(VB, cursor, position, 1_000).unwrap() else { panic!("a piece") };
    assert!(first.end < 30 && !first.from_memory);
    replica.replica_snapshot(VB, first.start, first.end).unwrap();
    for change in first.items {
        replica.replica_apply(VB, change).unwrap();
    }
    position = first.end;
    set_sized(&active, "k0", 'b'); // already sent
    set_sized(&active, "k29", 'c'); // not yet sent
    pump_in_pieces(&active, cursor, &mut position, &replica, 1_000);
    assert_eq!(replica_value(&replica, "k0").unwrap(), "b".repeat(100).as_bytes());
    assert_eq!(replica_value(&replica, "k29").unwrap(), "c".repeat(100).as_bytes());
    assert_eq!(replica.curr_items(), 30);
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, active.stream_info(VB).unwrap().high_seqno);
}

#[test]
fn a_long_change_log_is_read_in_bounded_pieces_too() {
    // Proves the memory path is bounded the same way: 40 changes read with a small limit arrive as several memory
    // snapshots, and the replica converges.
    let (active, replica) = (bucket(), replica());
    let cursor = active.open_cursor(VB, 0).unwrap();
    for i in 0..40 {
        set_sized(&active, &format!("m{i}"), 'a');
    }
    let mut position = 0;
    let snapshots = pump_in_pieces(&active, cursor, &mut position, &replica, 1_000);
    assert!(snapshots.len() >= 5 && snapshots.iter().all(|(from_memory, _)| *from_memory), "{snapshots:?}");
    assert_eq!(replica.curr_items(), 40);
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
    let DcpRead::Snapshot(s) = active.read_cursor(VB, cursor, 0, usize::MAX).unwrap() else {
        panic!("expected a snapshot")
    };
    let item = s.items.into_iter().next().unwrap();
    assert_eq!(replica.replica_apply(VB, item.clone()), Err(EngineError::TempFail));
    replica.set_warming_up(false);
    replica.replica_snapshot(VB, 1, 1).unwrap();
    assert_eq!(replica.replica_apply(VB, item), Ok(crate::ReplicaApply::Applied));
}

/// The regression of issue 21 item 5.3: a replica that held a prepare and missed its abort (its stream was down
/// when the active aborted it) used to keep the prepare when its new stream was served by a backfill, which reads
/// the hash table and knew nothing of aborts; promoted, it would have committed a write its active had aborted.
/// The backfill now carries the abort, and the replica drops the prepare.
#[test]
fn a_backfill_carries_the_abort_of_a_prepare_the_replica_holds() {
    let (active, replica) = (bucket(), replica());
    active.set_replication_chain(VB, &[Some(2)]);
    let opts = WriteOptions { durability: Some(settee_types::DurabilityLevel::Majority), ..Default::default() };
    let req = StoreRequest { mode: StoreMode::Set, value: b"\"v\"", flags: 0, expiry: 0, opts };
    let m = active.store(VB, &DocKey::new(0, b"k"), req).unwrap();
    assert!(m.sync_write);
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    pump(&active, cursor, &mut position, &replica);
    assert_eq!(replica.held_prepares(VB).len(), 1, "the replica holds the prepare");
    active.close_cursor(VB, cursor);

    assert!(active.abort_prepare(VB, m.seqno), "aborted while the replica's stream is down");
    set(&active, "other", "1");
    let cursor = active.open_cursor(VB, position).unwrap();
    let snapshots = pump(&active, cursor, &mut position, &replica);
    assert!(snapshots.iter().all(|(from_memory, _)| !from_memory), "served by a backfill: {snapshots:?}");
    assert!(replica.held_prepares(VB).is_empty(), "the backfill carried the abort");
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, active.stream_info(VB).unwrap().high_seqno);
    active.set_vbucket_state(VB, VbState::Replica, 0);
    replica.set_vbucket_state(VB, VbState::Active, 9);
    assert_eq!(replica.get(VB, &DocKey::new(0, b"k"), |_| ()), Err(EngineError::NotFound), "nothing to commit");
}

/// The regression of issue 21 item 5.4: a replica told to roll back used to empty its vBucket and copy it again
/// from zero. Now it rolls back to just below the oldest version that its writes above the named seqno replaced
/// (here: the producer names 4, `a`'s version at 3 was replaced at 5, so it goes back to 2), keeps what lies
/// there, and a stream from there leaves it holding exactly what its new active holds.
#[test]
fn a_replica_told_to_roll_back_keeps_what_lies_below_and_resumes() {
    let (old_active, replica, survivor) = (bucket(), replica(), replica());
    for (key, value) in [("x", "1"), ("y", "1"), ("a", "1"), ("b", "1")] {
        set(&old_active, key, value);
    }
    let cursor = old_active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    pump(&old_active, cursor, &mut position, &replica);
    let mut survivor_position = 0;
    let survivor_cursor = old_active.open_cursor(VB, 0).unwrap();
    pump(&old_active, survivor_cursor, &mut survivor_position, &survivor);
    // Writes only the replica receives before the old active fails.
    set(&old_active, "a", "2");
    set(&old_active, "d", "1");
    pump(&old_active, cursor, &mut position, &replica);
    let old_log = old_active.stream_info(VB).unwrap().failover;
    replica.set_failover_log(VB, old_log.clone());
    survivor.set_failover_log(VB, old_log.clone());
    survivor.set_vbucket_state(VB, VbState::Active, 0xcafe);
    set(&survivor, "e", "1");

    let info = survivor.stream_info(VB).unwrap();
    let start = settee_types::StreamStart::new(old_log.latest().uuid, 6, 6, 6);
    let asked = info.failover.rollback_point(start, info.high_seqno, info.purge_seqno).expect("a rollback");
    assert_eq!(asked, 4, "the histories agree up to the survivor's promotion");
    assert_eq!(replica.rollback_replica(VB, asked), 2, "below a's replaced version at 3");
    assert_eq!(replica_value(&replica, "x").unwrap(), b"1", "what lies below stays");
    assert_eq!(replica_value(&replica, "d"), Err(EngineError::NotFound), "what lies above goes");
    let rolled = replica.stream_info(VB).unwrap();
    assert_eq!((rolled.high_seqno, rolled.failover.latest().uuid), (2, old_log.latest().uuid));
    let resume = settee_types::StreamStart::new(rolled.failover.latest().uuid, 2, 2, 2);
    assert_eq!(info.failover.rollback_point(resume, info.high_seqno, info.purge_seqno), None, "it may resume");

    let cursor = survivor.open_cursor(VB, 2).unwrap();
    let mut position = 2;
    pump(&survivor, cursor, &mut position, &replica);
    for (key, value) in [("x", "1"), ("y", "1"), ("a", "1"), ("b", "1"), ("e", "1")] {
        assert_eq!(replica_value(&replica, key).unwrap(), value.as_bytes(), "{key}");
    }
    assert_eq!(replica_value(&replica, "d"), Err(EngineError::NotFound));
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, survivor.stream_info(VB).unwrap().high_seqno);
    assert_eq!(replica.curr_items(), survivor.curr_items());
}

/// Regression (server groups, the Python SDK's `lookup_in_any_replica` from a group holding only a replica: every
/// attempt got NOT_MY_VBUCKET, the handler refusing any replica-read lookup): a sub-document lookup with the
/// replica-read flag is served by a replica vBucket, as GET_REPLICA is, and refused by the active; a plain lookup
/// still needs the active. Fails without the fix (the engine ran every lookup on the active only).
#[test]
fn replica_read_lookups_are_served_by_replica_vbuckets_only() {
    let active = bucket();
    set(&active, "k", r#"{"batch":7}"#);
    let replica = replica();
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    pump(&active, cursor, &mut position, &replica);
    let spec = [settee_doc::LookupSpec { opcode: 0xc5, flags: 0, path: b"batch" }];
    let flagged = crate::DocFlags(crate::DocFlags::REPLICA_READ);
    let key = DocKey::new(0, b"k");
    let got = replica.lookup_in(VB, &key, &spec, flagged).expect("served by the replica");
    assert_eq!(got.results[0].value, b"7".to_vec());
    assert_eq!(active.lookup_in(VB, &key, &spec, flagged), Err(EngineError::NotMyVbucket));
    assert_eq!(replica.lookup_in(VB, &key, &spec, crate::DocFlags::default()), Err(EngineError::NotMyVbucket));
    assert_eq!(replica.lookup_in(VB, &DocKey::new(0, b"nope"), &spec, flagged), Err(EngineError::NotFound));
}
