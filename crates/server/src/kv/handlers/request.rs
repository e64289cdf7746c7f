//! Hot path: request pieces shared by the document handlers: the key with its collection, the (decompressed)
//! value, the mutation options from the frame infos, and the layout checks.

use std::borrow::Cow;

use settee_engine::{DocKey, WriteOptions};
use settee_mcbp::{Feature, Request, RequestFrameInfos};
use settee_types::{limits, Datatype, Status};

use crate::kv::dispatch::KvError;
use crate::kv::session::Session;
use crate::node::BucketHandle;

/// The bucket the connection selected (dispatch already answered NO_BUCKET for commands that need one).
pub(crate) fn selected_bucket(s: &Session) -> Result<&BucketHandle, KvError> {
    s.bucket.as_deref().ok_or(KvError::Status(Status::NoBucket))
}

/// Checks the extras length and whether key and value are present as the opcode requires; EINVAL otherwise.
pub(crate) fn expect_layout(
    req: &Request<'_>,
    extras: &[usize],
    key: bool,
    value: Option<bool>,
) -> Result<(), KvError> {
    let ok = extras.contains(&req.extras.len())
        && (req.key.is_empty() != key)
        && value.is_none_or(|must| req.value.is_empty() != must);
    if ok {
        Ok(())
    } else {
        Err(KvError::Status(Status::Einval))
    }
}

/// The document key: with Collections negotiated the key starts with a LEB128 collection id, otherwise it is in
/// the default collection. The bare key must be 1..=250 bytes.
pub(crate) fn doc_key<'a>(s: &Session, raw: &'a [u8]) -> Result<DocKey<'a>, KvError> {
    let key = if s.collections() {
        DocKey::from_encoded(raw).ok_or(KvError::Status(Status::Einval))?
    } else {
        DocKey::new(0, raw)
    };
    if key.key().is_empty() || key.key().len() > limits::KEY_BYTES_MAX {
        return Err(KvError::Status(Status::Einval));
    }
    Ok(key)
}

/// The request value, Snappy-decompressed when the datatype says so. Values with unknown datatype bits, or
/// compressed without Snappy negotiated, are EINVAL; a value that would decompress beyond the limit is E2BIG.
pub(crate) fn request_value<'a>(s: &Session, req: &Request<'a>) -> Result<Cow<'a, [u8]>, KvError> {
    decompressed(s, Datatype(req.datatype), req.value, false).map(|(value, _)| value)
}

/// `value` without Snappy compression, and its datatype `dt` without the SNAPPY bit. Unknown bits, Snappy the
/// connection did not negotiate, xattrs unless `xattrs` allows them and the connection negotiated them, and a value
/// that would decompress beyond the limit (E2BIG) are refused.
pub(crate) fn decompressed<'a>(
    s: &Session,
    dt: Datatype,
    value: &'a [u8],
    xattrs: bool,
) -> Result<(Cow<'a, [u8]>, Datatype), KvError> {
    let invalid = || KvError::Status(Status::Einval);
    if dt.0 & !Datatype::ALL.0 != 0 || (dt.has_xattr() && !(xattrs && s.has(Feature::Xattr))) {
        return Err(invalid());
    }
    if !dt.is_snappy() {
        return Ok((Cow::Borrowed(value), dt));
    }
    if !s.has(Feature::Snappy) {
        return Err(invalid());
    }
    let len = snap::raw::decompress_len(value).map_err(|_| invalid())?;
    if len > limits::VALUE_BYTES_MAX {
        return Err(KvError::Status(Status::E2big));
    }
    let plain = snap::raw::Decoder::new().decompress_vec(value).map_err(|_| invalid())?;
    Ok((Cow::Owned(plain), dt.without(Datatype::SNAPPY)))
}

/// CAS, durability and preserve-TTL for a mutation.
pub(crate) fn write_options(req: &Request<'_>) -> Result<WriteOptions, KvError> {
    let frames = RequestFrameInfos::parse(req.framing).map_err(|_| KvError::Status(Status::Einval))?;
    Ok(WriteOptions {
        cas: req.cas,
        durability: frames.durability.map(|(level, _)| level),
        preserve_ttl: frames.preserve_ttl,
    })
}

pub(crate) fn be_u32(b: &[u8]) -> u32 {
    b.get(..4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}
pub(crate) fn be_u64(b: &[u8]) -> u64 {
    b.get(..8).map_or(0, |b| u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
}
