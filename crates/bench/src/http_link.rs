//! One HTTP/1.1 connection to a query service, kept alive from request to request as an SDK's query connection
//! is: `POST /query/service` with a JSON body and Basic auth, the whole answer read back. One request at a time
//! (HTTP/1.1 has no pipelining worth the name); a connection that closed is opened again before the next request.
//!
//! It is hyper 1's connection-level client, not its pool: a benchmark connection is exactly one socket.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// The path the SDKs post queries to.
const QUERY_PATH: &str = "/query/service";
/// The largest answer read (a page of 100 YCSB records is ~120 KB; anything near this is a runaway query).
const ANSWER_BYTES_MAX: usize = 64 << 20;

/// Where queries go and as whom; shared by the connections to one query node.
#[derive(Debug)]
pub(crate) struct QueryEndpoint {
    pub addr: SocketAddr,
    host: HeaderValue,
    authorization: HeaderValue,
}

impl QueryEndpoint {
    pub(crate) fn new(addr: SocketAddr, user: &str, password: &str) -> Result<QueryEndpoint, HttpError> {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let bad = |what: &'static str| HttpError::Header { addr, what };
        Ok(QueryEndpoint {
            addr,
            host: HeaderValue::from_str(&addr.to_string()).map_err(|_| bad("host"))?,
            authorization: HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| bad("credentials"))?,
        })
    }
}

/// Why a query could not be sent or its answer read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("query service {addr}: connect: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("query service {addr}: {source}")]
    Http { addr: SocketAddr, source: hyper::Error },
    #[error("query service {addr}: reading the answer: {why}")]
    Body { addr: SocketAddr, why: String },
    #[error("query service {addr}: the {what} does not fit in a header")]
    Header { addr: SocketAddr, what: &'static str },
}

/// One kept-alive connection.
pub(crate) struct HttpLink {
    endpoint: Arc<QueryEndpoint>,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Connections opened, the first included.
    pub opened: u64,
}

impl HttpLink {
    /// Opens the connection (so that a bad endpoint fails the run before it starts).
    pub(crate) async fn connect(endpoint: Arc<QueryEndpoint>) -> Result<HttpLink, HttpError> {
        let mut link = HttpLink { endpoint, sender: None, opened: 0 };
        link.open().await?;
        Ok(link)
    }

    async fn open(&mut self) -> Result<(), HttpError> {
        let addr = self.endpoint.addr;
        let stream =
            tokio::net::TcpStream::connect(addr).await.map_err(|source| HttpError::Connect { addr, source })?;
        stream.set_nodelay(true).map_err(|source| HttpError::Connect { addr, source })?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|source| HttpError::Http { addr, source })?;
        // The connection's I/O runs as a task of this thread's runtime; it ends when the sender is dropped or the
        // server closes the socket (the sender then reports closed and the next request reopens).
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.sender = Some(sender);
        self.opened += 1;
        Ok(())
    }

    /// Posts `body` and returns the answer's HTTP status and body. A request the connection closed under before
    /// sending it (the server ended a kept-alive connection) is sent once more on a new connection; any other
    /// failure closes the connection, and the next call opens a new one.
    pub(crate) async fn post(&mut self, body: Bytes) -> Result<(u16, Bytes), HttpError> {
        let addr = self.endpoint.addr;
        let mut resent = false;
        loop {
            if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
                self.sender = None;
                self.open().await?;
            }
            match self.exchange(body.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(e) => {
                    self.sender = None;
                    match e {
                        Exchange::NotSent(_) if !resent => resent = true,
                        Exchange::NotSent(source) | Exchange::Http(source) => {
                            return Err(HttpError::Http { addr, source })
                        }
                        Exchange::Body(why) => return Err(HttpError::Body { addr, why }),
                    }
                }
            }
        }
    }

    async fn exchange(&mut self, body: Bytes) -> Result<(u16, Bytes), Exchange> {
        let Some(sender) = self.sender.as_mut() else {
            return Err(Exchange::Body("no connection".into()));
        };
        sender.ready().await.map_err(Exchange::NotSent)?;
        let mut request =
            Request::post(QUERY_PATH).body(Full::new(body)).map_err(|e| Exchange::Body(format!("request: {e}")))?;
        let headers = request.headers_mut();
        headers.insert(HOST, self.endpoint.host.clone());
        headers.insert(AUTHORIZATION, self.endpoint.authorization.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let response = sender.send_request(request).await.map_err(|e| {
            if e.is_canceled() {
                Exchange::NotSent(e)
            } else {
                Exchange::Http(e)
            }
        })?;
        let status = response.status().as_u16();
        let bytes = Limited::new(response.into_body(), ANSWER_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| Exchange::Body(e.to_string()))?
            .to_bytes();
        Ok((status, bytes))
    }
}

enum Exchange {
    /// The connection closed before the request went out: safe to send again.
    NotSent(hyper::Error),
    Http(hyper::Error),
    Body(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Reads one HTTP/1.1 request (headers and a Content-Length body) from `s`; returns its text.
    async fn read_request(s: &mut tokio::net::TcpStream) -> Option<String> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if body.len() >= len {
                    return Some(text);
                }
            }
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Two requests share one socket (keep-alive) and carry the path, Basic credentials and JSON body; when the
    /// server closes the socket, the next request opens another one.
    #[tokio::test]
    async fn requests_keep_the_connection_alive_and_reopen_after_a_close() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            // First socket: two requests, then close. Second socket: one request.
            for per_socket in [2, 1] {
                let (mut s, _) = listener.accept().await.unwrap();
                for i in 0..per_socket {
                    let req = read_request(&mut s).await.expect("a request");
                    seen.push(req);
                    let body = format!(r#"{{"results":[{i}],"status":"success"}}"#);
                    let close = if i + 1 == per_socket { "Connection: close\r\n" } else { "" };
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{close}\r\n{body}", body.len());
                    s.write_all(reply.as_bytes()).await.unwrap();
                }
            }
            seen
        });
        let endpoint = Arc::new(QueryEndpoint::new(addr, "Administrator", "password").unwrap());
        let mut link = HttpLink::connect(endpoint).await.unwrap();
        for expected in [0, 1, 0] {
            let (status, body) = link.post(Bytes::from_static(br#"{"statement":"SELECT 1"}"#)).await.unwrap();
            assert_eq!(status, 200);
            assert_eq!(body, format!(r#"{{"results":[{expected}],"status":"success"}}"#));
        }
        assert_eq!(link.opened, 2, "one socket for the first two requests, a second after the server closed");
        let seen = server.await.unwrap();
        assert!(seen[0].starts_with("POST /query/service HTTP/1.1\r\n"), "{}", seen[0]);
        let lower = seen[0].to_ascii_lowercase();
        assert!(lower.contains("authorization: basic qwrtaw5pc3ryyxrvcjpwyxnzd29yza=="), "{}", seen[0]);
        assert!(lower.contains("content-type: application/json"));
        assert!(seen[0].ends_with(r#"{"statement":"SELECT 1"}"#));
    }

    /// A refused connection is an error naming the endpoint.
    #[tokio::test]
    async fn a_refused_connection_names_the_endpoint() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let endpoint = Arc::new(QueryEndpoint::new(addr, "u", "p").unwrap());
        let err = HttpLink::connect(endpoint).await.err().expect("refused");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
