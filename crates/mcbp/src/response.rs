//! Hot path: response encoding, straight into the connection's write buffer. Also the response decoder that
//! clients and tests use, and the server-push encoder.

use crate::header::{read_u16, read_u32, read_u64, Lengths, Magic, HEADER_BYTES};
use crate::request::DecodeError;

/// A response, as a client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    pub magic: Magic,
    pub opcode: u8,
    pub datatype: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub framing: &'a [u8],
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Appends a response frame to `out`: magic 0x81, or 0x18 when there are framing extras.
#[allow(clippy::too_many_arguments)]
pub fn encode_response(
    out: &mut Vec<u8>,
    opcode: u8,
    status: u16,
    opaque: u32,
    cas: u64,
    datatype: u8,
    framing: &[u8],
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    let flexible = !framing.is_empty();
    let body = framing.len() + extras.len() + key.len() + value.len();
    out.reserve(HEADER_BYTES + body);
    let mut h = [0u8; HEADER_BYTES];
    h[0] = if flexible { Magic::AltClientResponse as u8 } else { Magic::ClientResponse as u8 };
    h[1] = opcode;
    if flexible {
        // Server-built sections are bounded: framing infos are a few bytes and keys are at most 250 bytes.
        h[2] = framing.len() as u8;
        h[3] = key.len() as u8;
    } else {
        h[2..4].copy_from_slice(&(key.len() as u16).to_be_bytes());
    }
    h[4] = extras.len() as u8;
    h[5] = datatype;
    h[6..8].copy_from_slice(&status.to_be_bytes());
    h[8..12].copy_from_slice(&(body as u32).to_be_bytes());
    h[12..16].copy_from_slice(&opaque.to_be_bytes());
    h[16..24].copy_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(framing);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Appends a server-initiated request (magic 0x82), e.g. a cluster-map change notification.
pub fn encode_server_push(out: &mut Vec<u8>, opcode: u8, opaque: u32, extras: &[u8], key: &[u8], value: &[u8]) {
    let start = out.len();
    encode_response(out, opcode, 0, opaque, 0, if value.is_empty() { 0 } else { 1 }, &[], extras, key, value);
    out[start] = Magic::ServerRequest as u8;
}

/// Decodes the response (or server push) at the start of `buf`; `Ok(None)` until the frame is complete.
pub fn decode_response(buf: &[u8], body_bytes_max: usize) -> Result<Option<(Response<'_>, usize)>, DecodeError> {
    let Some(h) = buf.get(..HEADER_BYTES) else { return Ok(None) };
    let magic = match Magic::from_byte(h[0]) {
        Some(m @ (Magic::ClientResponse | Magic::AltClientResponse | Magic::ServerRequest)) => m,
        _ => return Err(DecodeError::BadMagic(h[0])),
    };
    let len = Lengths::read(h, magic);
    if len.body > body_bytes_max {
        return Err(DecodeError::BodyTooLarge(len.body));
    }
    len.value().ok_or(DecodeError::BadLengths)?;
    let total = HEADER_BYTES + len.body;
    let Some(body) = buf.get(HEADER_BYTES..total) else { return Ok(None) };
    let (framing, rest) = body.split_at(len.framing);
    let (extras, rest) = rest.split_at(len.extras);
    let (key, value) = rest.split_at(len.key);
    Ok(Some((
        Response {
            magic,
            opcode: h[1],
            datatype: h[5],
            status: read_u16(h, 6),
            opaque: read_u32(h, 12),
            cas: read_u64(h, 16),
            framing,
            extras,
            key,
            value,
        },
        total,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SET reply with a mutation token is exactly the bytes the SDKs expect.
    #[test]
    fn encodes_a_mutation_reply_byte_for_byte() {
        let mut out = Vec::new();
        let token = [0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1];
        encode_response(&mut out, 0x01, 0, 7, 0x1122, 0, &[], &token, &[], &[]);
        let mut want = vec![0x81, 0x01, 0, 0, 16, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x11, 0x22];
        want.extend_from_slice(&token);
        assert_eq!(out, want);
        let (r, n) = decode_response(&out, 1 << 20).unwrap().unwrap();
        assert_eq!((n, r.opcode, r.status, r.opaque, r.cas, r.extras), (out.len(), 1, 0, 7, 0x1122, &token[..]));
    }

    /// With framing extras the reply switches to magic 0x18 with one-byte framing and key lengths.
    #[test]
    fn flexible_response_layout() {
        let mut out = Vec::new();
        encode_response(&mut out, 0x00, 1, 3, 0, 0, &[0x02, 0x00, 0x10], &[], b"k", b"v");
        assert_eq!(&out[..4], &[0x18, 0x00, 3, 1]);
        let (r, _) = decode_response(&out, 1 << 20).unwrap().unwrap();
        assert_eq!((r.framing, r.key, r.value, r.status), (&[0x02, 0x00, 0x10][..], &b"k"[..], &b"v"[..], 1));
    }

    /// A server push uses magic 0x82 and carries the JSON datatype when it has a body.
    #[test]
    fn server_push_layout() {
        let mut out = Vec::new();
        encode_server_push(&mut out, 0x01, 0, &[0; 16], b"default", b"{}");
        assert_eq!((out[0], out[1], out[5]), (0x82, 0x01, 1));
    }
}
