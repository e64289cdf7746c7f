//! One KV connection: a socket, a read buffer that frames are decoded from in place, and a write buffer that
//! pipelined requests are queued into and flushed with one write.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};

use settee_mcbp::{
    decode_response, encode_leb128, encode_request, Feature, Magic, Opcode, Request, Response, WithMetaExtras,
};
use settee_types::limits::FRAME_BODY_BYTES_MAX;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

use crate::stream::KvStream;
use crate::tls::TlsClient;

/// A reply, owning its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedResponse {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub datatype: u8,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl OwnedResponse {
    fn of(r: &Response<'_>) -> OwnedResponse {
        OwnedResponse {
            opcode: r.opcode,
            status: r.status,
            opaque: r.opaque,
            cas: r.cas,
            datatype: r.datatype,
            extras: r.extras.to_vec(),
            key: r.key.to_vec(),
            value: r.value.to_vec(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed reply: {0}")]
    Protocol(String),
    #[error("{what} failed with status 0x{status:02x}")]
    Status { what: &'static str, status: u16 },
    #[error("connection closed")]
    Closed,
    #[error("bad cluster config: {0}")]
    Config(String),
}

/// How a connection proves who it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// SASL PLAIN: the password in the request (meant for TLS connections, or a trusted network).
    #[default]
    Plain,
    /// SASL SCRAM-SHA512: only a proof of the password crosses the wire, and the server proves it knows it too.
    ScramSha512,
    /// None: the TLS client certificate already authenticated the connection (the server maps it to a user).
    Certificate,
}

/// Initial read buffer; it grows to hold the largest frame seen.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// One KV connection.
///
/// Two ways to use it: `call`/`send` write one request and wait for its reply (tests, bootstrap); `queue`, `flush`,
/// `fill` and `next_response` pipeline many requests and decode their replies in place without copying (bench).
pub struct Connection {
    stream: KvStream,
    /// Received bytes live in `rbuf[rstart..rend]`; the rest of `rbuf` is zeroed space to read into.
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    next_opaque: u32,
    collections: bool,
    features: Vec<Feature>,
}

impl Connection {
    /// Connects without any handshake (for tests that drive the protocol by hand, and for plain memcached).
    pub async fn connect_raw(addr: std::net::SocketAddr) -> Result<Connection, ClientError> {
        Connection::connect_raw_from(addr, None).await
    }

    /// Connects without any handshake, from `source` when one is given (see [`crate::dial`]).
    pub async fn connect_raw_from(
        addr: std::net::SocketAddr,
        source: Option<std::net::IpAddr>,
    ) -> Result<Connection, ClientError> {
        Connection::connect_raw_with(addr, source, None).await
    }

    /// Connects without any handshake but TLS's when `tls` is given (the server's certificate checked against its
    /// roots: a certificate they do not sign fails here), from `source` when one is given.
    pub async fn connect_raw_with(
        addr: std::net::SocketAddr,
        source: Option<std::net::IpAddr>,
        tls: Option<&TlsClient>,
    ) -> Result<Connection, ClientError> {
        let tcp = crate::dial(addr, source).await?;
        tcp.set_nodelay(true)?;
        let stream = match tls {
            None => KvStream::Plain(tcp),
            Some(tls) => KvStream::Tls(Box::new(tls.handshake(tcp, addr).await?)),
        };
        Ok(Connection {
            stream,
            rbuf: vec![0; READ_BUFFER_BYTES],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(READ_BUFFER_BYTES),
            next_opaque: 1,
            collections: false,
            features: Vec::new(),
        })
    }

    /// Connects, negotiates `features`, authenticates with PLAIN and selects `bucket` (if any).
    pub async fn connect(
        addr: std::net::SocketAddr,
        user: &str,
        password: &str,
        bucket: Option<&str>,
        features: &[Feature],
    ) -> Result<Connection, ClientError> {
        Connection::connect_from(addr, None, user, password, bucket, features).await
    }

    /// [`Connection::connect`] from `source` when one is given (a node's replication connections with
    /// `--bind-peer-connections`).
    pub async fn connect_from(
        addr: std::net::SocketAddr,
        source: Option<std::net::IpAddr>,
        user: &str,
        password: &str,
        bucket: Option<&str>,
        features: &[Feature],
    ) -> Result<Connection, ClientError> {
        Connection::connect_with(addr, source, None, user, password, bucket, features).await
    }

    /// [`Connection::connect_from`] over TLS when `tls` is given (a node's replication connections when the
    /// cluster encrypts node-to-node traffic).
    pub async fn connect_with(
        addr: std::net::SocketAddr,
        source: Option<std::net::IpAddr>,
        tls: Option<&TlsClient>,
        user: &str,
        password: &str,
        bucket: Option<&str>,
        features: &[Feature],
    ) -> Result<Connection, ClientError> {
        let mut c = Connection::connect_raw_with(addr, source, tls).await?;
        c.hello("settee-client", features).await?;
        c.sasl_plain(user, password).await?;
        if let Some(b) = bucket {
            c.select_bucket(b).await?;
        }
        Ok(c)
    }

    /// [`Connection::connect_with`] authenticating by `auth` (another cluster's XDCR writers: SCRAM on a plain
    /// port, or a client certificate).
    pub async fn connect_as(
        addr: std::net::SocketAddr,
        tls: Option<&TlsClient>,
        auth: Auth,
        (user, password): (&str, &str),
        bucket: Option<&str>,
        features: &[Feature],
    ) -> Result<Connection, ClientError> {
        let mut c = Connection::connect_raw_with(addr, None, tls).await?;
        c.hello("settee-client", features).await?;
        c.authenticate(auth, user, password).await?;
        if let Some(b) = bucket {
            c.select_bucket(b).await?;
        }
        Ok(c)
    }

    /// Authenticates by `auth`: PLAIN, SCRAM-SHA512, or nothing to do (a client certificate).
    pub async fn authenticate(&mut self, auth: Auth, user: &str, password: &str) -> Result<(), ClientError> {
        match auth {
            Auth::Plain => self.sasl_plain(user, password).await,
            Auth::ScramSha512 => self.sasl_scram(user, password).await,
            Auth::Certificate => Ok(()),
        }
    }

    /// SASL SCRAM-SHA512: SASL_AUTH with the client-first message, SASL_STEP with the client-final one, and the
    /// server's signature checked.
    pub async fn sasl_scram(&mut self, user: &str, password: &str) -> Result<(), ClientError> {
        let mut scram = crate::scram::ScramClient::new(user, password);
        let mechanism = crate::scram::MECHANISM;
        let r = self.call(Opcode::SaslAuth as u8, mechanism, &[], &scram.first(), 0, 0).await?;
        if r.status != settee_types::Status::AuthContinue.code() {
            return Err(ClientError::Status { what: "SASL_AUTH", status: r.status });
        }
        let answer = scram.answer(&r.value).map_err(|e| ClientError::Protocol(format!("SCRAM: {e}")))?;
        let r = self.call(Opcode::SaslStep as u8, mechanism, &[], &answer, 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "SASL_STEP", status: r.status });
        }
        scram.verify(&r.value).map_err(|e| ClientError::Protocol(format!("SCRAM: {e}")))
    }

    /// HELLO: asks for `features` and records what the server agreed to.
    pub async fn hello(&mut self, agent: &str, features: &[Feature]) -> Result<(), ClientError> {
        let asked: Vec<u8> = features.iter().flat_map(|f| f.code().to_be_bytes()).collect();
        let r = self.call(Opcode::Hello as u8, agent.as_bytes(), &[], &asked, 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "HELLO", status: r.status });
        }
        self.features =
            r.value.chunks_exact(2).filter_map(|p| Feature::from_code(u16::from_be_bytes([p[0], p[1]]))).collect();
        self.collections = self.has(Feature::Collections);
        Ok(())
    }

    /// SASL PLAIN authentication.
    pub async fn sasl_plain(&mut self, user: &str, password: &str) -> Result<(), ClientError> {
        let mut plain = vec![0u8];
        plain.extend_from_slice(user.as_bytes());
        plain.push(0);
        plain.extend_from_slice(password.as_bytes());
        let r = self.call(Opcode::SaslAuth as u8, b"PLAIN", &[], &plain, 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "SASL_AUTH", status: r.status });
        }
        Ok(())
    }

    pub async fn select_bucket(&mut self, bucket: &str) -> Result<(), ClientError> {
        let r = self.call(Opcode::SelectBucket as u8, bucket.as_bytes(), &[], &[], 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "SELECT_BUCKET", status: r.status });
        }
        Ok(())
    }

    /// Whether the server agreed to `f` in HELLO.
    pub fn has(&self, f: Feature) -> bool {
        self.features.contains(&f)
    }

    /// Whether keys on this connection carry a LEB128 collection prefix.
    pub fn collections(&self) -> bool {
        self.collections
    }

    /// The key as sent on this connection: with the collection prefix when Collections was negotiated.
    pub fn key(&self, cid: u32, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(key.len() + 2);
        if self.collections {
            encode_leb128(cid, &mut k);
        }
        k.extend_from_slice(key);
        k
    }

    /// Sends one request and waits for its reply.
    pub async fn call(
        &mut self,
        opcode: u8,
        key: &[u8],
        extras: &[u8],
        value: &[u8],
        vbucket: u16,
        cas: u64,
    ) -> Result<OwnedResponse, ClientError> {
        let req = Request { vbucket, cas, extras, value, ..Request::client(opcode, key) };
        self.send(&req).await
    }

    /// Sends a request built by the caller (any magic, framing or datatype) with a fresh opaque, and waits for
    /// its reply.
    pub async fn send(&mut self, req: &Request<'_>) -> Result<OwnedResponse, ClientError> {
        self.queue(req);
        self.flush().await?;
        self.read_response().await
    }

    /// Whether the connection runs over TLS.
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// Gives up the connection after its handshake: the stream (plain or TLS) and the bytes already read but not yet
    /// decoded, for a caller that speaks a protocol this type does not (a DCP consumer reads requests from the
    /// server).
    pub fn into_parts(self) -> (KvStream, Vec<u8>) {
        let unread = self.rbuf[self.rstart..self.rend].to_vec();
        (self.stream, unread)
    }

    /// Writes bytes as they are (for tests that send malformed frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Reads the next reply from the server. Server pushes (cluster-map notifications, on a connection that agreed
    /// Duplex) answer no request and are skipped.
    pub async fn read_response(&mut self) -> Result<OwnedResponse, ClientError> {
        loop {
            match self.next_response()? {
                Some(r) if r.magic == Magic::ServerRequest => continue,
                Some(r) => return Ok(OwnedResponse::of(&r)),
                None => {
                    self.fill().await?;
                }
            }
        }
    }

    /// Reads until the server closes the connection; true if it closed (rather than sending more frames).
    pub async fn closed_by_server(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        loop {
            match tokio::io::AsyncReadExt::read(&mut self.stream, &mut chunk).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    }

    // ---- pipelining ----

    /// Appends `req` to the write buffer with a fresh opaque, which it returns. Nothing is sent until `flush`.
    pub fn queue(&mut self, req: &Request<'_>) -> u32 {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        encode_request(&mut self.wbuf, &Request { opaque, ..*req });
        opaque
    }

    /// Queues a SET_WITH_META, or a DEL_WITH_META for a deletion (how restores and XDCR write documents with the
    /// metadata they carry): the key takes its collection prefix when the connection negotiated collections, and
    /// the value goes as given (never Snappy). Returns its opaque.
    pub fn queue_with_meta(&mut self, w: &WithMetaWrite<'_>) -> u32 {
        let extras = w.extras.encode();
        let mut key = Vec::with_capacity(w.key.len() + 5);
        if self.collections() {
            encode_leb128(w.collection, &mut key);
        }
        key.extend_from_slice(w.key);
        let opcode = if w.delete { Opcode::DelWithMeta } else { Opcode::SetWithMeta };
        let mut req = Request::client(opcode as u8, &key);
        req.vbucket = w.vbucket;
        req.extras = &extras;
        req.datatype = w.datatype;
        req.value = w.value;
        self.queue(&req)
    }

    /// Bytes queued and not yet flushed.
    pub fn queued_bytes(&self) -> usize {
        self.wbuf.len()
    }

    /// Writes every queued request with one write.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            if self.stream.is_tls() {
                // rustls keeps encrypted bytes it could not write yet until flushed.
                self.stream.flush().await?;
            }
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Decodes the next complete frame already received, borrowing it from the read buffer; None when more bytes
    /// are needed (call `fill`).
    pub fn next_response(&mut self) -> Result<Option<Response<'_>>, ClientError> {
        match decode_response(&self.rbuf[self.rstart..self.rend], FRAME_BODY_BYTES_MAX) {
            Ok(Some((r, n))) => {
                self.rstart += n;
                Ok(Some(r))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(ClientError::Protocol(e.to_string())),
        }
    }

    /// Waits for more bytes from the server and appends them to the read buffer. Cancel-safe: bytes are kept as
    /// soon as they are read, so it can be raced against a timer.
    pub async fn fill(&mut self) -> Result<usize, ClientError> {
        poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// The poll form of [`Connection::fill`], for waiting on several connections at once.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, ClientError>> {
        self.make_room();
        let mut rb = ReadBuf::new(&mut self.rbuf[self.rend..]);
        match Pin::new(&mut self.stream).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                if n == 0 {
                    return Poll::Ready(Err(ClientError::Closed));
                }
                self.rend += n;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Moves the unread bytes to the front when that frees space, and grows the buffer when a frame does not fit.
    fn make_room(&mut self) {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend < self.rbuf.len() && self.rstart < self.rbuf.len() / 2 {
            return;
        }
        self.rbuf.copy_within(self.rstart..self.rend, 0);
        self.rend -= self.rstart;
        self.rstart = 0;
        if self.rend == self.rbuf.len() {
            // A frame larger than the buffer: the header bounds it by FRAME_BODY_BYTES_MAX, checked in decode.
            let grown = (self.rbuf.len() * 2).min(FRAME_BODY_BYTES_MAX + 2 * settee_mcbp::HEADER_BYTES);
            self.rbuf.resize(grown.max(self.rbuf.len() + 1), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_mcbp::encode_response;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A fake server: accepts one connection, reads `expect` request bytes, then writes `reply` in two pieces that
    /// split a frame in the middle.
    async fn fake_server(expect: usize, reply: Vec<u8>) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = vec![0; expect];
            s.read_exact(&mut got).await.unwrap();
            let cut = reply.len() / 2 + 3;
            s.write_all(&reply[..cut]).await.unwrap();
            s.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            s.write_all(&reply[cut..]).await.unwrap();
        });
        addr
    }

    fn get(key: &[u8]) -> Request<'_> {
        Request::client(0, key)
    }

    /// Queued requests get consecutive opaques and go out in one flush; replies split across reads decode in
    /// order, borrowed from the read buffer, including one larger than the initial buffer.
    #[tokio::test]
    async fn pipelined_replies_decode_in_order_across_reads() {
        let big = vec![7u8; READ_BUFFER_BYTES * 3];
        let mut reply = Vec::new();
        encode_response(&mut reply, 0, 0, 1, 11, 0, &[], &[], &[], b"one");
        encode_response(&mut reply, 0, 1, 2, 0, 0, &[], &[], &[], &[]);
        encode_response(&mut reply, 0, 0, 3, 33, 0, &[], &[], &[], &big);
        let addr = fake_server(3 * (24 + 1), reply).await;
        let mut c = Connection::connect_raw(addr).await.unwrap();
        assert_eq!([c.queue(&get(b"a")), c.queue(&get(b"b")), c.queue(&get(b"c"))], [1, 2, 3]);
        assert_eq!(c.queued_bytes(), 75);
        c.flush().await.unwrap();
        assert_eq!(c.queued_bytes(), 0);
        let mut seen = Vec::new();
        while seen.len() < 3 {
            match c.next_response().unwrap() {
                Some(r) => seen.push((r.opaque, r.status, r.cas, r.value.len())),
                None => {
                    c.fill().await.unwrap();
                }
            }
        }
        assert_eq!(seen, [(1, 0, 11, 3), (2, 1, 0, 0), (3, 0, 33, big.len())]);
        assert!(matches!(c.fill().await, Err(ClientError::Closed)));
    }

    /// `call` and `read_response` keep working on top of the pipelining buffers.
    #[tokio::test]
    async fn call_returns_an_owned_reply() {
        let mut reply = Vec::new();
        encode_response(&mut reply, 0x0a, 0, 1, 0, 0, &[], &[1, 2], b"k", b"v");
        let addr = fake_server(24, reply).await;
        let mut c = Connection::connect_raw(addr).await.unwrap();
        let r = c.call(0x0a, &[], &[], &[], 0, 0).await.unwrap();
        assert_eq!((r.opcode, r.opaque, r.extras, r.key, r.value), (0x0a, 1, vec![1, 2], b"k".to_vec(), b"v".to_vec()));
        assert!(!c.collections() && c.key(8, b"x") == b"x");
    }

    /// A cluster-map push (magic 0x82) that arrives before the reply is not taken for the reply.
    #[tokio::test]
    async fn read_response_skips_server_pushes() {
        let mut reply = vec![0x82, 0x01, 0, 0, 16, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        reply.extend_from_slice(&[0; 16]);
        encode_response(&mut reply, 0xb5, 0, 1, 0, 0, &[], &[], &[], b"{}");
        let addr = fake_server(24, reply).await;
        let mut c = Connection::connect_raw(addr).await.unwrap();
        let r = c.call(0xb5, &[], &[], &[], 0, 0).await.unwrap();
        assert_eq!((r.opcode, r.opaque, r.value), (0xb5, 1, b"{}".to_vec()));
    }
}

/// One document written with its metadata ([`Connection::queue_with_meta`]).
#[derive(Clone, Copy, Debug)]
pub struct WithMetaWrite<'a> {
    pub vbucket: u16,
    pub collection: u32,
    pub key: &'a [u8],
    /// DEL_WITH_META instead of SET_WITH_META.
    pub delete: bool,
    pub extras: WithMetaExtras,
    pub datatype: u8,
    pub value: &'a [u8],
}
