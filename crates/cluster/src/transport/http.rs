//! [`RaftTransport`] over HTTP/1.1: JSON bodies POSTed to the peer's management port with a Basic auth header.
//!
//! The client is hyper 1's pooled client from hyper-util (already in the tree under axum): it keeps connections
//! alive between heartbeats, which a hand-written client would have to reimplement together with HTTP framing.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::peer_tls::{PeerConnector, TlsSwitch};
use super::rpc::*;
use super::{path, BoxFuture, MemberRequest, Proposed, RaftTransport, Reply, TransportError};
use crate::metadata::MetaCommand;
use crate::store::{ConsensusError, ProposeError};
use crate::vbmap::NodeId;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Idle pooled connections are dropped after this long; heartbeats every 250 ms keep the useful ones busy.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// A reply bigger than this is refused instead of buffered (snapshots travel in chunks far below it).
const REPLY_BYTES_MAX: usize = 64 << 20;
/// How much of an error body is kept in a [`TransportError::Status`].
const ERROR_BODY_BYTES_MAX: usize = 512;

/// Sends every request with the node-to-node credentials the server gives it (replaceable: a joining node adopts
/// its cluster's).
pub struct HttpTransport {
    client: Client<PeerConnector, Full<Bytes>>,
    /// Which peers are reached over TLS (node-to-node encryption); plain for all when unset.
    tls: Arc<TlsSwitch>,
    authorization: parking_lot::RwLock<HeaderValue>,
}

impl HttpTransport {
    pub fn new(username: &str, password: &str) -> Self {
        HttpTransport::with_source(username, password, None)
    }

    /// A transport whose connections come from `source` when one is given (`settee server
    /// --bind-peer-connections`), else from the address the kernel picks.
    pub fn with_source(username: &str, password: &str, source: Option<std::net::IpAddr>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_local_address(source);
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let tls = Arc::new(TlsSwitch::default());
        let connector = PeerConnector::new(connector, tls.clone());
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE_TIMEOUT).build(connector);
        HttpTransport { client, tls, authorization: parking_lot::RwLock::new(basic_authorization(username, password)) }
    }

    /// Which peers later requests reach over TLS (see [`TlsSwitch`]).
    pub fn tls(&self) -> &TlsSwitch {
        &self.tls
    }

    /// Sends every later request with these credentials.
    pub fn set_credentials(&self, username: &str, password: &str) {
        *self.authorization.write() = basic_authorization(username, password);
    }

    async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, TransportError> {
        match tokio::time::timeout(timeout, self.exchange(addr, path, body)).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::Timeout),
        }
    }

    async fn exchange<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        body: &Req,
    ) -> Result<Resp, TransportError> {
        let not_sent = |reason: String| TransportError::Connect { addr: addr.into(), reason };
        let uri: Uri = self.tls.uri(addr, path).parse().map_err(|e| not_sent(format!("bad address: {e}")))?;
        let body = serde_json::to_vec(body).map_err(|e| not_sent(format!("cannot encode the request: {e}")))?;
        let request = Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(AUTHORIZATION, self.authorization.read().clone())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| not_sent(e.to_string()))?;
        let response = self.client.request(request).await.map_err(|e| {
            if e.is_connect() || was_canceled(&e) {
                not_sent(e.to_string())
            } else {
                TransportError::Io(e.to_string())
            }
        })?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), REPLY_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| TransportError::Io(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(ERROR_BODY_BYTES_MAX)]).into_owned();
            return Err(TransportError::Status { code: status.as_u16(), body: text });
        }
        serde_json::from_slice(&bytes).map_err(|e| TransportError::Decode(e.to_string()))
    }
}

/// The `Authorization: Basic` header of node-to-node calls, marked sensitive (never logged).
pub fn basic_authorization(username: &str, password: &str) -> HeaderValue {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    let mut authorization =
        HeaderValue::from_str(&format!("Basic {token}")).expect("base64 text is a valid header value");
    authorization.set_sensitive(true);
    authorization
}

impl RaftTransport for HttpTransport {
    fn append_entries<'a>(
        &'a self,
        addr: &'a str,
        req: AppendEntriesRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<AppendEntriesResponse, RaftError>> {
        Box::pin(async move { self.post(addr, path::APPEND, &req, timeout).await })
    }

    fn vote<'a>(
        &'a self,
        addr: &'a str,
        req: VoteRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<VoteResponse, RaftError>> {
        Box::pin(async move { self.post(addr, path::VOTE, &req, timeout).await })
    }

    fn install_snapshot<'a>(
        &'a self,
        addr: &'a str,
        req: InstallSnapshotRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<InstallSnapshotResponse, RaftError<InstallSnapshotError>>> {
        Box::pin(async move { self.post(addr, path::SNAPSHOT, &req, timeout).await })
    }

    fn forward_propose<'a>(
        &'a self,
        addr: &'a str,
        cmd: MetaCommand,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Proposed, ProposeError>> {
        Box::pin(async move { self.post(addr, path::PROPOSE, &cmd, timeout).await })
    }

    fn forward_add_member<'a>(
        &'a self,
        addr: &'a str,
        req: MemberRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>> {
        Box::pin(async move { self.post(addr, path::ADD_MEMBER, &req, timeout).await })
    }

    fn forward_remove_member<'a>(
        &'a self,
        addr: &'a str,
        id: NodeId,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>> {
        Box::pin(async move { self.post(addr, path::REMOVE_MEMBER, &id, timeout).await })
    }

    fn forward_read_index<'a>(
        &'a self,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Option<u64>, ConsensusError>> {
        Box::pin(async move { self.post(addr, path::READ_INDEX, &(), timeout).await })
    }
}

/// Whether hyper gave the request up before sending it: the pooled connection it was queued on closed first (a
/// peer that just stopped). Such a request was never delivered, so it may go elsewhere.
fn was_canceled(e: &hyper_util::client::legacy::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if err.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_canceled) {
            return true;
        }
        source = err.source();
    }
    false
}
