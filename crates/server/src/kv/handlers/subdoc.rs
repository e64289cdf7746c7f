//! Sub-document commands: SUBDOC_MULTI_LOOKUP, SUBDOC_MULTI_MUTATION and the single-path opcodes, which run as a
//! one-spec request and answer in the single-path layout.

use crate::kv::pending::Out;
use settee_doc::{LookupSpec, MutationSpec};
use settee_engine::{DocFlags, EngineError, MutateInOptions};
use settee_mcbp::{encode_response, Feature, Opcode, Request};
use settee_types::{limits, Datatype, Status, VbId};

use super::request::be_u32;
use super::{doc_key, selected_bucket, write_options};
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::reply;
use crate::kv::session::Session;

const SPEC_OP_REMOVE_DOC: u8 = 0x04;

fn einval() -> KvError {
    KvError::Status(Status::Einval)
}

fn parse_lookup_specs(mut v: &[u8]) -> Result<Vec<LookupSpec<'_>>, KvError> {
    let mut specs = Vec::new();
    while !v.is_empty() {
        let h = v.get(..4).ok_or_else(einval)?;
        let path_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let path = v.get(4..4 + path_len).ok_or_else(einval)?;
        specs.push(LookupSpec { opcode: h[0], flags: h[1], path });
        v = &v[4 + path_len..];
        if specs.len() > limits::SUBDOC_SPECS_MAX {
            return Err(KvError::Status(Status::SubdocInvalidCombo));
        }
    }
    if specs.is_empty() {
        return Err(KvError::Status(Status::SubdocInvalidCombo));
    }
    Ok(specs)
}

fn parse_mutation_specs(mut v: &[u8]) -> Result<Vec<MutationSpec<'_>>, KvError> {
    let mut specs = Vec::new();
    while !v.is_empty() {
        let h = v.get(..8).ok_or_else(einval)?;
        let path_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let value_len = be_u32(&h[4..8]) as usize;
        let path = v.get(8..8 + path_len).ok_or_else(einval)?;
        let value = v.get(8 + path_len..8 + path_len + value_len).ok_or_else(einval)?;
        specs.push(MutationSpec { opcode: h[0], flags: h[1], path, value });
        v = &v[8 + path_len + value_len..];
        if specs.len() > limits::SUBDOC_SPECS_MAX {
            return Err(KvError::Status(Status::SubdocInvalidCombo));
        }
    }
    if specs.is_empty() {
        return Err(KvError::Status(Status::SubdocInvalidCombo));
    }
    Ok(specs)
}

/// Multi-mutation extras: [expiry u32] [user flags u32, with SubdocBinaryXattr] [doc flags u8].
fn mutation_extras(s: &Session, e: &[u8]) -> Result<(u32, Option<u32>, u8), KvError> {
    Ok(match e.len() {
        0 => (0, None, 0),
        1 => (0, None, e[0]),
        4 => (be_u32(e), None, 0),
        5 => (be_u32(e), None, e[4]),
        8 | 9 if s.has(Feature::SubdocBinaryXattr) => {
            (be_u32(e), Some(be_u32(&e[4..])), e.get(8).copied().unwrap_or(0))
        }
        _ => return Err(einval()),
    })
}

pub fn multi_lookup(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let doc_flags = match req.extras {
        [] => 0,
        [f] => *f,
        _ => return Err(einval()),
    };
    let key = doc_key(s, req.key)?;
    if !s.may(key.cid(), |a| a.read) {
        return Err(KvError::Status(Status::Eaccess));
    }
    let specs = parse_lookup_specs(req.value)?;
    let b = selected_bucket(s)?;
    let r = b.lookup_in(VbId(req.vbucket), &key, &specs, DocFlags(doc_flags))?;
    let mut body = Vec::new();
    let mut all_ok = true;
    for res in &r.results {
        all_ok &= res.status == Status::Success;
        body.extend_from_slice(&res.status.code().to_be_bytes());
        body.extend_from_slice(&(res.value.len() as u32).to_be_bytes());
        body.extend_from_slice(&res.value);
    }
    let status = match (all_ok, r.deleted) {
        (true, false) => Status::Success,
        (true, true) => Status::SubdocSuccessDeleted,
        (false, false) => Status::SubdocMultiPathFailure,
        (false, true) => Status::SubdocMultiPathFailureDeleted,
    };
    reply::with_value(out, req, status, r.cas, &[], &body);
    Ok(())
}

pub fn multi_mutation(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let (expiry, user_flags, doc_flags) = mutation_extras(s, req.extras)?;
    let key = doc_key(s, req.key)?;
    if !s.may(key.cid(), |a| a.write) {
        return Err(KvError::Status(Status::Eaccess));
    }
    let specs = parse_mutation_specs(req.value)?;
    let b = selected_bucket(s)?;
    let opts = MutateInOptions { doc_flags: DocFlags(doc_flags), expiry, user_flags, write: write_options(req)? };
    match b.mutate_in(VbId(req.vbucket), &key, &specs, opts) {
        Ok(r) => {
            let mut body = Vec::new();
            for (index, value) in &r.results {
                body.push(*index);
                body.extend_from_slice(&0u16.to_be_bytes());
                body.extend_from_slice(&(value.len() as u32).to_be_bytes());
                body.extend_from_slice(value);
            }
            let removed = specs.iter().any(|sp| sp.opcode == SPEC_OP_REMOVE_DOC);
            let status = if r.deleted && !removed { Status::SubdocSuccessDeleted } else { Status::Success };
            let (t, n) = reply::token(s, &r.mutation);
            out.mutation_reply(b, &r.mutation, req, |out| {
                encode_response(out, req.opcode, status.code(), req.opaque, r.mutation.cas, 0, &[], &t[..n], &[], &body)
            });
            Ok(())
        }
        Err(EngineError::SubdocSpec { index, status }) => {
            // The failure layout: exactly one entry, index and status, without a value length.
            let mut body = vec![index];
            body.extend_from_slice(&status.code().to_be_bytes());
            reply::with_value(out, req, Status::SubdocMultiPathFailure, 0, &[], &body);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A single-path opcode: extras = path length u16, path flags u8, [expiry u32 (mutations)], [doc flags u8];
/// the body holds the path then the value.
pub fn single_path(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    let e = req.extras;
    if e.len() < 3 {
        return Err(einval());
    }
    let path_len = usize::from(u16::from_be_bytes([e[0], e[1]]));
    let path_flags = e[2];
    let path = req.value.get(..path_len).ok_or_else(einval)?;
    let value = &req.value[path_len..];
    let key = doc_key(s, req.key)?;
    let b = selected_bucket(s)?;
    let is_lookup = matches!(op, Opcode::SubdocGet | Opcode::SubdocExists | Opcode::SubdocGetCount);
    if is_lookup {
        let doc_flags = match e.len() {
            3 => 0,
            4 => e[3],
            _ => return Err(einval()),
        };
        if !s.may(key.cid(), |a| a.read) {
            return Err(KvError::Status(Status::Eaccess));
        }
        let spec = [LookupSpec { opcode: op as u8, flags: path_flags, path }];
        let r = b.lookup_in(VbId(req.vbucket), &key, &spec, DocFlags(doc_flags))?;
        let res = r.results.into_iter().next().ok_or(KvError::Status(Status::Einternal))?;
        if res.status != Status::Success {
            return Err(KvError::Status(res.status));
        }
        let dt = if op == Opcode::SubdocExists || !s.has(Feature::Json) { Datatype::RAW } else { Datatype::JSON };
        let status = if r.deleted { Status::SubdocSuccessDeleted } else { Status::Success };
        encode_response(out, req.opcode, status.code(), req.opaque, r.cas, dt.0, &[], &[], &[], &res.value);
        return Ok(());
    }
    let (expiry, doc_flags) = match e.len() {
        3 => (0, 0),
        4 => (0, e[3]),
        7 => (be_u32(&e[3..]), 0),
        8 => (be_u32(&e[3..]), e[7]),
        _ => return Err(einval()),
    };
    if !s.may(key.cid(), |a| a.write) {
        return Err(KvError::Status(Status::Eaccess));
    }
    let spec = [MutationSpec { opcode: op as u8, flags: path_flags, path, value }];
    let opts = MutateInOptions { doc_flags: DocFlags(doc_flags), expiry, user_flags: None, write: write_options(req)? };
    match b.mutate_in(VbId(req.vbucket), &key, &spec, opts) {
        Ok(r) => {
            let (t, n) = reply::token(s, &r.mutation);
            let value = r.results.first().map(|(_, v)| v.as_slice()).unwrap_or(&[]);
            out.mutation_reply(b, &r.mutation, req, |out| {
                encode_response(out, req.opcode, 0, req.opaque, r.mutation.cas, 0, &[], &t[..n], &[], value)
            });
            Ok(())
        }
        Err(EngineError::SubdocSpec { status, .. }) => Err(KvError::Status(status)),
        Err(e) => Err(e.into()),
    }
}
