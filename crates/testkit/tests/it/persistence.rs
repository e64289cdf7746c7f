//! Persistent buckets over the wire: durable writes wait for disk, OBSERVE_SEQNO reports persisted seqnos, and a
//! restart brings the data back.

use settee_client::Connection;
use settee_mcbp::{Magic, Request};
use settee_server::config::{BucketTypeArg, ServerConfig};
use settee_server::RunningNode;
use settee_testkit::{ADMIN, PASSWORD, SDK_FEATURES};

use crate::helpers::{get, req, set, vb};

async fn start(dir: &std::path::Path) -> RunningNode {
    let mut config = ServerConfig::defaults();
    config.data_dir = dir.to_path_buf();
    config.bucket_type = BucketTypeArg::Couchbase;
    (config.kv_port, config.mgmt_port, config.query_port) = (0, 0, 0);
    RunningNode::start(config).await.expect("node starts")
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
    node.stop().await;

    let node = start(&dir).await;
    let mut c = connect_when_warm(&node).await;
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
