//! The HTTP exchange under the node-to-node calls (`peers`): HTTP/1.1 over a fresh connection, closed after one
//! exchange. Not a hot path; Raft has its own pooled transport.

use std::net::IpAddr;
use std::time::Duration;

use base64::Engine;
use settee_client::{KvStream, TlsClient};
use settee_cluster::peer::Body;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest answer read from a peer.
const REPLY_BYTES_MAX: u64 = 1 << 20;

/// One HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// Sends `method path` to `addr` ("host:port") with Basic credentials and `body`, within `timeout`, from
/// `source` when one is given (`--bind-peer-connections`), over TLS when `tls` is given (node-to-node encryption:
/// the peer's certificate checked by it).
#[allow(clippy::too_many_arguments)]
pub async fn call(
    addr: &str,
    source: Option<IpAddr>,
    tls: Option<&TlsClient>,
    method: &str,
    path: &str,
    credentials: Option<(&str, &str)>,
    body: &Body,
    timeout: Duration,
) -> anyhow::Result<Reply> {
    match tokio::time::timeout(timeout, exchange(addr, source, tls, method, path, credentials, body)).await {
        Ok(r) => r,
        Err(_) => anyhow::bail!("{addr} did not answer {method} {path} within {timeout:?}"),
    }
}

async fn exchange(
    addr: &str,
    source: Option<IpAddr>,
    tls: Option<&TlsClient>,
    method: &str,
    path: &str,
    credentials: Option<(&str, &str)>,
    body: &Body,
) -> anyhow::Result<Reply> {
    let tcp = match source {
        None => TcpStream::connect(addr).await?,
        Some(ip) => {
            let mut targets = tokio::net::lookup_host(addr).await?;
            let target = targets
                .find(|t| t.is_ipv4() == ip.is_ipv4())
                .ok_or_else(|| anyhow::anyhow!("{addr} has no address of {ip}'s family"))?;
            settee_client::dial(target, Some(ip)).await?
        }
    };
    let mut stream = match tls {
        None => KvStream::Plain(tcp),
        Some(tls) => {
            let peer = tcp.peer_addr()?;
            KvStream::Tls(Box::new(tls.handshake(tcp, peer).await?))
        }
    };
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some((user, password)) = credentials {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    let (content_type, content) = match body {
        Body::Empty => ("application/x-www-form-urlencoded", ""),
        Body::Json(json) => ("application/json", json.as_str()),
        Body::Form(form) => ("application/x-www-form-urlencoded", form.as_str()),
    };
    if !content.is_empty() || method == "POST" {
        request.push_str(&format!("Content-Type: {content_type}\r\n"));
        request.push_str(&format!("Content-Length: {}\r\n", content.len()));
    }
    request.push_str("\r\n");
    request.push_str(content);
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut raw = Vec::new();
    stream.take(REPLY_BYTES_MAX).read_to_end(&mut raw).await?;
    parse(&raw)
}

fn parse(raw: &[u8]) -> anyhow::Result<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow::anyhow!("malformed HTTP answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("malformed HTTP status line"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Ok(Reply { status, body })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        // Proves the status and body come out of both framings axum may use.
        let r = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{}"));
        let r =
            parse(b"HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!((r.status, r.body.as_str()), (400, "abcde"));
        assert!(parse(b"garbage").is_err());
    }

    /// A peer that accepts the connection and never answers (a hung node) costs a call its timeout, never more:
    /// the call fails with a message naming the peer, and the caller (a peer call of the control plane) moves on.
    #[tokio::test]
    async fn a_peer_that_never_answers_fails_the_call_at_its_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let held = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(sock);
        });
        let r = call(&addr, None, None, "GET", "/pools", None, &Body::Empty, Duration::from_millis(200)).await;
        let error = r.expect_err("no answer").to_string();
        assert!(error.contains("did not answer GET /pools"), "{error}");
        held.abort();
    }
}
