//! The pieces every DCP message shares: a bare request frame, an extras builder, a checked extras reader, and the
//! layout checks a decoder runs before it reads anything.

use super::{DcpDecodeError, Opcode};
use crate::request::Request;

/// The largest fixed section of any DCP message: the value of a v2.2 snapshot marker (STREAM_REQ's extras take 48).
const FIXED_SECTION_BYTES_MAX: usize = 52;

/// A DCP request frame of `opcode` (magic 0x80) with no CAS, datatype or sections: each message fills in what it
/// carries with struct-update syntax and hands the result to `encode_request`. Keys come from stored documents (at
/// most 250 bytes) or connection names, so they fit the header; `encode_request` panics otherwise.
pub(crate) fn frame(opcode: Opcode, vbucket: u16, opaque: u32) -> Request<'static> {
    Request { vbucket, opaque, ..Request::client(opcode as u8, &[]) }
}

/// Builds a fixed-layout section (extras, or a marker's value) in place, big-endian.
pub(crate) struct ExtrasBuf {
    buf: [u8; FIXED_SECTION_BYTES_MAX],
    len: usize,
}

impl ExtrasBuf {
    pub(crate) fn new() -> ExtrasBuf {
        ExtrasBuf { buf: [0; FIXED_SECTION_BYTES_MAX], len: 0 }
    }
    fn put(mut self, bytes: &[u8]) -> ExtrasBuf {
        let end = self.len + bytes.len();
        // Every message's layout is fixed and at most FIXED_SECTION_BYTES_MAX bytes: overflowing is a bug in this module.
        self.buf[self.len..end].copy_from_slice(bytes);
        self.len = end;
        self
    }
    pub(crate) fn u8(self, v: u8) -> ExtrasBuf {
        self.put(&[v])
    }
    pub(crate) fn u16(self, v: u16) -> ExtrasBuf {
        self.put(&v.to_be_bytes())
    }
    pub(crate) fn u32(self, v: u32) -> ExtrasBuf {
        self.put(&v.to_be_bytes())
    }
    pub(crate) fn u64(self, v: u64) -> ExtrasBuf {
        self.put(&v.to_be_bytes())
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Reads fixed-size fields from a section whose length was checked first; a short read yields zeros rather than a
/// panic (and trips a debug assertion, since it means the length check is wrong).
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { rest: bytes }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        match self.rest.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.rest = rest;
                *head
            }
            None => {
                debug_assert!(false, "read past a length-checked section");
                [0; N]
            }
        }
    }
    pub(crate) fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
}

/// Whether a section must, may or must not be present.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Required,
    Optional,
    Forbidden,
}

/// Checks the opcode and the presence of each section; `extras_lens` lists the accepted extras lengths.
pub(crate) fn check(
    req: &Request<'_>,
    opcode: Opcode,
    extras_lens: &[usize],
    key: Part,
    value: Part,
) -> Result<(), DcpDecodeError> {
    if req.opcode != opcode as u8 {
        return Err(DcpDecodeError::WrongOpcode { expected: opcode, got: req.opcode });
    }
    if !extras_lens.contains(&req.extras.len()) {
        return Err(DcpDecodeError::ExtrasLength { opcode, len: req.extras.len() });
    }
    match (key, req.key.is_empty()) {
        (Part::Required, true) => return Err(DcpDecodeError::MissingKey(opcode)),
        (Part::Forbidden, false) => return Err(DcpDecodeError::UnexpectedKey(opcode)),
        _ => {}
    }
    match (value, req.value.is_empty()) {
        (Part::Required, true) => Err(DcpDecodeError::BadValue(opcode)),
        (Part::Forbidden, false) => Err(DcpDecodeError::UnexpectedValue(opcode)),
        _ => Ok(()),
    }
}
