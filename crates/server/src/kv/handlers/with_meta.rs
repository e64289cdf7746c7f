//! SET_WITH_META (0xa2), ADD_WITH_META (0xa4) and DEL_WITH_META (0xa8): writes that keep the CAS, revision seqno,
//! flags, expiry and xattrs the caller gives, after conflict resolution (the engine's `write_with_meta`). Restores
//! (`settee backup restore`) and XDCR use them; the SDKs do not.
//!
//! Extras: `settee_mcbp::WithMetaExtras` (an extended-meta section at the end of the value is read past and ignored,
//! as Couchbase 4.6+ ignores it). A nonzero header CAS must match the document's.
//! Needs the bucket's meta-write privilege (`data.meta!write`), which data_writer does not carry.

use settee_engine::{DocKey, MetaWrite, MetaWriteKind};
use settee_mcbp::{Opcode, Request, RequestFrameInfos, WithMetaExtras};
use settee_types::{Datatype, Status, VbId};

use super::request::decompressed;
use super::{doc_key, selected_bucket};
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::pending::Out;
use crate::kv::reply;
use crate::kv::session::Session;

const KNOWN_OPTIONS: u32 = WithMetaExtras::SKIP_CONFLICT_RESOLUTION
    | WithMetaExtras::FORCE_ACCEPT_WITH_META_OPS
    | WithMetaExtras::REGENERATE_CAS
    | WithMetaExtras::IS_EXPIRATION;

pub fn write(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    let e = WithMetaExtras::decode(req.extras).ok_or(KvError::Status(Status::Einval))?;
    if req.key.is_empty() {
        return Err(KvError::Status(Status::Einval));
    }
    if !s.access.meta_write {
        return Err(KvError::Status(Status::Eaccess));
    }
    let options = e.options;
    if options & !KNOWN_OPTIONS != 0 || options & WithMetaExtras::FORCE_ACCEPT_WITH_META_OPS != 0 {
        return Err(KvError::Status(Status::Einval));
    }
    let frames = RequestFrameInfos::parse(req.framing).map_err(|_| KvError::Status(Status::Einval))?;
    if frames.durability.is_some() {
        // kv_engine refuses durability on the with-meta writes too.
        return Err(KvError::Status(Status::Einval));
    }
    let raw = req.value.len().checked_sub(usize::from(e.ext_meta_len)).ok_or(KvError::Status(Status::Einval))?;
    let (value, datatype) = decompressed(s, Datatype(req.datatype), &req.value[..raw], true)?;
    let kind = match op {
        Opcode::AddWithMeta => MetaWriteKind::Add,
        Opcode::DelWithMeta => MetaWriteKind::Delete,
        _ => MetaWriteKind::Set,
    };
    let key: DocKey<'_> = doc_key(s, req.key)?;
    let b = selected_bucket(s)?;
    let m = b.write_with_meta(
        VbId(req.vbucket),
        &key,
        MetaWrite {
            kind,
            value: &value,
            datatype,
            flags: e.flags,
            expiry: e.expiry,
            rev: e.rev,
            cas: e.cas,
            expect_cas: req.cas,
            mode: b.conflict_resolution(),
            skip_conflict_resolution: options & WithMetaExtras::SKIP_CONFLICT_RESOLUTION != 0,
            regenerate_cas: options & WithMetaExtras::REGENERATE_CAS != 0,
        },
    )?;
    out.mutation_reply(b, &m, req, |out| reply::mutation(out, req, s, &m));
    Ok(())
}
