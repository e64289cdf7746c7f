//! Accepts KV connections, at most `max_connections` at once, so a connection flood cannot exhaust memory or file
//! descriptors. When every slot is taken, the oldest connection that has not authenticated yet is closed to admit
//! the newcomer (`super::unauthenticated`); when every connection is authenticated, the newcomer is closed at once
//! with a log line.
//!
//! Thread per core (DESIGN.md §2): accepted connections are dealt round-robin to `--kv-threads` worker threads, each
//! running a single-threaded tokio runtime, and stay on their thread for their life, as memcached's worker threads
//! keep theirs. A request's wake-up, execution and reply then happen on one thread: the work-stealing runtime used
//! before moved wake-ups between its workers, which cost a futex wake and a context switch per request at batch 1
//! (BENCHMARKS.md, "Where settee loses"). Everything else (management, cluster, pagers, DCP producers, which read
//! the store) stays on the node's multi-threaded runtime.

use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::connection::{serve_connection, Transport};
use super::unauthenticated::{PreAuth, Unauthenticated};
use crate::node::Node;

/// A connection handed to a worker thread, with its slot under `--max-connections`, its place among the
/// unauthenticated connections, and whether it came to the TLS port.
struct Handoff {
    stream: std::net::TcpStream,
    permit: OwnedSemaphorePermit,
    pre_auth: PreAuth,
    tls: bool,
}

/// How long the listener waits for an evicted connection to give its slot back before giving up on the newcomer.
const EVICTION_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Accepts on the plain KV port and, when given, the TLS one, until `shutdown`.
pub async fn serve_kv(
    node: Arc<Node>,
    listener: TcpListener,
    tls_listener: Option<TcpListener>,
    shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(node.config.max_connections));
    let unauthenticated = Arc::new(Unauthenticated::default());
    let threads = match node.config.kv_threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let (workers, handles) = match start_workers(&node, threads, &shutdown) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the kv worker threads; kv service not started");
            return;
        }
    };
    let mut next = 0;
    let mut stop = shutdown.clone();
    loop {
        let (accepted, tls) = tokio::select! {
            a = listener.accept() => (a, false),
            a = async { tls_listener.as_ref().expect("guarded by the branch condition").accept().await }, if tls_listener.is_some() => (a, true),
            _ = stop.changed() => break,
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
        if !tls && node.peer_links.refuses_plain(&stream, peer) {
            continue;
        }
        let Some(permit) = admit(&slots, &unauthenticated).await else {
            tracing::warn!(%peer, limit = node.config.max_connections, "refusing kv connection: connection limit reached and every connection is authenticated");
            drop(stream);
            continue;
        };
        let pre_auth = unauthenticated.register();
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "dropping kv connection: cannot hand it to a worker");
                continue;
            }
        };
        if workers[next].send(Handoff { stream, permit, pre_auth, tls }).is_err() {
            tracing::error!(worker = next, "kv worker thread gone; dropping connection");
        }
        next = (next + 1) % workers.len();
    }
    // The workers end once their connections saw the shutdown and closed.
    drop(workers);
    let _ = tokio::task::spawn_blocking(move || {
        for h in handles {
            let _ = h.join();
        }
    })
    .await;
}

/// A free connection slot; when there is none, the oldest unauthenticated connection is told to close and its slot
/// is awaited (briefly). None when every connection is authenticated, or the evicted one did not let go in time.
async fn admit(slots: &Arc<Semaphore>, unauthenticated: &Unauthenticated) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = slots.clone().try_acquire_owned() {
        return Some(permit);
    }
    if !unauthenticated.evict_oldest() {
        return None;
    }
    tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await.ok()?.ok()
}

/// Where accepted connections are handed to each worker, and the workers' threads.
type Workers = (Vec<mpsc::UnboundedSender<Handoff>>, Vec<JoinHandle<()>>);

fn start_workers(node: &Arc<Node>, threads: usize, shutdown: &watch::Receiver<bool>) -> std::io::Result<Workers> {
    // DCP producers run here: they read the store, which must not block a worker's event loop.
    let main = tokio::runtime::Handle::current();
    let mut senders = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (node, shutdown, main) = (node.clone(), shutdown.clone(), main.clone());
        let handle = std::thread::Builder::new()
            .name(format!("settee-kv-{i}"))
            .spawn(move || runtime.block_on(run_worker(node, rx, shutdown, main)))?;
        senders.push(tx);
        handles.push(handle);
    }
    Ok((senders, handles))
}

/// One worker thread's event loop: serves the connections it is handed until the listener stops and every one of
/// them has closed.
async fn run_worker(
    node: Arc<Node>,
    mut handoffs: mpsc::UnboundedReceiver<Handoff>,
    shutdown: watch::Receiver<bool>,
    main: tokio::runtime::Handle,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            handoff = handoffs.recv() => {
                let Some(Handoff { stream, permit, pre_auth, tls }) = handoff else { break };
                let stream = match tokio::net::TcpStream::from_std(stream) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "dropping kv connection: cannot register it with the worker");
                        continue;
                    }
                };
                let (node, shutdown, main) = (node.clone(), shutdown.clone(), main.clone());
                connections.spawn(async move {
                    if tls {
                        serve_tls(node, stream, pre_auth, shutdown, main).await;
                    } else {
                        serve_connection(node, stream, Transport::Plain, pre_auth, shutdown, main).await;
                    }
                    drop(permit);
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    while connections.join_next().await.is_some() {}
}

/// Runs the TLS handshake of a connection to the TLS port, then serves it as any other. The handshake counts as
/// unauthenticated time: it ends early when the listener evicts the connection to make room or the node stops.
async fn serve_tls(
    node: Arc<Node>,
    stream: tokio::net::TcpStream,
    pre_auth: PreAuth,
    mut shutdown: watch::Receiver<bool>,
    main: tokio::runtime::Handle,
) {
    let Ok(peer) = stream.peer_addr() else { return };
    let _ = stream.set_nodelay(true);
    let evicted = pre_auth.evicted.clone();
    let tls = node.tls.clone();
    let stream = tokio::select! {
        s = tls.accept(stream, peer, crate::tls::TlsPort::Kv) => s,
        _ = evicted.notified() => {
            tracing::info!(%peer, "closing kv tls connection: the connection limit is reached and it is the oldest one not authenticated");
            None
        }
        _ = shutdown.changed() => None,
    };
    let Some(stream) = stream else { return };
    let names = crate::tls::client_cert_names(stream.get_ref().1.peer_certificates());
    let cert_user = match node.certificate_user(names.as_ref()) {
        Ok(user) => user.map(|u| u.id.clone()),
        Err(_) => {
            tracing::info!(%peer, ?names, "closing kv tls connection: the client certificate maps to no user");
            return;
        }
    };
    serve_connection(node, stream, Transport::Tls { cert_user }, pre_auth, shutdown, main).await;
}
