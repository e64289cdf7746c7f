//! Peers that accept connections and then never answer, or stop answering: a replication feed must not wait on
//! one forever (issue 21 item 6). Each test runs the real feed against a fake producer on a real socket, with short
//! timeouts, and proves the feed gives the connection up and connects again (the fake counts connections).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_server::dcp::consumer::{self, FeedSpec, FeedTimeouts};
use settee_testkit::{TestNode, ADMIN, PASSWORD};
use settee_types::VbId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How a fake producer treats each connection it accepts.
#[derive(Clone, Copy)]
enum Fake {
    /// Reads and never answers anything.
    Mute,
    /// Answers every request with success until the feed asks for a stream, then goes silent (no noops).
    SilentAfterHandshake,
}

/// Starts a fake producer; returns its address and the number of connections it has accepted.
async fn fake_producer(kind: Fake) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(sock, kind));
        }
    });
    (addr, accepted)
}

async fn serve(mut sock: TcpStream, kind: Fake) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut silent = matches!(kind, Fake::Mute);
    while let Ok(n) = sock.read(&mut chunk).await {
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Ok(Some((req, used))) = settee_mcbp::decode_request(&buf, 1 << 20) {
            silent |= req.opcode == settee_mcbp::Opcode::DcpStreamReq as u8;
            let header = success_header(req.opcode, req.opaque);
            buf.drain(..used);
            if !silent && sock.write_all(&header).await.is_err() {
                return;
            }
        }
    }
}

/// A response header with status success and no body.
fn success_header(opcode: u8, opaque: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0] = 0x81;
    h[1] = opcode;
    h[12..16].copy_from_slice(&opaque.to_be_bytes());
    h
}

/// Runs a feed of the test node's bucket against `source` with short timeouts until `accepted` counts a second
/// connection, which proves the feed left the first one.
async fn feed_reconnects(source: std::net::SocketAddr, accepted: &AtomicUsize, what: &str) {
    let node = TestNode::start().await;
    let bucket = node.running.node.bucket("default").expect("bucket");
    let timeouts = FeedTimeouts {
        handshake: Duration::from_millis(300),
        silence: Duration::from_millis(300),
        write: Duration::from_millis(300),
    };
    let spec = FeedSpec {
        source,
        vbuckets: vec![VbId(0)],
        username: ADMIN.into(),
        password: PASSWORD.into(),
        name: "replication:test".into(),
        bind: None,
        timeouts,
        tls: Default::default(),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (_list, list_rx) = watch::channel(spec.vbuckets.clone());
    let feed = tokio::spawn(consumer::run(bucket, spec, list_rx, stop_rx));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while accepted.load(Ordering::SeqCst) < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the feed never left a producer that {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    stop_tx.send(true).expect("stop");
    feed.await.expect("the feed stops");
    node.stop().await;
}

/// A producer that accepts the connection and never answers the handshake: the feed used to wait on it forever
/// (no replica progress, no reconnection); it now gives up after the handshake timeout and connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_leaves_a_producer_that_never_answers_the_handshake() {
    let (addr, accepted) = fake_producer(Fake::Mute).await;
    feed_reconnects(addr, &accepted, "never answers").await;
}

/// A producer that completes the handshake and then sends nothing at all (no items, no noops, although the feed
/// asked for noops): the feed used to wait on it forever; it now drops the connection after the silence timeout
/// and connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_leaves_a_producer_that_falls_silent() {
    let (addr, accepted) = fake_producer(Fake::SilentAfterHandshake).await;
    feed_reconnects(addr, &accepted, "falls silent").await;
}
