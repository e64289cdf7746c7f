//! A DCP producer connection: after DCP_OPEN the KV connection hands its socket here. This driver owns the socket
//! and the engine reads; `settee_dcp::ProducerConnection` decides what goes on the wire.
//!
//! Each pass: handle every complete frame from the consumer (stream requests, controls, buffer acks, noop
//! replies), read the vBuckets that have new mutations through their engine cursors into the streams, send what
//! flow control allows, then wait for the socket, a wake-up from the engine or the noop timer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use settee_dcp::{DcpItem, ProducerConnection, Snapshot, StreamRequestError};
use settee_engine::{ChangeKind, CursorId, DcpChange, DcpRead, EngineError, VbState};
use settee_mcbp::dcp::{
    encode_dcp_response, encode_failover_log_response, BufferAck, CloseStream, DcpControl, SeqnoAcknowledged,
    StreamEndReason, StreamReq,
};
use settee_mcbp::{decode_request, decode_response, encode_response, Opcode, Request};
use settee_types::{Datatype, Status, VbId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::hub::StreamWaker;
use crate::node::BucketHandle;

/// Frames written per socket write at most, so one busy connection cannot buffer without bound.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// How often the loop wakes without traffic, to send noops and notice a dead consumer.
const TICK: Duration = Duration::from_millis(500);
/// About how much one read of the engine copies for one stream: a backfill of a large vBucket, or a long change
/// log, is read in pieces of this size as the consumer takes them.
const READ_PIECE_BYTES: usize = 1 << 20;
/// Bytes of frames one connection may hold queued, all streams together, before it stops reading the engine. With a
/// consumer that neither reads nor acknowledges, this, one write batch and the socket's buffer are all a producer
/// holds, however many streams it has and however large their vBuckets are.
const CONNECTION_QUEUE_BYTES_MAX: usize = 4 << 20;
/// A write the consumer does not take for this long ends the connection (kv_engine disconnects stuck DCP
/// connections too): a consumer that stopped reading cannot keep the producer's cursors open forever.
const WRITE_STUCK_TIMEOUT: Duration = Duration::from_secs(360);
/// Largest frame body a consumer may send a producer: controls, stream requests and acknowledgements are small.
const CONSUMER_FRAME_BODY_BYTES_MAX: usize = 64 * 1024;

struct Producer {
    bucket: Arc<BucketHandle>,
    conn: ProducerConnection,
    waker: Arc<StreamWaker>,
    /// The engine cursor of each open stream and the seqno it has read up to.
    cursors: BTreeMap<VbId, (CursorId, u64)>,
    /// Streams to read on the next pass (new, woken, or with more to read).
    ready: BTreeSet<VbId>,
    include_xattrs: bool,
    collections: bool,
    /// The bucket clock's monotonic time when the connection opened: the connection's time starts there.
    epoch: Duration,
    peer: String,
    /// The node this connection replicates to, from its name (`replication:<node>:<bucket>`): its seqno
    /// acknowledgements commit sync writes. None for other consumers, whose acknowledgements count for nothing.
    replica_node: Option<u64>,
    /// What this connection last reported to the bucket's `DcpHub` as queued.
    queued_reported: usize,
}

/// What a KV connection hands over when it becomes a producer.
pub(crate) struct ProducerSetup {
    pub bucket: Arc<BucketHandle>,
    pub conn: ProducerConnection,
    /// DCP_OPEN asked for xattrs with the values.
    pub include_xattrs: bool,
    /// The connection negotiated collections: keys keep their collection prefix.
    pub collections: bool,
    pub peer: String,
    /// Who opened the connection, and the users it is checked against again whenever users change: a producer
    /// whose user is deleted or loses the DCP privilege stops, as kv_engine drops such connections.
    pub user: String,
    pub users: crate::auth::UserStore,
}

/// Runs the producer over the connection's halves (plain TCP or TLS) until the consumer goes or the node stops.
pub(crate) async fn serve<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    setup: ProducerSetup,
    mut rd: R,
    mut wr: W,
    mut rbuf: BytesMut,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let ProducerSetup { bucket, conn, include_xattrs, collections, peer, user, users } = setup;
    let mut users_generation = users.generation();
    let waker = bucket.dcp_hub.subscribe();
    let replica_node = std::str::from_utf8(conn.name()).ok().and_then(super::replica_node_of);
    let epoch = bucket.monotonic();
    let mut p = Producer {
        bucket,
        conn,
        waker,
        cursors: BTreeMap::new(),
        ready: BTreeSet::new(),
        include_xattrs,
        collections,
        epoch,
        peer,
        replica_node,
        queued_reported: 0,
    };
    tracing::info!(peer = %p.peer, name = %String::from_utf8_lossy(p.conn.name()), "dcp producer connection opened");
    let mut out = Vec::with_capacity(64 * 1024);
    // One timer and one shutdown waiter for the connection's life: a fresh `sleep` and `changed()` on every pass
    // registered a timer and a waiter on the watch's shared list (a mutex every connection takes) per batch.
    let tick = tokio::time::sleep(TICK);
    tokio::pin!(tick);
    let shutdown_signal = shutdown.changed();
    tokio::pin!(shutdown_signal);
    loop {
        if users.generation() != users_generation {
            users_generation = users.generation();
            if !users.bucket_access(&user, &p.bucket.name()).dcp {
                tracing::info!(peer = %p.peer, %user, "closing dcp connection: its user was deleted or lost the dcp privilege");
                break;
            }
        }
        // The acknowledgements of this read complete durable writes: their connections are woken once, after all.
        crate::kv::durable_replies::hold_outcomes();
        let open = p.handle_frames(&mut rbuf, &mut out);
        crate::kv::durable_replies::release_outcomes();
        if !open {
            break;
        }
        p.fill_streams();
        p.report_queued();
        let now = p.elapsed();
        while out.len() < WRITE_BATCH_BYTES && p.conn.poll_into(now, &mut out).is_some() {}
        p.close_finished_cursors();
        p.report_queued();
        if !out.is_empty() {
            match tokio::time::timeout(WRITE_STUCK_TIMEOUT, wr.write_all(&out)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => break,
                Err(_) => {
                    tracing::warn!(peer = %p.peer, "closing dcp connection: the consumer stopped taking what it is sent");
                    break;
                }
            }
            // Go round again at once while flow control allows and there is more to send or to read.
            let more = out.len() >= WRITE_BATCH_BYTES || p.ready_streams_want_data();
            out.clear();
            if more && p.conn.flow().can_send() {
                continue;
            }
        }
        if p.conn.is_dead(p.elapsed()) {
            tracing::warn!(peer = %p.peer, "closing dcp connection: the consumer stopped answering");
            break;
        }
        tokio::select! {
            r = rd.read_buf(&mut rbuf) => match r {
                Ok(0) | Err(_) => break,
                Ok(_) => p.conn.received(p.elapsed()),
            },
            _ = p.waker.notify.notified() => {}
            () = &mut tick => tick.as_mut().reset(tokio::time::Instant::now() + TICK),
            _ = &mut shutdown_signal => break,
        }
    }
    for (vb, (cursor, _)) in std::mem::take(&mut p.cursors) {
        p.bucket.close_cursor(vb, cursor);
    }
    p.bucket.dcp_hub.queued(std::mem::take(&mut p.queued_reported), 0);
    let _ = wr.shutdown().await;
    tracing::info!(peer = %p.peer, "dcp producer connection closed");
}

impl Producer {
    /// The connection's time: since it opened, by the bucket's clock.
    fn elapsed(&self) -> Duration {
        self.bucket.monotonic().saturating_sub(self.epoch)
    }

    fn ready_streams_want_data(&self) -> bool {
        self.ready.iter().any(|vb| self.conn.stream(*vb).is_some_and(|s| s.wants_from().is_some()))
    }

    /// Handles every complete frame in `rbuf`; false when the connection must close.
    fn handle_frames(&mut self, rbuf: &mut BytesMut, out: &mut Vec<u8>) -> bool {
        loop {
            let Some(&magic) = rbuf.first() else { return true };
            let used = if magic == 0x81 || magic == 0x18 {
                match decode_response(rbuf, CONSUMER_FRAME_BODY_BYTES_MAX) {
                    Ok(Some((resp, n))) => {
                        if resp.opcode == Opcode::DcpNoop as u8 {
                            self.conn.noop_response(resp.opaque);
                        }
                        n
                    }
                    Ok(None) => return true,
                    Err(e) => return self.malformed(&e.to_string()),
                }
            } else {
                match decode_request(rbuf, CONSUMER_FRAME_BODY_BYTES_MAX) {
                    Ok(Some((req, n))) => {
                        self.handle_request(&req, out);
                        n
                    }
                    Ok(None) => return true,
                    Err(e) => return self.malformed(&e.to_string()),
                }
            };
            rbuf.advance(used);
        }
    }

    fn malformed(&self, error: &str) -> bool {
        tracing::warn!(peer = %self.peer, error, "closing dcp connection: malformed frame");
        false
    }

    fn handle_request(&mut self, req: &Request<'_>, out: &mut Vec<u8>) {
        let reply = |out: &mut Vec<u8>, status: Status| {
            encode_response(out, req.opcode, status.code(), req.opaque, 0, 0, &[], &[], &[], &[])
        };
        match Opcode::from_byte(req.opcode) {
            Some(Opcode::DcpStreamReq) => match StreamReq::decode(req) {
                Ok(sr) => self.stream_request(&sr, out),
                Err(e) => reply(out, e.status()),
            },
            Some(Opcode::DcpControl) => match DcpControl::decode(req) {
                Ok(c) => {
                    let status = self.conn.control(c.key, c.value);
                    reply(out, status)
                }
                Err(e) => reply(out, e.status()),
            },
            Some(Opcode::DcpBufferAck) => {
                if let Ok(ack) = BufferAck::decode(req) {
                    self.conn.buffer_ack(ack.bytes);
                }
            }
            Some(Opcode::DcpCloseStream) => match CloseStream::decode(req) {
                Ok(c) => {
                    let status = self.conn.close_stream(VbId(c.vbucket));
                    reply(out, status)
                }
                Err(e) => reply(out, e.status()),
            },
            Some(Opcode::DcpGetFailoverLog) => match self.bucket.stream_info(VbId(req.vbucket)) {
                Ok(info) => encode_failover_log_response(out, req.opaque, &info.failover),
                Err(e) => reply(out, e.status()),
            },
            Some(Opcode::DcpSeqnoAcknowledged) => {
                // No reply: Couchbase's consumers do not expect one.
                let Ok(ack) = SeqnoAcknowledged::decode(req) else { return };
                let vb = VbId(ack.vbucket);
                match (self.conn.seqno_acknowledged(vb, ack.prepared_seqno), self.replica_node) {
                    (Ok(seqno), Some(node)) => self.bucket.seqno_acknowledged(vb, node, seqno),
                    (outcome, _) => {
                        tracing::debug!(peer = %self.peer, vb = vb.0, ?outcome, "seqno acknowledgement ignored")
                    }
                }
            }
            Some(Opcode::DcpNoop) => encode_dcp_response(out, Opcode::DcpNoop, 0, req.opaque),
            _ => {
                tracing::debug!(peer = %self.peer, opcode = req.opcode, "command not supported on a dcp producer connection");
                reply(out, Status::NotSupported)
            }
        }
    }

    fn stream_request(&mut self, req: &StreamReq<'_>, out: &mut Vec<u8>) {
        let vb = VbId(req.vbucket);
        if self.bucket.is_warming_up() {
            // Until warmup has loaded the vBucket its failover log and seqnos are not what the disk holds: a
            // decision now could tell a replica to roll back to zero, or stream it a partial copy. The consumer asks
            // again after a pause.
            return encode_dcp_response(out, Opcode::DcpStreamReq, Status::Etmpfail.code(), req.opaque);
        }
        let info = match self.bucket.stream_info(vb) {
            // A pending vBucket is held for a takeover: its copies still stream what it has.
            Ok(info) if matches!(info.state, VbState::Active | VbState::Pending) => info,
            Ok(_) => return encode_dcp_response(out, Opcode::DcpStreamReq, Status::NotMyVbucket.code(), req.opaque),
            Err(e) => return encode_dcp_response(out, Opcode::DcpStreamReq, e.status().code(), req.opaque),
        };
        match self.conn.stream_request(req, &info.failover, info.high_seqno, info.purge_seqno, out) {
            Ok(()) => match self.bucket.open_cursor(vb, req.start_seqno) {
                Ok(cursor) => {
                    self.cursors.insert(vb, (cursor, req.start_seqno));
                    self.waker.interested.insert(vb);
                    self.ready.insert(vb);
                }
                Err(_) => {
                    self.conn.end_stream(vb, StreamEndReason::StateChanged);
                }
            },
            Err(StreamRequestError::Rollback { to }) => {
                tracing::info!(peer = %self.peer, vb = vb.0, to, "dcp stream request answered with a rollback");
            }
            Err(e) => tracing::debug!(peer = %self.peer, vb = vb.0, error = %e, "dcp stream request refused"),
        }
    }

    /// Reads the engine for every ready stream that has room, a piece at a time, while the connection holds less
    /// than [`CONNECTION_QUEUE_BYTES_MAX`] queued: a consumer whose flow-control window is full, or whose socket
    /// does not drain, leaves frames queued and so stops further reads until it takes them.
    fn fill_streams(&mut self) {
        for vb in self.waker.pending.take() {
            self.ready.insert(vb);
        }
        let mut room = CONNECTION_QUEUE_BYTES_MAX.saturating_sub(self.conn.queued_bytes());
        let wants: Vec<VbId> = self
            .ready
            .iter()
            .copied()
            .filter(|vb| self.conn.stream(*vb).is_some_and(|s| s.wants_from().is_some()))
            .collect();
        for vb in wants {
            if room == 0 {
                // The rest stay ready for a later pass, once frames have gone out.
                break;
            }
            let Some(&(cursor, position)) = self.cursors.get(&vb) else { continue };
            let limit = room.min(READ_PIECE_BYTES);
            let read = match self.bucket.read_cursor(vb, cursor, position, limit) {
                Ok(DcpRead::UpToDate) => {
                    self.ready.remove(&vb);
                    continue;
                }
                Ok(DcpRead::Snapshot(s)) => self.items(vb, s.items).map(|items| {
                    let snapshot = if s.from_memory {
                        Snapshot::memory(s.start, s.end, items)
                    } else {
                        Snapshot::disk(s.start, s.end, items)
                    };
                    (snapshot, s.end)
                }),
                Ok(DcpRead::FromDisk { up_to, prepares }) => self
                    .disk_items(vb, position, up_to, prepares, limit)
                    .map(|(items, end)| (Snapshot::disk(position + 1, end, items), end)),
                Err(e) => Err(e),
            };
            match read {
                Ok((snapshot, end)) => {
                    let bytes: usize = snapshot.items.iter().map(DcpItem::frame_bytes_estimate).sum();
                    room = room.saturating_sub(bytes.max(1));
                    self.push(vb, snapshot, end);
                }
                Err(e) => {
                    let reason = match e {
                        EngineError::NotMyVbucket => StreamEndReason::StateChanged,
                        _ => StreamEndReason::BackfillFailed,
                    };
                    tracing::info!(peer = %self.peer, vb = vb.0, error = %e, "ending dcp stream");
                    self.conn.end_stream(vb, reason);
                    self.ready.remove(&vb);
                }
            }
        }
    }

    /// Tells the bucket's hub how much this connection holds queued now.
    fn report_queued(&mut self) {
        let now = self.conn.queued_bytes();
        if now != self.queued_reported {
            self.bucket.dcp_hub.queued(self.queued_reported, now);
            self.queued_reported = now;
        }
    }

    fn push(&mut self, vb: VbId, snapshot: Snapshot, end: u64) {
        if let Err(e) = self.conn.push_snapshot(vb, snapshot) {
            tracing::error!(peer = %self.peer, vb = vb.0, error = %e, "dcp stream refused a snapshot");
            self.conn.end_stream(vb, StreamEndReason::BackfillFailed);
        }
        if let Some(c) = self.cursors.get_mut(&vb) {
            c.1 = end;
        }
    }

    /// Closes the engine cursors of streams that have ended.
    fn close_finished_cursors(&mut self) {
        if self.cursors.len() == self.conn.stream_count() {
            return;
        }
        let done: Vec<VbId> = self.cursors.keys().filter(|vb| self.conn.stream(**vb).is_none()).copied().collect();
        for vb in done {
            if let Some((cursor, _)) = self.cursors.remove(&vb) {
                self.bucket.close_cursor(vb, cursor);
            }
            self.waker.interested.remove(vb);
            self.ready.remove(&vb);
        }
    }

    /// Items on disk only, between `after` and `up_to`, read from the store's seqno index, with the pending
    /// prepares of that range (memory only) merged in by seqno; at most about `limit_bytes` of them (at least one).
    /// Returns them and the seqno they reach: `up_to`, or just below the first record left for the next read. A
    /// read that fails ends the stream (the consumer asks again from where it is) rather than skipping the range:
    /// a stream that went on past it would leave its replica without those changes.
    fn disk_items(
        &self,
        vb: VbId,
        after: u64,
        up_to: u64,
        prepares: Vec<DcpChange>,
        limit_bytes: usize,
    ) -> Result<(Vec<DcpItem>, u64), EngineError> {
        let Some(p) = &self.bucket.persistence else { return Ok((Vec::new(), up_to)) };
        let read = tokio::task::block_in_place(|| {
            crate::persistence::disk_changes(&*p.store, vb, after, up_to, prepares, limit_bytes)
        });
        let (changes, end) = read.map_err(|e| {
            tracing::error!(vb = vb.0, error = %e, "dcp backfill from disk failed");
            EngineError::TempFail
        })?;
        Ok((self.items(vb, changes)?, end))
    }

    /// [`Self::item`] of each change, in order.
    fn items(&self, vb: VbId, changes: Vec<DcpChange>) -> Result<Vec<DcpItem>, EngineError> {
        let mut items = Vec::with_capacity(changes.len());
        for change in changes {
            items.extend(self.item(vb, change)?);
        }
        Ok(items)
    }

    /// The DCP form of an engine change, shaped for this connection: keys without their collection prefix and only
    /// the default collection unless collections were negotiated; xattrs only if DCP_OPEN asked for them; values
    /// the item pager ejected read back from the store. Without sync writes, prepares and aborts are left out and
    /// a commit goes out as the mutation it installed. None: not sent on this connection (or superseded: an
    /// ejected value whose key the store holds at a newer seqno, sent later at that seqno). An ejected value the
    /// store cannot read fails: the stream ends rather than go on without that change.
    fn item(&self, vb: VbId, change: DcpChange) -> Result<Option<DcpItem>, EngineError> {
        let DcpChange { item: mut i, kind } = change;
        let sync_writes = self.conn.settings().sync_writes;
        match kind {
            ChangeKind::Prepare(_) | ChangeKind::Abort { .. } if !sync_writes => return Ok(None),
            ChangeKind::Abort { prepared_seqno } => {
                let Some(key) = self.wire_key(i.key) else { return Ok(None) };
                return Ok(Some(DcpItem::Abort { key, prepared_seqno, abort_seqno: i.seqno }));
            }
            ChangeKind::Commit { prepared_seqno } if sync_writes => {
                let Some(key) = self.wire_key(i.key) else { return Ok(None) };
                return Ok(Some(DcpItem::Commit { key, prepared_seqno, commit_seqno: i.seqno }));
            }
            _ => {}
        }
        if i.value_missing {
            let Some(p) = self.bucket.persistence.as_ref() else { return Ok(None) };
            let found = tokio::task::block_in_place(|| p.store.get(vb, &i.key)).map_err(|e| {
                tracing::error!(vb = vb.0, error = %e, "dcp stream cannot read an ejected value from disk");
                EngineError::TempFail
            })?;
            match found {
                Some(found) if found.meta.seqno == i.seqno => i.value = found.value,
                _ => return Ok(None),
            }
        }
        let Some(key) = self.wire_key(i.key) else { return Ok(None) };
        let mut datatype = Datatype(i.datatype);
        if !self.include_xattrs && datatype.has_xattr() {
            if let Ok((_, body)) = settee_doc::split_value(&i.value, true) {
                i.value = body.to_vec();
            }
            datatype = Datatype(datatype.0 & !Datatype::XATTR.0);
        }
        let value = Bytes::from(i.value);
        if let ChangeKind::Prepare(level) = kind {
            let (cas, seqno, rev, flags, expiry, deleted) = (i.cas, i.seqno, i.rev, i.flags, i.expiry, i.deleted);
            return Ok(Some(DcpItem::Prepare { key, value, cas, seqno, rev, flags, expiry, datatype, level, deleted }));
        }
        Ok(Some(if i.deleted {
            DcpItem::Deletion { key, value, cas: i.cas, seqno: i.seqno, rev: i.rev, delete_time: i.expiry, datatype }
        } else {
            DcpItem::Mutation {
                key,
                value,
                cas: i.cas,
                seqno: i.seqno,
                rev: i.rev,
                flags: i.flags,
                expiry: i.expiry,
                datatype,
            }
        }))
    }

    /// A stored key as this connection sends it: with its collection prefix when collections were negotiated,
    /// else bare and only for the default collection (None: not sent).
    fn wire_key(&self, key: Vec<u8>) -> Option<Bytes> {
        if self.collections {
            return Some(Bytes::from(key));
        }
        let (cid, n) = settee_mcbp::decode_leb128(&key)?;
        (cid == 0).then(|| Bytes::copy_from_slice(&key[n..]))
    }
}
