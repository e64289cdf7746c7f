//! `DocMeta`: what the engine knows about a document, for the `$document` virtual xattr and for macros.

/// A document's metadata as stored. Snappy compression is already removed from the value the functions in this
/// crate receive, but `datatype` reports the stored bits, as `$document.datatype` does on Couchbase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DocMeta {
    pub cas: u64,
    pub seqno: u64,
    pub vbuuid: u64,
    pub revid: u64,
    /// Absolute Unix seconds; 0 means no expiry.
    pub exptime: u32,
    pub flags: u32,
    pub deleted: bool,
    /// Stored datatype bits: JSON 0x01, SNAPPY 0x02, XATTR 0x04.
    pub datatype: u8,
    /// Length of the body, xattrs excluded.
    pub value_bytes: u32,
    /// CRC32C of the body, xattrs excluded.
    pub crc32c: u32,
}
