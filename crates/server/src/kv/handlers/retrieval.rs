//! Hot path: GET, GET_REPLICA, TOUCH, GAT, GET_LOCKED, UNLOCK, GET_META, GET_RANDOM_KEY.

use crate::kv::pending::Out;
use settee_engine::ItemView;
use settee_mcbp::{encode_leb128, Opcode, Request};
use settee_types::{Datatype, Status, VbId};

use super::request::be_u32;
use super::{doc_key, expect_layout, selected_bucket};
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::reply;
use crate::kv::session::Session;

/// EACCESS unless the user may read the documents of collection `cid`.
fn need_read(s: &Session, cid: u32) -> Result<(), KvError> {
    if s.may(cid, |a| a.read) {
        Ok(())
    } else {
        Err(KvError::Status(Status::Eaccess))
    }
}

/// A document reply left to encode after the vBucket lock: one the reply would Snappy-compress.
struct Deferred {
    cas: u64,
    flags: u32,
    body: Vec<u8>,
    datatype: Datatype,
}

/// Encodes the reply to a read of `item` while its vBucket lock is held, unless the reply would be compressed:
/// compressing costs far more than copying the body out, and every other request on the vBucket waits for the
/// lock, so such a body is copied and encoded by [`finish_document`] after the lock.
fn encode_document(out: &mut Vec<u8>, req: &Request<'_>, s: &Session, item: ItemView<'_>) -> Option<Deferred> {
    let (body, datatype) = item.body();
    if reply::may_compress(s, body.len()) {
        return Some(Deferred { cas: item.cas, flags: item.flags, body: body.to_vec(), datatype });
    }
    reply::document(out, req, s, item.cas, &item.flags.to_be_bytes(), &[], body, datatype);
    None
}

fn finish_document(out: &mut Vec<u8>, req: &Request<'_>, s: &Session, deferred: Option<Deferred>) {
    if let Some(d) = deferred {
        reply::document(out, req, s, d.cas, &d.flags.to_be_bytes(), &[], &d.body, d.datatype);
    }
}

/// GET, and GET_REPLICA (served only by a replica vBucket; NOT_MY_VBUCKET elsewhere, as Couchbase answers).
pub fn get(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    expect_layout(req, &[0], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    need_read(s, key.cid())?;
    let b = selected_bucket(s)?;
    let reply = |item: ItemView<'_>| encode_document(out, req, s, item);
    let deferred = if op == Opcode::GetReplica {
        b.get_replica(VbId(req.vbucket), &key, reply)?
    } else {
        b.get(VbId(req.vbucket), &key, reply)?
    };
    finish_document(out, req, s, deferred);
    Ok(())
}

/// TOUCH (reply: CAS and token) and GAT (reply: like GET).
pub fn touch(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    expect_layout(req, &[4], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    if !s.may(key.cid(), |a| a.write) || (op == Opcode::Gat && !s.may(key.cid(), |a| a.read)) {
        return Err(KvError::Status(Status::Eaccess));
    }
    let b = selected_bucket(s)?;
    let expiry = be_u32(req.extras);
    let is_gat = op == Opcode::Gat;
    let mut body_reply = Vec::new();
    let (m, deferred) = b.touch(VbId(req.vbucket), &key, expiry, |item| {
        if is_gat {
            encode_document(&mut body_reply, req, s, item)
        } else {
            None
        }
    })?;
    if is_gat {
        finish_document(&mut body_reply, req, s, deferred);
        out.extend_from_slice(&body_reply);
    } else {
        reply::mutation(out, req, s, &m);
    }
    Ok(())
}

pub fn get_locked(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    expect_layout(req, &[0, 4], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    need_read(s, key.cid())?;
    let b = selected_bucket(s)?;
    let deferred =
        b.get_locked(VbId(req.vbucket), &key, be_u32(req.extras), |item| encode_document(out, req, s, item))?;
    finish_document(out, req, s, deferred);
    Ok(())
}

pub fn unlock(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    expect_layout(req, &[0], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    need_read(s, key.cid())?;
    let b = selected_bucket(s)?;
    b.unlock(VbId(req.vbucket), &key, req.cas)?;
    reply::status(out, req, Status::Success);
    Ok(())
}

/// GET_META: version 1 (20-byte extras) or, when asked with extras byte 2, version 2 (21 bytes, with datatype).
pub fn get_meta(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    expect_layout(req, &[0, 1], true, Some(false))?;
    let v2 = match req.extras {
        [] | [1] => false,
        [2] => true,
        _ => return Err(KvError::Status(Status::Einval)),
    };
    let key = doc_key(s, req.key)?;
    need_read(s, key.cid())?;
    let b = selected_bucket(s)?;
    let meta = b.get_meta(VbId(req.vbucket), &key)?;
    let mut extras = [0u8; 21];
    extras[..4].copy_from_slice(&u32::from(meta.deleted).to_be_bytes());
    extras[4..8].copy_from_slice(&meta.flags.to_be_bytes());
    extras[8..12].copy_from_slice(&meta.expiry.to_be_bytes());
    extras[12..20].copy_from_slice(&meta.rev.to_be_bytes());
    extras[20] = meta.datatype.0;
    let n = if v2 { 21 } else { 20 };
    reply::with_value(out, req, Status::Success, meta.cas, &extras[..n], &[]);
    Ok(())
}

/// GET_RANDOM_KEY: the collection id comes as 4 extras bytes when Collections is negotiated; the reply carries
/// the key (prefixed the same way), flags and value.
pub fn get_random_key(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let cid = match (req.extras.len(), s.collections()) {
        (0, _) => 0,
        (4, true) => be_u32(req.extras),
        _ => return Err(KvError::Status(Status::Einval)),
    };
    need_read(s, cid)?;
    let b = selected_bucket(s)?;
    let collections = s.collections();
    b.random_key(cid, |encoded_key, item| {
        let key: Vec<u8> = if collections {
            encoded_key.to_vec()
        } else {
            let mut k = Vec::new();
            encode_leb128(0, &mut k);
            encoded_key[k.len()..].to_vec()
        };
        let (body, dt) = item.body();
        reply::document(out, req, s, item.cas, &item.flags.to_be_bytes(), &key, body, dt);
    })?;
    Ok(())
}
