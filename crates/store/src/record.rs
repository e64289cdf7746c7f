use settee_types::{limits::NUM_VBUCKETS, Cas, Seqno, VbId};

use crate::StoreError;

/// The longest key the store accepts: four times the protocol's 250 bytes, which leaves room for the collection
/// prefix and any system key, and stays far inside fjall's 64 KiB key limit and the on-disk `u16` key length.
pub const KEY_BYTES_MAX: usize = 1024;

/// Everything about a document but its key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev: u64,
    pub flags: u32,
    /// Expiry time for a live document; the deletion time (Unix seconds) for a tombstone.
    pub expiry: u32,
    pub datatype: u8,
    pub deleted: bool,
}

impl RecordMeta {
    /// Size of [`RecordMeta::encode`]'s output.
    pub const ENCODED_BYTES: usize = 34;

    /// The fixed big-endian layout used both inside the checksum and on disk (docs/on-disk-format.md).
    pub fn encode(&self) -> [u8; Self::ENCODED_BYTES] {
        let mut b = [0u8; Self::ENCODED_BYTES];
        b[..8].copy_from_slice(&self.cas.to_be_bytes());
        b[8..16].copy_from_slice(&self.seqno.to_be_bytes());
        b[16..24].copy_from_slice(&self.rev.to_be_bytes());
        b[24..28].copy_from_slice(&self.flags.to_be_bytes());
        b[28..32].copy_from_slice(&self.expiry.to_be_bytes());
        b[32] = self.datatype;
        b[33] = u8::from(self.deleted);
        b
    }

    /// The inverse of [`RecordMeta::encode`]; `None` when the bytes are too short or the deleted flag is not 0/1.
    pub fn decode(b: &[u8]) -> Option<RecordMeta> {
        let b: &[u8; Self::ENCODED_BYTES] = b.get(..Self::ENCODED_BYTES)?.try_into().ok()?;
        let u64_at = |i: usize| b.get(i..i + 8).and_then(|s| s.try_into().ok()).map(u64::from_be_bytes);
        let u32_at = |i: usize| b.get(i..i + 4).and_then(|s| s.try_into().ok()).map(u32::from_be_bytes);
        let deleted = match b[33] {
            0 => false,
            1 => true,
            _ => return None,
        };
        Some(RecordMeta {
            cas: u64_at(0)?,
            seqno: u64_at(8)?,
            rev: u64_at(16)?,
            flags: u32_at(24)?,
            expiry: u32_at(28)?,
            datatype: b[32],
            deleted,
        })
    }
}

/// A stored document version with the checksum that guards it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub meta: RecordMeta,
    pub crc32c: u32,
}

impl Record {
    pub fn new(key: Vec<u8>, value: Vec<u8>, meta: RecordMeta) -> Record {
        let crc32c = Record::checksum(&key, &value, &meta);
        Record { key, value, meta, crc32c }
    }

    /// CRC32C over key, value, CAS, seqno, the rest of the metadata and the key length, so a record read back
    /// under the wrong key, with a stale seqno, or with bytes shifted between key and value fails the check too.
    pub fn checksum(key: &[u8], value: &[u8], m: &RecordMeta) -> u32 {
        let mut crc = crc32c::crc32c(key);
        crc = crc32c::crc32c_append(crc, value);
        crc = crc32c::crc32c_append(crc, &m.encode());
        let key_len = u32::try_from(key.len()).unwrap_or(u32::MAX);
        crc32c::crc32c_append(crc, &key_len.to_be_bytes())
    }

    pub fn is_intact(&self) -> bool {
        Record::checksum(&self.key, &self.value, &self.meta) == self.crc32c
    }
}

/// The preconditions every store applies before writing a batch, so that both implementations refuse the same
/// inputs: a known vBucket, intact records (a record damaged in memory must never reach disk), keys within
/// [`KEY_BYTES_MAX`], and seqnos strictly increasing above the vBucket's high seqno (a reused seqno would make the
/// by-seqno index point at the wrong document). Returns the batch's highest seqno (or `high_seqno` when empty).
pub(crate) fn check_batch(vb: VbId, batch: &[Record], high_seqno: Seqno) -> Result<Seqno, StoreError> {
    check_vb(vb)?;
    let mut high = high_seqno;
    for r in batch {
        let reject = |reason| Err(StoreError::Rejected { vb, seqno: r.meta.seqno, reason });
        if !r.is_intact() {
            return reject("checksum does not match the record's contents");
        }
        if r.key.is_empty() || r.key.len() > KEY_BYTES_MAX {
            return reject("key is empty or longer than KEY_BYTES_MAX");
        }
        if u32::try_from(r.value.len()).is_err() {
            return reject("value is 4 GiB or longer");
        }
        if r.meta.seqno <= high {
            return reject("seqno is not above the vBucket's high seqno");
        }
        high = r.meta.seqno;
    }
    Ok(high)
}

pub(crate) fn check_vb(vb: VbId) -> Result<(), StoreError> {
    if vb.0 < NUM_VBUCKETS {
        Ok(())
    } else {
        Err(StoreError::Io(format!("no vBucket {}", vb.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seqno: Seqno, deleted: bool) -> RecordMeta {
        RecordMeta { cas: 0x0102_0304_0506_0708, seqno, rev: 3, flags: 0xdead_beef, expiry: 9, datatype: 1, deleted }
    }

    /// Metadata survives its fixed encoding unchanged, and a deleted byte other than 0/1 is refused.
    #[test]
    fn meta_encoding_round_trips() {
        for deleted in [false, true] {
            let m = meta(42, deleted);
            assert_eq!(RecordMeta::decode(&m.encode()), Some(m));
        }
        let mut bad = meta(1, false).encode();
        bad[33] = 2;
        assert_eq!(RecordMeta::decode(&bad), None);
        assert_eq!(RecordMeta::decode(&bad[..33]), None);
    }

    /// Moving a byte from the key to the value changes the checksum, because the key length is covered.
    #[test]
    fn checksum_covers_the_key_value_boundary() {
        let m = meta(1, false);
        assert_ne!(Record::checksum(b"ab", b"c", &m), Record::checksum(b"a", b"bc", &m));
    }

    /// A batch is refused before any write when a record is damaged, a key is empty, or seqnos do not increase.
    #[test]
    fn batch_preconditions_are_checked() {
        let vb = VbId(3);
        let ok = Record::new(b"k".to_vec(), b"v".to_vec(), meta(5, false));
        assert_eq!(check_batch(vb, std::slice::from_ref(&ok), 4), Ok(5));
        assert!(matches!(check_batch(vb, std::slice::from_ref(&ok), 5), Err(StoreError::Rejected { seqno: 5, .. })));
        let mut damaged = ok.clone();
        damaged.value.push(1);
        assert!(matches!(check_batch(vb, &[damaged], 0), Err(StoreError::Rejected { .. })));
        let empty_key = Record::new(Vec::new(), b"v".to_vec(), meta(6, false));
        assert!(matches!(check_batch(vb, &[empty_key], 0), Err(StoreError::Rejected { .. })));
        assert!(check_batch(VbId(NUM_VBUCKETS), &[], 0).is_err());
        assert_eq!(check_batch(vb, &[], 7), Ok(7));
    }
}
