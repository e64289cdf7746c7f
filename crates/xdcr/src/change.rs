//! A change read from a source vBucket and the write that carries it to the target.

use std::sync::Arc;

/// What a change does to its document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Mutation,
    Deletion,
    /// A deletion by expiry (sent as DEL_WITH_META with the expiration option).
    Expiration,
}

/// One version of a document, with the metadata the target must keep (CAS, revision, flags, expiry, xattrs in the
/// value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    /// The document key, without a collection prefix (the target vBucket is a hash of it).
    pub key: Vec<u8>,
    /// The collection id on the target.
    pub collection: u32,
    pub value: Vec<u8>,
    pub datatype: u8,
    pub cas: u64,
    /// The source vBucket's seqno of this version.
    pub seqno: u64,
    pub rev: u64,
    pub flags: u32,
    /// Absolute expiry (Unix seconds); a deletion's delete time.
    pub expiry: u32,
}

impl Change {
    /// Bytes of key and value (what back-pressure counts).
    pub fn bytes(&self) -> usize {
        self.key.len() + self.value.len()
    }

    /// Bytes of the SET_WITH_META / DEL_WITH_META request that carries it: the 24-byte header, the extras
    /// (flags, expiry, revision, CAS; the options word for an expiration), the collection id as a LEB128 prefix
    /// of the key, the key and the value.
    pub fn request_bytes(&self) -> usize {
        const HEADER: usize = 24;
        let extras = if self.kind == ChangeKind::Expiration { 28 } else { 24 };
        let leb128 = (32 - self.collection.leading_zeros() as usize).div_ceil(7).max(1);
        HEADER + extras + leb128 + self.key.len() + self.value.len()
    }
}

/// A write for a target node: `id` comes back in the reply event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub id: u64,
    /// The target vBucket.
    pub vbucket: u16,
    pub change: Arc<Change>,
}
