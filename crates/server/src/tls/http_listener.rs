//! A TLS listener for the REST ports: axum serves what it yields exactly as it serves the plain listener.
//!
//! Handshakes run in their own tasks, so a client that stalls in its handshake delays nobody else; at most
//! `HANDSHAKES_MAX` run at once (a connection beyond that is closed with a log line), and each has the node's
//! handshake timeout.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;

use super::{NodeTls, TlsPort};

/// Handshakes in progress at once on one port.
const HANDSHAKES_MAX: usize = 512;
/// Finished handshakes waiting for axum to take them (axum takes them as fast as they come).
const READY_MAX: usize = 64;

/// Yields connections whose TLS handshake completed.
pub(crate) struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor_task: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `listener` for `port` (the management or the query port).
    pub(crate) fn new(listener: TcpListener, tls: Arc<NodeTls>, port: TlsPort) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_MAX);
        let acceptor_task = tokio::spawn(accept_loop(listener, tls, tx, port));
        Ok(TlsListener { local, ready, acceptor_task })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor_task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Arc<NodeTls>,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    port: TlsPort,
) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_MAX));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly and keep serving.
                tracing::warn!(?port, error = %e, "tls accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::warn!(%peer, ?port, limit = HANDSHAKES_MAX, "closing tls connection: too many handshakes in progress");
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
        }
        let (tls, ready) = (tls.clone(), ready.clone());
        tokio::spawn(async move {
            let done = tls.accept(stream, peer, port).await;
            drop(permit);
            if let Some(stream) = done {
                let _ = ready.send((stream, peer)).await;
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends when this listener is dropped; until then, nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
