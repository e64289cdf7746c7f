//! The producer side of a replication connection on the active's node: the real `ProducerConnection` fed from
//! the engine's cursors, as `server/src/dcp/producer.rs` feeds it.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use settee_dcp::{DcpItem, ProducerConnection, Snapshot};
use settee_engine::{Bucket, ChangeKind, CursorId, DcpChange, DcpRead, EngineError, VbState};
use settee_mcbp::dcp::{
    encode_dcp_response, BufferAck, CloseStream, DcpControl, DcpOpen, DcpOpenFlags, SeqnoAcknowledged, StreamEndReason,
    StreamReq,
};
use settee_mcbp::{decode_request, encode_response, Opcode};
use settee_types::{Datatype, Status, VbId};

use super::{node_id, Ctx};
use crate::msg::Msg;
use crate::net::Endpoint;

/// Bytes read from the engine per stream and step.
const READ_PIECE_BYTES: usize = 16 << 10;
/// Frames a connection sends per step at most.
const FRAMES_PER_STEP: usize = 64;

pub(super) struct Producer {
    conn: u64,
    consumer: usize,
    dcp: ProducerConnection,
    cursors: BTreeMap<VbId, (CursorId, u64)>,
}

impl Producer {
    /// The connection as the server's consumer opens it: DCP_OPEN with delete times, then its controls.
    pub(super) fn open(conn: u64, consumer: usize, now: Duration) -> Producer {
        let name = format!("replication:{}:{}", node_id(consumer), super::BUCKET);
        let flags = DcpOpenFlags::PRODUCER.with(DcpOpenFlags::INCLUDE_DELETE_TIMES);
        let open = DcpOpen { opaque: 0, flags, name: name.as_bytes(), value: &[] };
        let mut dcp = ProducerConnection::open(&open, true, now).expect("a valid DCP_OPEN");
        for (k, v) in
            [("connection_buffer_size", "65536"), ("enable_sync_writes", "true"), ("consumer_name", name.as_str())]
        {
            assert_eq!(dcp.control(k.as_bytes(), v.as_bytes()), Status::Success, "control {k}");
        }
        Producer { conn, consumer, dcp, cursors: BTreeMap::new() }
    }

    pub(super) fn close(self, bucket: Option<&Bucket>) {
        if let Some(bucket) = bucket {
            for (vb, (cursor, _)) in self.cursors {
                bucket.close_cursor(vb, cursor);
            }
        }
    }

    fn send(&self, ctx: &mut Ctx<'_>, me: usize, frame: Vec<u8>) {
        ctx.send(
            Endpoint::Node(me),
            Endpoint::Node(self.consumer),
            Some(self.conn),
            Msg::Dcp { conn: self.conn, frame },
        );
    }

    /// What the consumer sent: one or more whole frames.
    pub(super) fn on_frames(&mut self, bucket: &Bucket, mut frames: &[u8], ctx: &mut Ctx<'_>, me: usize) {
        let mut out = Vec::new();
        while let Ok(Some((req, n))) = decode_request(frames, 1 << 24) {
            self.on_request(bucket, &req, ctx, &mut out);
            frames = &frames[n..];
        }
        if !out.is_empty() {
            self.send(ctx, me, out);
        }
    }

    /// A request from the consumer (the server's `handle_request`).
    fn on_request(&mut self, bucket: &Bucket, req: &settee_mcbp::Request<'_>, ctx: &mut Ctx<'_>, out: &mut Vec<u8>) {
        let _ = ctx;
        match Opcode::from_byte(req.opcode) {
            Some(Opcode::DcpStreamReq) => {
                if let Ok(sr) = StreamReq::decode(req) {
                    self.stream_request(bucket, &sr, out);
                }
            }
            Some(Opcode::DcpControl) => {
                if let Ok(c) = DcpControl::decode(req) {
                    let status = self.dcp.control(c.key, c.value);
                    encode_response(out, req.opcode, status.code(), req.opaque, 0, 0, &[], &[], &[], &[]);
                }
            }
            Some(Opcode::DcpBufferAck) => {
                if let Ok(ack) = BufferAck::decode(req) {
                    self.dcp.buffer_ack(ack.bytes);
                }
            }
            Some(Opcode::DcpCloseStream) => {
                if let Ok(c) = CloseStream::decode(req) {
                    self.dcp.close_stream(VbId(c.vbucket));
                }
            }
            Some(Opcode::DcpSeqnoAcknowledged) => {
                if let Ok(ack) = SeqnoAcknowledged::decode(req) {
                    let vb = VbId(ack.vbucket);
                    if let Ok(seqno) = self.dcp.seqno_acknowledged(vb, ack.prepared_seqno) {
                        bucket.seqno_acknowledged(vb, node_id(self.consumer), seqno);
                    }
                }
            }
            _ => {}
        }
    }

    fn stream_request(&mut self, bucket: &Bucket, req: &StreamReq<'_>, out: &mut Vec<u8>) {
        let vb = VbId(req.vbucket);
        if bucket.is_warming_up() {
            // The server's: the consumer asks again after a pause.
            return encode_dcp_response(out, Opcode::DcpStreamReq, Status::Etmpfail.code(), req.opaque);
        }
        let info = match bucket.stream_info(vb) {
            Ok(info) if matches!(info.state, VbState::Active | VbState::Pending) => info,
            Ok(_) => return encode_dcp_response(out, Opcode::DcpStreamReq, Status::NotMyVbucket.code(), req.opaque),
            Err(e) => return encode_dcp_response(out, Opcode::DcpStreamReq, e.status().code(), req.opaque),
        };
        if self.dcp.stream_request(req, &info.failover, info.high_seqno, info.purge_seqno, out).is_ok() {
            match bucket.open_cursor(vb, req.start_seqno) {
                Ok(cursor) => {
                    if let Some((old, _)) = self.cursors.insert(vb, (cursor, req.start_seqno)) {
                        bucket.close_cursor(vb, old);
                    }
                }
                Err(_) => {
                    self.dcp.end_stream(vb, StreamEndReason::StateChanged);
                }
            }
        }
    }

    /// Reads the engine for the streams that want data, then sends what flow control lets out.
    pub(super) fn tick(&mut self, bucket: &Bucket, ctx: &mut Ctx<'_>, me: usize) {
        let wants: Vec<VbId> = self.dcp.wants().map(|(vb, _)| vb).filter(|vb| self.cursors.contains_key(vb)).collect();
        for vb in wants {
            if self.dcp.queued_bytes() > 4 * READ_PIECE_BYTES {
                break;
            }
            let Some(&(cursor, position)) = self.cursors.get(&vb) else { continue };
            match bucket.read_cursor(vb, cursor, position, READ_PIECE_BYTES) {
                Ok(DcpRead::UpToDate) => {}
                Ok(DcpRead::Snapshot(s)) => {
                    let items = s.items.into_iter().filter_map(item).collect();
                    let snapshot = if s.from_memory {
                        Snapshot::memory(s.start, s.end, items)
                    } else {
                        Snapshot::disk(s.start, s.end, items)
                    };
                    if self.dcp.push_snapshot(vb, snapshot).is_err() {
                        ctx.violations.push(format!("node {me} vb {}: the producer stream refused a snapshot", vb.0));
                        self.dcp.end_stream(vb, StreamEndReason::BackfillFailed);
                    }
                    if let Some(c) = self.cursors.get_mut(&vb) {
                        c.1 = s.end;
                    }
                }
                Ok(DcpRead::FromDisk { .. }) => {
                    self.dcp.end_stream(vb, StreamEndReason::BackfillFailed);
                }
                Err(e) => {
                    let reason = if e == EngineError::NotMyVbucket {
                        StreamEndReason::StateChanged
                    } else {
                        StreamEndReason::BackfillFailed
                    };
                    self.dcp.end_stream(vb, reason);
                }
            }
        }
        for _ in 0..FRAMES_PER_STEP {
            let mut frame = Vec::new();
            if self.dcp.poll_into(ctx.now, &mut frame).is_none() {
                break;
            }
            self.send(ctx, me, frame);
        }
        let done: Vec<VbId> = self.cursors.keys().filter(|vb| self.dcp.stream(**vb).is_none()).copied().collect();
        for vb in done {
            if let Some((cursor, _)) = self.cursors.remove(&vb) {
                bucket.close_cursor(vb, cursor);
            }
        }
    }
}

/// The DCP form of an engine change for a replication connection (collections and sync writes negotiated; a
/// memory-only bucket never ejects values).
fn item(change: DcpChange) -> Option<DcpItem> {
    let DcpChange { item: i, kind } = change;
    let key = Bytes::from(i.key);
    Some(match kind {
        ChangeKind::Abort { prepared_seqno } => DcpItem::Abort { key, prepared_seqno, abort_seqno: i.seqno },
        ChangeKind::Commit { prepared_seqno } => DcpItem::Commit { key, prepared_seqno, commit_seqno: i.seqno },
        ChangeKind::Prepare(level) => DcpItem::Prepare {
            key,
            value: Bytes::from(i.value),
            cas: i.cas,
            seqno: i.seqno,
            rev: i.rev,
            flags: i.flags,
            expiry: i.expiry,
            datatype: Datatype(i.datatype),
            level,
            deleted: i.deleted,
        },
        _ if i.deleted => DcpItem::Deletion {
            key,
            value: Bytes::from(i.value),
            cas: i.cas,
            seqno: i.seqno,
            rev: i.rev,
            delete_time: i.expiry,
            datatype: Datatype(i.datatype),
        },
        _ => DcpItem::Mutation {
            key,
            value: Bytes::from(i.value),
            cas: i.cas,
            seqno: i.seqno,
            rev: i.rev,
            flags: i.flags,
            expiry: i.expiry,
            datatype: Datatype(i.datatype),
        },
    })
}
