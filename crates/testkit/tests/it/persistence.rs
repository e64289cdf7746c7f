//! Persistent buckets over the wire: durable writes wait for disk, OBSERVE_SEQNO reports persisted seqnos, and a
//! restart brings the data back.

use settee_client::Connection;
use settee_mcbp::{Magic, Request};
use settee_server::config::BucketTypeArg;
use settee_server::RunningNode;
use settee_testkit::{ADMIN, PASSWORD, SDK_FEATURES};

use crate::helpers::{get, req, set, vb};

async fn start(dir: &std::path::Path) -> RunningNode {
    settee_testkit::start_node_in(dir, |c| c.bucket_type = BucketTypeArg::Couchbase).await
}

/// Warmup answers TMPFAIL until done; this waits for the first successful GET (with a deadline).
async fn connect_when_warm(node: &RunningNode) -> Connection {
    let mut c = Connection::connect(node.kv_addr, ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while get(&mut c, b"warmup-probe").await.status == 0x86 {
        assert!(std::time::Instant::now() < deadline, "warmup did not finish in 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    c
}

/// A persistToMajority SET is acknowledged only once persisted: right after the reply, OBSERVE_SEQNO reports the
/// write's seqno as persisted.
#[tokio::test]
async fn durable_write_is_persisted_when_acknowledged() {
    let dir = settee_testkit::temp_dir("durable");
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    let k = c.key(0, b"d");
    let r = Request {
        magic: Magic::AltClientRequest,
        framing: &[0x13, 0x03, 0x13, 0x88],
        vbucket: vb(b"d"),
        ..req(0x01, &k, &[0; 8], b"{\"durable\":true}")
    };
    let resp = c.send(&r).await.unwrap();
    assert_eq!(resp.status, 0);
    let seqno = u64::from_be_bytes(resp.extras[8..16].try_into().unwrap());
    let vbuuid = &resp.extras[..8];
    let obs = c.call(0x91, &[], &[], vbuuid, vb(b"d"), 0).await.unwrap();
    assert_eq!(obs.status, 0);
    let persisted = u64::from_be_bytes(obs.value[11..19].try_into().unwrap());
    assert!(persisted >= seqno, "persisted {persisted} < acknowledged seqno {seqno}");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Documents written before a clean stop are read back after a restart, with their flags; a deleted one stays
/// deleted.
#[tokio::test]
async fn data_survives_a_restart() {
    let dir = settee_testkit::temp_dir("warm");
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    for i in 0..500u32 {
        assert_eq!(set(&mut c, format!("k{i}").as_bytes(), format!("v{i}").as_bytes(), i, 0).await.status, 0);
    }
    let k = c.key(0, b"k7");
    assert_eq!(c.call(0x04, &k, &[], &[], vb(b"k7"), 0).await.unwrap().status, 0);
    let k7_vb = settee_types::VbId(vb(b"k7"));
    let before = node.node.bucket("default").unwrap().stream_info(k7_vb).unwrap();
    node.stop().await;

    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    // The vBucket's history survives the restart, with a new branch at the seqno it came back with, so a DCP
    // stream that followed the old history resumes without a rollback.
    let after = node.node.bucket("default").unwrap().stream_info(k7_vb).unwrap();
    assert_eq!(after.high_seqno, before.high_seqno);
    assert_eq!(&after.failover.entries()[1..], before.failover.entries());
    assert_eq!(after.failover.latest().seqno, before.high_seqno);
    for i in (0..500u32).filter(|i| *i != 7) {
        let g = get(&mut c, format!("k{i}").as_bytes()).await;
        assert_eq!((g.status, g.value, g.extras), (0, format!("v{i}").into_bytes(), i.to_be_bytes().to_vec()));
    }
    assert_eq!(get(&mut c, b"k7").await.status, 0x01);
    let s = set(&mut c, b"after", b"x", 0, 0).await;
    assert!(u64::from_be_bytes(s.extras[8..16].try_into().unwrap()) > 0);
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

async fn wait_until_flushed(node: &RunningNode) {
    let b = node.node.bucket("default").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let dirty = || (0..1024).filter_map(|v| b.vbucket(settee_types::VbId(v))).map(|vb| vb.dirty_len()).sum::<usize>();
    while dirty() > 0
        || (0..1024).any(|v| b.vbucket(settee_types::VbId(v)).is_some_and(|vb| vb.persisted_seqno() < vb.high_seqno()))
    {
        assert!(std::time::Instant::now() < deadline, "flusher did not catch up in 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Writing N documents, deleting them all and compacting (with a zero purge age) purges every tombstone and gives
/// back the space of values and tombstones. What stays is fjall's journal, which it only rotates past 64 MiB (the
/// store's own tests bound tables and blobs to 2x the live data); so the bound here is on the total.
#[tokio::test]
async fn compaction_reclaims_space_of_deleted_documents() {
    let dir = settee_testkit::temp_dir("compact");
    let node = settee_testkit::start_node_in(&dir, |c| {
        c.bucket_type = BucketTypeArg::Couchbase;
        c.metadata_purge_age_secs = 0;
    })
    .await;
    let mut c = Connection::connect(node.kv_addr, ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.unwrap();
    let handle = node.node.bucket("default").unwrap();
    let store = handle.persistence.as_ref().unwrap().store.clone();
    let empty = store.disk_bytes();
    let value = vec![b'x'; 2000];
    for i in 0..5000u32 {
        assert_eq!(set(&mut c, format!("doc-{i}").as_bytes(), &value, 0, 0).await.status, 0);
    }
    wait_until_flushed(&node).await;
    node.node.compact_bucket(&handle).await.unwrap();
    let full = store.disk_bytes();
    for i in 0..5000u32 {
        let k = c.key(0, format!("doc-{i}").as_bytes());
        assert_eq!(c.call(0x04, &k, &[], &[], vb(format!("doc-{i}").as_bytes()), 0).await.unwrap().status, 0);
    }
    wait_until_flushed(&node).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // tombstones must be at least a second old
    let purged = node.node.compact_bucket(&handle).await.unwrap();
    let after = store.disk_bytes();
    println!("disk bytes: empty {empty}, 10 MB written {full}, deleted and compacted {after}, purged {purged}");
    assert_eq!(purged, 5000);
    assert!(full > 5000 * 2000, "the data reached the disk ({full} bytes)");
    assert!(after < full * 3 / 4, "space not reclaimed: {after} bytes left of {full}");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full disk (through the store's file-system seam) never yields a false success: the durable write in flight
/// is SYNC_WRITE_AMBIGUOUS and later writes get TMPFAIL, while reads keep working.
#[tokio::test]
async fn full_disk_turns_writes_into_tmpfail() {
    let dir = settee_testkit::temp_dir("diskfull");
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    assert_eq!(set(&mut c, b"before", b"ok", 0, 0).await.status, 0);
    wait_until_flushed(&node).await;
    node.node.bucket("default").unwrap().persistence.as_ref().unwrap().faults.set_disk_full(true);
    let k = c.key(0, b"durable");
    let r = Request {
        magic: Magic::AltClientRequest,
        framing: &[0x13, 0x03, 0x13, 0x88],
        vbucket: vb(b"durable"),
        ..req(0x01, &k, &[0; 8], b"v")
    };
    assert_eq!(c.send(&r).await.unwrap().status, 0xa3, "durable write on a full disk is ambiguous");
    assert_eq!(set(&mut c, b"after", b"v", 0, 0).await.status, 0x86, "writes get TMPFAIL once the store failed");
    assert_eq!(get(&mut c, b"before").await.value, b"ok");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record that fails its checksum at warmup takes its vBucket out of service (EINTERNAL), and the other
/// vBuckets keep serving.
#[tokio::test]
async fn corrupt_record_takes_its_vbucket_out_of_service() {
    let dir = settee_testkit::temp_dir("corrupt");
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    assert_eq!(set(&mut c, b"victim", b"v1", 0, 0).await.status, 0);
    assert_eq!(set(&mut c, b"bystander", b"v2", 0, 0).await.status, 0);
    assert_ne!(vb(b"victim"), vb(b"bystander"));
    let bucket_dir = node.node.bucket("default").unwrap().persistence.as_ref().unwrap().dir.clone();
    node.stop().await;
    {
        let store = settee_store::FjallStore::open(&bucket_dir).unwrap();
        let mut key = vec![0u8];
        key.extend_from_slice(b"victim");
        store.corrupt_for_test(settee_types::VbId(vb(b"victim")), &key);
    }
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    assert_eq!(get(&mut c, b"victim").await.status, 0x84);
    assert_eq!(get(&mut c, b"bystander").await.value, b"v2");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A slow disk (every fsync blocks for seconds, through the store's file-system seam) never yields a false
/// success and stalls nothing else: a persist-level durable write whose timeout passes first is
/// SYNC_WRITE_AMBIGUOUS, while plain writes and reads keep being answered from memory; once the disk is fast
/// again, new durable writes succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_makes_persist_level_writes_ambiguous_and_stalls_nothing_else() {
    let dir = settee_testkit::temp_dir("slowdisk");
    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
    assert_eq!(set(&mut c, b"before", b"ok", 0, 0).await.status, 0);
    wait_until_flushed(&node).await;
    let faults = node.node.bucket("default").unwrap().persistence.as_ref().unwrap().faults.clone();
    faults.set_sync_delay(std::time::Duration::from_secs(4));
    let durable = |key: &'static [u8], timeout_ms: u16| {
        let t = timeout_ms.to_be_bytes();
        (key, [0x13, 0x03, t[0], t[1]])
    };
    let (key, framing) = durable(b"durable", 500);
    let k = c.key(0, key);
    let r =
        Request { magic: Magic::AltClientRequest, framing: &framing, vbucket: vb(key), ..req(0x01, &k, &[0; 8], b"v") };
    assert_eq!(c.send(&r).await.unwrap().status, 0xa3, "a persist-level write past its timeout is ambiguous");
    assert_eq!(set(&mut c, b"plain", b"v", 0, 0).await.status, 0, "plain writes go on");
    assert_eq!(get(&mut c, b"before").await.value, b"ok", "reads go on");
    faults.set_sync_delay(std::time::Duration::ZERO);
    let (key, framing) = durable(b"later", 10_000);
    let k = c.key(0, key);
    let r =
        Request { magic: Magic::AltClientRequest, framing: &framing, vbucket: vb(key), ..req(0x01, &k, &[0; 8], b"v") };
    assert_eq!(c.send(&r).await.unwrap().status, 0, "a fast disk again: durable writes succeed");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
