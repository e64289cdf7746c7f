//! One vBucket's stream on a producer connection: decides the stream request (rollback or accept), turns the
//! snapshots the driver reads from the engine into snapshot markers and items, and ends the stream.
//!
//! Invariants, asserted as frames leave: item seqnos strictly increase and each lies inside the last marker; no
//! item outside `[start_seqno + 1, end_seqno]` is sent; STREAM_END is the last frame.

use std::collections::VecDeque;

use crate::error::{StreamError, StreamRequestError};
use crate::flow_control::FlowControl;
use crate::item::{DcpItem, Snapshot, SnapshotKind};
use settee_mcbp::dcp::{
    MarkerFormat, SeqnoAdvanced, SnapshotFlags, SnapshotMarker, StreamEnd, StreamEndReason, StreamFlags, StreamReq,
};
use settee_types::{FailoverLog, Seqno, StreamStart, VbId};

/// Once a stream holds this many bytes of unsent frames, `wants_from` returns None so the driver stops reading;
/// a snapshot already pushed is always accepted whole.
pub const STREAM_QUEUE_BYTES_SOFT_MAX: usize = 1 << 20;

/// What the connection negotiated that changes how a stream encodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// DCP_OPEN INCLUDE_DELETE_TIMES: deletions use the v2 layout.
    pub include_delete_times: bool,
    /// Control `enable_expiry_opcode` (with delete times): expirations are sent as DCP_EXPIRATION.
    pub expiry_opcode: bool,
    /// Control `enable_sync_writes`: prepares, commits and aborts are sent, and markers use the v2.0 layout.
    pub sync_writes: bool,
    /// Collections were negotiated: a snapshot whose last sent item falls short of its end is closed with
    /// SEQNO_ADVANCED, so the consumer knows it has the whole snapshot.
    pub seqno_advanced: bool,
}

#[derive(Clone, Debug)]
enum Outgoing {
    Marker(SnapshotMarker),
    Item(DcpItem),
    Advanced(Seqno),
    End(StreamEndReason),
}

impl Outgoing {
    /// What the frame counts for in the queue's accounting, from the moment it is queued until it is sent.
    fn queue_bytes(&self) -> usize {
        match self {
            Outgoing::Marker(_) => settee_mcbp::HEADER_BYTES + 20,
            Outgoing::Item(item) => item.frame_bytes_estimate(),
            Outgoing::Advanced(_) => settee_mcbp::HEADER_BYTES + 8,
            Outgoing::End(_) => settee_mcbp::HEADER_BYTES + 4,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Accepting snapshots.
    Active,
    /// STREAM_END is queued; nothing more is accepted.
    Ending,
    /// Nothing more will be sent.
    Done,
}

/// A producer stream. See the module documentation.
#[derive(Debug)]
pub struct ProducerStream {
    vb: VbId,
    opaque: u32,
    start_seqno: Seqno,
    end_seqno: Seqno,
    options: StreamOptions,
    state: State,
    /// The end of the last snapshot queued; the stream has everything up to here.
    position: Seqno,
    marker_queued: bool,
    /// The newest visible seqno queued (for v2 markers).
    max_visible: Seqno,
    queue: VecDeque<Outgoing>,
    queued_bytes: usize,
    /// What has left through `poll_into`, for the invariants.
    sent_marker: Option<(Seqno, Seqno)>,
    sent_seqno: Seqno,
}

impl ProducerStream {
    /// Decides a stream request against the vBucket's failover log, high seqno and purge seqno. On success the
    /// driver replies with `log` (`StreamReqResponse::Accepted`); on error with `StreamRequestError::status_code`.
    /// TO_LATEST ends the stream at `high_seqno`; FROM_LATEST starts it there. The driver checks ACTIVE_VB_ONLY.
    pub fn open(
        req: &StreamReq<'_>,
        log: &FailoverLog,
        high_seqno: Seqno,
        purge_seqno: Seqno,
        options: StreamOptions,
    ) -> Result<ProducerStream, StreamRequestError> {
        let unsupported = StreamFlags::TAKEOVER.0 | StreamFlags::DISK_ONLY.0;
        if req.flags.0 & unsupported != 0 {
            return Err(StreamRequestError::UnsupportedFlags(req.flags.0 & unsupported));
        }
        if !req.value.is_empty() {
            return Err(StreamRequestError::ValueNotSupported);
        }
        let mut start = StreamStart {
            uuid: req.vb_uuid,
            start_seqno: req.start_seqno,
            snap_start: req.snap_start,
            snap_end: req.snap_end,
            strict_uuid: req.flags.contains(StreamFlags::STRICT_VB_UUID),
            ignore_purged_tombstones: req.flags.contains(StreamFlags::IGNORE_PURGED_TOMBSTONES),
        };
        if req.flags.contains(StreamFlags::FROM_LATEST) {
            start = StreamStart { uuid: log.latest().uuid, ..StreamStart::new(0, high_seqno, high_seqno, high_seqno) };
        }
        let end_seqno = if req.flags.contains(StreamFlags::TO_LATEST) { high_seqno } else { req.end_seqno };
        let snapshot_holds_start = start.snap_start <= start.start_seqno && start.start_seqno <= start.snap_end;
        if start.start_seqno > end_seqno || !snapshot_holds_start {
            return Err(StreamRequestError::InvalidRange);
        }
        if let Some(to) = log.rollback_point(start, high_seqno, purge_seqno) {
            return Err(StreamRequestError::Rollback { to });
        }
        let mut stream = ProducerStream {
            vb: VbId(req.vbucket),
            opaque: req.opaque,
            start_seqno: start.start_seqno,
            end_seqno,
            options,
            state: State::Active,
            position: start.start_seqno,
            marker_queued: false,
            max_visible: start.start_seqno,
            queue: VecDeque::new(),
            queued_bytes: 0,
            sent_marker: None,
            sent_seqno: start.start_seqno,
        };
        if stream.position >= end_seqno {
            stream.finish(StreamEndReason::Ok);
        }
        Ok(stream)
    }

    pub fn vbucket(&self) -> VbId {
        self.vb
    }
    pub fn opaque(&self) -> u32 {
        self.opaque
    }
    pub fn end_seqno(&self) -> Seqno {
        self.end_seqno
    }
    /// The end of the last snapshot accepted.
    pub fn position(&self) -> Seqno {
        self.position
    }
    /// Whether the stream has sent its last frame; the connection forgets it.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }
    /// Bytes of frames queued and not sent yet (estimated as they will be encoded).
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }
    /// Whether a frame is waiting to be sent.
    pub fn has_frame(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The first seqno the driver should read next, or None when the stream needs nothing now: it has ended, or
    /// its queue passed [`STREAM_QUEUE_BYTES_SOFT_MAX`] (ask again once frames have gone out).
    pub fn wants_from(&self) -> Option<Seqno> {
        let wants = self.state == State::Active && self.queued_bytes < STREAM_QUEUE_BYTES_SOFT_MAX;
        wants.then(|| self.position.saturating_add(1))
    }

    /// Queues a snapshot: a marker clipped to what the stream still needs, then its items. Items at or below the
    /// stream's position and beyond its end seqno are dropped, so a snapshot overlapping what was already sent
    /// (a memory checkpoint after a backfill) is fine, and one wholly behind is ignored. Prepares and aborts are
    /// dropped on streams without sync writes. The snapshot reaching the end seqno queues STREAM_END(OK).
    ///
    /// Errors (nothing is queued): the stream ended, the range is inverted, items are out of order or outside the
    /// range, or a commit for a stream without sync writes.
    pub fn push_snapshot(&mut self, snapshot: Snapshot) -> Result<(), StreamError> {
        self.check(&snapshot)?;
        if snapshot.end <= self.position {
            return Ok(());
        }
        if snapshot.start > self.end_seqno {
            // Nothing exists between the position and the end seqno: the stream has everything it asked for.
            self.position = self.end_seqno;
            self.finish(StreamEndReason::Ok);
            return Ok(());
        }
        let start = if self.marker_queued { snapshot.start.max(self.position + 1) } else { self.start_seqno };
        let end = snapshot.end.min(self.end_seqno);
        let wanted = |item: &DcpItem| {
            let seqno = item.seqno();
            seqno > self.position && seqno <= end && (self.options.sync_writes || !item.is_sync_write())
        };
        let items: Vec<DcpItem> = snapshot.items.into_iter().filter(wanted).collect();
        let last = items.last().map(DcpItem::seqno);
        if let Some(visible) = items.iter().rev().find(|i| i.is_visible()) {
            self.max_visible = visible.seqno();
        }
        let flags = match snapshot.kind {
            SnapshotKind::Memory => SnapshotFlags::MEMORY.with(SnapshotFlags::CHECKPOINT),
            SnapshotKind::Disk => SnapshotFlags::DISK.with(SnapshotFlags::CHECKPOINT),
        };
        let format = if self.options.sync_writes {
            let hcs = if snapshot.kind == SnapshotKind::Disk { snapshot.high_completed_seqno } else { 0 };
            MarkerFormat::V2_0 { max_visible_seqno: self.max_visible, high_completed_seqno: hcs }
        } else {
            MarkerFormat::V1
        };
        let marker = SnapshotMarker { opaque: self.opaque, vbucket: self.vb.0, start, end, flags, format };
        self.enqueue(Outgoing::Marker(marker));
        for item in items {
            self.enqueue(Outgoing::Item(item));
        }
        if self.options.seqno_advanced && last.is_none_or(|s| s < end) {
            self.enqueue(Outgoing::Advanced(end));
        }
        self.marker_queued = true;
        self.position = end;
        if self.position >= self.end_seqno {
            self.finish(StreamEndReason::Ok);
        }
        Ok(())
    }

    /// The client closed the stream (CLOSE_STREAM): with `send_stream_end` (the control
    /// `send_stream_end_on_client_close_stream`) a STREAM_END(CLOSED) is the last frame, else nothing more is sent.
    pub fn close(&mut self, send_stream_end: bool) {
        if send_stream_end {
            self.end(StreamEndReason::Closed);
        } else {
            self.drop_queue();
            self.state = State::Done;
        }
    }

    /// The producer ends the stream (the vBucket changed state, the connection is going away, ...): unsent frames
    /// are dropped and STREAM_END(`reason`) is the last frame. Does nothing on a stream already ending.
    pub fn end(&mut self, reason: StreamEndReason) {
        if self.state == State::Active {
            self.drop_queue();
            self.finish(reason);
        }
    }

    /// Appends the next frame to `out` when flow control allows, and returns its length.
    pub fn poll_into(&mut self, flow: &mut FlowControl, out: &mut Vec<u8>) -> Option<usize> {
        if !flow.can_send() {
            return None;
        }
        let next = self.queue.pop_front()?;
        let before = out.len();
        match &next {
            Outgoing::Marker(m) => {
                assert!(m.start <= m.end && m.end > self.sent_marker.map_or(0, |p| p.1).max(self.sent_seqno));
                self.sent_marker = Some((m.start, m.end));
                m.encode(out);
            }
            Outgoing::Item(item) => {
                let seqno = item.seqno();
                let (start, end) = self.sent_marker.expect("an item is always queued after its marker");
                assert!(seqno > self.sent_seqno, "seqno {seqno} sent after {}", self.sent_seqno);
                assert!(start <= seqno && seqno <= end && seqno <= self.end_seqno, "seqno {seqno} outside marker");
                self.sent_seqno = seqno;
                item.encode(self.vb, self.opaque, self.options.include_delete_times, self.options.expiry_opcode, out);
            }
            Outgoing::Advanced(seqno) => {
                assert!(*seqno > self.sent_seqno && self.sent_marker.is_some_and(|m| m.1 == *seqno));
                self.sent_seqno = *seqno;
                SeqnoAdvanced { opaque: self.opaque, vbucket: self.vb.0, seqno: *seqno }.encode(out);
            }
            Outgoing::End(reason) => {
                debug_assert!(self.queue.is_empty());
                self.state = State::Done;
                StreamEnd { opaque: self.opaque, vbucket: self.vb.0, reason: *reason }.encode(out);
            }
        }
        let len = out.len() - before;
        self.queued_bytes = self.queued_bytes.saturating_sub(next.queue_bytes());
        flow.sent(len);
        Some(len)
    }

    /// Convenience for tests and simple drivers: the next frame as its own buffer.
    pub fn poll_frame(&mut self, flow: &mut FlowControl) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.poll_into(flow, &mut out).map(|_| out)
    }

    fn check(&self, snapshot: &Snapshot) -> Result<(), StreamError> {
        if self.state != State::Active {
            return Err(StreamError::NotActive);
        }
        let (start, end) = (snapshot.start, snapshot.end);
        if start > end {
            return Err(StreamError::BadRange { start, end });
        }
        let mut previous = None;
        for item in &snapshot.items {
            let seqno = item.seqno();
            if seqno < start || seqno > end {
                return Err(StreamError::ItemOutsideSnapshot { seqno, start, end });
            }
            if let Some(previous) = previous.filter(|p| *p >= seqno) {
                return Err(StreamError::NotIncreasing { seqno, previous });
            }
            previous = Some(seqno);
            if !self.options.sync_writes && matches!(item, DcpItem::Commit { .. }) && seqno > self.position {
                return Err(StreamError::CommitWithoutSyncWrites { seqno });
            }
        }
        Ok(())
    }

    fn enqueue(&mut self, frame: Outgoing) {
        self.queued_bytes += frame.queue_bytes();
        self.queue.push_back(frame);
    }

    fn drop_queue(&mut self) {
        self.queue.clear();
        self.queued_bytes = 0;
    }

    fn finish(&mut self, reason: StreamEndReason) {
        self.enqueue(Outgoing::End(reason));
        self.state = State::Ending;
    }
}
