//! The extras of SET_WITH_META (0xa2), ADD_WITH_META (0xa4) and DEL_WITH_META (0xa8), defined once for the server
//! that decodes them and for the restore and XDCR writers that encode them (kv_engine's
//! docs/protocol/set_with_meta.md): flags u32, expiry u32, revision seqno u64, CAS u64, then optionally options u32
//! and/or the length u16 of an extended-meta section at the end of the value: 24, 26, 28 or 30 bytes.

/// The decoded extras of a with-meta write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WithMetaExtras {
    pub flags: u32,
    /// Absolute expiry (Unix seconds, 0 = never); for a deletion, its delete time.
    pub expiry: u32,
    pub rev: u64,
    pub cas: u64,
    /// `WithMetaExtras::SKIP_CONFLICT_RESOLUTION` and the other option bits.
    pub options: u32,
    /// Bytes of extended metadata at the end of the value (pre-4.6 clients; read past and ignored).
    pub ext_meta_len: u16,
}

impl WithMetaExtras {
    /// The write wins whatever the vBucket holds.
    pub const SKIP_CONFLICT_RESOLUTION: u32 = 0x01;
    /// Required by kv_engine's last-write-wins buckets.
    pub const FORCE_ACCEPT_WITH_META_OPS: u32 = 0x02;
    /// The server gives the document a new CAS (only with SKIP_CONFLICT_RESOLUTION).
    pub const REGENERATE_CAS: u32 = 0x04;
    /// DEL_WITH_META: the deletion is an expiry.
    pub const IS_EXPIRATION: u32 = 0x10;

    /// Decodes extras of 24, 26, 28 or 30 bytes; None for any other length.
    pub fn decode(e: &[u8]) -> Option<WithMetaExtras> {
        let u32_at = |i: usize| e.get(i..i + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
        let u64_at = |i: usize| e.get(i..i + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        let u16_at = |i: usize| e.get(i..i + 2).and_then(|b| b.try_into().ok()).map(u16::from_be_bytes);
        let (options, ext_meta_len) = match e.len() {
            24 => (0, 0),
            26 => (0, u16_at(24)?),
            28 => (u32_at(24)?, 0),
            30 => (u32_at(24)?, u16_at(28)?),
            _ => return None,
        };
        Some(WithMetaExtras {
            flags: u32_at(0)?,
            expiry: u32_at(4)?,
            rev: u64_at(8)?,
            cas: u64_at(16)?,
            options,
            ext_meta_len,
        })
    }

    /// The 28-byte form (with options, without extended metadata), which every writer of settee sends.
    pub fn encode(&self) -> [u8; 28] {
        let mut e = [0u8; 28];
        e[..4].copy_from_slice(&self.flags.to_be_bytes());
        e[4..8].copy_from_slice(&self.expiry.to_be_bytes());
        e[8..16].copy_from_slice(&self.rev.to_be_bytes());
        e[16..24].copy_from_slice(&self.cas.to_be_bytes());
        e[24..].copy_from_slice(&self.options.to_be_bytes());
        e
    }
}

#[cfg(test)]
mod tests {
    use super::WithMetaExtras;

    /// Proves the encoder and decoder agree, field by field at kv_engine's offsets, and that every length the
    /// protocol allows decodes while any other is refused.
    #[test]
    fn extras_round_trip_when_encoded_and_decoded() {
        let x =
            WithMetaExtras { flags: 7, expiry: 9, rev: 3, cas: 0x0102_0304_0506_0708, options: 0x11, ext_meta_len: 0 };
        let e = x.encode();
        assert_eq!(&e[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(WithMetaExtras::decode(&e), Some(x));
        assert_eq!(WithMetaExtras::decode(&e[..24]).map(|d| (d.rev, d.options)), Some((3, 0)));
        let mut with_ext = e[..24].to_vec();
        with_ext.extend_from_slice(&[0, 5]);
        assert_eq!(WithMetaExtras::decode(&with_ext).map(|d| d.ext_meta_len), Some(5));
        let mut both = e.to_vec();
        both.extend_from_slice(&[0, 6]);
        assert_eq!(WithMetaExtras::decode(&both).map(|d| (d.options, d.ext_meta_len)), Some((0x11, 6)));
        for bad in [0usize, 23, 25, 27, 29, 31] {
            assert_eq!(WithMetaExtras::decode(&vec![0; bad]), None, "{bad} bytes");
        }
    }
}
