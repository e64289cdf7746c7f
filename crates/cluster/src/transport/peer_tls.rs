//! Node-to-node HTTP over TLS: which peer addresses are reached over TLS now, and the hyper connector that dials
//! them (plain TCP for `http://`, TCP then a rustls handshake for `https://`).
//!
//! The server decides what is encrypted (the cluster's encryption level) and hands each pooled client a
//! [`PeerTls`]: the CAs a peer's certificate must chain to and, for each peer's plain address ("host:port"), the
//! address of the same service's TLS port. A request to an address in the table goes to `https://<tls address>`,
//! any other to `http://<address>`. The pool keys connections by scheme and address, so after a switch new
//! requests open connections over the new transport while the old pooled ones idle out.
//!
//! Not a hot path: Raft heartbeats and peer calls reuse pooled connections; a handshake happens per new connection.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use parking_lot::RwLock;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// What a client encrypts: the TLS settings, and the peer addresses (plain -> TLS) to reach over TLS.
pub struct PeerTls {
    pub connector: TlsConnector,
    /// "host:plainport" -> "host:tlsport".
    pub routes: HashMap<String, String>,
}

/// The current [`PeerTls`] of one client, replaced whole when the cluster's encryption changes. A leaf lock.
#[derive(Default)]
pub struct TlsSwitch(RwLock<Option<Arc<PeerTls>>>);

impl TlsSwitch {
    /// Encrypts the routes of `tls` from the next request on (None: everything plain).
    pub fn set(&self, tls: Option<Arc<PeerTls>>) {
        *self.0.write() = tls;
    }

    /// The URI of `path` on the peer at `addr` ("host:port", the plain address): over TLS when a route names it.
    pub fn uri(&self, addr: &str, path: &str) -> String {
        match self.0.read().as_ref().and_then(|t| t.routes.get(addr)) {
            Some(tls) => format!("https://{tls}{path}"),
            None => format!("http://{addr}{path}"),
        }
    }

    /// Whether requests to `addr` go over TLS now.
    pub fn encrypts(&self, addr: &str) -> bool {
        self.0.read().as_ref().is_some_and(|t| t.routes.contains_key(addr))
    }

    fn connector(&self) -> Option<TlsConnector> {
        self.0.read().as_ref().map(|t| t.connector.clone())
    }
}

/// hyper's connector for peer calls: `http://` over TCP, `https://` over TLS verified with the switch's CAs for the
/// URI's host (an IP address or a DNS name, as the peer's certificate names it).
#[derive(Clone)]
pub struct PeerConnector {
    http: HttpConnector,
    tls: Arc<TlsSwitch>,
}

impl PeerConnector {
    /// Wraps `http` (its source address, timeouts and TCP options apply to both schemes).
    pub fn new(mut http: HttpConnector, tls: Arc<TlsSwitch>) -> PeerConnector {
        http.enforce_http(false);
        PeerConnector { http, tls }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for PeerConnector {
    type Response = PeerStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<PeerStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let https = uri.scheme_str() == Some("https");
        let connector = if https { self.tls.connector() } else { None };
        let mut http = self.http.clone();
        Box::pin(async move {
            let tcp = http.call(uri.clone()).await?;
            if !https {
                return Ok(PeerStream::Plain(tcp));
            }
            let connector = connector.ok_or("node-to-node TLS was turned off")?;
            let host = uri.host().ok_or("no host in the peer's address")?;
            let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_owned())?;
            let tls = connector.connect(name, tcp.into_inner()).await?;
            Ok(PeerStream::Tls(Box::new(TokioIo::new(tls))))
        })
    }
}

/// A pooled peer connection, plain or TLS.
pub enum PeerStream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for PeerStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for PeerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
