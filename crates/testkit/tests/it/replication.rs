//! Replication between two nodes over real sockets: node B's replica vBuckets stream from node A's active ones
//! through A's DCP producer, and end up holding exactly what A holds, including deletions and documents written
//! before the stream started (backfill) and after (the change log); and sync writes on A commit once B
//! acknowledges them.

use std::time::Duration;

use settee_engine::{DocKey, EngineError, VbState};
use settee_mcbp::{Magic, Request};
use settee_server::dcp::consumer::{self, FeedSpec};
use settee_server::dcp::replication_connection_name;
use settee_testkit::{TestNode, ADMIN, PASSWORD};
use settee_types::VbId;
use tokio::sync::watch;

use crate::helpers::{get, req, set, vb};

fn replica_value(node: &TestNode, key: &[u8]) -> Result<Vec<u8>, EngineError> {
    let b = node.running.node.bucket("default").expect("bucket");
    b.get_replica(VbId(vb(key)), &DocKey::new(0, key), |i| i.body().0.to_vec())
}

/// Waits for `check` with a deadline of 30 s: generous, because the whole workspace's tests share the machine
/// (each of these starts two nodes and 1,024 streams), and a deadline only bounds how long a failure takes.
async fn eventually(mut check: impl FnMut() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
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
    let lower_half: Vec<VbId> = (0..512).map(VbId).collect();
    let spec = FeedSpec {
        source: a.kv_addr(),
        vbuckets: lower_half.clone(),
        username: ADMIN.into(),
        password: PASSWORD.into(),
        bind: None,
        name: "replication:test".into(),
        timeouts: Default::default(),
        tls: Default::default(),
    };
    // The feed starts with half the vBuckets; the list then grows to all of them on the same feed.
    let (list_tx, list_rx) = watch::channel(lower_half.clone());
    let feed = tokio::spawn(consumer::run(replica_bucket.clone(), spec, list_rx, stop_rx));
    let key_in = |upper: bool, tag: &str| {
        (0..).map(|i| format!("{tag}-{i}")).find(|k| (vb(k.as_bytes()) >= 512) == upper).expect("a key")
    };
    let (low, high) = (key_in(false, "before"), key_in(true, "before"));
    eventually(|| replica_value(&b, low.as_bytes()).is_ok(), "the lower half to stream").await;
    assert_eq!(replica_value(&b, high.as_bytes()), Err(EngineError::NotFound), "the upper half is not streamed");
    list_tx.send((0..1024).map(VbId).collect()).unwrap();
    for i in 0..200 {
        set(&mut client, format!("after-{i}").as_bytes(), format!("{i}").as_bytes(), 0, 0).await;
    }
    set(&mut client, b"before-7", b"\"changed\"", 0, 0).await;
    let k = client.key(0, b"before-8");
    client.call(0x04, &k, &[], &[], vb(b"before-8"), 0).await.unwrap();

    let active_bucket = a.running.node.bucket("default").unwrap();
    // Caught up: every vBucket's stream delivered up to the active's high seqno (streams run independently, so
    // equal item counts alone could come before a later update in another vBucket).
    let caught_up = || {
        (0..1024).all(|v| {
            let (x, y) = (active_bucket.stream_info(VbId(v)).unwrap(), replica_bucket.stream_info(VbId(v)).unwrap());
            x.high_seqno == y.high_seqno
        })
    };
    eventually(caught_up, "the replica to catch up").await;
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

    // The list shrinks back: the upper half's streams close, so later writes there no longer arrive.
    list_tx.send(lower_half).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (low, high) = (key_in(false, "late"), key_in(true, "late"));
    set(&mut client, high.as_bytes(), b"1", 0, 0).await;
    set(&mut client, low.as_bytes(), b"1", 0, 0).await;
    eventually(|| replica_value(&b, low.as_bytes()).is_ok(), "the lower half to keep streaming").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(replica_value(&b, high.as_bytes()), Err(EngineError::NotFound), "a closed stream delivers nothing");
    stop_tx.send(true).unwrap();
    feed.await.unwrap();
    a.stop().await;
    b.stop().await;
}

/// A SET with a durability frame: `framing` is the frame-info bytes (id 1, level, optional timeout).
async fn durable_set(c: &mut settee_testkit::Connection, key: &[u8], value: &[u8], framing: &[u8]) -> u16 {
    let k = c.key(0, key);
    let r = Request { magic: Magic::AltClientRequest, framing, vbucket: vb(key), ..req(0x01, &k, &[0; 8], value) };
    c.send(&r).await.unwrap().status
}

/// Sync writes across two nodes: with one replica configured and node 2 (B) as every vBucket's replica in A's
/// chains, a majority SET on A is answered with success only after B acknowledged the prepare over DCP, and B
/// then holds the committed value; with the feed stopped nothing acknowledges, so a majority SET times out as
/// SYNC_WRITE_AMBIGUOUS, is aborted, and A keeps serving the previous value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_write_commits_once_the_replica_acknowledges() {
    let (a, b) = (TestNode::start_with(|c| c.replicas = 1).await, TestNode::start_with(|c| c.replicas = 1).await);
    let active_bucket = a.running.node.bucket("default").unwrap();
    let replica_bucket = b.running.node.bucket("default").unwrap();
    for v in 0..1024 {
        replica_bucket.set_vbucket_state(VbId(v), VbState::Replica, 0);
        active_bucket.set_replication_chain(VbId(v), &[Some(2)]);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let spec = FeedSpec {
        source: a.kv_addr(),
        vbuckets: (0..1024).map(VbId).collect(),
        username: ADMIN.into(),
        password: PASSWORD.into(),
        bind: None,
        name: replication_connection_name(2, "default"),
        timeouts: Default::default(),
        tls: Default::default(),
    };
    let (_list, list_rx) = watch::channel(spec.vbuckets.clone());
    let feed = tokio::spawn(consumer::run(replica_bucket.clone(), spec, list_rx, stop_rx));
    let mut client = a.connect().await;
    assert_eq!(set(&mut client, b"plain", b"1", 0, 0).await.status, 0);
    eventually(|| replica_value(&b, b"plain").is_ok(), "the feed to stream").await;

    // Majority with a 5 s timeout (frame id 1, length 3: level 1, 5000 ms).
    assert_eq!(durable_set(&mut client, b"sync", b"{\"v\":1}", &[0x13, 0x01, 0x13, 0x88]).await, 0);
    assert_eq!(get(&mut client, b"sync").await.value, b"{\"v\":1}");
    eventually(|| replica_value(&b, b"sync").is_ok_and(|v| v == b"{\"v\":1}"), "the commit to reach B").await;
    assert_eq!(active_bucket.pending_prepares(VbId(vb(b"sync"))), 0);

    stop_tx.send(true).unwrap();
    feed.await.unwrap();
    // Majority with a 500 ms timeout: nobody acknowledges.
    assert_eq!(durable_set(&mut client, b"sync", b"{\"v\":2}", &[0x13, 0x01, 0x01, 0xf4]).await, 0xa3);
    assert_eq!(durable_set(&mut client, b"lost", b"1", &[0x13, 0x01, 0x01, 0xf4]).await, 0xa3);
    assert_eq!(get(&mut client, b"sync").await.value, b"{\"v\":1}", "the aborted value is not visible");
    assert_eq!(get(&mut client, b"lost").await.status, 0x01);
    assert_eq!(active_bucket.pending_prepares(VbId(vb(b"sync"))), 0, "the timed-out prepare was aborted");
    assert_eq!(set(&mut client, b"sync", b"3", 0, 0).await.status, 0, "the key is free again");
    a.stop().await;
    b.stop().await;
}

/// Node A (one replica configured, node 2 in every chain) and node B holding every vBucket as a replica, with B's
/// feed from A running; returns the feed's stop switch and task.
async fn replicated_pair() -> (TestNode, TestNode, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (a, b) = (TestNode::start_with(|c| c.replicas = 1).await, TestNode::start_with(|c| c.replicas = 1).await);
    let (active_bucket, replica_bucket) =
        (a.running.node.bucket("default").unwrap(), b.running.node.bucket("default").unwrap());
    for v in 0..1024 {
        replica_bucket.set_vbucket_state(VbId(v), VbState::Replica, 0);
        active_bucket.set_replication_chain(VbId(v), &[Some(2)]);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let feed = start_feed(&a, &b, stop_rx);
    (a, b, stop_tx, feed)
}

fn start_feed(a: &TestNode, b: &TestNode, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let spec = FeedSpec {
        source: a.kv_addr(),
        vbuckets: (0..1024).map(VbId).collect(),
        username: ADMIN.into(),
        password: PASSWORD.into(),
        bind: None,
        name: replication_connection_name(2, "default"),
        timeouts: Default::default(),
        tls: Default::default(),
    };
    let (list, list_rx) = watch::channel(spec.vbuckets.clone());
    let replica_bucket = b.running.node.bucket("default").unwrap();
    tokio::spawn(async move {
        consumer::run(replica_bucket, spec, list_rx, stop).await;
        drop(list);
    })
}

fn high_seqno(node: &TestNode, vb: u16) -> u64 {
    node.running.node.bucket("default").unwrap().stream_info(VbId(vb)).unwrap().high_seqno
}

/// The swap rebalance that never ended: a vBucket whose last change is an abort of a prepare its replica never
/// received. A stream that starts after both sends neither (the prepare is gone, the abort names a prepare the
/// replica cannot hold) but closes the snapshot with SEQNO_ADVANCED; the replica must take that seqno, or a
/// takeover (or graceful failover) waiting for the active's high seqno waits forever. It used to ignore it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_reaches_the_seqno_of_an_abort_it_was_never_sent() {
    let (a, b, stop_tx, feed) = replicated_pair().await;
    let mut client = a.connect().await;
    assert_eq!(set(&mut client, b"aborted", b"1", 0, 0).await.status, 0);
    let v = vb(b"aborted");
    eventually(|| high_seqno(&b, v) == high_seqno(&a, v), "the replica to stream").await;
    stop_tx.send(true).unwrap();
    feed.await.unwrap();
    // Majority with a 300 ms timeout while no replica streams: prepared, then aborted.
    assert_eq!(durable_set(&mut client, b"aborted", b"2", &[0x13, 0x01, 0x01, 0x2c]).await, 0xa3);
    let active_high = high_seqno(&a, v);
    assert_eq!(active_high, high_seqno(&b, v) + 2, "a prepare and its abort the replica has not seen");

    let (_stop, stop_rx) = watch::channel(false);
    let _feed = start_feed(&a, &b, stop_rx);
    eventually(|| high_seqno(&b, v) == active_high, "the replica to reach the abort's seqno").await;
    assert_eq!(replica_value(&b, b"aborted").unwrap(), b"1");
    a.stop().await;
    b.stop().await;
}

/// After a restart a replica stream used to start before warmup had loaded the vBucket, so it applied seqno 1 into
/// a vBucket whose store held more (the store then refused it and the whole bucket went to TMPFAIL). While the
/// producer's bucket warms up it refuses stream requests (TMPFAIL) and the consumer asks again; while the
/// consumer's bucket warms up it requests nothing. Once both are warm the replica streams normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_stream_waits_for_warmup() {
    let (a, b) = (TestNode::start().await, TestNode::start().await);
    let (active_bucket, replica_bucket) =
        (a.running.node.bucket("default").unwrap(), b.running.node.bucket("default").unwrap());
    for v in 0..1024 {
        replica_bucket.set_vbucket_state(VbId(v), VbState::Replica, 0);
    }
    let mut client = a.connect().await;
    assert_eq!(set(&mut client, b"warm", b"1", 0, 0).await.status, 0);
    let v = vb(b"warm");
    active_bucket.set_warming_up(true);
    replica_bucket.set_warming_up(true);
    let (_stop, stop_rx) = watch::channel(false);
    let _feed = start_feed(&a, &b, stop_rx);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(high_seqno(&b, v), 0, "nothing streams into a bucket warming up");
    replica_bucket.set_warming_up(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(high_seqno(&b, v), 0, "nothing streams from a bucket warming up");
    active_bucket.set_warming_up(false);
    eventually(|| replica_value(&b, b"warm").is_ok(), "the replica to stream once both are warm").await;
    assert_eq!(high_seqno(&b, v), high_seqno(&a, v));
    a.stop().await;
    b.stop().await;
}

/// A replica vBucket emptied while its stream runs (the flusher does this when the store refuses the replica's
/// data) is streamed again from zero on its own, instead of staying empty until the next write to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_emptied_under_its_stream_streams_again() {
    let (a, b, _stop, _feed) = replicated_pair().await;
    let mut client = a.connect().await;
    assert_eq!(set(&mut client, b"kept", b"1", 0, 0).await.status, 0);
    eventually(|| replica_value(&b, b"kept").is_ok(), "the replica to stream").await;
    b.running.node.bucket("default").unwrap().reset_vbucket(VbId(vb(b"kept")));
    assert_eq!(replica_value(&b, b"kept"), Err(EngineError::NotFound));
    eventually(|| replica_value(&b, b"kept").is_ok(), "the emptied replica to stream again").await;
    a.stop().await;
    b.stop().await;
}

/// A stream the producer ends on its own (its copy stopped being active for a moment: STREAM_END "state
/// changed") while the replica still wants it is asked for again, so the replica resumes once the copy is active
/// again; it used to stay ended until the vBucket list changed, and the replica fell behind for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_producer_ends_is_asked_for_again() {
    let (a, b, _stop, _feed) = replicated_pair().await;
    let mut client = a.connect().await;
    assert_eq!(set(&mut client, b"before", b"1", 0, 0).await.status, 0);
    eventually(|| replica_value(&b, b"before").is_ok(), "the replica to stream").await;
    let active_bucket = a.running.node.bucket("default").unwrap();
    let v = VbId(vb(b"before"));
    let uuid = active_bucket.stream_info(v).unwrap().failover.latest().uuid;
    active_bucket.set_vbucket_state(v, VbState::Dead, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    active_bucket.set_vbucket_state(v, VbState::Active, uuid ^ 1);
    let key = (0..).map(|i| format!("after-{i}")).find(|k| vb(k.as_bytes()) == v.0).expect("a key");
    assert_eq!(set(&mut client, key.as_bytes(), b"2", 0, 0).await.status, 0);
    eventually(|| replica_value(&b, key.as_bytes()).is_ok(), "the replica to stream the vBucket again").await;
    a.stop().await;
    b.stop().await;
}

/// Under unordered execution a connection's durable writes wait side by side, each until its own durability
/// timeout: with no replica acknowledging, a write sent later with a shorter timeout is answered
/// SYNC_WRITE_AMBIGUOUS first, a plain request behind both is answered at once, and both prepares are aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_writes_in_flight_time_out_each_at_its_own_deadline() {
    let a = TestNode::start_with(|c| c.replicas = 1).await;
    let bucket = a.running.node.bucket("default").unwrap();
    for v in 0..1024 {
        bucket.set_replication_chain(VbId(v), &[Some(2)]);
    }
    let mut features = settee_testkit::SDK_FEATURES.to_vec();
    features.push(settee_mcbp::Feature::UnorderedExecution);
    let mut c =
        settee_testkit::Connection::connect(a.kv_addr(), ADMIN, PASSWORD, Some("default"), &features).await.unwrap();
    let (slow, fast) = (c.key(0, b"slow"), c.key(0, b"fast"));
    // Majority with a 1,500 ms timeout, then one with 300 ms (frame id 1, length 3: level 1, the timeout).
    let slow_req = Request {
        magic: Magic::AltClientRequest,
        framing: &[0x13, 0x01, 0x05, 0xdc],
        vbucket: vb(b"slow"),
        ..req(0x01, &slow, &[0; 8], b"1")
    };
    let fast_req = Request {
        magic: Magic::AltClientRequest,
        framing: &[0x13, 0x01, 0x01, 0x2c],
        vbucket: vb(b"fast"),
        ..req(0x01, &fast, &[0; 8], b"1")
    };
    let slow_opaque = c.queue(&slow_req);
    let fast_opaque = c.queue(&fast_req);
    let missing = c.key(0, b"missing");
    let get_opaque = c.queue(&Request { vbucket: vb(b"missing"), ..req(0x00, &missing, &[], &[]) });
    c.flush().await.unwrap();
    let mut replies = Vec::new();
    for _ in 0..3 {
        let r = c.read_response().await.unwrap();
        replies.push((r.opaque, r.status));
    }
    assert_eq!(replies, [(get_opaque, 0x01), (fast_opaque, 0xa3), (slow_opaque, 0xa3)]);
    assert_eq!(bucket.pending_prepares(VbId(vb(b"slow"))), 0, "the timed-out prepare was aborted");
    assert_eq!(bucket.pending_prepares(VbId(vb(b"fast"))), 0, "the timed-out prepare was aborted");
    assert_eq!(set(&mut c, b"fast", b"2", 0, 0).await.status, 0, "the key is free again");
    a.stop().await;
}
