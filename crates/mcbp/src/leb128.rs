//! Unsigned LEB128, as used for the collection-id prefix of keys (kv_engine docs/Collections.md).

/// A u32 never needs more than five LEB128 bytes.
pub const LEB128_BYTES_MAX: usize = 5;

/// Decodes a canonical unsigned LEB128 u32 from the start of `input`, returning the value and the bytes used.
/// None if the input ends before the stop byte, uses more than five bytes, overflows a u32, or is not canonical
/// (a redundant trailing zero byte).
pub fn decode_leb128(input: &[u8]) -> Option<(u32, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in input.iter().take(LEB128_BYTES_MAX).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if i > 0 && b == 0 {
                return None;
            }
            return u32::try_from(value).ok().map(|v| (v, i + 1));
        }
    }
    None
}

/// Appends the LEB128 encoding of `value` to `out`.
pub fn encode_leb128(mut value: u32, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples from PROTOCOL.md §3 encode and decode exactly.
    #[test]
    fn leb128_matches_the_documented_examples() {
        for (v, bytes) in [
            (0u32, &[0x00u8][..]),
            (0x80, &[0x80, 0x01]),
            (0x555, &[0xD5, 0x0A]),
            (0xFFFF_FFFF, &[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        ] {
            let mut out = Vec::new();
            encode_leb128(v, &mut out);
            assert_eq!(out, bytes);
            assert_eq!(decode_leb128(bytes), Some((v, bytes.len())));
        }
    }

    /// Truncated, over-long, overflowing and non-canonical encodings are refused.
    #[test]
    fn leb128_rejects_bad_encodings() {
        assert_eq!(decode_leb128(&[]), None);
        assert_eq!(decode_leb128(&[0x80]), None);
        assert_eq!(decode_leb128(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(decode_leb128(&[0xFF, 0xFF, 0xFF, 0xFF, 0x1F]), None);
        assert_eq!(decode_leb128(&[0x81, 0x00]), None);
    }

    proptest::proptest! {
        /// Every u32 round-trips, followed by arbitrary key bytes.
        #[test]
        fn leb128_round_trips(v: u32, tail: Vec<u8>) {
            let mut out = Vec::new();
            encode_leb128(v, &mut out);
            let n = out.len();
            out.extend_from_slice(&tail);
            proptest::prop_assert_eq!(decode_leb128(&out), Some((v, n)));
        }
    }
}
