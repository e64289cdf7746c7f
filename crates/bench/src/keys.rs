//! Document keys from record numbers, written into a reusable buffer (no allocation per request).

use crate::distribution::fnv_hash64;
use crate::rng::splitmix64;

/// How a record number becomes a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormat {
    /// cbc-pillowfight's keys: the prefix and the record number as 20 zero-padded digits.
    Number,
    /// A 36-byte UUID-shaped key (8-4-4-4-12 hex digits) derived from the record number; the prefix goes first.
    Uuid,
    /// YCSB's hashed insert order: "user" followed by the FNV hash of the record number (the prefix is ignored).
    Ycsb,
}

/// Builds keys; the prefix is copied once.
#[derive(Clone, Debug)]
pub(crate) struct KeyWriter {
    format: KeyFormat,
    prefix: Vec<u8>,
}

impl KeyWriter {
    pub(crate) fn new(format: KeyFormat, prefix: &str) -> KeyWriter {
        KeyWriter { format, prefix: prefix.as_bytes().to_vec() }
    }

    /// Appends the key of record `n` to `out` (after the collection prefix the caller may have put there).
    pub(crate) fn write(&self, n: u64, out: &mut Vec<u8>) {
        match self.format {
            KeyFormat::Number => {
                out.extend_from_slice(&self.prefix);
                push_decimal(out, n, 20);
            }
            KeyFormat::Uuid => {
                out.extend_from_slice(&self.prefix);
                let mut s = n;
                let (a, b) = (splitmix64(&mut s), splitmix64(&mut s));
                push_hex(out, a >> 32, 8);
                out.push(b'-');
                push_hex(out, (a >> 16) & 0xffff, 4);
                out.push(b'-');
                push_hex(out, a & 0xffff, 4);
                out.push(b'-');
                push_hex(out, b >> 48, 4);
                out.push(b'-');
                push_hex(out, b & 0xffff_ffff_ffff, 12);
            }
            KeyFormat::Ycsb => {
                out.extend_from_slice(b"user");
                push_decimal(out, fnv_hash64(n), 0);
            }
        }
    }

    /// The longest key this writer produces (for validation against the protocol's 250-byte limit).
    pub(crate) fn max_len(&self) -> usize {
        match self.format {
            KeyFormat::Number => self.prefix.len() + 20,
            KeyFormat::Uuid => self.prefix.len() + 36,
            KeyFormat::Ycsb => 4 + 20,
        }
    }
}

/// Appends `n` in decimal, left-padded with zeros to `width` digits.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(len)));
    out.extend_from_slice(&digits[i..]);
}

/// Appends the low `width` hex digits of `v`.
fn push_hex(out: &mut Vec<u8>, v: u64, width: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..width).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xf) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Number keys are pillowfight's 20 digits after the prefix; YCSB keys match YCSB's; UUID keys are 36 bytes
    /// in the 8-4-4-4-12 layout, distinct per record.
    #[test]
    fn key_formats() {
        let key = |w: &KeyWriter, n: u64| {
            let mut k = vec![0x00];
            w.write(n, &mut k);
            assert_eq!(k[0], 0x00, "appends after what is there");
            k.split_off(1)
        };
        assert_eq!(key(&KeyWriter::new(KeyFormat::Number, ""), 42), b"00000000000000000042");
        assert_eq!(key(&KeyWriter::new(KeyFormat::Number, "p-"), u64::MAX), b"p-18446744073709551615");
        assert_eq!(key(&KeyWriter::new(KeyFormat::Ycsb, "ignored"), 0), b"user6284781860667377211");
        let uuid = KeyWriter::new(KeyFormat::Uuid, "");
        let k = key(&uuid, 1);
        assert_eq!(k.len(), 36);
        let dashes: Vec<usize> = k.iter().enumerate().filter(|(_, c)| **c == b'-').map(|(i, _)| i).collect();
        assert_eq!(dashes, [8, 13, 18, 23]);
        assert_ne!(key(&uuid, 2), k);
        assert_eq!(uuid.max_len(), 36);
    }
}
