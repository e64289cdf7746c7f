/// A vBucket number, 0..NUM_VBUCKETS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VbId(pub u16);

/// A per-vBucket sequence number; strictly increasing with every mutation.
pub type Seqno = u64;
/// A compare-and-swap value: a hybrid logical clock in nanoseconds, never 0 for a stored item.
pub type Cas = u64;
/// The identity of a vBucket's history (changes on failover).
pub type VbUuid = u64;
/// A collection id; 0 is the default collection.
pub type CollectionId = u32;

/// What the writer of a document version knows about the version of the same key already on disk. A store that
/// keeps a by-seqno index must retire the old version's entry when it writes a new one; knowing the old seqno (or
/// that there is none) spares it a read of its by-key index per record, which the flusher otherwise pays for every
/// key it writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDisk {
    /// Not known: the store looks the key up.
    #[default]
    Unknown,
    /// The key has no version on disk.
    Absent,
    /// The key's version on disk is at this seqno, or was until a purge removed it.
    At(Seqno),
}

impl OnDisk {
    /// Whether this knowledge agrees with what the store holds for the key: `stored` is the seqno of its version
    /// there, None when it has none. A version purged since it was known as `At` agrees (the store has nothing to
    /// retire).
    pub fn agrees_with(self, stored: Option<Seqno>) -> bool {
        match (self, stored) {
            (OnDisk::Unknown, _) | (_, None) => true,
            (OnDisk::Absent, Some(_)) => false,
            (OnDisk::At(known), Some(stored)) => known == stored,
        }
    }
}

/// The CAS a GET reports for a locked document, so that no client can mutate it without the lock CAS.
pub const LOCKED_CAS: Cas = u64::MAX;

/// The vBucket that owns a key, exactly as the SDKs compute it: zlib CRC-32 of the key (without the collection
/// prefix), bits 16..31 masked to 15 bits, modulo the vBucket count.
pub fn vbucket_for_key(key: &[u8], num_vbuckets: u16) -> VbId {
    let crc = crc32_ieee(key);
    VbId((((crc >> 16) & 0x7fff) % u32::from(num_vbuckets.max(1))) as u16)
}

/// Bitwise CRC-32 (IEEE); only used where a hash is computed once per request on the client side and in tests,
/// so a table-free version keeps this crate dependency-free.
fn crc32_ieee(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors in PROTOCOL.md §4, checked against the live Python client.
    #[test]
    fn vbucket_for_key_matches_the_sdk_vectors() {
        assert_eq!(crc32_ieee(b"foo"), 0x8c73_6521);
        assert_eq!(vbucket_for_key(b"foo", 1024), VbId(115));
        assert_eq!(vbucket_for_key(b"hello", 1024), VbId(528));
        assert_eq!(vbucket_for_key(b"key", 1024), VbId(656));
        assert_eq!(vbucket_for_key(b"airline_10", 1024), VbId(361));
        assert_eq!(vbucket_for_key(b"airline_10", 64), VbId(41));
    }
}
