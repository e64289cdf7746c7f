//! Engine semantics driven directly, with a manual clock: expiry, locks, seqnos, quota, collections,
//! sub-document document flags and xattr survival.

use std::sync::Arc;

use settee_doc::{LookupSpec, MutationSpec};
use settee_types::{ManualClock, Status, VbId, LOCKED_CAS};

use crate::{
    Bucket, BucketConfig, BucketKind, DocFlags, DocKey, EngineError, EvictionPolicy, MutateInOptions, StoreMode,
    StoreRequest, WriteOptions,
};

const NOW: u32 = 1_700_000_000;

fn bucket_with(quota: u64) -> (Bucket, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(NOW));
    let config = BucketConfig {
        name: "b".into(),
        uuid: "00112233445566778899aabbccddeeff".into(),
        kind: BucketKind::Ephemeral,
        ram_quota_bytes: quota,
        replicas: 0,
        eviction: EvictionPolicy::NoEviction,
        max_ttl: 0,
        flush_enabled: true,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    (Bucket::new(config, clock.clone()), clock)
}

fn bucket() -> (Bucket, Arc<ManualClock>) {
    bucket_with(256 << 20)
}

fn set(b: &Bucket, key: &DocKey<'_>, value: &[u8], expiry: u32) -> Result<crate::MutationResult, EngineError> {
    b.store(VbId(1), key, StoreRequest { mode: StoreMode::Set, value, flags: 0, expiry, opts: WriteOptions::default() })
}

fn read(b: &Bucket, key: &DocKey) -> Result<Vec<u8>, EngineError> {
    b.get(VbId(1), key, |i| i.body().0.to_vec())
}

/// Every mutation takes the next seqno of its vBucket and a larger CAS, including touch and delete.
#[test]
fn seqnos_and_cas_grow_with_every_mutation() {
    let (b, _) = bucket();
    let k = DocKey::new(0, b"k");
    let m1 = set(&b, &k, b"1", 0).unwrap();
    let (m2, ()) = b.touch(VbId(1), &k, 0, |_| ()).unwrap();
    let m3 = b.delete(VbId(1), &k, WriteOptions::default()).unwrap();
    assert_eq!((m1.seqno, m2.seqno, m3.seqno), (1, 2, 3));
    assert!(m1.cas < m2.cas && m2.cas < m3.cas);
    assert_eq!(b.vbucket(VbId(1)).unwrap().high_seqno(), 3);
}

/// A relative expiry hides the document once the clock passes it, and the pager turns it into a tombstone
/// (with a new seqno) and later purges the tombstone.
#[test]
fn expiry_is_lazy_and_paged() {
    let (b, clock) = bucket();
    let k = DocKey::new(0, b"e");
    set(&b, &k, b"v", 10).unwrap();
    clock.advance_secs(9);
    assert_eq!(read(&b, &k).unwrap(), b"v");
    clock.advance_secs(1);
    assert_eq!(read(&b, &k), Err(EngineError::NotFound));
    assert!(b.get_meta(VbId(1), &k).unwrap().deleted);

    let k2 = DocKey::new(0, b"e2");
    set(&b, &k2, b"v", 5).unwrap();
    clock.advance_secs(6);
    assert_eq!(b.run_expiry_pager(3600), 1);
    assert_eq!(b.curr_items(), 0);
    assert!(b.get_meta(VbId(1), &k2).unwrap().deleted);
    clock.advance_secs(3600);
    b.run_expiry_pager(3600);
    assert_eq!(b.get_meta(VbId(1), &k2), Err(EngineError::NotFound), "tombstone purged");
}

/// A lock hides the CAS, refuses other writers, and ends by itself when its time is up.
#[test]
fn locks_expire() {
    let (b, clock) = bucket();
    let k = DocKey::new(0, b"l");
    set(&b, &k, b"v", 0).unwrap();
    let lock_cas = b.get_locked(VbId(1), &k, 3, |i| i.cas).unwrap();
    assert_eq!(b.get(VbId(1), &k, |i| i.cas).unwrap(), LOCKED_CAS);
    assert_eq!(set(&b, &k, b"x", 0), Err(EngineError::Locked));
    assert_eq!(b.delete(VbId(1), &k, WriteOptions::default()), Err(EngineError::Locked));
    clock.advance_secs(3);
    assert_eq!(b.get(VbId(1), &k, |i| i.cas).unwrap(), lock_cas);
    assert!(set(&b, &k, b"x", 0).is_ok());
}

/// A write that would take the bucket past its quota is refused, and the bucket keeps serving reads.
#[test]
fn quota_refuses_writes_instead_of_growing() {
    let (b, _) = bucket_with(64 * 1024);
    let big = vec![b'x'; 16 * 1024];
    let mut stored = 0;
    for i in 0..10 {
        match set(&b, &DocKey::new(0, format!("k{i}").as_bytes()), &big, 0) {
            Ok(_) => stored += 1,
            Err(e) => assert_eq!(e, EngineError::OutOfMemory),
        }
    }
    assert!((1..10).contains(&stored), "stored {stored}");
    assert!(b.mem_used() <= 64 * 1024);
    assert_eq!(read(&b, &DocKey::new(0, b"k0")).unwrap().len(), 16 * 1024);
}

/// Dropping a collection removes its documents and makes its id unknown; other collections keep theirs.
#[test]
fn dropping_a_collection_purges_its_items() {
    let (b, _) = bucket();
    b.edit_manifest(|m| m.create_collection("_default", "c", None, false)).unwrap();
    let (_, cid) = b.resolve_collection("_default.c").unwrap();
    let in_c = DocKey::new(cid, b"k");
    let in_default = DocKey::new(0, b"k");
    set(&b, &in_c, b"c", 0).unwrap();
    set(&b, &in_default, b"d", 0).unwrap();
    assert_eq!(b.curr_items(), 2);
    b.edit_manifest(|m| m.drop_collection("_default", "c")).unwrap();
    assert_eq!(b.curr_items(), 1);
    assert!(matches!(read(&b, &in_c), Err(EngineError::UnknownCollection { .. })));
    assert_eq!(read(&b, &in_default).unwrap(), b"d");
}

/// A collection's maxTTL gives documents without an expiry one.
#[test]
fn collection_max_ttl_applies() {
    let (b, clock) = bucket();
    b.edit_manifest(|m| m.create_collection("_default", "ttl", Some(5), false)).unwrap();
    let (_, cid) = b.resolve_collection("_default.ttl").unwrap();
    let k = DocKey::new(cid, b"k");
    set(&b, &k, b"v", 0).unwrap();
    clock.advance_secs(5);
    assert_eq!(read(&b, &k), Err(EngineError::NotFound));
}

fn xattr_upsert<'a>(path: &'a [u8], value: &'a [u8]) -> MutationSpec<'a> {
    MutationSpec { opcode: 0xc8, flags: 0x04 | 0x01, path, value }
}

/// System xattrs survive a full-document SET and a delete; user xattrs survive neither.
#[test]
fn system_xattrs_survive_set_and_delete() {
    let (b, _) = bucket();
    let k = DocKey::new(0, b"x");
    set(&b, &k, br#"{"a":1}"#, 0).unwrap();
    let specs = [xattr_upsert(b"_sys.v", b"1"), xattr_upsert(b"user.v", b"2")];
    b.mutate_in(VbId(1), &k, &specs, MutateInOptions::default()).unwrap();
    set(&b, &k, br#"{"a":2}"#, 0).unwrap();
    let look = |flags| {
        let specs = [
            LookupSpec { opcode: 0xc5, flags: 0x04, path: b"_sys" },
            LookupSpec { opcode: 0xc5, flags: 0x04, path: b"user" },
        ];
        b.lookup_in(VbId(1), &k, &specs, DocFlags(flags)).unwrap()
    };
    let r = look(0);
    assert_eq!((r.results[0].status, r.results[0].value.as_slice()), (Status::Success, &br#"{"v":1}"#[..]));
    assert_eq!(r.results[1].status, Status::SubdocPathEnoent);
    b.delete(VbId(1), &k, WriteOptions::default()).unwrap();
    let r = look(DocFlags::ACCESS_DELETED);
    assert!(r.deleted);
    assert_eq!(r.results[0].status, Status::Success);
}

/// CREATE_AS_DELETED makes a tombstone visible only with ACCESS_DELETED; REVIVE brings it back to life, and
/// reviving a live document is refused.
#[test]
fn create_as_deleted_and_revive() {
    let (b, _) = bucket();
    let k = DocKey::new(0, b"t");
    let staged = [xattr_upsert(b"txn.stgd", br#"{"live":true}"#)];
    let flags = DocFlags(DocFlags::ADD | DocFlags::ACCESS_DELETED | DocFlags::CREATE_AS_DELETED);
    let r = b.mutate_in(VbId(1), &k, &staged, MutateInOptions { doc_flags: flags, ..Default::default() }).unwrap();
    assert!(r.deleted);
    assert_eq!(read(&b, &k), Err(EngineError::NotFound));
    // A second staged insert sees the tombstone as an existing document.
    let again = b.mutate_in(VbId(1), &k, &staged, MutateInOptions { doc_flags: flags, ..Default::default() });
    assert_eq!(again.unwrap_err(), EngineError::Exists);
    // As transactions commit a staged insert: the body becomes the staged xattr and the document revives.
    let body = [MutationSpec { opcode: 0xd3, flags: 0x04, path: b"txn.stgd", value: b"" }];
    let revive = DocFlags(DocFlags::ACCESS_DELETED | DocFlags::REVIVE);
    let r = b.mutate_in(VbId(1), &k, &body, MutateInOptions { doc_flags: revive, ..Default::default() }).unwrap();
    assert!(!r.deleted);
    assert_eq!(read(&b, &k).unwrap(), br#"{"live":true}"#);
    let err = b.mutate_in(VbId(1), &k, &body, MutateInOptions { doc_flags: revive, ..Default::default() });
    assert_eq!(err.unwrap_err(), EngineError::Subdoc(Status::SubdocCanOnlyReviveDeletedDocuments));
}

/// A failing second spec leaves the document untouched and names the failing spec.
#[test]
fn failed_mutation_changes_nothing() {
    let (b, _) = bucket();
    let k = DocKey::new(0, b"a");
    let m = set(&b, &k, br#"{"n":1}"#, 0).unwrap();
    let specs = [
        MutationSpec { opcode: 0xc8, flags: 0, path: b"n", value: b"2" },
        MutationSpec { opcode: 0xca, flags: 0, path: b"missing", value: b"3" },
    ];
    let err = b.mutate_in(VbId(1), &k, &specs, MutateInOptions::default()).unwrap_err();
    assert_eq!(err, EngineError::SubdocSpec { index: 1, status: Status::SubdocPathEnoent });
    assert_eq!(read(&b, &k).unwrap(), br#"{"n":1}"#);
    assert_eq!(b.get(VbId(1), &k, |i| i.cas).unwrap(), m.cas);
    assert_eq!(b.vbucket(VbId(1)).unwrap().high_seqno(), 1, "no seqno taken by the failed mutation");
}

/// A vBucket outside the map or not active is NOT_MY_VBUCKET.
#[test]
fn foreign_vbuckets_are_not_mine() {
    let (b, _) = bucket();
    let k = DocKey::new(0, b"k");
    assert_eq!(b.get(VbId(1024), &k, |_| ()), Err(EngineError::NotMyVbucket));
    b.vbucket(VbId(3)).unwrap().set_state(crate::VbState::Replica);
    assert_eq!(b.get(VbId(3), &k, |_| ()), Err(EngineError::NotMyVbucket));
}

/// Flush removes every document and frees their memory.
#[test]
fn flush_empties_the_bucket() {
    let (b, _) = bucket();
    for i in 0..100 {
        set(&b, &DocKey::new(0, format!("k{i}").as_bytes()), b"v", 0).unwrap();
    }
    assert_eq!(b.curr_items(), 100);
    b.flush();
    assert_eq!((b.curr_items(), b.mem_used()), (0, 0));
}

/// A flush of a memory-only bucket drops tombstones too, and records the highest one dropped as the purge seqno: a
/// DCP stream resuming below it could miss a deletion.
#[test]
fn flush_records_the_tombstones_it_purges() {
    let (b, _) = bucket();
    let key = DocKey::new(0, b"gone");
    set(&b, &key, b"v", 0).unwrap();
    let deleted = b.delete(VbId(1), &key, WriteOptions::default()).unwrap();
    set(&b, &DocKey::new(0, b"live"), b"v", 0).unwrap();
    assert_eq!(b.stream_info(VbId(1)).unwrap().purge_seqno, 0);
    b.flush();
    assert_eq!(b.stream_info(VbId(1)).unwrap().purge_seqno, deleted.seqno);
}
