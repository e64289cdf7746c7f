//! Hot path: SET, ADD, REPLACE, DELETE, INCREMENT, DECREMENT, APPEND, PREPEND.

use crate::kv::pending::Out;
use settee_engine::{ArithmeticOp, ArithmeticRequest, StoreMode, StoreRequest};
use settee_mcbp::{encode_response, Opcode, Request};
use settee_types::{Status, VbId};

use super::request::{be_u32, be_u64};
use super::{doc_key, expect_layout, request_value, selected_bucket, write_options};
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::reply;
use crate::kv::session::Session;

/// EACCESS unless the user may write the documents of collection `cid`.
fn need_write(s: &Session, cid: u32) -> Result<(), KvError> {
    if s.may(cid, |a| a.write) {
        Ok(())
    } else {
        Err(KvError::Status(Status::Eaccess))
    }
}

pub fn store(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    expect_layout(req, &[8], true, None)?;
    let key = doc_key(s, req.key)?;
    need_write(s, key.cid())?;
    let value = request_value(s, req)?;
    let mode = match op {
        Opcode::Add => StoreMode::Add,
        Opcode::Replace => StoreMode::Replace,
        _ => StoreMode::Set,
    };
    let b = selected_bucket(s)?;
    let m = b.store(
        VbId(req.vbucket),
        &key,
        StoreRequest {
            mode,
            value: &value,
            flags: be_u32(&req.extras[..4]),
            expiry: be_u32(&req.extras[4..]),
            opts: write_options(req)?,
        },
    )?;
    out.mutation_reply(b, &m, req, |out| reply::mutation(out, req, s, &m));
    Ok(())
}

pub fn delete(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    expect_layout(req, &[0], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    need_write(s, key.cid())?;
    let b = selected_bucket(s)?;
    let m = b.delete(VbId(req.vbucket), &key, write_options(req)?)?;
    out.mutation_reply(b, &m, req, |out| reply::mutation(out, req, s, &m));
    Ok(())
}

/// INCREMENT / DECREMENT: extras are delta u64, initial u64, expiry u32; the reply value is the new count as an
/// 8-byte big-endian number and the extras are the mutation token.
pub fn arithmetic(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    expect_layout(req, &[20], true, Some(false))?;
    let key = doc_key(s, req.key)?;
    need_write(s, key.cid())?;
    let b = selected_bucket(s)?;
    let op = if op == Opcode::Increment { ArithmeticOp::Increment } else { ArithmeticOp::Decrement };
    let r = b.arithmetic(
        VbId(req.vbucket),
        &key,
        ArithmeticRequest {
            op,
            delta: be_u64(&req.extras[..8]),
            initial: be_u64(&req.extras[8..16]),
            expiry: be_u32(&req.extras[16..]),
            opts: write_options(req)?,
        },
    )?;
    let (t, n) = reply::token(s, &r.mutation);
    out.mutation_reply(b, &r.mutation, req, |out| {
        encode_response(out, req.opcode, 0, req.opaque, r.mutation.cas, 0, &[], &t[..n], &[], &r.value.to_be_bytes())
    });
    Ok(())
}

pub fn concat(s: &Session, req: &Request<'_>, out: &mut Out, op: Opcode) -> KvResult {
    expect_layout(req, &[0], true, None)?;
    let key = doc_key(s, req.key)?;
    need_write(s, key.cid())?;
    let value = request_value(s, req)?;
    let b = selected_bucket(s)?;
    let m = b.concat(VbId(req.vbucket), &key, &value, op == Opcode::Prepend, write_options(req)?)?;
    out.mutation_reply(b, &m, req, |out| reply::mutation(out, req, s, &m));
    Ok(())
}
