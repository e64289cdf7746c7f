//! Protocol limits, the same as Couchbase Server's so that clients see the same errors at the same sizes.

/// vBuckets per bucket.
pub const NUM_VBUCKETS: u16 = 1024;
/// The longest document key, in bytes, not counting the collection-id prefix.
pub const KEY_BYTES_MAX: usize = 250;
/// The largest document value (body plus xattrs), in bytes; larger values get E2BIG.
pub const VALUE_BYTES_MAX: usize = 20 * 1024 * 1024;
/// A frame whose body is larger than this closes the connection: no legitimate client sends one.
pub const FRAME_BODY_BYTES_MAX: usize = 30 * 1024 * 1024;
/// Sub-document: the most specs in one multi-path request.
pub const SUBDOC_SPECS_MAX: usize = 16;
/// Sub-document: the longest path, in bytes.
pub const SUBDOC_PATH_BYTES_MAX: usize = 1024;
/// Sub-document: the deepest nesting of a document or a path.
pub const SUBDOC_DEPTH_MAX: usize = 32;
/// Expiry values up to this many seconds are relative; larger values are absolute Unix times.
pub const EXPIRY_RELATIVE_SECS_MAX: u32 = 30 * 24 * 60 * 60;
/// GET_LOCKED: the lock time used when the client asks for 0 or for more than the maximum.
pub const LOCK_SECS_DEFAULT: u32 = 15;
/// GET_LOCKED: the longest lock a client may ask for.
pub const LOCK_SECS_MAX: u32 = 30;
