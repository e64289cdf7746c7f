//! SET_WITH_META (0xa2), ADD_WITH_META (0xa4) and DEL_WITH_META (0xa8): writes that keep the CAS, revision seqno,
//! flags, expiry and xattrs the caller gives, after conflict resolution (the engine's `write_with_meta`). Restores
//! (`settee backup restore`) and XDCR use them; the SDKs do not.
//!
//! Extras (kv_engine's docs/protocol/set_with_meta.md): flags u32, expiry u32, revision seqno u64, CAS u64, then
//! optionally options u32 and/or the length u16 of an extended-meta section at the end of the value (read past,
//! ignored, as Couchbase 4.6+ ignores it): 24, 26, 28 or 30 bytes. A nonzero header CAS must match the document's.
//! Needs the bucket's meta-write privilege (`data.meta!write`), which data_writer does not carry.

use settee_engine::{ConflictMode, DocKey, MetaWrite, MetaWriteKind};
use settee_mcbp::{Opcode, Request, RequestFrameInfos};
use settee_types::{Datatype, Status, VbId};

use super::request::{be_u32, be_u64, decompressed};
use super::{doc_key, selected_bucket};
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::pending::Out;
use crate::kv::reply;
use crate::kv::session::Session;

/// The write wins whatever the vBucket holds.
const SKIP_CONFLICT_RESOLUTION: u32 = 0x01;
/// Required by last-write-wins buckets; settee's buckets resolve by revision seqno, which refuses it (kv_engine).
const FORCE_ACCEPT_WITH_META_OPS: u32 = 0x02;
/// The server gives the document a new CAS (only with SKIP_CONFLICT_RESOLUTION).
const REGENERATE_CAS: u32 = 0x04;
/// DEL_WITH_META: the deletion is an expiry.
const IS_EXPIRATION: u32 = 0x10;
const KNOWN_OPTIONS: u32 = SKIP_CONFLICT_RESOLUTION | FORCE_ACCEPT_WITH_META_OPS | REGENERATE_CAS | IS_EXPIRATION;

pub fn write(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    let e = req.extras;
    if !matches!(e.len(), 24 | 26 | 28 | 30) || req.key.is_empty() {
        return Err(KvError::Status(Status::Einval));
    }
    if !s.access.meta_write {
        return Err(KvError::Status(Status::Eaccess));
    }
    let options = if e.len() >= 28 { be_u32(&e[24..28]) } else { 0 };
    let ext_meta = match e.len() {
        26 => u16::from_be_bytes([e[24], e[25]]),
        30 => u16::from_be_bytes([e[28], e[29]]),
        _ => 0,
    };
    if options & !KNOWN_OPTIONS != 0 || options & FORCE_ACCEPT_WITH_META_OPS != 0 {
        return Err(KvError::Status(Status::Einval));
    }
    let frames = RequestFrameInfos::parse(req.framing).map_err(|_| KvError::Status(Status::Einval))?;
    if frames.durability.is_some() {
        // kv_engine refuses durability on the with-meta writes too.
        return Err(KvError::Status(Status::Einval));
    }
    let raw = req.value.len().checked_sub(usize::from(ext_meta)).ok_or(KvError::Status(Status::Einval))?;
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
            flags: be_u32(&e[..4]),
            expiry: be_u32(&e[4..8]),
            rev: be_u64(&e[8..16]),
            cas: be_u64(&e[16..24]),
            expect_cas: req.cas,
            mode: ConflictMode::RevisionSeqno,
            skip_conflict_resolution: options & SKIP_CONFLICT_RESOLUTION != 0,
            regenerate_cas: options & REGENERATE_CAS != 0,
        },
    )?;
    out.mutation_reply(b, &m, req, |out| reply::mutation(out, req, s, &m));
    Ok(())
}
