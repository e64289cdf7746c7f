//! Accepts KV connections, at most `max_connections` at once: one more is closed at accept with a log line, so a
//! connection flood cannot exhaust memory or file descriptors.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::connection::serve_connection;
use crate::node::Node;

pub async fn serve_kv(node: Arc<Node>, listener: TcpListener, shutdown: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(node.config.max_connections));
    let mut stop = shutdown.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: log, back off briefly, keep serving the connections we have.
                tracing::warn!(error = %e, "kv accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = node.config.max_connections, "refusing kv connection: connection limit reached");
            drop(stream);
            continue;
        };
        let node = node.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            serve_connection(node, stream, shutdown).await;
            drop(permit);
        });
    }
}
