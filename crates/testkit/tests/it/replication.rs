//! Replication between two nodes over real sockets: node B's replica vBuckets stream from node A's active ones
//! through A's DCP producer, and end up holding exactly what A holds, including deletions and documents written
//! before the stream started (backfill) and after (the change log).

use std::time::Duration;

use settee_engine::{DocKey, EngineError, VbState};
use settee_server::dcp::consumer::{self, FeedSpec};
use settee_testkit::{TestNode, ADMIN, PASSWORD};
use settee_types::VbId;
use tokio::sync::watch;

use crate::helpers::{get, set, vb};

fn replica_value(node: &TestNode, key: &[u8]) -> Result<Vec<u8>, EngineError> {
    let b = node.running.node.bucket("default").expect("bucket");
    b.get_replica(VbId(vb(key)), &DocKey::new(0, key), |i| i.body().0.to_vec())
}

async fn eventually(mut check: impl FnMut() -> bool, what: &str) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_node_follows_its_active_over_dcp() {
    let (a, b) = (TestNode::start().await, TestNode::start().await);
    let replica_bucket = b.running.node.bucket("default").unwrap();
    for v in 0..1024 {
        replica_bucket.set_vbucket_state(VbId(v), VbState::Replica, 0);
    }
    let mut client = a.connect().await;
    for i in 0..200 {
        set(&mut client, format!("before-{i}").as_bytes(), b"{\"v\":1}", 0, 0).await;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let spec = FeedSpec {
        source: a.kv_addr(),
        vbuckets: (0..1024).map(VbId).collect(),
        username: ADMIN.into(),
        password: PASSWORD.into(),
        name: "replication:test".into(),
    };
    let feed = tokio::spawn(consumer::run(replica_bucket.clone(), spec, stop_rx));
    for i in 0..200 {
        set(&mut client, format!("after-{i}").as_bytes(), format!("{i}").as_bytes(), 0, 0).await;
    }
    set(&mut client, b"before-7", b"\"changed\"", 0, 0).await;
    let k = client.key(0, b"before-8");
    client.call(0x04, &k, &[], &[], vb(b"before-8"), 0).await.unwrap();

    let active_bucket = a.running.node.bucket("default").unwrap();
    eventually(|| replica_bucket.curr_items() == active_bucket.curr_items(), "the replica to catch up").await;
    assert_eq!(active_bucket.curr_items(), 399);
    assert_eq!(replica_value(&b, b"before-7").unwrap(), b"\"changed\"");
    assert_eq!(replica_value(&b, b"after-199").unwrap(), b"199");
    assert_eq!(replica_value(&b, b"before-8"), Err(EngineError::NotFound), "the deletion was replicated");
    for v in 0..1024 {
        let (x, y) = (active_bucket.stream_info(VbId(v)).unwrap(), replica_bucket.stream_info(VbId(v)).unwrap());
        assert_eq!(x.high_seqno, y.high_seqno, "vBucket {v} seqnos");
        assert_eq!(x.failover, y.failover, "vBucket {v} follows its active's history");
    }
    assert_eq!(get(&mut client, b"after-3").await.status, 0);
    // GET_REPLICA over the wire: served by the replica node, refused by the active one.
    let mut replica_client = b.connect().await;
    let k = replica_client.key(0, b"after-3");
    let r = replica_client.call(0x83, &k, &[], &[], vb(b"after-3"), 0).await.unwrap();
    assert_eq!((r.status, r.value.as_slice()), (0, &b"3"[..]));
    let r = client.call(0x83, &k, &[], &[], vb(b"after-3"), 0).await.unwrap();
    assert_eq!(r.status, 0x07, "the active node holds no replica of the vBucket");
    stop_tx.send(true).unwrap();
    feed.await.unwrap();
    a.stop().await;
    b.stop().await;
}
