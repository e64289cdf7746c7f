//! The bytes [`super::FjallStore`] keeps in its three fjall keyspaces; `docs/on-disk-format.md` describes the
//! same layout for humans. Every value starts with a format version byte and is covered by a CRC32C that also
//! covers the fjall key it is stored under, so a value returned for the wrong key fails the check. Integers are
//! big-endian. Decoders never index unchecked bytes: a short or malformed value decodes to `None` (corrupt).

use settee_types::{Seqno, VbId};

use crate::{Record, RecordMeta, VbStateRecord};

/// Version byte at the start of every value, and the value of the store-wide format marker.
pub(crate) const FORMAT_VERSION: u8 = 1;

pub(crate) const BY_KEY: &str = "by_key";
pub(crate) const BY_SEQNO: &str = "by_seqno";
pub(crate) const VB_META: &str = "vb_meta";

/// `vb_meta` keys: a tag byte, then the vBucket (or a name for store-wide keys).
const TAG_STORE: u8 = 0x00;
const TAG_HIGH_SEQNO: u8 = 0x01;
const TAG_VB_STATE: u8 = 0x02;

/// Store-wide marker holding [`FORMAT_VERSION`]; written when the store is created, checked on every open.
pub(crate) const FORMAT_KEY: &[u8] = &[TAG_STORE, b'f', b'o', b'r', b'm', b'a', b't'];
/// Store-wide key rewritten after a compaction so fjall rotates a memtable, which is what unlinks retired files.
pub(crate) const COMPACTED_KEY: &[u8] = &[TAG_STORE, b'c', b'o', b'm', b'p', b'a', b'c', b't'];

const CRC_BYTES: usize = 4;
const META_BYTES: usize = RecordMeta::ENCODED_BYTES;
/// `by_key` value: version, entry CRC, record CRC, metadata.
#[cfg(test)]
pub(crate) const KEY_ENTRY_BYTES: usize = 1 + CRC_BYTES + CRC_BYTES + META_BYTES;
/// `by_seqno` value before the key and value bytes: version, bound CRC, metadata, key length.
pub(crate) const SEQNO_ENTRY_HEADER_BYTES: usize = 1 + CRC_BYTES + META_BYTES + 2;

pub(crate) fn vb_prefix(vb: VbId) -> [u8; 2] {
    vb.0.to_be_bytes()
}

/// `by_key` key: vBucket ‖ document key.
pub(crate) fn key_index_key(vb: VbId, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + key.len());
    key_index_key_into(&mut k, vb, key);
    k
}

/// [`key_index_key`] into `out` (cleared first), so a writer can reuse one buffer for every record.
pub(crate) fn key_index_key_into(out: &mut Vec<u8>, vb: VbId, key: &[u8]) {
    out.clear();
    out.extend_from_slice(&vb_prefix(vb));
    out.extend_from_slice(key);
}

/// `by_seqno` key: vBucket ‖ seqno, so a vBucket's records sort in seqno order.
pub(crate) fn seqno_index_key(vb: VbId, seqno: Seqno) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(&vb_prefix(vb));
    k[2..].copy_from_slice(&seqno.to_be_bytes());
    k
}

/// The seqno of a `by_seqno` key (`u64::MAX` for a malformed one, which no real record has).
pub(crate) fn seqno_of_index_key(index_key: &[u8]) -> Seqno {
    u64_at(index_key, 2).unwrap_or(u64::MAX)
}

pub(crate) fn high_seqno_key(vb: VbId) -> [u8; 3] {
    let [a, b] = vb_prefix(vb);
    [TAG_HIGH_SEQNO, a, b]
}

pub(crate) const HIGH_SEQNO_PREFIX: [u8; 1] = [TAG_HIGH_SEQNO];

pub(crate) fn vb_state_key(vb: VbId) -> [u8; 3] {
    let [a, b] = vb_prefix(vb);
    [TAG_VB_STATE, a, b]
}

/// The vBucket of a `vb_meta` high-seqno key.
pub(crate) fn vb_of_meta_key(key: &[u8]) -> Option<VbId> {
    Some(VbId(u16::from_be_bytes(key.get(1..3)?.try_into().ok()?)))
}

/// CRC32C of the fjall key followed by the value bytes after the CRC field.
fn entry_crc(index_key: &[u8], rest: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(index_key), rest)
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

/// Writes `[version][crc placeholder]`, lets `body` append the rest, then fills in the CRC over key ‖ rest.
fn sealed(index_key: &[u8], capacity: usize, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::with_capacity(capacity);
    sealed_into(&mut v, index_key, body);
    v
}

/// [`sealed`] into `v` (cleared first).
fn sealed_into(v: &mut Vec<u8>, index_key: &[u8], body: impl FnOnce(&mut Vec<u8>)) {
    v.clear();
    v.push(FORMAT_VERSION);
    v.extend_from_slice(&[0; CRC_BYTES]);
    body(v);
    let crc = entry_crc(index_key, &v[1 + CRC_BYTES..]);
    v[1..1 + CRC_BYTES].copy_from_slice(&crc.to_be_bytes());
}

/// The bytes after `[version][crc]` when both check out.
fn unsealed<'a>(index_key: &[u8], v: &'a [u8]) -> Option<&'a [u8]> {
    if *v.first()? != FORMAT_VERSION {
        return None;
    }
    let rest = v.get(1 + CRC_BYTES..)?;
    (u32_at(v, 1)? == entry_crc(index_key, rest)).then_some(rest)
}

/// `by_key` value: `[version][entry crc][record crc][meta]`. No value bytes: the key index stays small, so the
/// read-before-write of every mutation and the key-and-metadata warmup touch only it.
#[cfg(test)]
pub(crate) fn encode_key_entry(index_key: &[u8], r: &Record) -> Vec<u8> {
    let mut v = Vec::with_capacity(KEY_ENTRY_BYTES);
    encode_key_entry_into(&mut v, index_key, r);
    v
}

/// [`encode_key_entry`] into `out` (cleared first).
pub(crate) fn encode_key_entry_into(out: &mut Vec<u8>, index_key: &[u8], r: &Record) {
    sealed_into(out, index_key, |v| {
        v.extend_from_slice(&r.crc32c.to_be_bytes());
        v.extend_from_slice(&r.meta.encode());
    })
}

/// The metadata and the full record's CRC from a `by_key` value.
pub(crate) fn decode_key_entry(index_key: &[u8], v: &[u8]) -> Option<(RecordMeta, u32)> {
    let rest = unsealed(index_key, v)?;
    if rest.len() != CRC_BYTES + META_BYTES {
        return None;
    }
    Some((RecordMeta::decode(rest.get(CRC_BYTES..)?)?, u32_at(rest, 0)?))
}

/// `by_seqno` value: `[version][bound crc][meta][key len u16][key][value]`: the whole record, so DCP backfill
/// and warmup with values are one sequential scan. The bound CRC is the record CRC (key, value, metadata)
/// continued over the fjall key, so one pass over the value both verifies the record and ties it to its vBucket
/// and seqno; the record CRC itself is recomputed on the way out.
#[cfg(test)]
pub(crate) fn encode_seqno_entry(index_key: &[u8], r: &Record) -> Vec<u8> {
    let mut v = Vec::with_capacity(SEQNO_ENTRY_HEADER_BYTES + r.key.len() + r.value.len());
    encode_seqno_entry_into(&mut v, index_key, r);
    v
}

/// [`encode_seqno_entry`] into `v` (cleared first).
pub(crate) fn encode_seqno_entry_into(v: &mut Vec<u8>, index_key: &[u8], r: &Record) {
    v.clear();
    v.push(FORMAT_VERSION);
    v.extend_from_slice(&crc32c::crc32c_append(r.crc32c, index_key).to_be_bytes());
    v.extend_from_slice(&r.meta.encode());
    // Keys are at most KEY_BYTES_MAX (checked before any write), so the length fits u16.
    let key_len = u16::try_from(r.key.len()).expect("key length was checked against KEY_BYTES_MAX");
    v.extend_from_slice(&key_len.to_be_bytes());
    v.extend_from_slice(&r.key);
    v.extend_from_slice(&r.value);
}

/// The record from a `by_seqno` value, when its CRC matches its contents and the fjall key it was read under.
pub(crate) fn decode_seqno_entry(index_key: &[u8], v: &[u8]) -> Option<Record> {
    if *v.first()? != FORMAT_VERSION {
        return None;
    }
    let bound = u32_at(v, 1)?;
    let meta = RecordMeta::decode(v.get(1 + CRC_BYTES..)?)?;
    let key_len_at = 1 + CRC_BYTES + META_BYTES;
    let key_len = usize::from(u16::from_be_bytes(v.get(key_len_at..key_len_at + 2)?.try_into().ok()?));
    let key = v.get(SEQNO_ENTRY_HEADER_BYTES..SEQNO_ENTRY_HEADER_BYTES.checked_add(key_len)?)?;
    let value = v.get(SEQNO_ENTRY_HEADER_BYTES + key_len..)?;
    let crc32c = Record::checksum(key, value, &meta);
    if crc32c::crc32c_append(crc32c, index_key) != bound || u64_at(index_key, 2)? != meta.seqno {
        return None;
    }
    Some(Record { key: key.to_vec(), value: value.to_vec(), meta, crc32c })
}

/// `vb_meta` high seqno: `[version][crc][seqno u64]`.
pub(crate) fn encode_high_seqno(index_key: &[u8], seqno: Seqno) -> Vec<u8> {
    sealed(index_key, 1 + CRC_BYTES + 8, |v| v.extend_from_slice(&seqno.to_be_bytes()))
}

pub(crate) fn decode_high_seqno(index_key: &[u8], v: &[u8]) -> Option<Seqno> {
    let rest = unsealed(index_key, v)?;
    if rest.len() != 8 {
        return None;
    }
    u64_at(rest, 0)
}

/// `vb_meta` state: `[version][crc][vbuuid u64][high seqno u64][max cas u64][n u16][n x (uuid u64, seqno u64)]
/// [prepares completed to u64]`; the last field is absent in states written before it existed (read as 0).
pub(crate) fn encode_vb_state(index_key: &[u8], s: &VbStateRecord) -> Vec<u8> {
    sealed(index_key, 1 + CRC_BYTES + 34 + 16 * s.failover.len(), |v| {
        v.extend_from_slice(&s.vbuuid.to_be_bytes());
        v.extend_from_slice(&s.high_seqno.to_be_bytes());
        v.extend_from_slice(&s.max_cas.to_be_bytes());
        // The entry count was checked against FAILOVER_ENTRIES_MAX before any write.
        let n = u16::try_from(s.failover.len()).expect("failover log length was checked");
        v.extend_from_slice(&n.to_be_bytes());
        for (uuid, seqno) in &s.failover {
            v.extend_from_slice(&uuid.to_be_bytes());
            v.extend_from_slice(&seqno.to_be_bytes());
        }
        v.extend_from_slice(&s.prepares_completed_to.to_be_bytes());
    })
}

pub(crate) fn decode_vb_state(index_key: &[u8], v: &[u8]) -> Option<VbStateRecord> {
    let rest = unsealed(index_key, v)?;
    let n = usize::from(u16::from_be_bytes(rest.get(24..26)?.try_into().ok()?));
    let entries_end = 26 + 16 * n;
    let prepares_completed_to = match rest.len().checked_sub(entries_end)? {
        0 => 0,
        8 => u64_at(rest, entries_end)?,
        _ => return None,
    };
    let failover: Option<Vec<_>> =
        (0..n).map(|i| Some((u64_at(rest, 26 + 16 * i)?, u64_at(rest, 34 + 16 * i)?))).collect();
    Some(VbStateRecord {
        vbuuid: u64_at(rest, 0)?,
        high_seqno: u64_at(rest, 8)?,
        max_cas: u64_at(rest, 16)?,
        failover: failover?,
        prepares_completed_to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        let meta = RecordMeta { cas: 77, seqno: 9, rev: 2, flags: 5, expiry: 0, datatype: 1, deleted: false };
        Record::new(b"doc-1".to_vec(), b"{\"a\":1}".to_vec(), meta)
    }

    /// Asserts `decode` accepts `bytes` under `key` and refuses every single-bit flip of them, and every truncation.
    fn every_flip_is_caught<T>(key: &[u8], bytes: &[u8], decode: impl Fn(&[u8], &[u8]) -> Option<T>) {
        assert!(decode(key, bytes).is_some());
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.to_vec();
                b[i] ^= 1 << bit;
                assert!(decode(key, &b).is_none(), "flip of bit {bit} in byte {i} went unnoticed");
            }
            assert!(decode(key, &bytes[..i]).is_none(), "truncation to {i} bytes went unnoticed");
        }
    }

    /// Each value type round-trips, and any single-bit flip or truncation decodes to corrupt rather than a value.
    #[test]
    fn entries_round_trip_and_detect_every_bit_flip() {
        let r = record();
        let kk = key_index_key(VbId(7), &r.key);
        let ke = encode_key_entry(&kk, &r);
        assert_eq!(ke.len(), KEY_ENTRY_BYTES);
        assert_eq!(decode_key_entry(&kk, &ke), Some((r.meta, r.crc32c)));
        every_flip_is_caught(&kk, &ke, decode_key_entry);

        let sk = seqno_index_key(VbId(7), r.meta.seqno);
        let se = encode_seqno_entry(&sk, &r);
        assert_eq!(decode_seqno_entry(&sk, &se), Some(r.clone()));
        every_flip_is_caught(&sk, &se, decode_seqno_entry);

        let state = VbStateRecord {
            vbuuid: 1,
            high_seqno: 2,
            max_cas: 3,
            failover: vec![(1, 0), (9, 5)],
            prepares_completed_to: 7,
        };
        let vk = vb_state_key(VbId(7));
        let ve = encode_vb_state(&vk, &state);
        assert_eq!(decode_vb_state(&vk, &ve), Some(state.clone()));
        every_flip_is_caught(&vk, &ve, decode_vb_state);
        // A state written before `prepares_completed_to` existed reads back with 0 there.
        let old = sealed(&vk, 1 + CRC_BYTES + 42, |v| {
            for field in [1u64, 2, 3] {
                v.extend_from_slice(&field.to_be_bytes());
            }
            v.extend_from_slice(&1u16.to_be_bytes());
            v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        });
        let expected = VbStateRecord { failover: vec![(1, 0)], prepares_completed_to: 0, ..state };
        assert_eq!(decode_vb_state(&vk, &old), Some(expected));

        let hk = high_seqno_key(VbId(7));
        let he = encode_high_seqno(&hk, 42);
        assert_eq!(decode_high_seqno(&hk, &he), Some(42));
        every_flip_is_caught(&hk, &he, decode_high_seqno);
    }

    /// A value stored under one key does not decode under another (another vBucket, document or seqno).
    #[test]
    fn values_are_bound_to_their_key() {
        let r = record();
        let ke = encode_key_entry(&key_index_key(VbId(7), &r.key), &r);
        assert_eq!(decode_key_entry(&key_index_key(VbId(8), &r.key), &ke), None);
        assert_eq!(decode_key_entry(&key_index_key(VbId(7), b"doc-2"), &ke), None);
        let se = encode_seqno_entry(&seqno_index_key(VbId(7), 9), &r);
        assert_eq!(decode_seqno_entry(&seqno_index_key(VbId(7), 10), &se), None);
        assert_eq!(decode_seqno_entry(&seqno_index_key(VbId(8), 9), &se), None);
        let he = encode_high_seqno(&high_seqno_key(VbId(1)), 5);
        assert_eq!(decode_high_seqno(&high_seqno_key(VbId(2)), &he), None);
    }
}
