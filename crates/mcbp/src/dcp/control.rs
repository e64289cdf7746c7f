//! Connection and stream management messages: DCP_OPEN, DCP_CONTROL, BUFFER_ACKNOWLEDGEMENT, NOOP, ADD_STREAM,
//! CLOSE_STREAM, GET_FAILOVER_LOG, SET_VBUCKET_STATE and SEQNO_ACKNOWLEDGED.

use super::codec::{check, frame, ExtrasBuf, Fields, Part};
use super::{DcpDecodeError, DcpOpenFlags, Opcode, StreamFlags};
use crate::request::{encode_request, Request};
use settee_types::Seqno;

/// DCP_OPEN (0x50): extras `reserved u32` (formerly a seqno, sent as 0) and `flags u32`; the connection name in the
/// key; an optional JSON value (`consumer_name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcpOpen<'a> {
    pub opaque: u32,
    pub flags: DcpOpenFlags,
    pub name: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> DcpOpen<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u32(0).u32(self.flags.0);
        encode_request(
            out,
            &Request {
                extras: extras.bytes(),
                key: self.name,
                value: self.value,
                ..frame(Opcode::DcpOpen, 0, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<DcpOpen<'a>, DcpDecodeError> {
        check(req, Opcode::DcpOpen, &[8], Part::Required, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        let _reserved = x.u32();
        Ok(DcpOpen { opaque: req.opaque, flags: DcpOpenFlags(x.u32()), name: req.key, value: req.value })
    }
}

/// DCP_CONTROL (0x5e): a setting name in the key and its value, both text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcpControl<'a> {
    pub opaque: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> DcpControl<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_request(out, &Request { key: self.key, value: self.value, ..frame(Opcode::DcpControl, 0, self.opaque) });
    }
    pub fn decode(req: &Request<'a>) -> Result<DcpControl<'a>, DcpDecodeError> {
        check(req, Opcode::DcpControl, &[0], Part::Required, Part::Optional)?;
        Ok(DcpControl { opaque: req.opaque, key: req.key, value: req.value })
    }
}

/// DCP_BUFFER_ACKNOWLEDGEMENT (0x5d): the consumer has processed `bytes` more bytes (headers included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferAck {
    pub opaque: u32,
    pub bytes: u32,
}

impl BufferAck {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u32(self.bytes);
        encode_request(out, &Request { extras: extras.bytes(), ..frame(Opcode::DcpBufferAck, 0, self.opaque) });
    }
    pub fn decode(req: &Request<'_>) -> Result<BufferAck, DcpDecodeError> {
        check(req, Opcode::DcpBufferAck, &[4], Part::Forbidden, Part::Forbidden)?;
        Ok(BufferAck { opaque: req.opaque, bytes: Fields::new(req.extras).u32() })
    }
}

/// DCP_NOOP (0x5c): the producer's liveness probe; the consumer answers with a NOOP response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcpNoop {
    pub opaque: u32,
}

impl DcpNoop {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_request(out, &frame(Opcode::DcpNoop, 0, self.opaque));
    }
    pub fn decode(req: &Request<'_>) -> Result<DcpNoop, DcpDecodeError> {
        check(req, Opcode::DcpNoop, &[0], Part::Forbidden, Part::Forbidden)?;
        Ok(DcpNoop { opaque: req.opaque })
    }
}

/// DCP_ADD_STREAM (0x51): asks a consumer to open a stream with these stream-request flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddStream {
    pub opaque: u32,
    pub vbucket: u16,
    pub flags: StreamFlags,
}

impl AddStream {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u32(self.flags.0);
        encode_request(
            out,
            &Request { extras: extras.bytes(), ..frame(Opcode::DcpAddStream, self.vbucket, self.opaque) },
        );
    }
    pub fn decode(req: &Request<'_>) -> Result<AddStream, DcpDecodeError> {
        check(req, Opcode::DcpAddStream, &[4], Part::Forbidden, Part::Forbidden)?;
        Ok(AddStream { opaque: req.opaque, vbucket: req.vbucket, flags: StreamFlags(Fields::new(req.extras).u32()) })
    }
}

/// DCP_CLOSE_STREAM (0x52): closes the vBucket's stream; header only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseStream {
    pub opaque: u32,
    pub vbucket: u16,
}

impl CloseStream {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_request(out, &frame(Opcode::DcpCloseStream, self.vbucket, self.opaque));
    }
    pub fn decode(req: &Request<'_>) -> Result<CloseStream, DcpDecodeError> {
        check(req, Opcode::DcpCloseStream, &[0], Part::Forbidden, Part::Forbidden)?;
        Ok(CloseStream { opaque: req.opaque, vbucket: req.vbucket })
    }
}

/// DCP_GET_FAILOVER_LOG (0x54): header only; the reply body is the failover log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetFailoverLog {
    pub opaque: u32,
    pub vbucket: u16,
}

impl GetFailoverLog {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_request(out, &frame(Opcode::DcpGetFailoverLog, self.vbucket, self.opaque));
    }
    pub fn decode(req: &Request<'_>) -> Result<GetFailoverLog, DcpDecodeError> {
        check(req, Opcode::DcpGetFailoverLog, &[0], Part::Forbidden, Part::Forbidden)?;
        Ok(GetFailoverLog { opaque: req.opaque, vbucket: req.vbucket })
    }
}

/// A vBucket state as DCP_SET_VBUCKET_STATE carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VbucketState {
    Active = 1,
    Replica = 2,
    Pending = 3,
    Dead = 4,
}

impl VbucketState {
    pub fn from_wire(b: u8) -> Option<VbucketState> {
        match b {
            1 => Some(Self::Active),
            2 => Some(Self::Replica),
            3 => Some(Self::Pending),
            4 => Some(Self::Dead),
            _ => None,
        }
    }
}

/// DCP_SET_VBUCKET_STATE (0x5b): extras `state u8`; an optional JSON value (set-vbucket-state-value.md), kept raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetVbucketState<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub state: VbucketState,
    pub value: &'a [u8],
}

impl<'a> SetVbucketState<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u8(self.state as u8);
        encode_request(
            out,
            &Request {
                extras: extras.bytes(),
                value: self.value,
                ..frame(Opcode::DcpSetVbucketState, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<SetVbucketState<'a>, DcpDecodeError> {
        check(req, Opcode::DcpSetVbucketState, &[1], Part::Forbidden, Part::Optional)?;
        let raw = Fields::new(req.extras).u8();
        let state = VbucketState::from_wire(raw).ok_or(DcpDecodeError::VbucketState(raw))?;
        Ok(SetVbucketState { opaque: req.opaque, vbucket: req.vbucket, state, value: req.value })
    }
}

/// DCP_SEQNO_ACKNOWLEDGED (0x61): a replica's high prepared seqno, sent consumer → producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqnoAcknowledged {
    pub opaque: u32,
    pub vbucket: u16,
    pub prepared_seqno: Seqno,
}

impl SeqnoAcknowledged {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u64(self.prepared_seqno);
        encode_request(
            out,
            &Request { extras: extras.bytes(), ..frame(Opcode::DcpSeqnoAcknowledged, self.vbucket, self.opaque) },
        );
    }
    pub fn decode(req: &Request<'_>) -> Result<SeqnoAcknowledged, DcpDecodeError> {
        check(req, Opcode::DcpSeqnoAcknowledged, &[8], Part::Forbidden, Part::Forbidden)?;
        Ok(SeqnoAcknowledged {
            opaque: req.opaque,
            vbucket: req.vbucket,
            prepared_seqno: Fields::new(req.extras).u64(),
        })
    }
}
