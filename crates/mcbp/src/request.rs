//! Hot path: request framing. Decoding checks that a whole frame is buffered and that its lengths agree before it
//! borrows the parts.

use crate::header::{read_u16, read_u32, read_u64, Lengths, Magic, HEADER_BYTES};

/// One request, borrowing its parts from the read buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub magic: Magic,
    /// The raw opcode byte: unknown opcodes still need an UNKNOWN_COMMAND reply that echoes it.
    pub opcode: u8,
    pub datatype: u8,
    pub vbucket: u16,
    pub opaque: u32,
    pub cas: u64,
    /// The frame-info section (magic 0x08 only).
    pub framing: &'a [u8],
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Request<'a> {
    /// A client request (magic 0x80) of `opcode` for `key` with every other field zero or empty; callers fill in
    /// the rest with struct-update syntax.
    pub fn client(opcode: u8, key: &'a [u8]) -> Request<'a> {
        Request {
            magic: Magic::ClientRequest,
            opcode,
            datatype: 0,
            vbucket: 0,
            opaque: 0,
            cas: 0,
            framing: &[],
            extras: &[],
            key,
            value: &[],
        }
    }
}

/// A frame that cannot be decoded; the connection must be closed, since the stream can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The first byte is not a request magic.
    BadMagic(u8),
    /// The declared body is larger than the server accepts.
    BodyTooLarge(usize),
    /// Framing extras, extras and key do not fit in the declared body.
    BadLengths,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::BadMagic(m) => write!(f, "invalid request magic 0x{m:02x}"),
            DecodeError::BodyTooLarge(n) => write!(f, "frame body of {n} bytes exceeds the limit"),
            DecodeError::BadLengths => write!(f, "header lengths exceed the body length"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes the request at the start of `buf`. Returns `Ok(None)` until the whole frame is buffered, then the
/// request and the number of bytes it used. `body_bytes_max` bounds what a client may make the server buffer.
pub fn decode_request(buf: &[u8], body_bytes_max: usize) -> Result<Option<(Request<'_>, usize)>, DecodeError> {
    let Some(h) = buf.get(..HEADER_BYTES) else {
        // Reject a bad magic as soon as the first byte arrives, rather than waiting for a header.
        return match buf.first() {
            Some(&m) if !matches!(Magic::from_byte(m), Some(Magic::ClientRequest | Magic::AltClientRequest)) => {
                Err(DecodeError::BadMagic(m))
            }
            _ => Ok(None),
        };
    };
    let magic = match Magic::from_byte(h[0]) {
        Some(m @ (Magic::ClientRequest | Magic::AltClientRequest)) => m,
        _ => return Err(DecodeError::BadMagic(h[0])),
    };
    let len = Lengths::read(h, magic);
    if len.body > body_bytes_max {
        return Err(DecodeError::BodyTooLarge(len.body));
    }
    let value_len = len.value().ok_or(DecodeError::BadLengths)?;
    let total = HEADER_BYTES + len.body;
    let Some(body) = buf.get(HEADER_BYTES..total) else {
        return Ok(None);
    };
    let (framing, rest) = body.split_at(len.framing);
    let (extras, rest) = rest.split_at(len.extras);
    let (key, value) = rest.split_at(len.key);
    debug_assert_eq!(value.len(), value_len);
    let req = Request {
        magic,
        opcode: h[1],
        datatype: h[5],
        vbucket: read_u16(h, 6),
        opaque: read_u32(h, 12),
        cas: read_u64(h, 16),
        framing,
        extras,
        key,
        value,
    };
    Ok(Some((req, total)))
}

/// Encodes a request (used by clients and tests). Uses magic 0x08 when `framing` is not empty.
/// Panics if the key or a section is longer than the header can express; callers build requests from their own data.
pub fn encode_request(out: &mut Vec<u8>, req: &Request<'_>) {
    let flexible = !req.framing.is_empty();
    let body = req.framing.len() + req.extras.len() + req.key.len() + req.value.len();
    out.reserve(HEADER_BYTES + body);
    out.push(if flexible { 0x08 } else { 0x80 });
    out.push(req.opcode);
    if flexible {
        out.push(u8::try_from(req.framing.len()).expect("framing extras fit in a byte"));
        out.push(u8::try_from(req.key.len()).expect("flexible keys fit in a byte"));
    } else {
        out.extend_from_slice(&u16::try_from(req.key.len()).expect("key fits in u16").to_be_bytes());
    }
    out.push(u8::try_from(req.extras.len()).expect("extras fit in a byte"));
    out.push(req.datatype);
    out.extend_from_slice(&req.vbucket.to_be_bytes());
    out.extend_from_slice(&u32::try_from(body).expect("body fits in u32").to_be_bytes());
    out.extend_from_slice(&req.opaque.to_be_bytes());
    out.extend_from_slice(&req.cas.to_be_bytes());
    out.extend_from_slice(req.framing);
    out.extend_from_slice(req.extras);
    out.extend_from_slice(req.key);
    out.extend_from_slice(req.value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample<'a>(framing: &'a [u8], extras: &'a [u8], key: &'a [u8], value: &'a [u8]) -> Request<'a> {
        Request {
            magic: if framing.is_empty() { Magic::ClientRequest } else { Magic::AltClientRequest },
            opcode: 0x01,
            datatype: 1,
            vbucket: 115,
            opaque: 0xdead_beef,
            cas: 42,
            framing,
            extras,
            key,
            value,
        }
    }

    /// A GET for key "foo" on vBucket 115, written out byte by byte, decodes to exactly its fields.
    #[test]
    fn decodes_a_classic_get_byte_for_byte() {
        let bytes = [
            0x80, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x73, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x07, 0, 0, 0, 0,
            0, 0, 0, 0, b'f', b'o', b'o',
        ];
        let (req, used) = decode_request(&bytes, 1 << 20).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!((req.opcode, req.vbucket, req.opaque, req.key), (0, 115, 7, &b"foo"[..]));
        assert!(req.extras.is_empty() && req.value.is_empty() && req.framing.is_empty());
    }

    /// Partial frames wait for more bytes; bad magics, oversized bodies and inconsistent lengths are errors.
    #[test]
    fn incomplete_and_invalid_frames() {
        let mut out = Vec::new();
        encode_request(&mut out, &sample(&[], &[1, 2, 3, 4], b"k", b"v"));
        for cut in 0..out.len() {
            assert_eq!(decode_request(&out[..cut], 1 << 20), Ok(None), "cut at {cut}");
        }
        assert_eq!(decode_request(&[0x81], 1 << 20), Err(DecodeError::BadMagic(0x81)));
        assert_eq!(decode_request(&out, 2), Err(DecodeError::BodyTooLarge(6)));
        let mut bad = out.clone();
        bad[4] = 200; // extras longer than the body
        assert_eq!(decode_request(&bad, 1 << 20), Err(DecodeError::BadLengths));
    }

    proptest! {
        /// Any request encodes and decodes back to itself, in both framings, followed by arbitrary trailing bytes.
        #[test]
        fn request_round_trips(
            framing in proptest::collection::vec(any::<u8>(), 0..20),
            extras in proptest::collection::vec(any::<u8>(), 0..30),
            key in proptest::collection::vec(any::<u8>(), 0..255),
            value in proptest::collection::vec(any::<u8>(), 0..300),
            tail in proptest::collection::vec(any::<u8>(), 0..30),
        ) {
            let req = sample(&framing, &extras, &key, &value);
            let mut out = Vec::new();
            encode_request(&mut out, &req);
            let n = out.len();
            out.extend_from_slice(&tail);
            let (got, used) = decode_request(&out, 1 << 20).unwrap().unwrap();
            prop_assert_eq!(used, n);
            prop_assert_eq!(got, req);
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_request(&bytes, 1 << 20);
        }
    }
}
