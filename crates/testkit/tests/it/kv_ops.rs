//! KV semantics over the wire: CAS, locks, counters, append, touch, meta, limits, durability, collections.

use settee_client::Connection;
use settee_mcbp::{Feature, Magic, Request};
use settee_testkit::{TestNode, ADMIN, PASSWORD, SDK_FEATURES};

use crate::helpers::{get, req, set, vb};

async fn call(
    c: &mut Connection,
    op: u8,
    key: &[u8],
    extras: &[u8],
    value: &[u8],
    cas: u64,
) -> settee_client::OwnedResponse {
    let k = c.key(0, key);
    c.call(op, &k, extras, value, vb(key), cas).await.unwrap()
}

/// ADD on an existing key is KEY_EEXISTS, REPLACE of a missing key KEY_ENOENT, REPLACE with a stale CAS
/// KEY_EEXISTS, DELETE removes and a second DELETE is KEY_ENOENT.
#[tokio::test]
async fn store_modes_and_cas() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let s = set(&mut c, b"a", b"1", 0, 0).await;
    assert_eq!(call(&mut c, 0x02, b"a", &[0; 8], b"2", 0).await.status, 0x02);
    assert_eq!(call(&mut c, 0x03, b"missing", &[0; 8], b"2", 0).await.status, 0x01);
    assert_eq!(call(&mut c, 0x03, b"a", &[0; 8], b"2", s.cas + 1).await.status, 0x02);
    assert_eq!(call(&mut c, 0x03, b"a", &[0; 8], b"2", s.cas).await.status, 0x00);
    assert_eq!(call(&mut c, 0x04, b"a", &[], &[], 0).await.status, 0x00);
    assert_eq!(call(&mut c, 0x04, b"a", &[], &[], 0).await.status, 0x01);
    assert_eq!(get(&mut c, b"a").await.status, 0x01);
    node.stop().await;
}

/// A locked document reads with CAS 0xffff...; writers without the lock CAS get LOCKED; a second lock is
/// LOCKED; UNLOCK with a wrong CAS is LOCKED; a write with the lock CAS succeeds and unlocks; UNLOCK of an unlocked
/// document is NOT_LOCKED.
#[tokio::test]
async fn locking() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    set(&mut c, b"l", b"v", 0, 0).await;
    let locked = call(&mut c, 0x94, b"l", &5u32.to_be_bytes(), &[], 0).await;
    assert_eq!(locked.status, 0);
    assert_eq!(get(&mut c, b"l").await.cas, u64::MAX);
    assert_eq!(set(&mut c, b"l", b"x", 0, 0).await.status, 0x09);
    assert_eq!(call(&mut c, 0x94, b"l", &[], &[], 0).await.status, 0x09);
    assert_eq!(call(&mut c, 0x95, b"l", &[], &[], locked.cas + 1).await.status, 0x09);
    assert_eq!(call(&mut c, 0x03, b"l", &[0; 8], b"new", locked.cas).await.status, 0);
    assert_eq!(get(&mut c, b"l").await.value, b"new");
    assert_eq!(call(&mut c, 0x95, b"l", &[], &[], 1).await.status, 0x0e);
    node.stop().await;
}

fn counter_extras(delta: u64, initial: u64, expiry: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&expiry.to_be_bytes());
    e
}

/// Counters: create with the initial value, add, floor at zero on decrement, refuse non-numbers, and do not
/// create with expiry 0xffffffff.
#[tokio::test]
async fn counters() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let r = call(&mut c, 0x05, b"n", &counter_extras(1, 10, 0), &[], 0).await;
    assert_eq!((r.status, r.value.as_slice()), (0, &10u64.to_be_bytes()[..]));
    let r = call(&mut c, 0x05, b"n", &counter_extras(5, 0, 0), &[], 0).await;
    assert_eq!(r.value, 15u64.to_be_bytes());
    let r = call(&mut c, 0x06, b"n", &counter_extras(100, 0, 0), &[], 0).await;
    assert_eq!(r.value, 0u64.to_be_bytes());
    assert_eq!(get(&mut c, b"n").await.value, b"0");
    assert_eq!(call(&mut c, 0x05, b"nope", &counter_extras(1, 0, u32::MAX), &[], 0).await.status, 0x01);
    set(&mut c, b"text", b"abc", 0, 0).await;
    assert_eq!(call(&mut c, 0x05, b"text", &counter_extras(1, 0, 0), &[], 0).await.status, 0x06);
    node.stop().await;
}

/// APPEND and PREPEND extend the body; on a missing document they are NOT_STORED.
#[tokio::test]
async fn append_prepend() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    set(&mut c, b"s", b"mid", 5, 0).await;
    assert_eq!(call(&mut c, 0x0e, b"s", &[], b"-end", 0).await.status, 0);
    assert_eq!(call(&mut c, 0x0f, b"s", &[], b"start-", 0).await.status, 0);
    let g = get(&mut c, b"s").await;
    assert_eq!((g.value.as_slice(), g.extras.as_slice()), (&b"start-mid-end"[..], &5u32.to_be_bytes()[..]));
    assert_eq!(call(&mut c, 0x0e, b"none", &[], b"x", 0).await.status, 0x05);
    node.stop().await;
}

/// GET_META v2 reports 21 bytes (deleted, flags, expiry, seqno, datatype) and keeps answering for a tombstone.
#[tokio::test]
async fn get_meta_v2_and_tombstones() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    set(&mut c, b"m", br#"{"x":1}"#, 9, 0).await;
    let m = call(&mut c, 0xa0, b"m", &[2], &[], 0).await;
    assert_eq!((m.status, m.extras.len()), (0, 21));
    assert_eq!(&m.extras[..8], &[0, 0, 0, 0, 0, 0, 0, 9]);
    assert_eq!(m.extras[20], 1);
    call(&mut c, 0x04, b"m", &[], &[], 0).await;
    let m = call(&mut c, 0xa0, b"m", &[2], &[], 0).await;
    assert_eq!((m.status, &m.extras[..4]), (0, &[0, 0, 0, 1][..]));
    assert_eq!(call(&mut c, 0xa0, b"never", &[2], &[], 0).await.status, 0x01);
    node.stop().await;
}

/// TOUCH with an absolute expiry in the past expires the document at once; GAT returns the value.
#[tokio::test]
async fn touch_and_expiry() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    set(&mut c, b"t", b"v", 0, 0).await;
    let gat = call(&mut c, 0x1d, b"t", &100u32.to_be_bytes(), &[], 0).await;
    assert_eq!((gat.status, gat.value.as_slice()), (0, &b"v"[..]));
    // 2_600_000 s is beyond 30 days, so it is an absolute time in 1970: already expired.
    assert_eq!(call(&mut c, 0x1c, b"t", &2_600_000u32.to_be_bytes(), &[], 0).await.status, 0);
    assert_eq!(get(&mut c, b"t").await.status, 0x01);
    assert_eq!(call(&mut c, 0x1c, b"t", &[0; 4], &[], 0).await.status, 0x01);
    node.stop().await;
}

/// Keys over 250 bytes are EINVAL; values over 20 MiB are E2BIG; bad extras are EINVAL.
#[tokio::test]
async fn limits_and_bad_input() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let long = vec![b'k'; 251];
    assert_eq!(set(&mut c, &long, b"v", 0, 0).await.status, 0x04);
    assert_eq!(set(&mut c, &vec![b'k'; 250], b"v", 0, 0).await.status, 0);
    let big = vec![b'x'; 20 * 1024 * 1024 + 1];
    assert_eq!(set(&mut c, b"big", &big, 0, 0).await.status, 0x03);
    assert_eq!(call(&mut c, 0x01, b"k", &[0; 3], b"v", 0).await.status, 0x04);
    assert_eq!(call(&mut c, 0x00, b"k", &[0; 4], &[], 0).await.status, 0x04);
    node.stop().await;
}

fn durable_set<'a>(key: &'a [u8], framing: &'a [u8]) -> Request<'a> {
    Request {
        magic: Magic::AltClientRequest,
        framing,
        vbucket: vb(&key[1..]),
        extras: &[0; 8],
        ..req(0x01, key, &[], b"v")
    }
}

/// With 0 replicas majority is met by the active alone; persist levels are refused on a memory-only bucket; a bad
/// level is EINVAL; with 1 replica on one node majority is DURABILITY_IMPOSSIBLE.
#[tokio::test]
async fn durability_rules() {
    let node = TestNode::start_with(|c| c.bucket_type = settee_server::config::BucketTypeArg::Ephemeral).await;
    let mut c = node.connect().await;
    let k = c.key(0, b"d");
    assert_eq!(c.send(&durable_set(&k, &[0x11, 0x01])).await.unwrap().status, 0);
    assert_eq!(c.send(&durable_set(&k, &[0x11, 0x03])).await.unwrap().status, 0xa0);
    assert_eq!(c.send(&durable_set(&k, &[0x11, 0x09])).await.unwrap().status, 0x04);
    node.stop().await;

    let node = TestNode::start_with(|cfg| cfg.replicas = 1).await;
    let mut c = node.connect().await;
    let k = c.key(0, b"d");
    assert_eq!(c.send(&durable_set(&k, &[0x11, 0x01])).await.unwrap().status, 0xa1);
    node.stop().await;
}

/// Collections: an unknown collection id is UNKNOWN_COLLECTION with the manifest uid; once created, GET_COLLECTION_ID
/// resolves it and documents in it are separate from the default collection's.
#[tokio::test]
async fn collections() {
    let node = TestNode::start().await;
    let mut c = Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.unwrap();
    let mut k = vec![0x08];
    k.extend_from_slice(b"doc");
    let r = c.call(0x00, &k, &[], &[], vb(b"doc"), 0).await.unwrap();
    assert_eq!((r.status, r.value.as_slice()), (0x88, &br#"{"manifest_uid":"0"}"#[..]));
    let bucket = node.running.node.bucket("default").unwrap();
    bucket.edit_manifest(|m| m.create_scope("s")).unwrap();
    bucket.edit_manifest(|m| m.create_collection("s", "c", None, false)).unwrap();
    let id = c.call(0xbb, &[], &[], b"s.c", 0, 0).await.unwrap();
    assert_eq!((id.status, id.extras.as_slice()), (0, &[0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 8][..]));
    assert_eq!(c.call(0xbb, &[], &[], b"s.nope", 0, 0).await.unwrap().status, 0x88);
    assert_eq!(c.call(0xbb, &[], &[], b"nope.c", 0, 0).await.unwrap().status, 0x8c);
    assert_eq!(c.call(0x01, &k, &[0; 8], b"in-c", vb(b"doc"), 0).await.unwrap().status, 0);
    assert_eq!(get(&mut c, b"doc").await.status, 0x01, "default collection is separate");
    assert_eq!(c.call(0x00, &k, &[], &[], vb(b"doc"), 0).await.unwrap().value, b"in-c");
    let _ = Feature::Collections;
    node.stop().await;
}

/// Snappy: a compressed SET is stored decompressed, and a large GET comes back compressed to a Snappy client.
#[tokio::test]
async fn snappy_both_ways() {
    let node = TestNode::start().await;
    let mut features = SDK_FEATURES.to_vec();
    features.push(Feature::Snappy);
    let mut c = Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("default"), &features).await.unwrap();
    let body = "abcdefgh".repeat(1000);
    let compressed = snap::raw::Encoder::new().compress_vec(body.as_bytes()).unwrap();
    let k = c.key(0, b"z");
    let r = Request { datatype: 0x02, vbucket: vb(b"z"), ..req(0x01, &k, &[0; 8], &compressed) };
    assert_eq!(c.send(&r).await.unwrap().status, 0);
    let g = get(&mut c, b"z").await;
    assert_eq!(g.datatype & 0x02, 0x02);
    assert_eq!(snap::raw::Decoder::new().decompress_vec(&g.value).unwrap(), body.as_bytes());
    node.stop().await;
}
