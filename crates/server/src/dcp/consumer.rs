//! The replica side of replication: one connection from this node to the node holding the active copies of some
//! of a bucket's vBuckets, streaming each of them into the local replica vBucket.
//!
//! The driver owns the socket and the engine calls; `settee_dcp::ConsumerStream` validates every message and
//! says when to acknowledge. On any error the connection is dropped and opened again after a pause; each stream
//! resumes from what the replica holds (the producer's failover log decides whether that is still valid).
//!
//! Sync writes: the connection asks for them (`enable_sync_writes`, with its name as `consumer_name`), applies
//! prepares, commits and aborts to the replica vBuckets, and acknowledges prepares with DCP_SEQNO_ACKNOWLEDGED
//! as each stream's high prepared seqno moves: at once for majority-level prepares of a complete memory snapshot,
//! and for persist-level ones (or any in a disk snapshot) once the replica's flusher persisted them, which the
//! driver checks on a short tick while such prepares wait.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use settee_client::{Connection, KvStream};
use settee_dcp::{ConsumerAction, ConsumerEvent, ConsumerFlowControl, ConsumerStream, DcpItem};
use settee_engine::{ChangeKind, DcpChange, EngineError, ItemSnapshot, ReplicaApply, VbState};
use settee_mcbp::dcp::{encode_dcp_response, CloseStream, DcpControl, DcpOpen, DcpOpenFlags};
use settee_mcbp::{decode_request, decode_response, Feature, Opcode, Request};
use settee_types::limits::FRAME_BODY_BYTES_MAX;
use settee_types::{Status, VbId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::node::BucketHandle;

/// Bytes the producer may send before this consumer acknowledges them.
const BUFFER_BYTES: u32 = 16 * 1024 * 1024;
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// Pause before asking again for a stream the producer refused.
const STREAM_RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often the replica's persisted seqno is checked while persist-level prepares wait to be acknowledged.
const PERSISTENCE_POLL: Duration = Duration::from_millis(5);
/// How often an idle connection looks whether one of its replica vBuckets was emptied by someone else.
const RESET_CHECK: Duration = Duration::from_millis(250);

/// How long a feed waits on its producer before it drops the connection (logged) and connects again after its
/// pause, so a producer that accepts connections and never answers, or stops answering, holds nothing forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedTimeouts {
    /// The connection, authentication and DCP handshake together.
    pub handshake: Duration,
    /// Nothing received, not even a noop (the connection asks for them; an idle producer sends one every second).
    pub silence: Duration,
    /// A write to the producer (acknowledgements, stream requests) it does not take.
    pub write: Duration,
}

impl Default for FeedTimeouts {
    fn default() -> FeedTimeouts {
        FeedTimeouts {
            handshake: Duration::from_secs(10),
            silence: Duration::from_secs(30),
            write: Duration::from_secs(30),
        }
    }
}

/// What one replication connection streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedSpec {
    /// The producer's KV address.
    pub source: SocketAddr,
    /// The vBuckets this node holds as replicas whose active is on `source`. A running feed follows changes to
    /// this list on its open connection (see [`run`]).
    pub vbuckets: Vec<VbId>,
    pub username: String,
    pub password: String,
    /// The local address the connection comes from (`--bind-peer-connections`), or none.
    pub bind: Option<std::net::IpAddr>,
    /// Names the connection on the producer: [`crate::dcp::replication_connection_name`], from which the
    /// producer learns the node whose acknowledgements commit sync writes.
    pub name: String,
    pub timeouts: FeedTimeouts,
    /// TLS to the producer's KV TLS port (`source` is then that port), when node-to-node encryption covers data.
    pub tls: FeedTls,
}

/// The TLS client of a feed, or None for plain TCP. Two feeds compare equal when both are plain or both TLS: the
/// CAs a TLS client trusts change only with the cluster's CA, and a change of transport is what restarts a feed.
#[derive(Clone, Debug, Default)]
pub struct FeedTls(pub Option<settee_client::TlsClient>);

impl PartialEq for FeedTls {
    fn eq(&self, other: &FeedTls) -> bool {
        self.0.is_some() == other.0.is_some()
    }
}

impl Eq for FeedTls {}

impl FeedSpec {
    /// Whether `other` is the same connection (everything but the vBucket list equal).
    pub fn same_connection(&self, other: &FeedSpec) -> bool {
        (&self.source, &self.username, &self.password, &self.bind, &self.name, &self.tls)
            == (&other.source, &other.username, &other.password, &other.bind, &other.name, &other.tls)
    }
}

/// Runs the feed until `stop` turns true, reconnecting after failures. `vbuckets` is the list to stream: a change
/// opens streams for added vBuckets and closes those removed, on the same connection (a rebalance changes it for
/// every vBucket it moves).
pub async fn run(
    bucket: Arc<BucketHandle>,
    spec: FeedSpec,
    mut vbuckets: watch::Receiver<Vec<VbId>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let outcome = tokio::select! {
            r = stream_once(&bucket, &spec, &mut vbuckets) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        if let Err(e) = outcome {
            tracing::info!(bucket = %bucket.name(), source = %spec.source, error = %e, "replication connection lost; reconnecting");
        }
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One connection's life: handshake, a stream per vBucket, then apply what arrives until an error.
async fn stream_once(
    bucket: &BucketHandle,
    spec: &FeedSpec,
    vbuckets: &mut watch::Receiver<Vec<VbId>>,
) -> anyhow::Result<()> {
    let limit = spec.timeouts.handshake;
    let Ok(connected) = tokio::time::timeout(limit, handshake(bucket, spec)).await else {
        tracing::warn!(bucket = %bucket.name(), source = %spec.source, "replication producer did not complete the handshake within {limit:?}; reconnecting");
        anyhow::bail!("the producer did not complete the handshake within {limit:?}");
    };
    let (sock, unread) = connected?;
    stream(bucket, spec, vbuckets, sock, unread).await
}

/// Connects, authenticates and opens the DCP connection; returns the socket and what was read past the replies.
async fn handshake(bucket: &BucketHandle, spec: &FeedSpec) -> anyhow::Result<(KvStream, Vec<u8>)> {
    let features = [Feature::Collections, Feature::Xattr, Feature::Json];
    let mut c = Connection::connect_with(
        spec.source,
        spec.bind,
        spec.tls.0.as_ref(),
        &spec.username,
        &spec.password,
        Some(&bucket.name()),
        &features,
    )
    .await?;
    let flags = DcpOpenFlags::PRODUCER.with(DcpOpenFlags::INCLUDE_XATTRS).with(DcpOpenFlags::INCLUDE_DELETE_TIMES);
    let mut out = Vec::new();
    DcpOpen { opaque: 0, flags, name: spec.name.as_bytes(), value: &[] }.encode(&mut out);
    let controls = [
        ("connection_buffer_size", BUFFER_BYTES.to_string()),
        ("enable_noop", "true".into()),
        ("enable_sync_writes", "true".into()),
        // The producer accepts seqno acknowledgements only from a named consumer.
        ("consumer_name", spec.name.clone()),
    ];
    for (k, v) in &controls {
        DcpControl { opaque: 0, key: k.as_bytes(), value: v.as_bytes() }.encode(&mut out);
    }
    c.send_raw(&out).await?;
    for _ in 0..=controls.len() {
        let r = c.read_response().await?;
        anyhow::ensure!(r.status == 0, "dcp handshake (opcode 0x{:02x}) refused: 0x{:04x}", r.opcode, r.status);
    }
    Ok(c.into_parts())
}

/// Streams on an open DCP connection until an error (a producer silent for [`FeedTimeouts::silence`] is one).
async fn stream(
    bucket: &BucketHandle,
    spec: &FeedSpec,
    vbuckets: &mut watch::Receiver<Vec<VbId>>,
    mut sock: KvStream,
    unread: Vec<u8>,
) -> anyhow::Result<()> {
    let mut out = Vec::new();
    let mut rbuf = BytesMut::from(&unread[..]);
    let mut streams = Streams::default();
    let mut wanted: BTreeSet<VbId> = vbuckets.borrow_and_update().iter().copied().collect();
    out.clear();
    for &vb in &wanted {
        streams.open_if_replica(bucket, vb, &mut out)?;
    }
    write(&mut sock, &out, spec.timeouts.write).await?;
    tracing::info!(bucket = %bucket.name(), source = %spec.source, vbuckets = wanted.len(), "replication streams requested");
    let mut heard_at = tokio::time::Instant::now();
    // One timer for the connection's life, moved on only when it fires: re-arming it on every read registered a
    // timer per batch.
    let silent = tokio::time::sleep_until(heard_at + spec.timeouts.silence);
    tokio::pin!(silent);
    let mut flow = ConsumerFlowControl::new(BUFFER_BYTES);
    let mut poll = tokio::time::interval(PERSISTENCE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut list_changed = false;
    let mut resets_seen = bucket.resets();
    let mut reset_check = tokio::time::interval(RESET_CHECK);
    reset_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        out.clear();
        if std::mem::take(&mut list_changed) {
            let now: BTreeSet<VbId> = vbuckets.borrow_and_update().iter().copied().collect();
            for &vb in wanted.difference(&now) {
                streams.remove(vb);
                CloseStream { opaque: u32::from(vb.0), vbucket: vb.0 }.encode(&mut out);
            }
            for &vb in now.difference(&wanted) {
                streams.open_if_replica(bucket, vb, &mut out)?;
            }
            wanted = now;
        }
        if bucket.resets() != resets_seen {
            resets_seen = bucket.resets();
            if let Some(vb) = streams.emptied_behind_our_back(bucket) {
                anyhow::bail!("replica vBucket {} was emptied while streaming; streaming again", vb.0);
            }
        }
        for vb in streams.due_retries() {
            streams.open_if_replica(bucket, vb, &mut out)?;
        }
        let mut used = 0;
        while let Some(&magic) = rbuf.get(used) {
            let n = if magic == 0x81 || magic == 0x18 {
                let Some((resp, n)) = decode_response(&rbuf[used..], FRAME_BODY_BYTES_MAX)? else { break };
                if resp.opcode == Opcode::DcpStreamReq as u8 {
                    let vb = VbId(u16::try_from(resp.opaque).unwrap_or(u16::MAX));
                    stream_response(bucket, &mut streams, vb, resp.status, resp.value, &mut out)?;
                }
                n
            } else {
                let Some((req, n)) = decode_request(&rbuf[used..], FRAME_BODY_BYTES_MAX)? else { break };
                if let Err(e) = message(bucket, &mut streams, &req, &mut out) {
                    let vb = VbId(req.vbucket);
                    if !is_not_replica(&e) {
                        return Err(e);
                    }
                    // The local copy stopped being a replica (promoted by a takeover, or dropped) before the list
                    // change that closes its stream arrived: only this stream ends.
                    tracing::debug!(bucket = %bucket.name(), vb = vb.0, "stream for a vBucket no longer a replica closed");
                    if streams.remove(vb).is_some() {
                        CloseStream { opaque: u32::from(vb.0), vbucket: vb.0 }.encode(&mut out);
                    }
                }
                flow.consumed(n);
                n
            };
            used += n;
        }
        rbuf.advance(used);
        streams.acknowledge_prepares(bucket, &mut out);
        if let Some(ack) = flow.take_ack(0) {
            ack.encode(&mut out);
        }
        if !out.is_empty() {
            write(&mut sock, &out, spec.timeouts.write).await?;
        }
        let awaiting = !streams.awaiting.is_empty();
        tokio::select! {
            read = sock.read_buf(&mut rbuf) => {
                if read? == 0 {
                    anyhow::bail!("connection closed by the producer");
                }
                heard_at = tokio::time::Instant::now();
            }
            () = &mut silent => {
                let silence = spec.timeouts.silence;
                if heard_at + silence > tokio::time::Instant::now() {
                    silent.as_mut().reset(heard_at + silence);
                    continue;
                }
                tracing::warn!(bucket = %bucket.name(), source = %spec.source, "replication producer sent nothing, not even a noop, for {silence:?}; reconnecting");
                anyhow::bail!("the producer sent nothing for {silence:?}");
            }
            changed = vbuckets.changed() => {
                // The feed's owner went away: its stop signal follows.
                changed?;
                list_changed = true;
            }
            _ = poll.tick(), if awaiting => {}
            _ = reset_check.tick() => {}
            _ = tokio::time::sleep(STREAM_RETRY_PAUSE), if streams.has_retries() => {}
        }
    }
}

/// Writes to the producer within `limit`.
async fn write(sock: &mut KvStream, bytes: &[u8], limit: Duration) -> anyhow::Result<()> {
    // The flush pushes out what TLS still buffers (a no-op on plain TCP).
    let written = async {
        sock.write_all(bytes).await?;
        sock.flush().await
    };
    match tokio::time::timeout(limit, written).await {
        Ok(written) => Ok(written?),
        Err(_) => {
            tracing::warn!(
                bytes = bytes.len(),
                "replication producer did not take a write within {limit:?}; reconnecting"
            );
            anyhow::bail!("the producer did not take a write within {limit:?}")
        }
    }
}

/// The streams of one connection: those requested or open, the vBucket generation each was opened on, and the
/// vBuckets to ask for again later.
#[derive(Default)]
struct Streams {
    open: BTreeMap<VbId, ConsumerStream>,
    /// Streams that got a message or were opened since the last acknowledgement pass (possibly twice).
    touched: Vec<VbId>,
    /// Streams whose prepares wait to be acknowledged (their snapshot to complete, or to be persisted): only these
    /// and the touched ones are looked at by an acknowledgement pass, not every stream of the connection.
    awaiting: BTreeSet<VbId>,
    /// The generation of the local vBucket when its stream was opened (see `Bucket::reset_vbucket`).
    generations: BTreeMap<VbId, u64>,
    /// Streams not requested yet (the bucket is warming up) or refused by the producer, and when to ask again.
    retries: Vec<(VbId, tokio::time::Instant)>,
}

impl Streams {
    /// Requests a stream for `vb` unless the local copy is no longer a replica (its state changed after the list
    /// naming it was sent; the next list leaves it out). While warmup loads the bucket no stream is requested: the
    /// replica's seqnos, which the request resumes from, are not known yet, and what it would apply could be
    /// overtaken by what warmup loads; the request is made once warmup is done.
    fn open_if_replica(&mut self, bucket: &BucketHandle, vb: VbId, out: &mut Vec<u8>) -> anyhow::Result<()> {
        if bucket.is_warming_up() {
            self.retry_later(vb);
            return Ok(());
        }
        match open_stream(bucket, vb) {
            Ok((stream, generation)) => {
                stream.request().encode(out);
                self.open.insert(vb, stream);
                self.touched.push(vb);
                self.generations.insert(vb, generation);
                Ok(())
            }
            Err(e) if is_not_replica(&e) => {
                tracing::debug!(bucket = %bucket.name(), vb = vb.0, "no stream for a vBucket no longer a replica");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Appends a DCP_SEQNO_ACKNOWLEDGED for every stream whose high prepared seqno moved, after telling the
    /// streams with waiting prepares how far the replica vBucket is persisted. Only streams touched since the last
    /// pass or still awaiting can have moved.
    fn acknowledge_prepares(&mut self, bucket: &BucketHandle, out: &mut Vec<u8>) {
        if self.touched.is_empty() && self.awaiting.is_empty() {
            return;
        }
        let mut check = std::mem::take(&mut self.touched);
        check.extend(self.awaiting.iter().copied());
        check.sort_unstable();
        check.dedup();
        for vb in check.iter().copied() {
            let Some(stream) = self.open.get_mut(&vb) else {
                self.awaiting.remove(&vb);
                continue;
            };
            if stream.awaits_acknowledgement() {
                if let Some(persisted) = bucket.persisted_seqno(vb) {
                    stream.persisted(persisted);
                }
            }
            if let Some(ack) = stream.seqno_ack() {
                ack.encode(out);
            }
            if stream.awaits_acknowledgement() {
                self.awaiting.insert(vb);
            } else {
                self.awaiting.remove(&vb);
            }
        }
        // Keep the allocation for the next pass.
        check.clear();
        self.touched = check;
    }

    fn remove(&mut self, vb: VbId) -> Option<ConsumerStream> {
        self.awaiting.remove(&vb);
        self.retries.retain(|(r, _)| *r != vb);
        self.generations.remove(&vb);
        self.open.remove(&vb)
    }

    fn retry_later(&mut self, vb: VbId) {
        self.open.remove(&vb);
        if !self.retries.iter().any(|(r, _)| *r == vb) {
            self.retries.push((vb, tokio::time::Instant::now() + STREAM_RETRY_PAUSE));
        }
    }

    fn has_retries(&self) -> bool {
        !self.retries.is_empty()
    }

    /// The vBuckets whose retry is due, taken out of the list.
    fn due_retries(&mut self) -> Vec<VbId> {
        let now = tokio::time::Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.retries.drain(..).partition(|(_, at)| *at <= now);
        self.retries = later;
        due.into_iter().map(|(vb, _)| vb).collect()
    }

    /// A streamed replica vBucket that was emptied by someone else than this stream (the flusher, after the store
    /// refused its data): its stream no longer matches what the replica holds. A copy that stopped being a replica
    /// (dropped by the map; the list change that closes its stream follows) does not count.
    fn emptied_behind_our_back(&self, bucket: &BucketHandle) -> Option<VbId> {
        self.open.keys().copied().find(|vb| {
            let Ok(info) = bucket.stream_info(*vb) else { return false };
            info.state == VbState::Replica && self.generations.get(vb).is_some_and(|opened| *opened != info.generation)
        })
    }
}

/// Whether `e` says the local vBucket is not (or no longer) a replica: the engine's NOT_MY_VBUCKET, from a
/// replica-only call or from [`open_stream`].
fn is_not_replica(e: &anyhow::Error) -> bool {
    e.downcast_ref::<EngineError>() == Some(&EngineError::NotMyVbucket)
}

/// A stream request resuming from what the local replica vBucket holds (opaque = the vBucket id), and the
/// vBucket's generation.
fn open_stream(bucket: &BucketHandle, vb: VbId) -> anyhow::Result<(ConsumerStream, u64)> {
    let info = bucket.stream_info(vb)?;
    if info.state != VbState::Replica {
        return Err(EngineError::NotMyVbucket.into());
    }
    let mut stream = ConsumerStream::new(vb, u32::from(vb.0), &info.failover, info.high_seqno, info.snapshot);
    let held: Vec<(u64, bool)> = bucket
        .held_prepares(vb)
        .into_iter()
        .map(|(seqno, level)| (seqno, level == settee_types::DurabilityLevel::PersistToMajority))
        .collect();
    stream.resume_prepares(&held);
    Ok((stream, info.generation))
}

fn stream_response(
    bucket: &BucketHandle,
    streams: &mut Streams,
    vb: VbId,
    status: u16,
    body: &[u8],
    out: &mut Vec<u8>,
) -> anyhow::Result<()> {
    let Some(stream) = streams.open.get_mut(&vb) else { return Ok(()) };
    streams.touched.push(vb);
    match stream.on_stream_response(status, body)? {
        ConsumerEvent::Accepted { failover_log } => bucket.set_failover_log(vb, failover_log),
        ConsumerEvent::RollbackTo(seqno) => {
            // Back to `seqno` or below it, keeping what lies there (zero when the engine cannot tell what its
            // writes above `seqno` replaced; see `settee_engine::rollback`), then stream from there.
            let to = bucket.rollback_replica(vb, seqno);
            tracing::info!(bucket = %bucket.name(), vb = vb.0, asked = seqno, to, "replica rolled back; streams again from there");
            let (fresh, generation) = open_stream(bucket, vb)?;
            fresh.request().encode(out);
            streams.open.insert(vb, fresh);
            streams.touched.push(vb);
            streams.generations.insert(vb, generation);
        }
        ConsumerEvent::Rejected(status) => {
            // Usually NOT_MY_VBUCKET: the map already names the source as active but the source has not applied it
            // yet (a rebalance or failover in progress); or TMPFAIL from a source still warming up. The stream is
            // asked for again after a pause.
            tracing::debug!(bucket = %bucket.name(), vb = vb.0, status, "replication stream refused; will ask again");
            streams.retry_later(vb);
        }
    }
    Ok(())
}

/// Empties a replica vBucket in memory; its flusher clears the store's copy before it writes anything new of it.
pub(crate) fn reset_replica(bucket: &BucketHandle, vb: VbId) {
    bucket.reset_vbucket(vb);
}

fn message(bucket: &BucketHandle, streams: &mut Streams, req: &Request<'_>, out: &mut Vec<u8>) -> anyhow::Result<()> {
    if req.opcode == Opcode::DcpNoop as u8 {
        encode_dcp_response(out, Opcode::DcpNoop, Status::Success.code(), req.opaque);
        return Ok(());
    }
    let vb = VbId(req.vbucket);
    let Some(stream) = streams.open.get_mut(&vb) else {
        tracing::debug!(vb = vb.0, opcode = req.opcode, "dcp message for a vBucket without a stream");
        return Ok(());
    };
    streams.touched.push(vb);
    match stream.on_message(req)? {
        ConsumerAction::SnapshotMarker { start, end, .. } => bucket.replica_snapshot(vb, start, end)?,
        ConsumerAction::Apply(item) => {
            if bucket.replica_apply(vb, change_of(item))? == ReplicaApply::MissingPrepare {
                // The replica lost the prepare (its disk did not keep it) and cannot know what was committed: it
                // starts the vBucket over, from zero, on the next connection.
                reset_replica(bucket, vb);
                anyhow::bail!("vBucket {} got a commit for a prepare it lost; streaming it again from zero", vb.0);
            }
        }
        ConsumerAction::StreamEnd(reason) => {
            // The producer ended a stream this replica still wants (its copy stopped being active there for a
            // while, a backfill failed): ask again after a pause, as for a refused request, until the vBucket
            // list says otherwise. Left ended, the replica would fall behind for good, and a rebalance building
            // or taking over this vBucket would wait for it.
            tracing::info!(bucket = %bucket.name(), vb = vb.0, ?reason, "replication stream ended; will ask again");
            streams.retry_later(vb);
        }
        // The snapshot's last changes are not for this stream (an abort of a prepare it never sent): the replica
        // still reached that seqno, which a takeover or a graceful failover waits for.
        ConsumerAction::SeqnoAdvanced(seqno) => bucket.replica_seqno_advanced(vb, seqno)?,
        ConsumerAction::SetVbucketState(_) => {}
    }
    Ok(())
}

/// The engine form of a replicated change. The item's key and value buffers move into the snapshot (a `Bytes`
/// made from a copy of the frame owns its buffer alone, so it becomes a `Vec` without copying again).
fn change_of(item: DcpItem) -> DcpChange {
    let snapshot = |key: Bytes, value: Bytes, cas, seqno, rev, flags, expiry, datatype, deleted| ItemSnapshot {
        key: key.into(),
        value: value.into(),
        cas,
        seqno,
        rev,
        flags,
        expiry,
        datatype,
        deleted,
        value_missing: false,
    };
    match item {
        DcpItem::Mutation { key, value, cas, seqno, rev, flags, expiry, datatype } => {
            snapshot(key, value, cas, seqno, rev, flags, expiry, datatype.0, false).into()
        }
        DcpItem::Deletion { key, value, cas, seqno, rev, delete_time, datatype } => {
            snapshot(key, value, cas, seqno, rev, 0, delete_time, datatype.0, true).into()
        }
        DcpItem::Expiration { key, cas, seqno, rev, delete_time } => {
            snapshot(key, Bytes::new(), cas, seqno, rev, 0, delete_time, 0, true).into()
        }
        DcpItem::Prepare { key, value, cas, seqno, rev, flags, expiry, datatype, level, deleted } => DcpChange {
            item: snapshot(key, value, cas, seqno, rev, flags, expiry, datatype.0, deleted),
            kind: ChangeKind::Prepare(level),
        },
        DcpItem::Commit { key, prepared_seqno, commit_seqno } => {
            DcpChange::commit(key.into(), prepared_seqno, commit_seqno)
        }
        DcpItem::Abort { key, prepared_seqno, abort_seqno } => {
            DcpChange::abort(key.into(), prepared_seqno, abort_seqno)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dcp::{replica_node_of, replication_connection_name};

    /// The producer recognises a replication feed by its name and ignores acknowledgements of anything else.
    #[test]
    fn replication_names_carry_the_node() {
        assert_eq!(replica_node_of(&replication_connection_name(2, "default")), Some(2));
        assert_eq!(replica_node_of("replication:7:a:b"), Some(7));
        assert_eq!(replica_node_of("replication:test"), None);
        assert_eq!(replica_node_of("replication:ns_1@a->ns_1@b:default"), None);
        assert_eq!(replica_node_of("eq_dcpq:indexer"), None);
    }
}
