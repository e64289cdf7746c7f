//! The consumer side of a replication connection on a replica's node: a real `ConsumerStream` per vBucket,
//! applied to the engine as `server/src/dcp/consumer.rs` applies it (rollback to zero, retry after refusals and
//! stream ends, seqno acknowledgements, buffer acknowledgements).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use settee_dcp::{ConsumerAction, ConsumerEvent, ConsumerFlowControl, ConsumerStream, DcpItem};
use settee_engine::{Bucket, ChangeKind, DcpChange, EngineError, ItemSnapshot, ReplicaApply, VbState};
use settee_mcbp::dcp::{encode_dcp_response, CloseStream};
use settee_mcbp::{decode_request, decode_response, Opcode};
use settee_types::{DurabilityLevel, Status, VbId};

use super::Ctx;
use crate::msg::Msg;
use crate::net::Endpoint;

const BUFFER_BYTES: u32 = 65536;
const STREAM_RETRY_PAUSE: Duration = Duration::from_millis(200);

pub(super) struct Consumer {
    pub(super) conn: u64,
    source: usize,
    streams: BTreeMap<VbId, ConsumerStream>,
    generations: BTreeMap<VbId, u64>,
    /// The newest seqno applied per stream: a stream never resends one (DESIGN §5).
    applied: BTreeMap<VbId, u64>,
    retries: Vec<(VbId, Duration)>,
    wanted: BTreeSet<VbId>,
    flow: ConsumerFlowControl,
    out: Vec<u8>,
}

impl Consumer {
    pub(super) fn new(conn: u64, source: usize) -> Consumer {
        Consumer {
            conn,
            source,
            streams: BTreeMap::new(),
            generations: BTreeMap::new(),
            applied: BTreeMap::new(),
            retries: Vec::new(),
            wanted: BTreeSet::new(),
            flow: ConsumerFlowControl::new(BUFFER_BYTES),
            out: Vec::new(),
        }
    }

    fn flush(&mut self, ctx: &mut Ctx<'_>, me: usize) {
        if !self.out.is_empty() {
            let frame = std::mem::take(&mut self.out);
            ctx.send(
                Endpoint::Node(me),
                Endpoint::Node(self.source),
                Some(self.conn),
                Msg::Dcp { conn: self.conn, frame },
            );
        }
    }

    /// Opens streams for added vBuckets and closes those removed (a map change).
    pub(super) fn set_wanted(&mut self, bucket: &Bucket, now: BTreeSet<VbId>, ctx: &mut Ctx<'_>, me: usize) {
        for vb in self.wanted.difference(&now).copied().collect::<Vec<_>>() {
            self.remove(vb);
            CloseStream { opaque: u32::from(vb.0), vbucket: vb.0 }.encode(&mut self.out);
        }
        for vb in now.difference(&self.wanted).copied().collect::<Vec<_>>() {
            self.open(bucket, vb, ctx.now);
        }
        self.wanted = now;
        self.flush(ctx, me);
    }

    fn remove(&mut self, vb: VbId) {
        self.retries.retain(|(r, _)| *r != vb);
        self.generations.remove(&vb);
        self.applied.remove(&vb);
        self.streams.remove(&vb);
    }

    fn retry_later(&mut self, vb: VbId, now: Duration) {
        self.streams.remove(&vb);
        if !self.retries.iter().any(|(r, _)| *r == vb) {
            self.retries.push((vb, now + STREAM_RETRY_PAUSE));
        }
    }

    /// A stream request resuming from what the local replica holds, unless the copy is no longer a replica.
    /// While warmup loads the bucket no stream is requested (its seqnos are not known yet): the server's
    /// `open_if_replica`.
    fn open(&mut self, bucket: &Bucket, vb: VbId, now: Duration) {
        if bucket.is_warming_up() {
            self.retry_later(vb, now);
            return;
        }
        let Ok(info) = bucket.stream_info(vb) else { return };
        if info.state != VbState::Replica {
            // The map change that makes it one may come later: ask again then.
            self.retry_later(vb, now);
            return;
        }
        let mut stream = ConsumerStream::new(vb, u32::from(vb.0), &info.failover, info.high_seqno, info.snapshot);
        let held: Vec<(u64, bool)> = bucket
            .held_prepares(vb)
            .into_iter()
            .map(|(seqno, level)| (seqno, level == DurabilityLevel::PersistToMajority))
            .collect();
        stream.resume_prepares(&held);
        stream.request().encode(&mut self.out);
        self.streams.insert(vb, stream);
        self.generations.insert(vb, info.generation);
        self.applied.insert(vb, info.high_seqno);
    }

    /// What the producer sent: one or more whole frames. An error ends the connection (the caller reopens it
    /// later).
    pub(super) fn on_frames(
        &mut self,
        bucket: &Bucket,
        mut frames: &[u8],
        ctx: &mut Ctx<'_>,
        me: usize,
    ) -> Result<(), String> {
        let mut r = Ok(());
        while !frames.is_empty() && r.is_ok() {
            let used = if frames[0] == 0x81 {
                let Ok(Some((resp, n))) = decode_response(frames, 1 << 24) else {
                    return Err("bad response frame".into());
                };
                if resp.opcode == Opcode::DcpStreamReq as u8 {
                    let vb = VbId(u16::try_from(resp.opaque).unwrap_or(u16::MAX));
                    r = self.stream_response(bucket, vb, resp.status, resp.value, ctx);
                }
                n
            } else {
                let Ok(Some((req, n))) = decode_request(frames, 1 << 24) else {
                    return Err("bad request frame".into());
                };
                self.flow.consumed(n);
                r = self.message(bucket, &req, ctx);
                n
            };
            frames = &frames[used..];
        }
        self.flush(ctx, me);
        r
    }

    fn stream_response(
        &mut self,
        bucket: &Bucket,
        vb: VbId,
        status: u16,
        body: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<(), String> {
        let Some(stream) = self.streams.get_mut(&vb) else { return Ok(()) };
        match stream.on_stream_response(status, body).map_err(|e| e.to_string())? {
            ConsumerEvent::Accepted { failover_log } => bucket.set_failover_log(vb, failover_log),
            ConsumerEvent::RollbackTo(to) => {
                // Back to `to` or below, keeping what lies there (zero when the engine cannot tell what its writes
                // above `to` replaced), then stream from there: the server's `stream_response`.
                let kept = bucket.rollback_replica(vb, to);
                ctx.count(if kept > 0 { "replica partial rollbacks" } else { "replica rollbacks to zero" });
                if std::env::var_os("SIM_DEBUG").is_some() {
                    eprintln!(
                        "{:?} conn {} from node {}: vb {} asked to roll back to {to}, kept {kept}",
                        ctx.now, self.conn, self.source, vb.0
                    );
                }
                self.open(bucket, vb, ctx.now);
            }
            ConsumerEvent::Rejected(_) => self.retry_later(vb, ctx.now),
        }
        Ok(())
    }

    fn message(&mut self, bucket: &Bucket, req: &settee_mcbp::Request<'_>, ctx: &mut Ctx<'_>) -> Result<(), String> {
        if req.opcode == Opcode::DcpNoop as u8 {
            encode_dcp_response(&mut self.out, Opcode::DcpNoop, Status::Success.code(), req.opaque);
            return Ok(());
        }
        let vb = VbId(req.vbucket);
        let Some(stream) = self.streams.get_mut(&vb) else { return Ok(()) };
        let action = stream.on_message(req).map_err(|e| format!("{e} (vb {}, opcode {:#x})", vb.0, req.opcode))?;
        let applied = |r: Result<(), EngineError>| r.map_err(|e| format!("vb {}: {e}", vb.0));
        match action {
            ConsumerAction::SnapshotMarker { start, end, .. } => applied(bucket.replica_snapshot(vb, start, end))?,
            ConsumerAction::Apply(item) => {
                let seqno = item.seqno();
                let last = self.applied.get(&vb).copied().unwrap_or(0);
                if seqno <= last {
                    return Err(format!("vb {}: seqno {seqno} resent after {last}", vb.0));
                }
                self.applied.insert(vb, seqno);
                match bucket.replica_apply(vb, change_of(item)) {
                    Ok(ReplicaApply::MissingPrepare) => {
                        bucket.reset_vbucket(vb);
                        return Err(format!("vb {}: a commit for a prepare the replica lost", vb.0));
                    }
                    Ok(_) => {}
                    Err(EngineError::NotMyVbucket) => {
                        self.remove(vb);
                        CloseStream { opaque: u32::from(vb.0), vbucket: vb.0 }.encode(&mut self.out);
                    }
                    Err(e) => return Err(format!("vb {}: {e}", vb.0)),
                }
            }
            ConsumerAction::StreamEnd(_) => self.retry_later(vb, ctx.now),
            ConsumerAction::SeqnoAdvanced(seqno) => applied(bucket.replica_seqno_advanced(vb, seqno))?,
            ConsumerAction::SetVbucketState(_) => {}
        }
        Ok(())
    }

    /// Retries due streams, acknowledges prepares and buffer space.
    pub(super) fn tick(&mut self, bucket: &Bucket, ctx: &mut Ctx<'_>, me: usize) {
        let now = ctx.now;
        let (due, later): (Vec<_>, Vec<_>) = self.retries.drain(..).partition(|(_, at)| *at <= now);
        self.retries = later;
        for (vb, _) in due {
            if self.wanted.contains(&vb) {
                self.open(bucket, vb, now);
            }
        }
        // A replica emptied behind the stream's back (not by it): start that stream again.
        let emptied: Vec<VbId> = self
            .streams
            .keys()
            .copied()
            .filter(|vb| {
                bucket.stream_info(*vb).is_ok_and(|i| {
                    i.state == VbState::Replica && self.generations.get(vb).is_some_and(|g| *g != i.generation)
                })
            })
            .collect();
        for vb in emptied {
            self.remove(vb);
            CloseStream { opaque: u32::from(vb.0), vbucket: vb.0 }.encode(&mut self.out);
            self.retry_later(vb, now);
        }
        for (vb, stream) in self.streams.iter_mut() {
            if stream.awaits_acknowledgement() {
                if let Some(persisted) = bucket.persisted_seqno(*vb) {
                    stream.persisted(persisted);
                }
            }
            if let Some(ack) = stream.seqno_ack() {
                ack.encode(&mut self.out);
            }
        }
        if let Some(ack) = self.flow.take_ack(0) {
            ack.encode(&mut self.out);
        }
        self.flush(ctx, me);
    }
}

/// The engine form of a replicated change (the server's `change_of`).
fn change_of(item: DcpItem) -> DcpChange {
    let snapshot = |key: Bytes, value: Bytes, cas, seqno, rev, flags, expiry, datatype, deleted| ItemSnapshot {
        key: key.to_vec(),
        value: value.to_vec(),
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
            DcpChange::commit(key.to_vec(), prepared_seqno, commit_seqno)
        }
        DcpItem::Abort { key, prepared_seqno, abort_seqno } => {
            DcpChange::abort(key.to_vec(), prepared_seqno, abort_seqno)
        }
    }
}
