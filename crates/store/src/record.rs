use settee_types::{Cas, Seqno};

/// Everything about a document but its key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev: u64,
    pub flags: u32,
    pub expiry: u32,
    pub datatype: u8,
    pub deleted: bool,
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

    /// CRC32C over key, value, CAS, seqno and the rest of the metadata, so a record read back under the wrong key
    /// or with a stale seqno fails the check too.
    pub fn checksum(key: &[u8], value: &[u8], m: &RecordMeta) -> u32 {
        let mut crc = crc32c::crc32c(key);
        crc = crc32c::crc32c_append(crc, value);
        let mut meta = [0u8; 34];
        meta[..8].copy_from_slice(&m.cas.to_be_bytes());
        meta[8..16].copy_from_slice(&m.seqno.to_be_bytes());
        meta[16..24].copy_from_slice(&m.rev.to_be_bytes());
        meta[24..28].copy_from_slice(&m.flags.to_be_bytes());
        meta[28..32].copy_from_slice(&m.expiry.to_be_bytes());
        meta[32] = m.datatype;
        meta[33] = u8::from(m.deleted);
        crc32c::crc32c_append(crc, &meta)
    }

    pub fn is_intact(&self) -> bool {
        Record::checksum(&self.key, &self.value, &self.meta) == self.crc32c
    }
}
