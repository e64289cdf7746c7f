//! Stream messages: STREAM_REQ and its reply, STREAM_END, SNAPSHOT_MARKER (v1 and v2.x), SEQNO_ADVANCED,
//! OSO_SNAPSHOT and SYSTEM_EVENT.

use super::codec::{check, frame, ExtrasBuf, Fields, Part};
use super::{DcpDecodeError, Opcode, SnapshotFlags, StreamFlags, STATUS_ROLLBACK};
use crate::request::{encode_request, Request};
use crate::response::encode_response;
use settee_types::{FailoverLog, Seqno, Status, VbUuid};

/// DCP_STREAM_REQ (0x53): extras `flags u32, reserved u32, start u64, end u64, vb_uuid u64, snap_start u64,
/// snap_end u64` (48 bytes); no key; an optional JSON value (collections filter, stream id), kept raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamReq<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub flags: StreamFlags,
    pub start_seqno: Seqno,
    pub end_seqno: Seqno,
    pub vb_uuid: VbUuid,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
    pub value: &'a [u8],
}

impl<'a> StreamReq<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new()
            .u32(self.flags.0)
            .u32(0)
            .u64(self.start_seqno)
            .u64(self.end_seqno)
            .u64(self.vb_uuid)
            .u64(self.snap_start)
            .u64(self.snap_end);
        encode_request(
            out,
            &Request {
                extras: extras.bytes(),
                value: self.value,
                ..frame(Opcode::DcpStreamReq, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<StreamReq<'a>, DcpDecodeError> {
        check(req, Opcode::DcpStreamReq, &[48], Part::Forbidden, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        let flags = StreamFlags(x.u32());
        let _reserved = x.u32();
        Ok(StreamReq {
            opaque: req.opaque,
            vbucket: req.vbucket,
            flags,
            start_seqno: x.u64(),
            end_seqno: x.u64(),
            vb_uuid: x.u64(),
            snap_start: x.u64(),
            snap_end: x.u64(),
            value: req.value,
        })
    }
}

/// The reply to a STREAM_REQ: success with the producer's failover log, ROLLBACK (0x23) with the seqno to roll back
/// to, or another status with no body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamReqResponse {
    Accepted(FailoverLog),
    Rollback(Seqno),
    Failed(u16),
}

impl StreamReqResponse {
    pub fn encode(&self, opaque: u32, out: &mut Vec<u8>) {
        match self {
            Self::Accepted(log) => encode_failover_log_reply(out, Opcode::DcpStreamReq, opaque, log),
            Self::Rollback(seqno) => {
                let op = Opcode::DcpStreamReq as u8;
                encode_response(out, op, STATUS_ROLLBACK, opaque, 0, 0, &[], &[], &[], &seqno.to_be_bytes());
            }
            Self::Failed(status) => super::encode_dcp_response(out, Opcode::DcpStreamReq, *status, opaque),
        }
    }
    /// Reads a reply from its status and value.
    pub fn decode(status: u16, value: &[u8]) -> Result<StreamReqResponse, DcpDecodeError> {
        let bad = DcpDecodeError::BadValue(Opcode::DcpStreamReq);
        match status {
            0 => FailoverLog::decode(value).map(Self::Accepted).ok_or(bad),
            STATUS_ROLLBACK => {
                let seqno: [u8; 8] = value.try_into().map_err(|_| bad)?;
                Ok(Self::Rollback(u64::from_be_bytes(seqno)))
            }
            other => Ok(Self::Failed(other)),
        }
    }
}

/// Appends a successful GET_FAILOVER_LOG reply.
pub fn encode_failover_log_response(out: &mut Vec<u8>, opaque: u32, log: &FailoverLog) {
    encode_failover_log_reply(out, Opcode::DcpGetFailoverLog, opaque, log);
}

fn encode_failover_log_reply(out: &mut Vec<u8>, opcode: Opcode, opaque: u32, log: &FailoverLog) {
    let mut body = Vec::with_capacity(log.entries().len() * settee_types::FAILOVER_ENTRY_BYTES);
    log.encode(&mut body);
    encode_response(out, opcode as u8, Status::Success.code(), opaque, 0, 0, &[], &[], &[], &body);
}

/// Why a stream ended (stream-end.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamEndReason {
    /// Everything up to the end seqno was sent.
    Ok,
    /// The client closed the stream.
    Closed,
    /// The vBucket's state changed.
    StateChanged,
    Disconnected,
    TooSlow,
    BackfillFailed,
    /// The vBucket is rolling back; the client must reopen and follow the rollback protocol.
    Rollback,
    FilterEmpty,
    LostPrivileges,
    /// A code newer than this list; still ends the stream.
    Other(u32),
}

impl StreamEndReason {
    pub fn code(self) -> u32 {
        match self {
            Self::Ok => 0,
            Self::Closed => 1,
            Self::StateChanged => 2,
            Self::Disconnected => 3,
            Self::TooSlow => 4,
            Self::BackfillFailed => 5,
            Self::Rollback => 6,
            Self::FilterEmpty => 7,
            Self::LostPrivileges => 8,
            Self::Other(code) => code,
        }
    }
    pub fn from_code(code: u32) -> StreamEndReason {
        match code {
            0 => Self::Ok,
            1 => Self::Closed,
            2 => Self::StateChanged,
            3 => Self::Disconnected,
            4 => Self::TooSlow,
            5 => Self::BackfillFailed,
            6 => Self::Rollback,
            7 => Self::FilterEmpty,
            8 => Self::LostPrivileges,
            other => Self::Other(other),
        }
    }
}

/// DCP_STREAM_END (0x55): extras `reason u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEnd {
    pub opaque: u32,
    pub vbucket: u16,
    pub reason: StreamEndReason,
}

impl StreamEnd {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u32(self.reason.code());
        encode_request(
            out,
            &Request { extras: extras.bytes(), ..frame(Opcode::DcpStreamEnd, self.vbucket, self.opaque) },
        );
    }
    pub fn decode(req: &Request<'_>) -> Result<StreamEnd, DcpDecodeError> {
        check(req, Opcode::DcpStreamEnd, &[4], Part::Forbidden, Part::Forbidden)?;
        let reason = StreamEndReason::from_code(Fields::new(req.extras).u32());
        Ok(StreamEnd { opaque: req.opaque, vbucket: req.vbucket, reason })
    }
}

/// The layout of a snapshot marker and the fields only the v2 layouts carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerFormat {
    /// Extras `start u64, end u64, flags u32` (20 bytes), no value.
    V1,
    /// Extras: one version byte, 0. Value: `start, end, flags u32, max_visible_seqno, high_completed_seqno` (36
    /// bytes). Sent to consumers that enabled sync writes; the HCS is meaningful for disk snapshots only.
    V2_0 { max_visible_seqno: Seqno, high_completed_seqno: Seqno },
    /// Version byte 2: v2.0 plus `purge_seqno, high_prepared_seqno` (52 bytes); after `max_marker_version=2.2`.
    V2_2 { max_visible_seqno: Seqno, high_completed_seqno: Seqno, purge_seqno: Seqno, high_prepared_seqno: Seqno },
}

/// DCP_SNAPSHOT_MARKER (0x56): the items that follow, up to the next marker, lie in `[start, end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotMarker {
    pub opaque: u32,
    pub vbucket: u16,
    pub start: Seqno,
    pub end: Seqno,
    pub flags: SnapshotFlags,
    pub format: MarkerFormat,
}

impl SnapshotMarker {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let fields = ExtrasBuf::new().u64(self.start).u64(self.end).u32(self.flags.0);
        let header = frame(Opcode::DcpSnapshotMarker, self.vbucket, self.opaque);
        let (version, value) = match self.format {
            MarkerFormat::V1 => return encode_request(out, &Request { extras: fields.bytes(), ..header }),
            MarkerFormat::V2_0 { max_visible_seqno, high_completed_seqno } => {
                (0u8, fields.u64(max_visible_seqno).u64(high_completed_seqno))
            }
            MarkerFormat::V2_2 { max_visible_seqno, high_completed_seqno, purge_seqno, high_prepared_seqno } => {
                let v = fields.u64(max_visible_seqno).u64(high_completed_seqno).u64(purge_seqno);
                (2u8, v.u64(high_prepared_seqno))
            }
        };
        encode_request(out, &Request { extras: &[version], value: value.bytes(), ..header });
    }
    pub fn decode(req: &Request<'_>) -> Result<SnapshotMarker, DcpDecodeError> {
        let op = Opcode::DcpSnapshotMarker;
        check(req, op, &[1, 20], Part::Forbidden, Part::Optional)?;
        let (fields, version) = match req.extras {
            [version] => (req.value, Some(*version)),
            _ if req.value.is_empty() => (req.extras, None),
            _ => return Err(DcpDecodeError::UnexpectedValue(op)),
        };
        let wanted = match version {
            None => 20,
            Some(0) => 36,
            Some(2) => 52,
            Some(v) => return Err(DcpDecodeError::MarkerVersion(v)),
        };
        if fields.len() != wanted {
            return Err(DcpDecodeError::BadValue(op));
        }
        let mut x = Fields::new(fields);
        let (start, end, flags) = (x.u64(), x.u64(), SnapshotFlags(x.u32()));
        let format = match version {
            None => MarkerFormat::V1,
            Some(0) => MarkerFormat::V2_0 { max_visible_seqno: x.u64(), high_completed_seqno: x.u64() },
            _ => MarkerFormat::V2_2 {
                max_visible_seqno: x.u64(),
                high_completed_seqno: x.u64(),
                purge_seqno: x.u64(),
                high_prepared_seqno: x.u64(),
            },
        };
        Ok(SnapshotMarker { opaque: req.opaque, vbucket: req.vbucket, start, end, flags, format })
    }
}

/// DCP_SEQNO_ADVANCED (0x64): extras `seqno u64`; the vBucket reached `seqno` through items this stream does not
/// send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqnoAdvanced {
    pub opaque: u32,
    pub vbucket: u16,
    pub seqno: Seqno,
}

impl SeqnoAdvanced {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u64(self.seqno);
        encode_request(
            out,
            &Request { extras: extras.bytes(), ..frame(Opcode::DcpSeqnoAdvanced, self.vbucket, self.opaque) },
        );
    }
    pub fn decode(req: &Request<'_>) -> Result<SeqnoAdvanced, DcpDecodeError> {
        check(req, Opcode::DcpSeqnoAdvanced, &[8], Part::Forbidden, Part::Forbidden)?;
        Ok(SeqnoAdvanced { opaque: req.opaque, vbucket: req.vbucket, seqno: Fields::new(req.extras).u64() })
    }
}

/// DCP_OSO_SNAPSHOT (0x65): extras `flags u32` (START 0x01, END 0x02) around an out-of-seqno-order snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsoSnapshot {
    pub opaque: u32,
    pub vbucket: u16,
    pub flags: u32,
}

impl OsoSnapshot {
    pub const START: u32 = 0x01;
    pub const END: u32 = 0x02;

    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u32(self.flags);
        encode_request(
            out,
            &Request { extras: extras.bytes(), ..frame(Opcode::DcpOsoSnapshot, self.vbucket, self.opaque) },
        );
    }
    pub fn decode(req: &Request<'_>) -> Result<OsoSnapshot, DcpDecodeError> {
        check(req, Opcode::DcpOsoSnapshot, &[4], Part::Forbidden, Part::Forbidden)?;
        Ok(OsoSnapshot { opaque: req.opaque, vbucket: req.vbucket, flags: Fields::new(req.extras).u32() })
    }
}

/// DCP_SYSTEM_EVENT (0x5f): extras `seqno u64, event u32, version u8` (13 bytes); key and value are per event and
/// kept raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemEvent<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub seqno: Seqno,
    pub event: u32,
    pub version: u8,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> SystemEvent<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u64(self.seqno).u32(self.event).u8(self.version);
        encode_request(
            out,
            &Request {
                extras: extras.bytes(),
                key: self.key,
                value: self.value,
                ..frame(Opcode::DcpSystemEvent, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<SystemEvent<'a>, DcpDecodeError> {
        check(req, Opcode::DcpSystemEvent, &[13], Part::Optional, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        Ok(SystemEvent {
            opaque: req.opaque,
            vbucket: req.vbucket,
            seqno: x.u64(),
            event: x.u32(),
            version: x.u8(),
            key: req.key,
            value: req.value,
        })
    }
}
