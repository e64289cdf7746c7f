//! Sync writes driven directly: prepares and their visibility, commits by the replicas' acknowledgements, aborts,
//! the per-level persistence rules, the replica side fed by an active's cursor, and promotion.

use std::sync::Arc;

use parking_lot::Mutex;
use settee_types::{DurabilityLevel, ManualClock, VbId};

use crate::replication_tests::pump;
use crate::{
    ArithmeticOp, ArithmeticRequest, Bucket, BucketConfig, BucketKind, ChangeKind, DcpChange, DcpRead, DocKey,
    EngineError, EvictionPolicy, MutationResult, ReplicaApply, StoreMode, StoreRequest, VbState, WriteOptions,
};

const VB: VbId = VbId(5);
const MAJORITY: Option<DurabilityLevel> = Some(DurabilityLevel::Majority);

fn bucket(kind: BucketKind, replicas: u8) -> Bucket {
    let config = BucketConfig {
        name: "s".into(),
        uuid: "00112233445566778899aabbccddeeff".into(),
        kind,
        ram_quota_bytes: 64 << 20,
        replicas,
        eviction: if kind == BucketKind::Ephemeral { EvictionPolicy::NoEviction } else { EvictionPolicy::ValueOnly },
        max_ttl: 0,
        flush_enabled: true,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    Bucket::new(config, Arc::new(ManualClock::new(1_700_000_000)))
}

/// An active vBucket with one replica configured, on node 7.
fn active_with_replica(kind: BucketKind) -> Bucket {
    let b = bucket(kind, 1);
    b.set_replication_chain(VB, &[Some(7)]);
    b
}

fn write(
    b: &Bucket,
    key: &str,
    value: &str,
    durability: Option<DurabilityLevel>,
) -> Result<MutationResult, EngineError> {
    let opts = WriteOptions { durability, ..Default::default() };
    let req = StoreRequest { mode: StoreMode::Set, value: value.as_bytes(), flags: 0, expiry: 0, opts };
    b.store(VB, &DocKey::new(0, key.as_bytes()), req)
}

fn read(b: &Bucket, key: &str) -> Result<Vec<u8>, EngineError> {
    b.get(VB, &DocKey::new(0, key.as_bytes()), |i| i.body().0.to_vec())
}

/// Registers a waiter for the write and returns the slot its outcome lands in.
fn wait(b: &Bucket, m: &MutationResult) -> Arc<Mutex<Option<Result<(), EngineError>>>> {
    let outcome = Arc::new(Mutex::new(None));
    let o = outcome.clone();
    b.when_sync_write_completes(m.vb, m.seqno, Box::new(move |r| *o.lock() = Some(r)));
    outcome
}

/// Flushes the vBucket as the flusher would: drain, then mark what was drained persisted.
fn flush(b: &Bucket) {
    if let Some(batch) = b.drain_dirty(VB) {
        b.mark_persisted(VB, batch.generation, batch.up_to);
    }
}

/// A pending prepare is invisible to readers (GET, sub-document lookups) and holds its key: every other write of
/// it gets SYNC_WRITE_IN_PROGRESS, durable or not.
#[test]
fn a_pending_prepare_is_invisible_and_holds_its_key() {
    let b = active_with_replica(BucketKind::Ephemeral);
    write(&b, "k", "\"old\"", None).unwrap();
    let m = write(&b, "k", "\"new\"", MAJORITY).unwrap();
    assert!(m.sync_write);
    assert_eq!(read(&b, "k").unwrap(), b"\"old\"");
    let spec = settee_doc::LookupSpec { opcode: 0x00, flags: 0, path: b"" };
    let looked = b.lookup_in(VB, &DocKey::new(0, b"k"), &[spec], crate::DocFlags::default()).unwrap();
    assert_eq!(looked.results[0].value, b"\"old\"");
    assert_eq!(write(&b, "k", "x", None), Err(EngineError::SyncWriteInProgress));
    assert_eq!(write(&b, "k", "x", MAJORITY), Err(EngineError::SyncWriteInProgress));
    assert_eq!(b.delete(VB, &DocKey::new(0, b"k"), WriteOptions::default()), Err(EngineError::SyncWriteInProgress));
    assert_eq!(b.touch(VB, &DocKey::new(0, b"k"), 0, |_| ()).unwrap_err(), EngineError::SyncWriteInProgress);
    // A new key's prepare is just as invisible.
    write(&b, "fresh", "1", MAJORITY).unwrap();
    assert_eq!(read(&b, "fresh"), Err(EngineError::NotFound));
    assert_eq!(b.pending_prepares(VB), 2);
}

/// With one replica (two copies) majority commits on the acknowledgement of node 7, the chain's replica; an
/// acknowledgement from another node, or below the prepare's seqno, does not count. The committed document
/// keeps the prepare's CAS and takes the next seqno.
#[test]
fn an_acknowledgement_from_the_chain_commits() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    b.seqno_acknowledged(VB, 8, m.seqno);
    b.seqno_acknowledged(VB, 7, m.seqno - 1);
    assert_eq!(*outcome.lock(), None);
    assert_eq!(read(&b, "k"), Err(EngineError::NotFound));
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(*outcome.lock(), Some(Ok(())));
    let (cas, seqno) = b.get(VB, &DocKey::new(0, b"k"), |i| (i.cas, i.seqno)).unwrap();
    assert_eq!((cas, seqno), (m.cas, m.seqno + 1));
    assert_eq!(b.pending_prepares(VB), 0);
    assert!(write(&b, "k", "w", None).is_ok(), "the key is free again");
}

/// Two replicas make three copies: a majority is the active and one replica, either of them.
#[test]
fn two_replicas_need_one_acknowledgement() {
    let b = bucket(BucketKind::Ephemeral, 2);
    b.set_replication_chain(VB, &[Some(2), Some(3)]);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    b.seqno_acknowledged(VB, 3, m.seqno);
    assert_eq!(*outcome.lock(), Some(Ok(())));
    assert_eq!(read(&b, "k").unwrap(), b"v");
}

/// A durable write needs a majority of the configured copies to exist: the active plus the `Some` entries of the
/// chain (none until a chain is set). Three replicas make durability impossible, as in Couchbase.
#[test]
fn durability_impossible_without_a_majority_of_copies() {
    let b = bucket(BucketKind::Ephemeral, 1);
    assert_eq!(write(&b, "k", "v", MAJORITY), Err(EngineError::DurabilityImpossible), "no chain known yet");
    b.set_replication_chain(VB, &[None]);
    assert_eq!(write(&b, "k", "v", MAJORITY), Err(EngineError::DurabilityImpossible));
    assert!(write(&b, "k", "v", None).is_ok(), "plain writes do not care");
    let b = bucket(BucketKind::Ephemeral, 2);
    b.set_replication_chain(VB, &[None, None]);
    assert_eq!(write(&b, "k", "v", MAJORITY), Err(EngineError::DurabilityImpossible));
    b.set_replication_chain(VB, &[None, Some(3)]);
    assert!(write(&b, "k", "v", MAJORITY).is_ok(), "two copies of three are a majority");
    let b = bucket(BucketKind::Ephemeral, 3);
    b.set_replication_chain(VB, &[Some(1), Some(2), Some(3)]);
    assert_eq!(write(&b, "k", "v", MAJORITY), Err(EngineError::DurabilityImpossible));
    let b = bucket(BucketKind::Ephemeral, 0);
    assert!(!write(&b, "k", "v", MAJORITY).unwrap().sync_write, "no replicas: complete at once");
}

/// Aborting a prepare (its writer timed out) tells the waiter the outcome is ambiguous, leaves the previous
/// value in place and frees the key; an abort takes a seqno. A second abort, or one of a committed prepare, does
/// nothing.
#[test]
fn abort_frees_the_key() {
    let b = active_with_replica(BucketKind::Ephemeral);
    write(&b, "k", "old", None).unwrap();
    let m = write(&b, "k", "new", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    assert!(b.abort_prepare(VB, m.seqno));
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    assert_eq!(read(&b, "k").unwrap(), b"old");
    assert_eq!(b.vbucket(VB).unwrap().high_seqno(), m.seqno + 1, "the abort took a seqno");
    assert!(!b.abort_prepare(VB, m.seqno));
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(read(&b, "k").unwrap(), b"old", "a late acknowledgement commits nothing");
    let m = write(&b, "k", "newer", MAJORITY).unwrap();
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert!(!b.abort_prepare(VB, m.seqno), "already committed");
    assert_eq!(read(&b, "k").unwrap(), b"newer");
}

/// A satisfied prepare never commits before an earlier one of the same vBucket; aborting the earlier one lets it.
#[test]
fn prepares_commit_in_seqno_order() {
    let b = active_with_replica(BucketKind::Couchbase);
    let first = write(&b, "a", "1", Some(DurabilityLevel::PersistToMajority)).unwrap();
    let second = write(&b, "b", "1", MAJORITY).unwrap();
    let (o1, o2) = (wait(&b, &first), wait(&b, &second));
    b.seqno_acknowledged(VB, 7, second.seqno);
    assert!(o1.lock().is_none() && o2.lock().is_none(), "the first still waits for the active's disk");
    assert_eq!(read(&b, "b"), Err(EngineError::NotFound));
    assert!(b.abort_prepare(VB, first.seqno));
    assert_eq!(*o2.lock(), Some(Ok(())));
    assert_eq!(read(&b, "b").unwrap(), b"1");
}

/// The levels' persistence rules with one replica: majorityAndPersistActive needs the replica's acknowledgement
/// and the active's persistence before it commits, persistToMajority needs both copies persisted (the replica's
/// acknowledgement stands for its persistence); the prepare commits (becomes readable) only once the round that
/// wrote its record is on disk, and the writer hears of success only once the next round put the commit there
/// too. Majority ignores the disk.
#[test]
fn per_level_persistence_rules() {
    let b = active_with_replica(BucketKind::Couchbase);
    for level in [DurabilityLevel::MajorityAndPersistActive, DurabilityLevel::PersistToMajority] {
        let key = format!("{level:?}");
        let m = write(&b, &key, "v", Some(level)).unwrap();
        let outcome = wait(&b, &m);
        b.seqno_acknowledged(VB, 7, m.seqno);
        assert_eq!(read(&b, &key), Err(EngineError::NotFound), "{level:?}: no flusher round has started");
        let batch = b.drain_dirty(VB).expect("a round to take");
        assert_eq!(read(&b, &key), Err(EngineError::NotFound), "{level:?}: the prepare is not on disk yet");
        b.mark_persisted(VB, batch.generation, batch.up_to);
        assert_eq!(read(&b, &key).unwrap(), b"v", "{level:?}: committed once the prepare is on disk");
        let batch = b.drain_dirty(VB).expect("the commit's round");
        let written: Vec<_> = batch
            .items
            .iter()
            .filter(|i| !crate::is_sync_write_key(&i.key))
            .map(|i| (i.key.clone(), i.value.clone()))
            .collect();
        assert_eq!(written, [(DocKey::new(0, key.as_bytes()).encoded().to_vec(), b"v".to_vec())]);
        assert_eq!(*outcome.lock(), None, "{level:?}: the commit is not on disk yet");
        b.mark_persisted(VB, batch.generation, batch.up_to);
        assert_eq!(*outcome.lock(), Some(Ok(())));
    }
    // The active's persistence alone is not a majority of two copies.
    let m = write(&b, "p", "v", Some(DurabilityLevel::PersistToMajority)).unwrap();
    flush(&b);
    assert_eq!(read(&b, "p"), Err(EngineError::NotFound));
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(read(&b, "p").unwrap(), b"v");
    // Majority commits on the acknowledgement without any flush.
    let m = write(&b, "m", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(*outcome.lock(), Some(Ok(())));
}

/// A persist-level prepare commits once its round is on disk; when the round that carries its commit then fails,
/// its writer gets an ambiguous outcome, never success; a write queued behind that prepare without a persist level
/// is answered when the prepare commits.
#[test]
fn a_round_that_fails_after_committing_is_ambiguous() {
    let b = bucket(BucketKind::Couchbase, 0);
    let durable = write(&b, "d", "v", Some(DurabilityLevel::PersistToMajority)).unwrap();
    let behind = write(&b, "m", "v", MAJORITY).unwrap();
    let (o1, o2) = (wait(&b, &durable), wait(&b, &behind));
    assert!(o1.lock().is_none() && o2.lock().is_none(), "both wait for the active's disk");
    let batch = b.drain_dirty(VB).expect("the prepare's round");
    assert!(o2.lock().is_none(), "the prepare before it is not on disk yet");
    b.mark_persisted(VB, batch.generation, batch.up_to);
    assert_eq!(*o2.lock(), Some(Ok(())), "the majority write no longer waits once the prepare before it committed");
    assert!(b.drain_dirty(VB).is_some(), "the commit's round");
    assert_eq!(*o1.lock(), None);
    b.fail_persistence();
    assert_eq!(*o1.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
}

/// A writer that registers after its prepare completed still learns the outcome; an unknown prepare is
/// ambiguous, never a success.
#[test]
fn a_late_waiter_learns_the_outcome() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(*wait(&b, &m).lock(), Some(Ok(())));
    let unknown = MutationResult { seqno: 999, ..m };
    assert_eq!(*wait(&b, &unknown).lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
}

/// Every durable mutation is a prepare: deletions, counters and appends stay invisible until committed.
#[test]
fn every_durable_mutation_is_a_prepare() {
    let b = active_with_replica(BucketKind::Ephemeral);
    write(&b, "k", "1", None).unwrap();
    let durable = WriteOptions { durability: MAJORITY, ..Default::default() };
    let key = DocKey::new(0, b"k");
    let del = b.delete(VB, &key, durable).unwrap();
    assert!(del.sync_write);
    assert_eq!(read(&b, "k").unwrap(), b"1", "the durable delete is pending");
    b.seqno_acknowledged(VB, 7, del.seqno);
    assert_eq!(read(&b, "k"), Err(EngineError::NotFound));
    let req = ArithmeticRequest { op: ArithmeticOp::Increment, delta: 5, initial: 10, expiry: 0, opts: durable };
    let counted = b.arithmetic(VB, &key, req).unwrap();
    assert!(counted.mutation.sync_write);
    assert_eq!(read(&b, "k"), Err(EngineError::NotFound));
    b.seqno_acknowledged(VB, 7, counted.mutation.seqno);
    assert_eq!(read(&b, "k").unwrap(), b"10");
    let appended = b.concat(VB, &key, b"0", false, durable).unwrap();
    assert_eq!(read(&b, "k").unwrap(), b"10");
    b.seqno_acknowledged(VB, 7, appended.seqno);
    assert_eq!(read(&b, "k").unwrap(), b"100");
}

/// What a cursor with sync writes reads: a prepare while it is pending, then a commit naming it; a prepare and
/// its commit read together come as one mutation (the reader never saw the prepare); an abort follows a prepare
/// the reader has, and is left out otherwise.
#[test]
fn cursors_read_prepares_commits_and_aborts() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let cursor = b.open_cursor(VB, 0).unwrap();
    let kinds = |b: &Bucket, position: &mut u64| -> Vec<(ChangeKind, u64)> {
        let DcpRead::Snapshot(s) = b.read_cursor(VB, cursor, *position, usize::MAX).unwrap() else {
            panic!("a snapshot")
        };
        *position = s.end;
        s.items.iter().map(|c| (c.kind, c.item.seqno)).collect()
    };
    let mut position = 0;
    write(&b, "a", "0", None).unwrap();
    kinds(&b, &mut position);
    let p = write(&b, "a", "1", MAJORITY).unwrap();
    assert_eq!(kinds(&b, &mut position), vec![(ChangeKind::Prepare(DurabilityLevel::Majority), p.seqno)]);
    b.seqno_acknowledged(VB, 7, p.seqno);
    assert_eq!(kinds(&b, &mut position), vec![(ChangeKind::Commit { prepared_seqno: p.seqno }, p.seqno + 1)]);
    let q = write(&b, "a", "2", MAJORITY).unwrap();
    b.seqno_acknowledged(VB, 7, q.seqno);
    assert_eq!(kinds(&b, &mut position), vec![(ChangeKind::Mutation, q.seqno + 1)]);
    let r = write(&b, "a", "3", MAJORITY).unwrap();
    assert_eq!(kinds(&b, &mut position).len(), 1);
    b.abort_prepare(VB, r.seqno);
    assert_eq!(kinds(&b, &mut position), vec![(ChangeKind::Abort { prepared_seqno: r.seqno }, r.seqno + 1)]);
    let s = write(&b, "a", "4", MAJORITY).unwrap();
    b.abort_prepare(VB, s.seqno);
    assert!(kinds(&b, &mut position).is_empty(), "a prepare aborted before the reader saw it is not sent");
}

/// A replica fed by the active's cursor holds prepares aside (GET_REPLICA keeps the old value), installs the
/// committed document at the commit seqno, and drops aborted prepares.
#[test]
fn a_replica_applies_prepares_commits_and_aborts() {
    let active = active_with_replica(BucketKind::Ephemeral);
    let replica = bucket(BucketKind::Ephemeral, 1);
    replica.set_vbucket_state(VB, VbState::Replica, 0);
    let cursor = active.open_cursor(VB, 0).unwrap();
    let mut position = 0;
    let replica_read = |key: &str| replica.get_replica(VB, &DocKey::new(0, key.as_bytes()), |i| i.body().0.to_vec());
    write(&active, "k", "old", None).unwrap();
    let m = write(&active, "k", "new", MAJORITY).unwrap();
    pump(&active, cursor, &mut position, &replica);
    assert_eq!(replica.pending_prepares(VB), 1);
    assert_eq!(replica_read("k").unwrap(), b"old");
    active.seqno_acknowledged(VB, 7, m.seqno);
    pump(&active, cursor, &mut position, &replica);
    assert_eq!(replica_read("k").unwrap(), b"new");
    assert_eq!(replica.pending_prepares(VB), 0);
    let m = write(&active, "k", "aborted", MAJORITY).unwrap();
    pump(&active, cursor, &mut position, &replica);
    active.abort_prepare(VB, m.seqno);
    pump(&active, cursor, &mut position, &replica);
    assert_eq!(replica.pending_prepares(VB), 0);
    assert_eq!(replica_read("k").unwrap(), b"new");
    let (a, r) = (active.stream_info(VB).unwrap(), replica.stream_info(VB).unwrap());
    assert_eq!(a.high_seqno, r.high_seqno);
}

/// A commit for a prepare the replica does not hold (it lost its in-memory prepares) applies nothing and says so.
#[test]
fn a_commit_without_its_prepare_is_reported() {
    let replica = bucket(BucketKind::Ephemeral, 1);
    replica.set_vbucket_state(VB, VbState::Replica, 0);
    replica.replica_snapshot(VB, 1, 2).unwrap();
    let key = DocKey::new(0, b"k").encoded().to_vec();
    assert_eq!(replica.replica_apply(VB, DcpChange::commit(key, 1, 2)).unwrap(), ReplicaApply::MissingPrepare);
    assert_eq!(replica.stream_info(VB).unwrap().high_seqno, 0);
}

/// Promotion (failover): a replica that holds prepares commits them all when it becomes active, so a write its
/// old active acknowledged is never lost.
#[test]
fn promotion_commits_outstanding_prepares() {
    let active = active_with_replica(BucketKind::Ephemeral);
    let replica = bucket(BucketKind::Ephemeral, 1);
    replica.set_vbucket_state(VB, VbState::Replica, 0);
    let cursor = active.open_cursor(VB, 0).unwrap();
    let (a, b) = (write(&active, "a", "1", MAJORITY).unwrap(), write(&active, "b", "1", MAJORITY).unwrap());
    pump(&active, cursor, &mut 0, &replica);
    assert_eq!(replica.pending_prepares(VB), 2);
    replica.set_vbucket_state(VB, VbState::Active, 99);
    assert_eq!(replica.pending_prepares(VB), 0);
    assert_eq!(read(&replica, "a").unwrap(), b"1");
    assert_eq!(read(&replica, "b").unwrap(), b"1");
    let info = replica.stream_info(VB).unwrap();
    assert_eq!(info.high_seqno, b.seqno + 2, "two commits after the prepares");
    assert_eq!(info.failover.latest().seqno, b.seqno, "the new branch starts before the commits");
    assert!(a.seqno < b.seqno);
}

/// Demotion: writers waiting on a vBucket that stops being active learn their outcome is unknown; the prepares
/// stay for the new active to settle.
#[test]
fn demotion_makes_waiters_ambiguous() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    b.set_vbucket_state(VB, VbState::Replica, 0);
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    assert_eq!(b.pending_prepares(VB), 1);
    assert!(!b.abort_prepare(VB, m.seqno), "only an active aborts");
}

/// A takeover hold (active -> pending) takes no new writes but finishes the durable writes it had prepared: an
/// acknowledgement still commits them and their writers hear success; released (pending -> active), the copy
/// keeps its history (no new failover-log branch).
#[test]
fn a_held_vbucket_finishes_its_sync_writes() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    let branches = b.stream_info(VB).unwrap().failover.entries().len();
    b.set_vbucket_state(VB, VbState::Pending, 0);
    assert_eq!(*outcome.lock(), None, "still in flight");
    assert!(b.sync_writes_in_flight(VB));
    assert_eq!(write(&b, "other", "v", None), Err(EngineError::NotMyVbucket), "no new writes while held");
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(*outcome.lock(), Some(Ok(())));
    assert!(!b.sync_writes_in_flight(VB));
    b.set_vbucket_state(VB, VbState::Active, 99);
    assert_eq!(b.stream_info(VB).unwrap().failover.entries().len(), branches, "same history");
    assert_eq!(read(&b, "k").unwrap(), b"v");
}

/// A bucket flush aborts the sync writes in flight: their writers hear the outcome is unknown and nothing
/// commits over the flushed bucket later.
#[test]
fn flush_aborts_sync_writes_in_flight() {
    let b = active_with_replica(BucketKind::Ephemeral);
    let m = write(&b, "k", "v", MAJORITY).unwrap();
    let outcome = wait(&b, &m);
    b.flush();
    assert_eq!(*outcome.lock(), Some(Err(EngineError::SyncWriteAmbiguous)));
    b.seqno_acknowledged(VB, 7, m.seqno);
    assert_eq!(read(&b, "k"), Err(EngineError::NotFound));
    assert!(write(&b, "k", "w", MAJORITY).is_ok(), "the key is free");
}
