//! The query service under bad conditions, on a real node and real sockets: a request past its timeout, one past
//! its memory quota, clients that go away or never read.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use settee_testkit::TestNode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one query over a new connection and returns the connection (unread).
async fn send_query(node: &TestNode, body: &str) -> TcpStream {
    send_query_to(node.running.query_addr, body).await
}

async fn send_query_to(addr: std::net::SocketAddr, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect to the query port");
    let auth = "QWRtaW5pc3RyYXRvcjpwYXNzd29yZA=="; // Administrator:password
    let req = format!(
        "POST /query/service HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("send");
    s
}

/// Runs a query and returns (HTTP status, JSON answer). The answer is read until the connection closes or the
/// JSON is complete.
async fn query(node: &TestNode, body: &str) -> (u16, Value) {
    query_at(node.running.query_addr, body).await
}

/// [`query`] against the query port at `addr`.
pub(crate) async fn query_at(addr: std::net::SocketAddr, body: &str) -> (u16, Value) {
    let mut s = send_query_to(addr, body).await;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(60), s.read(&mut buf))
            .await
            .expect("answer in time")
            .expect("read");
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(v) = parse_http(&raw) {
            return v;
        }
    }
    parse_http(&raw).expect("a complete HTTP answer")
}

/// `GET path` on `addr` as the administrator; returns (HTTP status, JSON answer or Null).
pub(crate) async fn get_at(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let auth = "QWRtaW5pc3RyYXRvcjpwYXNzd29yZA=="; // Administrator:password
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
        .await
        .expect("answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, parse_http(&raw).map(|(_, v)| v).unwrap_or(Value::Null))
}

fn parse_http(raw: &[u8]) -> Option<(u16, Value)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)?
    } else {
        body.to_string()
    };
    serde_json::from_str(&body).ok().map(|v| (status, v))
}

fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        if n == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..n)?);
        body = rest.get(n + 2..)?;
    }
}

/// A statement whose answer is large (about 6 MB) and produced fast.
const BIG: &str = r#"{"statement": "SELECT RAW REPEAT('x', 1000) FROM ARRAY_RANGE(0, 6000) AS i"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_timeout_stops_with_1080() {
    // Proves the server-side timeout: a 16-million-row cross product asked to finish in 100 ms ends with status
    // "timeout" and error 1080 naming the limit, long before it could have finished.
    let node = TestNode::start().await;
    let started = Instant::now();
    let body = r#"{"statement": "SELECT COUNT(1) FROM ARRAY_RANGE(0, 4000) AS a, ARRAY_RANGE(0, 4000) AS b", "timeout": "100ms"}"#;
    let (_, answer) = query(&node, body).await;
    assert_eq!(answer["status"], "timeout", "{answer}");
    assert_eq!(answer["errors"][0]["code"], 1080);
    assert_eq!(answer["errors"][0]["msg"], "Timeout 100ms exceeded");
    assert!(started.elapsed() < Duration::from_secs(20));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_memory_quota_fails_with_5500() {
    // Proves `memory_quota`: sorting 300,000 rows in 1 MiB fails with 5500 instead of growing the node; the same
    // statement with LIMIT (a bounded top-k) fits.
    let node = TestNode::start().await;
    let body = r#"{"statement": "SELECT RAW i FROM ARRAY_RANGE(0, 300000) AS i ORDER BY i DESC", "memory_quota": 1}"#;
    let (_, answer) = query(&node, body).await;
    assert_eq!(answer["errors"][0]["code"], 5500, "{answer}");
    let body =
        r#"{"statement": "SELECT RAW i FROM ARRAY_RANGE(0, 300000) AS i ORDER BY i DESC LIMIT 3", "memory_quota": 1}"#;
    let (status, answer) = query(&node, body).await;
    assert_eq!((status, &answer["results"]), (200, &serde_json::json!([299999, 299998, 299997])), "{answer}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_its_request() {
    // Proves that closing the connection mid-answer stops the request (it leaves the active set) instead of
    // running it to the end.
    let node = TestNode::start().await;
    let mut s = send_query(&node, BIG).await;
    let mut first = [0u8; 1024];
    let _ = s.read(&mut first).await.expect("the answer starts");
    drop(s);
    let q = node.running.node.query.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while q.requests.active_count() > 0 {
        assert!(Instant::now() < deadline, "the abandoned request is still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_read_do_not_block_others_and_are_cut_off() {
    // Proves that requests whose clients stop reading give their servicers back (more of them than there are
    // servicers, and other queries still answer at once), and that they are cancelled once they have waited
    // past the stall limit.
    let node = TestNode::start().await;
    let q = node.running.node.query.clone();
    q.send_stall_timeout_ms.store(5_000, Ordering::Relaxed);
    let mut stuck = Vec::new();
    for _ in 0..(q.servicers + 4) {
        stuck.push(send_query(&node, BIG).await);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while q.requests.active_count() < stuck.len() {
        assert!(Instant::now() < deadline, "the stuck requests did not all start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, answer) = query(&node, r#"{"statement": "SELECT RAW 1"}"#).await;
    assert_eq!((status, &answer["results"]), (200, &serde_json::json!([1])), "{answer}");
    // It was answered while every stuck request still held its place (none had reached the stall limit yet).
    assert!(q.requests.active_count() >= stuck.len(), "a query waited until the stuck ones were cut off");
    let deadline = Instant::now() + Duration::from_secs(30);
    while q.requests.active_count() > 0 {
        assert!(Instant::now() < deadline, "requests whose clients never read were not cut off");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(stuck);
    node.stop().await;
}
