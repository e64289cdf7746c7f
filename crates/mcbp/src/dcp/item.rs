//! Hot path: the data messages a producer streams: MUTATION, DELETION (v1 and v2), EXPIRATION, PREPARE, COMMIT
//! and ABORT. The document CAS travels in the header, the datatype describes the value as sent.

use super::codec::{check, frame, ExtrasBuf, Fields, Part};
use super::{DcpDecodeError, Opcode};
use crate::request::{encode_request, Request};
use settee_types::{Cas, Datatype, DurabilityLevel, Seqno};

/// Splits the legacy extended-metadata section (`nmeta` bytes after the value) off the value. Producers since 5.0
/// send `nmeta` 0; older ones may not, and the section is not part of the document.
fn strip_ext_meta(value: &[u8], nmeta: u16, op: Opcode) -> Result<&[u8], DcpDecodeError> {
    let len = value.len().checked_sub(usize::from(nmeta)).ok_or(DcpDecodeError::BadValue(op))?;
    Ok(&value[..len])
}

/// DCP_MUTATION (0x57): extras `by_seqno u64, rev_seqno u64, flags u32, expiration u32, lock_time u32, nmeta u16,
/// nru u8` (31 bytes); key; optional value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mutation<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub cas: Cas,
    pub datatype: Datatype,
    pub by_seqno: Seqno,
    pub rev_seqno: u64,
    pub flags: u32,
    pub expiration: u32,
    pub lock_time: u32,
    pub nru: u8,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Mutation<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new()
            .u64(self.by_seqno)
            .u64(self.rev_seqno)
            .u32(self.flags)
            .u32(self.expiration)
            .u32(self.lock_time)
            .u16(0)
            .u8(self.nru);
        encode_request(
            out,
            &Request {
                cas: self.cas,
                datatype: self.datatype.0,
                extras: extras.bytes(),
                key: self.key,
                value: self.value,
                ..frame(Opcode::DcpMutation, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Mutation<'a>, DcpDecodeError> {
        let op = Opcode::DcpMutation;
        check(req, op, &[31], Part::Required, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        let (by_seqno, rev_seqno, flags, expiration, lock_time) = (x.u64(), x.u64(), x.u32(), x.u32(), x.u32());
        let nmeta = x.u16();
        Ok(Mutation {
            opaque: req.opaque,
            vbucket: req.vbucket,
            cas: req.cas,
            datatype: Datatype(req.datatype),
            by_seqno,
            rev_seqno,
            flags,
            expiration,
            lock_time,
            nru: x.u8(),
            key: req.key,
            value: strip_ext_meta(req.value, nmeta, op)?,
        })
    }
}

/// DCP_DELETION (0x58). v1 extras `by_seqno u64, rev_seqno u64, nmeta u16` (18 bytes); v2, used when the
/// connection was opened with INCLUDE_DELETE_TIMES, `by_seqno u64, rev_seqno u64, delete_time u32, unused u8` (21
/// bytes). The value, when present, holds the tombstone's xattrs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub cas: Cas,
    pub datatype: Datatype,
    pub by_seqno: Seqno,
    pub rev_seqno: u64,
    /// `Some` selects the v2 layout (0 for deletions streamed from memory); `None` the v1 layout.
    pub delete_time: Option<u32>,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Deletion<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u64(self.by_seqno).u64(self.rev_seqno);
        let extras = match self.delete_time {
            Some(t) => extras.u32(t).u8(0),
            None => extras.u16(0),
        };
        encode_request(
            out,
            &Request {
                cas: self.cas,
                datatype: self.datatype.0,
                extras: extras.bytes(),
                key: self.key,
                value: self.value,
                ..frame(Opcode::DcpDeletion, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Deletion<'a>, DcpDecodeError> {
        let op = Opcode::DcpDeletion;
        check(req, op, &[18, 21], Part::Required, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        let (by_seqno, rev_seqno) = (x.u64(), x.u64());
        let (delete_time, value) = if req.extras.len() == 21 {
            (Some(x.u32()), req.value)
        } else {
            (None, strip_ext_meta(req.value, x.u16(), op)?)
        };
        Ok(Deletion {
            opaque: req.opaque,
            vbucket: req.vbucket,
            cas: req.cas,
            datatype: Datatype(req.datatype),
            by_seqno,
            rev_seqno,
            delete_time,
            key: req.key,
            value,
        })
    }
}

/// DCP_EXPIRATION (0x59): extras `by_seqno u64, rev_seqno u64, delete_time u32` (20 bytes; expiration.md's example
/// header says 0x12, but its table, its bytes and kv_engine's payload all make 20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiration<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub cas: Cas,
    pub datatype: Datatype,
    pub by_seqno: Seqno,
    pub rev_seqno: u64,
    pub delete_time: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Expiration<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new().u64(self.by_seqno).u64(self.rev_seqno).u32(self.delete_time);
        encode_request(
            out,
            &Request {
                cas: self.cas,
                datatype: self.datatype.0,
                extras: extras.bytes(),
                key: self.key,
                value: self.value,
                ..frame(Opcode::DcpExpiration, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Expiration<'a>, DcpDecodeError> {
        check(req, Opcode::DcpExpiration, &[20], Part::Required, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        Ok(Expiration {
            opaque: req.opaque,
            vbucket: req.vbucket,
            cas: req.cas,
            datatype: Datatype(req.datatype),
            by_seqno: x.u64(),
            rev_seqno: x.u64(),
            delete_time: x.u32(),
            key: req.key,
            value: req.value,
        })
    }
}

/// DCP_PREPARE (0x60): extras `by_seqno u64, rev_seqno u64, flags u32, expiration u32, lock_time u32, nru u8,
/// deleted u8, durability_level u8` (31 bytes); key; optional value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepare<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub cas: Cas,
    pub datatype: Datatype,
    pub by_seqno: Seqno,
    pub rev_seqno: u64,
    pub flags: u32,
    pub expiration: u32,
    pub lock_time: u32,
    pub nru: u8,
    /// A prepared deletion (a durable delete).
    pub deleted: bool,
    pub level: DurabilityLevel,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Prepare<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let extras = ExtrasBuf::new()
            .u64(self.by_seqno)
            .u64(self.rev_seqno)
            .u32(self.flags)
            .u32(self.expiration)
            .u32(self.lock_time)
            .u8(self.nru)
            .u8(u8::from(self.deleted))
            .u8(self.level as u8);
        encode_request(
            out,
            &Request {
                cas: self.cas,
                datatype: self.datatype.0,
                extras: extras.bytes(),
                key: self.key,
                value: self.value,
                ..frame(Opcode::DcpPrepare, self.vbucket, self.opaque)
            },
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Prepare<'a>, DcpDecodeError> {
        check(req, Opcode::DcpPrepare, &[31], Part::Required, Part::Optional)?;
        let mut x = Fields::new(req.extras);
        let (by_seqno, rev_seqno, flags, expiration, lock_time) = (x.u64(), x.u64(), x.u32(), x.u32(), x.u32());
        let (nru, deleted, level) = (x.u8(), x.u8(), x.u8());
        Ok(Prepare {
            opaque: req.opaque,
            vbucket: req.vbucket,
            cas: req.cas,
            datatype: Datatype(req.datatype),
            by_seqno,
            rev_seqno,
            flags,
            expiration,
            lock_time,
            nru,
            deleted: deleted != 0,
            level: DurabilityLevel::from_wire(level).ok_or(DcpDecodeError::DurabilityLevel(level))?,
            key: req.key,
            value: req.value,
        })
    }
}

/// DCP_COMMIT (0x62): extras `prepared_seqno u64, commit_seqno u64`; key; no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub prepared_seqno: Seqno,
    pub commit_seqno: Seqno,
    pub key: &'a [u8],
}

impl<'a> Commit<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_resolution(
            out,
            Opcode::DcpCommit,
            self.vbucket,
            self.opaque,
            [self.prepared_seqno, self.commit_seqno],
            self.key,
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Commit<'a>, DcpDecodeError> {
        let [prepared_seqno, commit_seqno] = decode_resolution(req, Opcode::DcpCommit)?;
        Ok(Commit { opaque: req.opaque, vbucket: req.vbucket, prepared_seqno, commit_seqno, key: req.key })
    }
}

/// DCP_ABORT (0x63): extras `prepared_seqno u64, abort_seqno u64`; key; no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abort<'a> {
    pub opaque: u32,
    pub vbucket: u16,
    pub prepared_seqno: Seqno,
    pub abort_seqno: Seqno,
    pub key: &'a [u8],
}

impl<'a> Abort<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_resolution(
            out,
            Opcode::DcpAbort,
            self.vbucket,
            self.opaque,
            [self.prepared_seqno, self.abort_seqno],
            self.key,
        );
    }
    pub fn decode(req: &Request<'a>) -> Result<Abort<'a>, DcpDecodeError> {
        let [prepared_seqno, abort_seqno] = decode_resolution(req, Opcode::DcpAbort)?;
        Ok(Abort { opaque: req.opaque, vbucket: req.vbucket, prepared_seqno, abort_seqno, key: req.key })
    }
}

/// COMMIT and ABORT share their layout: two seqnos and the key.
fn encode_resolution(out: &mut Vec<u8>, op: Opcode, vbucket: u16, opaque: u32, seqnos: [Seqno; 2], key: &[u8]) {
    let extras = ExtrasBuf::new().u64(seqnos[0]).u64(seqnos[1]);
    encode_request(out, &Request { extras: extras.bytes(), key, ..frame(op, vbucket, opaque) });
}

fn decode_resolution(req: &Request<'_>, op: Opcode) -> Result<[Seqno; 2], DcpDecodeError> {
    check(req, op, &[16], Part::Required, Part::Forbidden)?;
    let mut x = Fields::new(req.extras);
    Ok([x.u64(), x.u64()])
}
