//! Hot path: one KV connection. Read what the socket has, execute every complete frame in order, write all the
//! replies of the batch with one write, repeat. Handlers return values; only this loop touches the socket.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use settee_mcbp::{decode_request, Feature};
use settee_types::limits::FRAME_BODY_BYTES_MAX;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::futures::Notified;

use super::dispatch::dispatch;
use super::durable_replies::DurableReplies;
use super::pending::Out;
use super::read_budget::{pending_frame_bytes, Claim};
use super::reply;
use super::session::Session;
use super::unauthenticated::PreAuth;
use crate::dcp::{hold_wakes, release_wakes};
use crate::node::Node;
use crate::timings::OpTimer;
use settee_types::Status;

/// Read buffer size to start with; it grows to hold one whole frame at most.
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Stop executing a batch once this many reply bytes wait, and write them first, so a pipeline of large GETs
/// cannot make the server buffer without bound.
const WRITE_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Durable writes one connection may leave waiting at once under unordered execution.
const INFLIGHT_MAX: usize = 1024;

/// Whether a request must wait for every earlier one (unordered execution): commands that change the connection's
/// state, and requests carrying the barrier frame.
fn is_barrier(req: &settee_mcbp::Request<'_>) -> bool {
    matches!(req.opcode, 0x1f | 0x20 | 0x21 | 0x22 | 0x89)
        || settee_mcbp::RequestFrameInfos::parse(req.framing).is_ok_and(|f| f.barrier)
}

/// A request that still finds its item ejected after this many background fetches gets TMPFAIL (the item pager
/// is racing it); the client retries.
const FETCH_ATTEMPTS_MAX: u32 = 3;
/// Largest request body a connection may send before it authenticates: HELLO, SASL (at most 4 KiB), the error map
/// and NOOP are all small, so a larger frame from an unauthenticated client closes the connection at its header,
/// before its body is buffered (Couchbase closes unauthenticated connections that send large frames too).
const UNAUTHENTICATED_BODY_BYTES_MAX: usize = 8 * 1024;
/// Buffers above this size are released after use so idle connections stay small.
const IDLE_BUFFER_BYTES_MAX: usize = 256 * 1024;

/// Pushes the current config of the connection's bucket (or the global one) as a cluster-map notification.
fn push_config(node: &Node, session: &Session, out: &mut Vec<u8>) {
    let rev = i64::try_from(node.rev()).unwrap_or(i64::MAX);
    let full = session.has(Feature::ClustermapChangeNotification);
    let (name, config) = match &session.bucket {
        Some(b) if !b.is_deleted() => (b.name(), if full { Some(node.bucket_config(b)) } else { None }),
        _ => (String::new(), if full { Some(node.global_config()) } else { None }),
    };
    let body = config.map(|c| serde_json::to_vec(&c).unwrap_or_default()).unwrap_or_default();
    reply::clustermap_notification(out, &name, 1, rev, &body);
}

/// What the read-buffer budget allows the connection before its next read.
enum Budget<'a> {
    /// The partial frame at the head of the buffer (if any) fits the connection's own buffer, or its reservation
    /// was taken before.
    Fits,
    /// A reservation for a large frame was just taken: its deadline starts now.
    Taken,
    /// No budget for the large frame yet: do not read until this completes (another frame freed budget).
    Wait(std::pin::Pin<Box<Notified<'a>>>),
}

/// Makes the connection's reservation match the frame it is receiving and sizes the buffer for it; a buffer that
/// grew past its idle bound without a reservation (many pipelined frames) goes back to its small size.
fn settle_read_budget<'a>(node: &'a Node, claim: &mut Claim, rbuf: &mut BytesMut) -> Budget<'a> {
    let frame_bytes = pending_frame_bytes(rbuf);
    let outcome = match claim.settle(frame_bytes, READ_BUFFER_BYTES) {
        Some(true) => Budget::Taken,
        Some(false) => Budget::Fits,
        None => {
            // Register for the wake-up before trying again, so a release in between is not missed.
            let mut freed = Box::pin(node.read_budget.freed());
            freed.as_mut().enable();
            match claim.settle(frame_bytes, READ_BUFFER_BYTES) {
                Some(_) => Budget::Taken,
                None => return Budget::Wait(freed),
            }
        }
    };
    if claim.bytes() > 0 {
        rbuf.reserve(claim.bytes().saturating_sub(rbuf.len()));
    } else if rbuf.capacity() > IDLE_BUFFER_BYTES_MAX {
        *rbuf = small_copy(rbuf);
    }
    outcome
}

/// A fresh buffer of the initial size holding what `rbuf` holds (a partial header or small frame at most).
fn small_copy(rbuf: &BytesMut) -> BytesMut {
    let mut small = BytesMut::with_capacity(READ_BUFFER_BYTES.max(rbuf.len()));
    small.extend_from_slice(rbuf);
    small
}

/// A KV connection's byte stream: plain TCP (11210) or TLS over TCP (11207). The loop reads and writes through
/// separate halves; for TCP they are the socket's own halves, so the plain port pays nothing for TLS existing.
pub(crate) trait KvStream: Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// The socket underneath, for its addresses and options.
    fn tcp(&self) -> &TcpStream;
    fn into_halves(self) -> (Self::Read, Self::Write);
}

impl KvStream for TcpStream {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    fn tcp(&self) -> &TcpStream {
        self
    }
    fn into_halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

impl KvStream for tokio_rustls::server::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
    fn into_halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

/// Writes `bytes` to the client; false when the connection is to be closed: the write failed, or the client took
/// nothing of it for `limit` (it stopped reading), which is logged. A slow reader that keeps taking bytes is fine.
async fn send<W: AsyncWrite + Unpin>(wr: &mut W, bytes: &[u8], limit: Duration, peer: &std::net::SocketAddr) -> bool {
    let mut sent = 0;
    while sent < bytes.len() {
        match tokio::time::timeout(limit, wr.write(&bytes[sent..])).await {
            Ok(Ok(0) | Err(_)) => return false,
            Ok(Ok(n)) => sent += n,
            Err(_) => {
                tracing::warn!(%peer, unsent_bytes = bytes.len() - sent, "closing kv connection: the client took none of its replies for the write timeout");
                return false;
            }
        }
    }
    true
}

/// Moves the replies of the durable writes that are complete (or timed out) into `wbuf`, recording their timings.
fn take_replies(node: &Node, session: &Session, durables: &mut DurableReplies, wbuf: &mut Out) {
    durables.take_ready(|reply, timer| {
        timer.finish(node, session.bucket.as_deref(), session.peer, &session.agent);
        wbuf.extend_from_slice(&reply);
    });
}

/// Waits until at most `left` durable writes wait, moving the replies of those done into `wbuf`.
async fn wait_replies(node: &Node, session: &Session, durables: &mut DurableReplies, wbuf: &mut Out, left: usize) {
    while durables.len() > left {
        durables.changed().await;
        take_replies(node, session, durables, wbuf);
    }
}

/// Which port a connection came to, and for the TLS port the user its client certificate authenticated.
pub(crate) enum Transport {
    Plain,
    Tls { cert_user: Option<String> },
}

/// Serves one connection on the current (worker) thread; a connection that becomes a DCP producer continues on
/// `main`, the node's multi-threaded runtime, because a producer reads the store.
pub(crate) async fn serve_connection<S: KvStream>(
    node: Arc<Node>,
    stream: S,
    transport: Transport,
    pre_auth: PreAuth,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    main: tokio::runtime::Handle,
) {
    let peer = match stream.tcp().peer_addr() {
        Ok(p) => p,
        Err(_) => return,
    };
    let _ = stream.tcp().set_nodelay(true);
    let local = stream.tcp().local_addr().ok();
    node.kv_connections.fetch_add(1, Ordering::Relaxed);
    node.kv_accepted[usize::from(matches!(transport, Transport::Tls { .. }))].fetch_add(1, Ordering::Relaxed);
    let (mut rd, mut wr) = stream.into_halves();
    let mut session = Session::new(peer);
    session.local = local;
    if let Transport::Tls { cert_user } = transport {
        session.tls = true;
        if let Some(user) = cert_user {
            session.auth_mechanism = "X.509";
            if let Err(why) = crate::kv::handlers::session::authenticated(&node, &mut session, user) {
                tracing::info!(%peer, ?why, "kv connection's certificate user not authenticated");
            }
        }
    }
    // One waiter for the node's shutdown for the connection's life: a fresh `changed()` per read would register
    // and unregister with the watch's shared waiter list (a mutex all connections share) on every batch.
    let producer_shutdown = shutdown.clone();
    let mut auth_shutdown = shutdown.clone();
    let shutdown_signal = shutdown.changed();
    tokio::pin!(shutdown_signal);
    let mut rbuf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut wbuf = Out::with_capacity(READ_BUFFER_BYTES);
    // Replies of durable writes waiting for their outcomes (many only when the client allows unordered execution).
    let mut durables = DurableReplies::new(wbuf.inbox());
    let mut configs = node.config_changes();
    // Until SASL succeeds: the deadline to authenticate by, and the listener's signal to make room.
    let auth_deadline = tokio::time::Instant::now() + Duration::from_secs(node.config.kv_auth_timeout_secs);
    let mut pre_auth = Some(pre_auth);
    let evicted = pre_auth.as_ref().map(|p| p.evicted.clone()).unwrap_or_default();
    // The node-wide read-buffer budget this connection holds for a large frame, and when that frame must be in by.
    let mut claim = Claim::new(node.read_budget.clone());
    let frame_timeout = Duration::from_secs(node.config.kv_frame_timeout_secs);
    let write_timeout = Duration::from_secs(node.config.kv_write_timeout_secs);
    let mut frame_deadline = None;
    // A plain connection not made to 127.0.0.1 or ::1 ends at its next request once the cluster's encryption level
    // is `strict` (new ones are closed by the listener).
    let closes_at_strict = !session.tls && local.is_some_and(|l| node.peer_links.plain_port_refuses_at_strict(l));
    'conn: loop {
        if session.user.is_some() {
            // Authenticated: no deadline, never evicted for room.
            pre_auth = None;
        }
        let mut budget_freed = None;
        let may_read = match settle_read_budget(&node, &mut claim, &mut rbuf) {
            Budget::Fits => true,
            Budget::Taken => {
                frame_deadline = Some(tokio::time::Instant::now() + frame_timeout);
                true
            }
            Budget::Wait(freed) => {
                budget_freed = Some(freed);
                false
            }
        };
        if claim.bytes() == 0 {
            frame_deadline = None;
        }
        let read = tokio::select! {
            r = rd.read_buf(&mut rbuf), if may_read => r,
            () = async { if let Some(freed) = budget_freed.as_mut() { freed.as_mut().await } }, if budget_freed.is_some() => {
                continue;
            }
            // Timers are made inside async blocks so that a disabled branch (the usual case) costs no timer.
            () = async { if let Some(at) = frame_deadline { tokio::time::sleep_until(at).await } }, if frame_deadline.is_some() => {
                tracing::warn!(%peer, frame_bytes = claim.bytes(), "closing kv connection: a large frame stayed incomplete for the frame timeout");
                break;
            }
            Ok(()) = configs.changed(), if session.wants_config_pushes() => {
                configs.borrow_and_update();
                push_config(&node, &session, &mut wbuf);
                if !send(&mut wr, &wbuf, write_timeout, &peer).await {
                    break;
                }
                wbuf.clear();
                continue;
            }
            () = durables.changed(), if !durables.is_empty() => {
                take_replies(&node, &session, &mut durables, &mut wbuf);
                if wbuf.is_empty() {
                    continue;
                }
                if !send(&mut wr, &wbuf, write_timeout, &peer).await {
                    break;
                }
                wbuf.clear();
                continue;
            }
            _ = &mut shutdown_signal => break,
            () = async { tokio::time::sleep_until(auth_deadline).await }, if pre_auth.is_some() => {
                tracing::info!(%peer, "closing kv connection: not authenticated within the authentication timeout");
                break;
            }
            _ = evicted.notified(), if pre_auth.is_some() => {
                tracing::info!(%peer, "closing kv connection: the connection limit is reached and it is the oldest one not authenticated");
                break;
            }
        };
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "kv connection read failed");
                break;
            }
        }
        if closes_at_strict && node.peer_links.is_strict() {
            tracing::info!(%peer, "closing kv connection to a plain port: the cluster encryption level is now strict");
            break;
        }
        let mut used = 0;
        let mut fatal = false;
        // When the previous request of this batch was answered, if nothing was awaited since: the next request
        // starts then, which saves a clock read per request.
        let mut answered_at = None;
        loop {
            let body_max = if session.user.is_some() { FRAME_BODY_BYTES_MAX } else { UNAUTHENTICATED_BODY_BYTES_MAX };
            match decode_request(&rbuf[used..], body_max) {
                Ok(Some((req, n))) => {
                    if !durables.is_empty() && is_barrier(&req) {
                        // Connection-state changes and barrier frames wait for everything before them.
                        release_wakes();
                        wait_replies(&node, &session, &mut durables, &mut wbuf, 0).await;
                        answered_at = None;
                    }
                    let timer = OpTimer::start(&node, &req, answered_at.take());
                    let mut fetches = 0;
                    // The batch's changes wake the DCP producers once, when it ends or before anything is awaited.
                    hold_wakes();
                    dispatch(&node, &mut session, &req, &mut wbuf);
                    if wbuf.auth.is_some() || wbuf.fetch.is_some() {
                        release_wakes();
                    }
                    if let Some(work) = wbuf.auth.take() {
                        // A PLAIN derivation or a failed attempt's delay: this connection waits (in order), the
                        // worker thread serves its other connections meanwhile.
                        let shutdown = &mut auth_shutdown;
                        super::handlers::session::finish_auth(&node, &mut session, work, &req, &mut wbuf, shutdown)
                            .await;
                    }
                    while let Some(fetch) = wbuf.fetch.take() {
                        // The request touched an item that is on disk only: fetch it, then run the request again.
                        if fetches == FETCH_ATTEMPTS_MAX {
                            reply::status(&mut wbuf, &req, Status::Etmpfail);
                            break;
                        }
                        fetches += 1;
                        fetch.run().await;
                        dispatch(&node, &mut session, &req, &mut wbuf);
                    }
                    if wbuf.pending.is_none() {
                        answered_at = Some(timer.finish(&node, session.bucket.as_deref(), peer, &session.agent));
                    }
                    used += n;
                    if session.close || session.dcp.is_some() {
                        break;
                    }
                    if let Some(pending) = wbuf.pending.take() {
                        if session.has(Feature::UnorderedExecution) {
                            if durables.len() >= INFLIGHT_MAX {
                                // Bound what one connection can leave waiting: wait for one before going on.
                                release_wakes();
                                wait_replies(&node, &session, &mut durables, &mut wbuf, INFLIGHT_MAX - 1).await;
                            }
                            durables.insert(pending, timer);
                        } else {
                            // Requests run in order: send what is ready, then wait for this reply before the next.
                            release_wakes();
                            durables.insert(pending, timer);
                            wait_replies(&node, &session, &mut durables, &mut wbuf, 0).await;
                            if !send(&mut wr, &wbuf, write_timeout, &peer).await {
                                fatal = true;
                                break;
                            }
                            wbuf.clear();
                        }
                    } else if wbuf.len() >= WRITE_BATCH_BYTES_MAX {
                        release_wakes();
                        if !send(&mut wr, &wbuf, write_timeout, &peer).await {
                            fatal = true;
                            break;
                        }
                        wbuf.clear();
                        answered_at = None;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let authenticated = session.user.is_some();
                    tracing::warn!(%peer, agent = %session.agent, authenticated, error = %e, "closing kv connection: malformed frame");
                    fatal = true;
                    break;
                }
            }
        }
        release_wakes();
        rbuf.advance(used);
        if used > 0 && claim.release_unless(pending_frame_bytes(&rbuf)) {
            // The large frame has been consumed: its budget goes back before its reply does, and so does its memory
            // (the allocation is still the frame's size even though `capacity()`, counted past the consumed
            // bytes, looks small).
            rbuf = small_copy(&rbuf);
        }
        if !wbuf.is_empty() {
            if !send(&mut wr, &wbuf, write_timeout, &peer).await {
                break 'conn;
            }
            wbuf.clear();
        }
        if fatal || session.close {
            break;
        }
        if let Some(upgrade) = session.dcp.take() {
            wait_replies(&node, &session, &mut durables, &mut wbuf, 0).await;
            if !wbuf.is_empty() && !send(&mut wr, &wbuf, write_timeout, &peer).await {
                break 'conn;
            }
            wbuf.clear();
            let Some(bucket) = session.bucket.clone() else { break };
            let collections = session.collections();
            // `_replication` counts the connection until this scope ends with it.
            let crate::kv::handlers::dcp::DcpUpgrade { conn, include_xattrs, replication: _replication } = *upgrade;
            let setup = crate::dcp::producer::ProducerSetup {
                bucket,
                conn,
                include_xattrs,
                collections,
                peer: peer.to_string(),
                user: session.user.clone().unwrap_or_default(),
                users: node.users.clone(),
            };
            let _ = main.spawn(crate::dcp::producer::serve(setup, rd, wr, rbuf, producer_shutdown)).await;
            node.kv_connections.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        if wbuf.capacity() > IDLE_BUFFER_BYTES_MAX {
            wbuf.buf = Vec::with_capacity(READ_BUFFER_BYTES);
        }
    }
    // The budget goes back before the client can see the connection close.
    drop(claim);
    let _ = wr.shutdown().await;
    node.kv_connections.fetch_sub(1, Ordering::Relaxed);
}
