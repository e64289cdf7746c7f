//! A producer connection: the DCP_OPEN flags and DCP_CONTROL settings, its streams by vBucket, connection-wide flow
//! control, round-robin sending across streams, NOOPs and dead-connection detection.
//!
//! Time is an input: every method that needs it takes `now`, a monotonic `Duration` since any fixed epoch.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::error::{OpenError, StreamError, StreamRequestError};
use crate::flow_control::FlowControl;
use crate::item::Snapshot;
use crate::producer_stream::{ProducerStream, StreamOptions};
use crate::settings::ProducerSettings;
use settee_mcbp::dcp::{DcpNoop, DcpOpen, DcpOpenFlags, StreamEndReason, StreamReq, StreamReqResponse};
use settee_types::{FailoverLog, Seqno, Status, VbId};

/// DCP_OPEN names are at most this long (open-connection.md).
pub const CONNECTION_NAME_BYTES_MAX: usize = 200;
/// Couchbase's `dcp_idle_timeout`: with noops enabled, a connection that has received nothing for this long is
/// dead.
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(360);

/// A producer connection. See the module documentation.
#[derive(Debug)]
pub struct ProducerConnection {
    name: Vec<u8>,
    collections: bool,
    settings: ProducerSettings,
    flow: FlowControl,
    streams: BTreeMap<VbId, ProducerStream>,
    /// The streams with a frame queued: a poll finds the next one without walking every stream (up to 1,024).
    ready: BTreeSet<VbId>,
    /// The sum of every stream's `queued_bytes`, kept in step by `refresh` so the driver's checks on every pass
    /// do not walk every stream.
    queued_bytes: usize,
    /// The vBucket served last, so the next poll starts after it.
    cursor: Option<VbId>,
    noop_sent_at: Duration,
    /// The opaque of the last NOOP sent.
    noop_opaque: u32,
    /// Whether the last NOOP is still unanswered.
    noop_pending: bool,
    received_at: Duration,
    idle_timeout: Duration,
}

impl ProducerConnection {
    /// Accepts a DCP_OPEN with the PRODUCER flag. `collections` says whether HELLO negotiated collections (keys
    /// carry collection ids, SEQNO_ADVANCED may be sent).
    pub fn open(req: &DcpOpen<'_>, collections: bool, now: Duration) -> Result<ProducerConnection, OpenError> {
        let flags = req.flags;
        if !flags.contains(DcpOpenFlags::PRODUCER) {
            return Err(OpenError::NotProducer);
        }
        let no_value_twice =
            flags.contains(DcpOpenFlags::NO_VALUE) && flags.contains(DcpOpenFlags::NO_VALUE_WITH_UNDERLYING_DATATYPE);
        if flags.contains(DcpOpenFlags::INVALID) || no_value_twice {
            return Err(OpenError::InvalidFlags(flags.0));
        }
        if req.name.len() > CONNECTION_NAME_BYTES_MAX {
            return Err(OpenError::NameTooLong(req.name.len()));
        }
        Ok(ProducerConnection {
            name: req.name.to_vec(),
            collections,
            settings: ProducerSettings::new(flags),
            flow: FlowControl::new(),
            streams: BTreeMap::new(),
            ready: BTreeSet::new(),
            queued_bytes: 0,
            cursor: None,
            noop_sent_at: now,
            noop_opaque: 0,
            noop_pending: false,
            received_at: now,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
        })
    }

    /// Replaces the idle timeout (the node's `dcp_idle_timeout` setting).
    pub fn set_idle_timeout(&mut self, timeout: Duration) {
        self.idle_timeout = timeout;
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }
    pub fn settings(&self) -> &ProducerSettings {
        &self.settings
    }
    pub fn flow(&self) -> &FlowControl {
        &self.flow
    }
    pub fn stream(&self, vb: VbId) -> Option<&ProducerStream> {
        self.streams.get(&vb)
    }
    /// Bytes of frames all streams have queued and not sent yet: what the driver holds for this consumer beyond its
    /// socket buffer, which it keeps bounded by reading the engine only while this is small.
    pub fn queued_bytes(&self) -> usize {
        debug_assert_eq!(self.queued_bytes, self.streams.values().map(ProducerStream::queued_bytes).sum::<usize>());
        self.queued_bytes
    }
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// The driver calls this for every frame it reads from the consumer: any traffic proves the peer alive.
    pub fn received(&mut self, now: Duration) {
        self.received_at = self.received_at.max(now);
    }

    /// Applies a DCP_CONTROL; the status is the reply.
    pub fn control(&mut self, key: &[u8], value: &[u8]) -> Status {
        let status = self.settings.apply(key, value);
        self.flow.set_buffer_size(self.settings.connection_buffer_bytes);
        status
    }

    /// Handles a DCP_STREAM_REQ: appends the reply (failover log, rollback seqno or error status) to `out` and
    /// returns the outcome for the driver to log or act on. The driver first checks that the vBucket exists here
    /// (NOT_MY_VBUCKET) and reads its failover log, high seqno and purge seqno.
    pub fn stream_request(
        &mut self,
        req: &StreamReq<'_>,
        log: &FailoverLog,
        high_seqno: Seqno,
        purge_seqno: Seqno,
        out: &mut Vec<u8>,
    ) -> Result<(), StreamRequestError> {
        let vb = VbId(req.vbucket);
        let result = if self.streams.contains_key(&vb) {
            Err(StreamRequestError::StreamExists)
        } else {
            ProducerStream::open(req, log, high_seqno, purge_seqno, self.stream_options())
        };
        match result {
            Ok(stream) => {
                self.streams.insert(vb, stream);
                self.refresh(vb, 0);
                StreamReqResponse::Accepted(log.clone()).encode(req.opaque, out);
                Ok(())
            }
            Err(e) => {
                let reply = match e {
                    StreamRequestError::Rollback { to } => StreamReqResponse::Rollback(to),
                    other => StreamReqResponse::Failed(other.status_code()),
                };
                reply.encode(req.opaque, out);
                Err(e)
            }
        }
    }

    /// Handles DCP_CLOSE_STREAM: KEY_ENOENT when the vBucket has no stream here.
    pub fn close_stream(&mut self, vb: VbId) -> Status {
        let send_end = self.settings.send_stream_end_on_client_close;
        let before = self.stream_queued(vb);
        let Some(stream) = self.streams.get_mut(&vb) else { return Status::KeyEnoent };
        stream.close(send_end);
        self.refresh(vb, before);
        Status::Success
    }

    /// Ends a stream from the producer side (the vBucket changed state or is rolling back); false if none.
    pub fn end_stream(&mut self, vb: VbId, reason: StreamEndReason) -> bool {
        let before = self.stream_queued(vb);
        let ended = self.streams.get_mut(&vb).map(|s| s.end(reason)).is_some();
        self.refresh(vb, before);
        ended
    }

    /// Handles DCP_BUFFER_ACKNOWLEDGEMENT.
    pub fn buffer_ack(&mut self, bytes: u32) {
        self.flow.acked(bytes);
    }

    /// Handles the consumer's reply to a NOOP.
    pub fn noop_response(&mut self, opaque: u32) {
        if opaque == self.noop_opaque {
            self.noop_pending = false;
        }
    }

    /// Checks a DCP_SEQNO_ACKNOWLEDGED and returns the seqno for the driver to hand to durability tracking: EINVAL
    /// without sync replication (sync writes and a consumer name), NOT_MY_VBUCKET without a stream.
    pub fn seqno_acknowledged(&mut self, vb: VbId, prepared_seqno: Seqno) -> Result<Seqno, Status> {
        if !self.settings.sync_replication() {
            return Err(Status::Einval);
        }
        if !self.streams.contains_key(&vb) {
            return Err(Status::NotMyVbucket);
        }
        Ok(prepared_seqno)
    }

    /// Feeds a stream the next snapshot the driver read from the engine.
    pub fn push_snapshot(&mut self, vb: VbId, snapshot: Snapshot) -> Result<(), StreamError> {
        let before = self.stream_queued(vb);
        let pushed = self.streams.get_mut(&vb).ok_or(StreamError::NoStream(vb))?.push_snapshot(snapshot);
        self.refresh(vb, before);
        pushed
    }

    /// The streams that need data, with the first seqno each needs.
    pub fn wants(&self) -> impl Iterator<Item = (VbId, Seqno)> + '_ {
        self.streams.iter().filter_map(|(vb, s)| s.wants_from().map(|from| (*vb, from)))
    }

    /// Appends the next frame to `out` and returns its length, or None when there is nothing to send now. A due
    /// NOOP goes first and ignores flow control (it is never acknowledged); then the streams take turns, one frame
    /// each, starting after the one served last, while flow control allows.
    pub fn poll_into(&mut self, now: Duration, out: &mut Vec<u8>) -> Option<usize> {
        if let Some(len) = self.poll_noop(now, out) {
            return Some(len);
        }
        if !self.flow.can_send() {
            return None;
        }
        let first = VbId(self.cursor.and_then(|vb| vb.0.checked_add(1)).unwrap_or(0));
        let next = self.ready.range(first..).next().or_else(|| self.ready.iter().next()).copied()?;
        let before = self.stream_queued(next);
        let len = self.streams.get_mut(&next).and_then(|stream| stream.poll_into(&mut self.flow, out));
        self.cursor = Some(next);
        self.refresh(next, before);
        len
    }

    fn stream_queued(&self, vb: VbId) -> usize {
        self.streams.get(&vb).map_or(0, ProducerStream::queued_bytes)
    }

    /// Keeps `ready` and the queued total in step with stream `vb` after a change (it held `before` queued
    /// bytes), and forgets the stream once it is done.
    fn refresh(&mut self, vb: VbId, before: usize) {
        self.queued_bytes = (self.queued_bytes + self.stream_queued(vb)).saturating_sub(before);
        match self.streams.get(&vb) {
            Some(s) if s.is_done() => {
                self.streams.remove(&vb);
                self.ready.remove(&vb);
            }
            Some(s) if s.has_frame() => {
                self.ready.insert(vb);
            }
            _ => {
                self.ready.remove(&vb);
            }
        }
    }

    /// Whether the driver should drop the connection: noops are enabled and nothing has arrived from the consumer
    /// for the idle timeout (Couchbase's rule; the noop interval only paces the probes).
    pub fn is_dead(&self, now: Duration) -> bool {
        self.settings.noop_enabled && now.saturating_sub(self.received_at) > self.idle_timeout
    }

    fn poll_noop(&mut self, now: Duration, out: &mut Vec<u8>) -> Option<usize> {
        let due = now.saturating_sub(self.noop_sent_at) >= self.settings.noop_interval;
        if !self.settings.noop_enabled || self.noop_pending || !due {
            return None;
        }
        self.noop_opaque = self.noop_opaque.wrapping_add(1);
        self.noop_pending = true;
        self.noop_sent_at = now;
        let before = out.len();
        DcpNoop { opaque: self.noop_opaque }.encode(out);
        Some(out.len() - before)
    }

    fn stream_options(&self) -> StreamOptions {
        let s = &self.settings;
        StreamOptions {
            include_delete_times: s.open_flags.contains(DcpOpenFlags::INCLUDE_DELETE_TIMES),
            expiry_opcode: s.expiry_opcode,
            sync_writes: s.sync_writes,
            seqno_advanced: self.collections,
        }
    }
}
