//! One vBucket's stream on the replica side: builds the DCP_STREAM_REQ from what the replica has, reads the reply
//! (accepted, or roll back first), then checks every message of the stream before the driver applies it.
//!
//! Checks: every item follows a snapshot marker, lies inside it, and has a seqno above every seqno received before;
//! markers advance. A violation is an error: the driver drops the stream, since its producer cannot be trusted.

use crate::error::ConsumerError;
use crate::high_prepared::HighPrepared;
use crate::item::{DcpItem, SnapshotKind};
use settee_mcbp::dcp::{
    DcpMessage, MarkerFormat, SeqnoAcknowledged, SnapshotFlags, StreamEndReason, StreamFlags, StreamReq,
    StreamReqResponse, VbucketState,
};
use settee_mcbp::Request;
use settee_types::{DurabilityLevel, FailoverLog, Seqno, VbId, VbUuid};

/// What the reply to the stream request means for the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerEvent {
    /// Streaming starts; the replica replaces its failover log with the producer's.
    Accepted { failover_log: FailoverLog },
    /// The replica must roll its vBucket back to this seqno, then open a new `ConsumerStream`.
    RollbackTo(Seqno),
    /// Another status (NOT_MY_VBUCKET, ERANGE, ...); the stream is over.
    Rejected(u16),
}

/// What the driver must do with a message it received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerAction {
    /// The items that follow belong to `[start, end]`.
    SnapshotMarker {
        start: Seqno,
        end: Seqno,
        kind: SnapshotKind,
        flags: SnapshotFlags,
        /// From v2 markers of disk snapshots.
        high_completed_seqno: Option<Seqno>,
    },
    Apply(DcpItem),
    /// The vBucket reached this seqno through items this stream does not carry.
    SeqnoAdvanced(Seqno),
    SetVbucketState(VbucketState),
    /// The stream is over; reopen it unless the reason was OK and the end was wanted.
    StreamEnd(StreamEndReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Requested,
    Streaming,
    Ended,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpenSnapshot {
    start: Seqno,
    end: Seqno,
    kind: SnapshotKind,
}

/// A consumer stream. See the module documentation.
#[derive(Debug)]
pub struct ConsumerStream {
    vb: VbId,
    opaque: u32,
    uuid: VbUuid,
    state: State,
    snapshot: Option<OpenSnapshot>,
    /// The newest seqno received (item or SEQNO_ADVANCED), starting at the requested start.
    last_seqno: Seqno,
    /// The newest marker's end, or the requested start.
    marker_end: Seqno,
    /// Where a new stream request would resume: `(start_seqno, snap_start, snap_end)`.
    resume: (Seqno, Seqno, Seqno),
    prepared: HighPrepared,
}

impl ConsumerStream {
    /// A stream for a replica whose newest failover entry is `log.latest()`, that has every item up to
    /// `high_seqno` and was receiving `last_snapshot` (start, end). A snapshot that does not contain `high_seqno`
    /// is widened until it does, which can only make the producer roll the replica back further, never skip data.
    pub fn new(vb: VbId, opaque: u32, log: &FailoverLog, high_seqno: Seqno, last_snapshot: (Seqno, Seqno)) -> Self {
        let resume = (high_seqno, last_snapshot.0.min(high_seqno), last_snapshot.1.max(high_seqno));
        ConsumerStream {
            vb,
            opaque,
            uuid: log.latest().uuid,
            state: State::Requested,
            snapshot: None,
            last_seqno: high_seqno,
            marker_end: high_seqno,
            resume,
            prepared: HighPrepared::default(),
        }
    }

    /// The DCP_STREAM_REQ to send: from the resume point to the end of time.
    pub fn request(&self) -> StreamReq<'static> {
        let (start_seqno, snap_start, snap_end) = self.resume;
        StreamReq {
            opaque: self.opaque,
            vbucket: self.vb.0,
            flags: StreamFlags::default(),
            start_seqno,
            end_seqno: u64::MAX,
            vb_uuid: self.uuid,
            snap_start,
            snap_end,
            value: &[],
        }
    }

    pub fn vbucket(&self) -> VbId {
        self.vb
    }
    pub fn opaque(&self) -> u32 {
        self.opaque
    }
    pub fn is_ended(&self) -> bool {
        self.state == State::Ended
    }
    /// The newest seqno received.
    pub fn last_seqno(&self) -> Seqno {
        self.last_seqno
    }

    /// Where a stream request made now would resume, `(start_seqno, snap_start, snap_end)`: the driver persists it
    /// with the data so a reconnect asks for exactly what is missing. A complete snapshot resumes at its end.
    pub fn resume_point(&self) -> (Seqno, Seqno, Seqno) {
        self.resume
    }

    /// Reads the reply to the stream request.
    pub fn on_stream_response(&mut self, status: u16, body: &[u8]) -> Result<ConsumerEvent, ConsumerError> {
        if self.state != State::Requested {
            return Err(ConsumerError::NotStreaming);
        }
        let reply = StreamReqResponse::decode(status, body).map_err(|_| ConsumerError::BadResponse)?;
        Ok(match reply {
            StreamReqResponse::Accepted(failover_log) => {
                self.state = State::Streaming;
                ConsumerEvent::Accepted { failover_log }
            }
            StreamReqResponse::Rollback(to) => {
                self.state = State::Ended;
                ConsumerEvent::RollbackTo(to)
            }
            StreamReqResponse::Failed(status) => {
                self.state = State::Ended;
                ConsumerEvent::Rejected(status)
            }
        })
    }

    /// Checks one message of the stream and says what to do with it.
    pub fn on_message(&mut self, req: &Request<'_>) -> Result<ConsumerAction, ConsumerError> {
        let msg = DcpMessage::decode(req)?;
        if self.state != State::Streaming {
            return Err(ConsumerError::NotStreaming);
        }
        if req.vbucket != self.vb.0 || req.opaque != self.opaque {
            return Err(ConsumerError::WrongStream { vbucket: req.vbucket, opaque: req.opaque });
        }
        match msg {
            DcpMessage::SnapshotMarker(m) => self.on_marker(m.start, m.end, m.flags, m.format),
            DcpMessage::SeqnoAdvanced(a) => {
                if self.advance_to(a.seqno)?.end == a.seqno {
                    self.complete_snapshot();
                }
                Ok(ConsumerAction::SeqnoAdvanced(a.seqno))
            }
            DcpMessage::StreamEnd(end) => {
                if end.reason == StreamEndReason::Ok {
                    self.complete_snapshot();
                }
                self.state = State::Ended;
                Ok(ConsumerAction::StreamEnd(end.reason))
            }
            DcpMessage::SetVbucketState(s) => Ok(ConsumerAction::SetVbucketState(s.state)),
            other => match DcpItem::from_message(&other) {
                Some(item) => self.on_item(item),
                None => Err(ConsumerError::Unexpected(req.opcode)),
            },
        }
    }

    /// Prepares the replica already held when this stream was opened (ascending; `true` for a persist-level one):
    /// they are acknowledged again on this connection, as soon as the snapshot that brought them is complete (and,
    /// for persist-level ones, persisted), since acknowledgements sent on an earlier connection may have been lost.
    pub fn resume_prepares(&mut self, held: &[(Seqno, bool)]) {
        let (high, snap_start, snap_end) = self.resume;
        for &(seqno, persist) in held.iter().filter(|(s, _)| *s <= high) {
            self.prepared.prepare(seqno, if persist { seqno } else { 0 });
        }
        // The resume snapshot is complete when the replica reached its end; otherwise only what precedes it is.
        let complete = if high >= snap_end { high } else { snap_start.saturating_sub(1) };
        self.prepared.snapshot_complete(complete);
    }

    /// The driver persisted everything up to `seqno` (lets persist-level and disk-snapshot prepares count).
    pub fn persisted(&mut self, seqno: Seqno) {
        self.prepared.persisted(seqno);
    }

    /// Whether prepares received on this stream are not acknowledged yet: the driver keeps telling the stream what
    /// is persisted ([`ConsumerStream::persisted`]) while this holds.
    pub fn awaits_acknowledgement(&self) -> bool {
        self.prepared.has_pending()
    }

    /// The DCP_SEQNO_ACKNOWLEDGED to send now, when the high prepared seqno moved since the last one.
    pub fn seqno_ack(&mut self) -> Option<SeqnoAcknowledged> {
        let prepared_seqno = self.prepared.take_ack()?;
        Some(SeqnoAcknowledged { opaque: self.opaque, vbucket: self.vb.0, prepared_seqno })
    }

    fn on_marker(
        &mut self,
        start: Seqno,
        end: Seqno,
        flags: SnapshotFlags,
        format: MarkerFormat,
    ) -> Result<ConsumerAction, ConsumerError> {
        if start > end || end <= self.marker_end {
            return Err(ConsumerError::BadMarker { start, end, position: self.marker_end });
        }
        // The producer sends a whole snapshot before the next marker: the previous one is complete.
        self.complete_snapshot();
        let kind = if flags.contains(SnapshotFlags::DISK) { SnapshotKind::Disk } else { SnapshotKind::Memory };
        self.snapshot = Some(OpenSnapshot { start, end, kind });
        self.marker_end = end;
        let high_completed_seqno = match format {
            MarkerFormat::V1 => None,
            MarkerFormat::V2_0 { high_completed_seqno, .. } | MarkerFormat::V2_2 { high_completed_seqno, .. } => {
                (kind == SnapshotKind::Disk).then_some(high_completed_seqno)
            }
        };
        Ok(ConsumerAction::SnapshotMarker { start, end, kind, flags, high_completed_seqno })
    }

    fn on_item(&mut self, item: DcpItem) -> Result<ConsumerAction, ConsumerError> {
        let snapshot = self.advance_to(item.seqno())?;
        if let DcpItem::Prepare { seqno, level, .. } = &item {
            let persist_upto = match (snapshot.kind, level) {
                (SnapshotKind::Disk, _) => snapshot.end,
                (SnapshotKind::Memory, DurabilityLevel::PersistToMajority) => *seqno,
                (SnapshotKind::Memory, _) => 0,
            };
            self.prepared.prepare(*seqno, persist_upto);
        }
        if item.seqno() == snapshot.end {
            self.complete_snapshot();
        }
        Ok(ConsumerAction::Apply(item))
    }

    /// Checks that `seqno` may come next and records it; returns the snapshot it falls in. The caller completes
    /// the snapshot when `seqno` is its end, after recording what the item means for the HPS.
    fn advance_to(&mut self, seqno: Seqno) -> Result<OpenSnapshot, ConsumerError> {
        let snapshot = self.snapshot.ok_or(ConsumerError::NoSnapshot { seqno })?;
        if seqno < snapshot.start || seqno > snapshot.end {
            return Err(ConsumerError::OutsideSnapshot { seqno, start: snapshot.start, end: snapshot.end });
        }
        if seqno <= self.last_seqno {
            return Err(ConsumerError::NotIncreasing { seqno, last: self.last_seqno });
        }
        self.last_seqno = seqno;
        self.resume = (seqno, snapshot.start, snapshot.end);
        Ok(snapshot)
    }

    fn complete_snapshot(&mut self) {
        if let Some(s) = self.snapshot {
            self.resume = (s.end, s.end, s.end);
            self.prepared.snapshot_complete(s.end);
        }
    }
}
