use settee_mcbp::{decode_response, encode_leb128, encode_request, Feature, Magic, Request};
use settee_types::limits::FRAME_BODY_BYTES_MAX;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
}

/// One KV connection.
pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
    next_opaque: u32,
    collections: bool,
}

const OP_HELLO: u8 = 0x1f;
const OP_SASL_AUTH: u8 = 0x21;
const OP_SELECT_BUCKET: u8 = 0x89;

impl Connection {
    /// Connects without any handshake (for tests that drive the protocol by hand).
    pub async fn connect_raw(addr: std::net::SocketAddr) -> Result<Connection, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection { stream, buf: Vec::with_capacity(64 * 1024), next_opaque: 1, collections: false })
    }

    /// Connects, negotiates `features`, authenticates with PLAIN and selects `bucket` (if any).
    pub async fn connect(
        addr: std::net::SocketAddr,
        user: &str,
        password: &str,
        bucket: Option<&str>,
        features: &[Feature],
    ) -> Result<Connection, ClientError> {
        let mut c = Connection::connect_raw(addr).await?;
        let hello: Vec<u8> = features.iter().flat_map(|f| f.code().to_be_bytes()).collect();
        let r = c.call(OP_HELLO, b"settee-client", &[], &hello, 0, 0).await?;
        c.collections = r.value.chunks(2).any(|p| p == Feature::Collections.code().to_be_bytes());
        let mut plain = vec![0u8];
        plain.extend_from_slice(user.as_bytes());
        plain.push(0);
        plain.extend_from_slice(password.as_bytes());
        let r = c.call(OP_SASL_AUTH, b"PLAIN", &[], &plain, 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "SASL_AUTH", status: r.status });
        }
        if let Some(b) = bucket {
            let r = c.call(OP_SELECT_BUCKET, b.as_bytes(), &[], &[], 0, 0).await?;
            if r.status != 0 {
                return Err(ClientError::Status { what: "SELECT_BUCKET", status: r.status });
            }
        }
        Ok(c)
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
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let req = Request {
            magic: Magic::ClientRequest,
            opcode,
            datatype: 0,
            vbucket,
            opaque,
            cas,
            framing: &[],
            extras,
            key,
            value,
        };
        let mut out = Vec::new();
        encode_request(&mut out, &req);
        self.send_raw(&out).await?;
        self.read_response().await
    }

    /// Sends a request built by the caller (any magic, framing or datatype) with a fresh opaque, and waits for
    /// its reply.
    pub async fn send(&mut self, req: &Request<'_>) -> Result<OwnedResponse, ClientError> {
        let mut req = *req;
        req.opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let mut out = Vec::new();
        encode_request(&mut out, &req);
        self.send_raw(&out).await?;
        self.read_response().await
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Reads the next frame from the server.
    pub async fn read_response(&mut self) -> Result<OwnedResponse, ClientError> {
        loop {
            match decode_response(&self.buf, FRAME_BODY_BYTES_MAX) {
                Ok(Some((r, n))) => {
                    let owned = OwnedResponse {
                        opcode: r.opcode,
                        status: r.status,
                        opaque: r.opaque,
                        cas: r.cas,
                        datatype: r.datatype,
                        extras: r.extras.to_vec(),
                        key: r.key.to_vec(),
                        value: r.value.to_vec(),
                    };
                    self.buf.drain(..n);
                    return Ok(owned);
                }
                Ok(None) => {}
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the server closes the connection; true if it closed (rather than sending more frames).
    pub async fn closed_by_server(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    }
}
