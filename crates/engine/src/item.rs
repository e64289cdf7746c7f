//! Hot path: the stored item and the borrowed view handed to readers.

use std::borrow::Cow;

use settee_mcbp::{decode_leb128, encode_leb128};
use settee_types::{Cas, CollectionId, Datatype, Seqno};

use crate::table::Item;

/// A document key as the engine stores it: the LEB128 collection id followed by the key bytes. Keeping the prefix
/// in the stored key makes keys of different collections distinct without a second table. A key that arrives with
/// its prefix (Collections negotiated, as the SDKs do) is borrowed from the request, not copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocKey<'a> {
    encoded: Cow<'a, [u8]>,
    cid: CollectionId,
    prefix_len: usize,
}

impl<'a> DocKey<'a> {
    pub fn new(cid: CollectionId, key: &[u8]) -> DocKey<'static> {
        let mut encoded = Vec::with_capacity(key.len() + 2);
        encode_leb128(cid, &mut encoded);
        let prefix_len = encoded.len();
        encoded.extend_from_slice(key);
        DocKey { encoded: Cow::Owned(encoded), cid, prefix_len }
    }
    /// Parses a key that already carries its collection prefix; None if the prefix is malformed.
    pub fn from_encoded(encoded: &'a [u8]) -> Option<DocKey<'a>> {
        let (cid, prefix_len) = decode_leb128(encoded)?;
        Some(DocKey { encoded: Cow::Borrowed(encoded), cid, prefix_len })
    }
    pub fn cid(&self) -> CollectionId {
        self.cid
    }
    /// The key without the collection prefix (what the vBucket hash and the user see).
    pub fn key(&self) -> &[u8] {
        &self.encoded[self.prefix_len..]
    }
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }
}

/// The fields of one document as an operation builds it, before it is packed into the vBucket's table
/// ([`crate::table::Item`]). Deleted documents stay as tombstones (with their system xattrs) so that seqnos,
/// `exists` and sub-document access to deleted documents behave as in Couchbase. The value may be borrowed (a SET
/// copies the request's bytes straight into the packed item).
#[derive(Clone, Debug)]
pub(crate) struct StoredItem<'v> {
    /// The value: an optional xattr section followed by the body, never compressed.
    pub value: Cow<'v, [u8]>,
    pub cas: Cas,
    pub seqno: Seqno,
    /// Revision: how many times the document was mutated.
    pub rev: u64,
    pub flags: u32,
    /// Absolute Unix seconds, 0 = never. For a tombstone, the time it was deleted.
    pub expiry: u32,
    /// JSON and XATTR bits of the stored value.
    pub datatype: Datatype,
    pub deleted: bool,
    /// Unix seconds until which the document is locked by GET_LOCKED; 0 = unlocked.
    pub locked_until: u32,
    /// The value is in memory (false once the item pager ejected it; it is on disk).
    pub resident: bool,
    /// Accessed since the item pager last looked (second-chance ejection).
    pub referenced: bool,
}

impl StoredItem<'_> {
    /// Bytes charged to the bucket quota for this item under `key_len`.
    pub(crate) fn footprint(&self, key_len: usize) -> usize {
        crate::table::footprint(key_len, self.value.len())
    }
    /// The same fields with the value owned (a prepare outlives the request that made it).
    pub(crate) fn into_owned(mut self) -> StoredItem<'static> {
        let value = std::mem::take(&mut self.value).into_owned();
        self.with_value(Cow::Owned(value))
    }
    /// The same fields with another value (the start of a new version of a document).
    pub(crate) fn with_value<'w>(self, value: Cow<'w, [u8]>) -> StoredItem<'w> {
        StoredItem {
            value,
            cas: self.cas,
            seqno: self.seqno,
            rev: self.rev,
            flags: self.flags,
            expiry: self.expiry,
            datatype: self.datatype,
            deleted: self.deleted,
            locked_until: self.locked_until,
            resident: self.resident,
            referenced: self.referenced,
        }
    }
}

/// What a reader sees of a live item, borrowed while the vBucket lock is held.
#[derive(Clone, Copy, Debug)]
pub struct ItemView<'a> {
    /// The whole stored value, xattrs included when `datatype` has the XATTR bit.
    pub value: &'a [u8],
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev: u64,
    pub flags: u32,
    pub expiry: u32,
    pub datatype: Datatype,
    pub deleted: bool,
}

impl<'a> ItemView<'a> {
    pub(crate) fn of(item: &'a Item, cas: Cas) -> ItemView<'a> {
        ItemView {
            value: item.value(),
            cas,
            seqno: item.seqno(),
            rev: item.rev(),
            flags: item.flags(),
            expiry: item.expiry(),
            datatype: item.datatype(),
            deleted: item.deleted(),
        }
    }
    /// The document body without its xattr section, and the datatype that goes with it.
    pub fn body(&self) -> (&'a [u8], Datatype) {
        if !self.datatype.has_xattr() {
            return (self.value, self.datatype);
        }
        let section = self.value.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize).unwrap_or(0);
        let body = self.value.get(4 + section..).unwrap_or(&[]);
        (body, self.datatype.without(Datatype::XATTR))
    }
}

/// Whether `body` is a JSON document: Couchbase sets the JSON datatype bit by inspecting the value.
pub(crate) fn is_json(body: &[u8]) -> bool {
    !body.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys keep their collection prefix for storage and expose the bare key.
    #[test]
    fn doc_key_prefix() {
        let k = DocKey::new(0x555, b"foo");
        assert_eq!(k.encoded(), &[0xD5, 0x0A, b'f', b'o', b'o']);
        assert_eq!((k.cid(), k.key()), (0x555, &b"foo"[..]));
        assert_eq!(DocKey::from_encoded(k.encoded()).as_ref(), Some(&k));
        assert_eq!(DocKey::from_encoded(&[0x80]), None);
    }

    /// JSON detection accepts documents and scalars and rejects text and empty values.
    #[test]
    fn json_detection() {
        assert!(is_json(br#"{"a":1}"#) && is_json(b"42") && is_json(b"\"s\""));
        assert!(!is_json(b"hello") && !is_json(b"") && !is_json(b"{\"a\":"));
    }
}
