//! Hostile clients (issue 17, item 5): privileges a command needs beyond reading documents, and what becomes of a
//! connection whose user is deleted. Each test runs a real node on real sockets.

use std::time::Duration;

use settee_client::Connection;
use settee_mcbp::dcp::{DcpOpen, DcpOpenFlags};
use settee_mcbp::Request;
use settee_server::auth::Role;
use settee_testkit::{TestNode, ADMIN, PASSWORD};

use crate::helpers::req;

/// The status kv_engine answers a command the user lacks the privilege for.
const EACCESS: u16 = 0x24;

/// Adds (or replaces) a user through the cluster metadata, as the REST API does.
pub async fn add_user(node: &TestNode, id: &str, password: &str, roles: &str) {
    let roles = Role::parse_list(roles).expect("roles");
    let (id, password) = (id.to_owned(), password.to_owned());
    let change = node.running.node.propose_user_change(move |u| u.upsert(&id, "", Some(&password), roles));
    change.await.expect("proposed").expect("user stored");
}

async fn delete_user(node: &TestNode, id: &str) {
    let id = id.to_owned();
    let change = node.running.node.propose_user_change(move |u| Ok::<bool, ()>(u.delete(&id)));
    assert!(change.await.expect("proposed").expect("deleted"), "the user existed");
}

async fn connect_as(node: &TestNode, user: &str, password: &str) -> Connection {
    Connection::connect(node.kv_addr(), user, password, Some("default"), &[]).await.expect("connect")
}

/// Sends DCP_OPEN (producer) and returns the reply's status.
async fn dcp_open(c: &mut Connection, name: &str) -> u16 {
    let mut frame = Vec::new();
    DcpOpen { opaque: 7, flags: DcpOpenFlags::PRODUCER, name: name.as_bytes(), value: &[] }.encode(&mut frame);
    c.send_raw(&frame).await.expect("send");
    c.read_response().await.expect("reply").status
}

/// Waits (up to `limit`) for the server to close the connection; true if it did.
async fn closed_within(c: &mut Connection, limit: Duration) -> bool {
    tokio::time::timeout(limit, c.closed_by_server()).await.unwrap_or(false)
}

/// Regression: a user with only `data_reader[default]` could open a DCP producer and stream every document. Proves
/// DCP_OPEN needs the DCP privilege: data_reader gets EACCESS, data_dcp_reader and the administrator (the identity
/// the node's own replication connections use) open the producer.
#[tokio::test]
async fn dcp_open_needs_the_dcp_privilege_not_just_read_access() {
    let node = TestNode::start().await;
    add_user(&node, "reader", "reader-pw", "data_reader[default]").await;
    add_user(&node, "streamer", "streamer-pw", "data_dcp_reader[default]").await;
    let mut reader = connect_as(&node, "reader", "reader-pw").await;
    assert_eq!(dcp_open(&mut reader, "probe").await, EACCESS);
    let mut streamer = connect_as(&node, "streamer", "streamer-pw").await;
    assert_eq!(dcp_open(&mut streamer, "backup").await, 0);
    let mut admin = connect_as(&node, ADMIN, PASSWORD).await;
    assert_eq!(dcp_open(&mut admin, "replication:9:default").await, 0);
    node.stop().await;
}

/// Regression: STAT answered any connection with a bucket selected. Proves it needs the bucket's stats privilege
/// (Couchbase's SimpleStats): a data_reader gets EACCESS, data_monitoring (which can select the bucket for that
/// alone) and the administrator get the statistics.
#[tokio::test]
async fn stat_needs_the_stats_privilege() {
    let node = TestNode::start().await;
    add_user(&node, "reader", "reader-pw", "data_reader[default]").await;
    add_user(&node, "monitor", "monitor-pw", "data_monitoring[default]").await;
    let mut reader = connect_as(&node, "reader", "reader-pw").await;
    assert_eq!(reader.call(0x10, b"", &[], &[], 0, 0).await.unwrap().status, EACCESS);
    for (user, password) in [("monitor", "monitor-pw"), (ADMIN, PASSWORD)] {
        let mut c = connect_as(&node, user, password).await;
        let first = c.call(0x10, b"", &[], &[], 0, 0).await.unwrap();
        assert_eq!(first.status, 0, "{user}");
        assert!(!first.key.is_empty(), "{user}: the first reply names a statistic");
    }
    node.stop().await;
}

/// Regression: a connection whose user was deleted kept being answered. Proves the next request of a deleted user's
/// KV connection closes it without an answer, and that a DCP producer opened by a deleted user stops too, while a
/// connection of another user is unaffected.
#[tokio::test]
async fn connections_of_a_deleted_user_are_closed() {
    let node = TestNode::start().await;
    add_user(&node, "gone", "gone-pw", "data_dcp_reader[default]").await;
    add_user(&node, "stays", "stays-pw", "data_reader[default]").await;
    let mut kv = connect_as(&node, "gone", "gone-pw").await;
    let mut producer = connect_as(&node, "gone", "gone-pw").await;
    let mut other = connect_as(&node, "stays", "stays-pw").await;
    let get = |c: &Connection| c.key(0, b"missing");
    let key = get(&kv);
    assert_eq!(kv.send(&req(0x00, &key, &[], &[])).await.unwrap().status, 0x01, "KEY_ENOENT before the delete");
    assert_eq!(dcp_open(&mut producer, "gone-stream").await, 0);

    delete_user(&node, "gone").await;
    kv.send_raw(&{
        let mut frame = Vec::new();
        settee_mcbp::encode_request(&mut frame, &req(0x00, &key, &[], &[]));
        frame
    })
    .await
    .unwrap();
    assert!(closed_within(&mut kv, Duration::from_secs(10)).await, "the deleted user's kv connection closes");
    assert!(closed_within(&mut producer, Duration::from_secs(10)).await, "the deleted user's producer closes");
    let key = get(&other);
    assert_eq!(other.send(&req(0x00, &key, &[], &[])).await.unwrap().status, 0x01, "another user is unaffected");
    node.stop().await;
}

/// How many answers arrive on `c` within `limit`.
async fn answers_within(c: &mut Connection, limit: Duration) -> usize {
    let mut answers = 0;
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::timeout_at(deadline, c.read_response()).await.is_ok_and(|r| r.is_ok()) {
        answers += 1;
    }
    answers
}

/// Regression: wrong-password PLAIN attempts ran PBKDF2 on the KV worker thread inside the batch, so four
/// connections pipelining bad logins stalled every other client of that worker for seconds. Proves, on a node with
/// a single worker thread, that another connection's GETs are each answered within a generous 2 s while four
/// connections with 300 pipelined bad logins each are under way, and that the flood is still being answered (slowly:
/// each failure on a connection waits longer than the one before) when the GETs are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_plain_logins_do_not_stall_the_other_connections_of_their_worker() {
    let node = TestNode::start_with(|c| c.kv_threads = 1).await;
    let mut victim = node.connect().await;
    let bad_login = Request { value: b"\0Administrator\0not-the-password", ..Request::client(0x21, b"PLAIN") };
    let mut flood = Vec::new();
    for _ in 0..4 {
        let mut c = Connection::connect_raw(node.kv_addr()).await.expect("connect");
        for _ in 0..300 {
            c.queue(&bad_login);
        }
        c.flush().await.expect("flood sent");
        flood.push(c);
    }
    let key = victim.key(0, b"victim-key");
    for i in 0..20 {
        let get = tokio::time::timeout(Duration::from_secs(2), victim.send(&req(0x00, &key, &[], &[]))).await;
        assert_eq!(get.expect("GET answered within 2 s").unwrap().status, 0x01, "GET {i}");
    }
    for c in &mut flood {
        let answered = answers_within(c, Duration::from_millis(200)).await;
        assert!(answered < 300, "the flood is still under way when the GETs are done ({answered} answered)");
    }
    node.stop().await;
}

/// A KV header announcing `body` bytes of GET, without the body.
fn header_only(body: u32) -> Vec<u8> {
    let mut frame = vec![0u8; 24];
    frame[0] = 0x80;
    frame[8..12].copy_from_slice(&body.to_be_bytes());
    frame
}

/// Regression: connections that never authenticate (silent, a partial header, a HELLO and nothing more) stayed open
/// for minutes. Proves each is closed once the authentication timeout (1 s here) passes, while an authenticated
/// connection idle for as long stays open and is answered.
#[tokio::test]
async fn unauthenticated_connections_are_closed_after_the_auth_timeout() {
    let node = TestNode::start_with(|c| c.kv_auth_timeout_secs = 1).await;
    let mut authenticated = node.connect().await;
    let mut silent = Connection::connect_raw(node.kv_addr()).await.unwrap();
    let mut partial = Connection::connect_raw(node.kv_addr()).await.unwrap();
    partial.send_raw(&header_only(10)[..10]).await.unwrap();
    let mut hello_only = Connection::connect_raw(node.kv_addr()).await.unwrap();
    hello_only.hello("hostile", &[]).await.unwrap();
    for (what, c) in [("silent", &mut silent), ("partial header", &mut partial), ("hello only", &mut hello_only)] {
        assert!(closed_within(c, Duration::from_secs(10)).await, "{what} connection closed");
    }
    let key = authenticated.key(0, b"k");
    assert_eq!(authenticated.send(&req(0x00, &key, &[], &[])).await.unwrap().status, 0x01, "still served");
    node.stop().await;
}

/// Regression: an unauthenticated client could declare a 29 MiB body and be buffered. Proves the header alone
/// closes such a connection (well before the authentication timeout, set to a minute here), while the same frame
/// size is no reason to close an authenticated connection (which then waits for the body).
#[tokio::test]
async fn a_large_frame_from_an_unauthenticated_client_closes_the_connection_at_its_header() {
    let node = TestNode::start_with(|c| c.kv_auth_timeout_secs = 60).await;
    let mut hostile = Connection::connect_raw(node.kv_addr()).await.unwrap();
    hostile.send_raw(&header_only(29 << 20)).await.unwrap();
    assert!(closed_within(&mut hostile, Duration::from_secs(5)).await, "closed at the header");
    let mut client = node.connect().await;
    client.send_raw(&header_only(64 * 1024)).await.unwrap();
    assert!(!closed_within(&mut client, Duration::from_millis(500)).await, "an authenticated client may send it");
    node.stop().await;
}

/// Regression: 10,000 silent connections locked every legitimate client out (each new one was refused at accept
/// while the slots were held). Proves, with 20 slots all held by silent connections and a long authentication
/// timeout, that a legitimate client still connects, authenticates and is served, the oldest silent connection
/// being closed to make room.
#[tokio::test]
async fn a_flood_of_unauthenticated_connections_cannot_lock_out_a_client() {
    let node = TestNode::start_with(|c| {
        c.max_connections = 20;
        c.kv_auth_timeout_secs = 60;
    })
    .await;
    let mut flood = Vec::new();
    for _ in 0..20 {
        let mut c = Connection::connect_raw(node.kv_addr()).await.unwrap();
        c.hello("hostile", &[]).await.unwrap(); // answered: the connection holds a slot
        flood.push(c);
    }
    let mut client = tokio::time::timeout(Duration::from_secs(10), node.connect()).await.expect("admitted in time");
    let key = client.key(0, b"k");
    assert_eq!(client.send(&req(0x00, &key, &[], &[])).await.unwrap().status, 0x01);
    assert!(closed_within(&mut flood[0], Duration::from_secs(5)).await, "the oldest silent connection made room");
    node.stop().await;
}

/// A SET of `value_bytes` as raw bytes, to be sent in pieces; `key` as the connection encodes it.
fn raw_set(key: &[u8], value_bytes: usize) -> Vec<u8> {
    let body = 8 + key.len() + value_bytes;
    let mut frame = header_only(u32::try_from(body).expect("small enough"));
    frame[1] = 0x01;
    frame[2..4].copy_from_slice(&u16::try_from(key.len()).expect("short key").to_be_bytes());
    frame[4] = 8;
    frame.extend_from_slice(&[0u8; 8]);
    frame.extend_from_slice(key);
    frame.resize(frame.len() + value_bytes, b'x');
    frame
}

/// Regression: a thousand connections each streaming a 19 MB SET grew the process one-for-one with the bytes sent,
/// because only each frame was capped. Proves, with a read-buffer budget of 8 MiB, that six clients that have all
/// started a 3 MiB SET (the first 64 KiB of each is in before any sends the rest) never hold more than 8 MiB between
/// them (the others wait, TCP back-pressure), that every SET is still stored, and that the budget is all given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_frames_wait_for_read_buffer_budget_instead_of_growing_memory() {
    let node = TestNode::start_with(|c| {
        c.kv_read_buffer_mb = 8;
        c.bucket_type = settee_server::config::BucketTypeArg::Ephemeral;
    })
    .await;
    let started = std::sync::Arc::new(tokio::sync::Barrier::new(6));
    let mut writers = Vec::new();
    for i in 0..6 {
        let (mut c, started) = (node.connect().await, started.clone());
        writers.push(tokio::spawn(async move {
            let frame = raw_set(&c.key(0, format!("big-{i}").as_bytes()), 3 << 20);
            c.send_raw(&frame[..64 * 1024]).await.unwrap();
            started.wait().await;
            c.send_raw(&frame[64 * 1024..]).await.unwrap();
            c.read_response().await.unwrap().status
        }));
    }
    for writer in writers {
        let status = tokio::time::timeout(Duration::from_secs(60), writer).await.expect("stored in time").unwrap();
        assert_eq!(status, 0);
    }
    let budget = &node.running.node.read_budget;
    assert!(budget.peak_bytes() <= 8 << 20, "at most the budget was held at once: {}", budget.peak_bytes());
    assert!(budget.peak_bytes() > 3 << 20, "the large frames did reserve budget");
    assert_eq!(budget.held_bytes(), 0, "everything given back");
    node.stop().await;
}

/// Proves a client that starts a large frame and stops sending is closed once the frame timeout (1 s here) passes,
/// giving its read-buffer budget back, so a stalled sender cannot keep the budget from others.
#[tokio::test]
async fn a_stalled_large_frame_is_closed_and_its_budget_freed() {
    let node = TestNode::start_with(|c| c.kv_frame_timeout_secs = 1).await;
    let mut stalled = node.connect().await;
    let frame = raw_set(b"stalled-k", 4 << 20);
    stalled.send_raw(&frame[..1 << 20]).await.unwrap();
    assert!(closed_within(&mut stalled, Duration::from_secs(10)).await, "closed after the frame timeout");
    assert_eq!(node.running.node.read_budget.held_bytes(), 0);
    node.stop().await;
}

/// Reads raw frames (DCP messages are requests from the server) until a STREAM_END; returns how many mutations came.
async fn read_stream_to_its_end(stream: &mut settee_client::KvStream, mut buf: Vec<u8>) -> usize {
    use tokio::io::AsyncReadExt;
    let mut mutations = 0;
    loop {
        while buf.len() >= 24 {
            let total = 24 + u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
            if buf.len() < total {
                break;
            }
            match (buf[0], buf[1]) {
                (0x80, 0x57) => mutations += 1,
                (0x80, 0x55) => return mutations,
                (0x81, 0x53) => assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 0, "stream accepted"),
                _ => {}
            }
            buf.drain(..total);
        }
        let mut chunk = vec![0u8; 256 * 1024];
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the producer closed before STREAM_END");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Regression: a DCP backfill ignored flow control and read a whole vBucket into the producer's queue at once, so 16
/// producers whose consumers never read each held a vBucket in memory. Proves a stream over a vBucket of 10 MiB
/// (40 documents of 256 KiB) delivers every document while the bucket's producers never hold more than 5 MiB
/// queued: the backfill is read in pieces as the consumer takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dcp_backfill_is_read_in_pieces_not_a_whole_vbucket_at_once() {
    let node = TestNode::start_with(|c| c.bucket_type = settee_server::config::BucketTypeArg::Ephemeral).await;
    let mut writer = node.connect().await;
    let target = crate::helpers::vb(b"dcp-0");
    let keys: Vec<String> =
        (0..).map(|i| format!("dcp-{i}")).filter(|k| crate::helpers::vb(k.as_bytes()) == target).take(40).collect();
    let value = vec![b'v'; 256 * 1024];
    for key in &keys {
        assert_eq!(crate::helpers::set(&mut writer, key.as_bytes(), &value, 0, 0).await.status, 0);
    }
    let bucket = node.running.node.bucket("default").unwrap();
    let high = bucket.stream_info(settee_types::VbId(target)).unwrap().high_seqno;
    let mut dcp = connect_as(&node, ADMIN, PASSWORD).await;
    assert_eq!(dcp_open(&mut dcp, "backfill-test").await, 0);
    let mut frame = Vec::new();
    settee_mcbp::dcp::StreamReq {
        opaque: 1,
        vbucket: target,
        flags: settee_mcbp::dcp::StreamFlags(0),
        start_seqno: 0,
        end_seqno: high,
        vb_uuid: 0,
        snap_start: 0,
        snap_end: 0,
        value: &[],
    }
    .encode(&mut frame);
    dcp.send_raw(&frame).await.unwrap();
    let (mut socket, unread) = dcp.into_parts();
    let mutations =
        tokio::time::timeout(Duration::from_secs(60), read_stream_to_its_end(&mut socket, unread)).await.unwrap();
    assert_eq!(mutations, 40, "every document streamed");
    let peak = bucket.dcp_hub.queued_bytes_peak();
    assert!(peak > 0 && peak <= 5 << 20, "the producer held at most 5 MiB queued at once, not the vBucket: {peak}");
    node.stop().await;
}

/// Proves a client that sends requests and never reads the replies is closed once it has taken nothing for the
/// write timeout (1 s here), instead of holding the connection (its buffers, its place) forever: the replies to 64
/// GETs of a 1 MiB document cannot all fit in the socket buffers, the client reads nothing for 4 s, then finds the
/// connection closed after what was buffered. Before the write timeout the server waited forever, resumed when the
/// client read, and left the connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_replies_is_closed_after_the_write_timeout() {
    let node = TestNode::start_with(|c| c.kv_write_timeout_secs = 1).await;
    let mut c = node.connect().await;
    assert_eq!(crate::helpers::set(&mut c, b"big", &vec![b'x'; 1 << 20], 0, 0).await.status, 0);
    let k = c.key(0, b"big");
    for _ in 0..64 {
        c.queue(&Request { vbucket: crate::helpers::vb(b"big"), ..req(0x00, &k, &[], &[]) });
    }
    c.flush().await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(closed_within(&mut c, Duration::from_secs(20)).await, "closed after the write timeout");
    let mut other = node.connect().await;
    assert_eq!(crate::helpers::get(&mut other, b"big").await.status, 0, "other clients are served");
    node.stop().await;
}

/// Proves a management-port client that pipelines requests and never reads the answers is closed once the server
/// could write nothing for the write timeout (1 s here): the answers to 1,000 bucket listings cannot all fit in the
/// socket buffers, and the client, still reading nothing, finds its connection closed (its writes fail). Before the
/// guard the server waited forever with the connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_client_that_never_reads_is_closed_after_the_write_timeout() {
    use tokio::io::AsyncWriteExt;
    let node = TestNode::start_with(|c| c.rest_write_timeout_secs = 1).await;
    let addr = node.running.mgmt_addr;
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = "QWRtaW5pc3RyYXRvcjpwYXNzd29yZA=="; // Administrator:password
    let one = format!("GET /pools/default/buckets HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\n\r\n");
    s.write_all(one.repeat(1000).as_bytes()).await.expect("send");
    assert!(closed_while_unread(&mut s, one.as_bytes()).await, "the connection was closed after the write timeout");
    let (status, _) = crate::query::get_at(addr, "/pools/default/buckets").await;
    assert_eq!(status, 200, "other clients are served");
    node.stop().await;
}

/// Proves a management-port connection on which nothing is ever sent is closed after the write timeout (1 s
/// here): axum's server has no header-read timeout, and such a connection used to stay open for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_connection_that_never_sends_a_request_is_closed() {
    use tokio::io::AsyncReadExt;
    let node = TestNode::start_with(|c| c.rest_write_timeout_secs = 1).await;
    let mut s = tokio::net::TcpStream::connect(node.running.mgmt_addr).await.expect("connect");
    let mut sink = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the silent connection was closed");
    node.stop().await;
}

/// Whether the server closes `s` within 60 s while the client reads nothing: the client keeps sending `probe`
/// (without reading), and a closed connection makes a write fail. A server that never closes leaves the writes
/// succeeding, or blocking once its receive buffer is full.
async fn closed_while_unread(s: &mut tokio::net::TcpStream, probe: &[u8]) -> bool {
    use tokio::io::AsyncWriteExt;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Ok(Err(_)) = tokio::time::timeout(Duration::from_secs(1), s.write_all(probe)).await {
            return true;
        }
    }
    false
}
