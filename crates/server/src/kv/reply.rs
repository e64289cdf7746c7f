//! Hot path: building replies into the connection's write buffer.

use settee_engine::MutationResult;
use settee_mcbp::{encode_response, Feature, Request};
use settee_types::{Datatype, Status};

use super::session::Session;

/// Values at least this long are sent Snappy-compressed to clients that negotiated Snappy, when that saves space.
const SNAPPY_REPLY_BYTES_MIN: usize = 1024;

/// A reply with no body beyond the status.
pub fn status(out: &mut Vec<u8>, req: &Request<'_>, status: Status) {
    encode_response(out, req.opcode, status.code(), req.opaque, 0, 0, &[], &[], &[], &[]);
}

/// A reply with a raw (binary) value.
pub fn with_value(out: &mut Vec<u8>, req: &Request<'_>, status: Status, cas: u64, extras: &[u8], value: &[u8]) {
    encode_response(out, req.opcode, status.code(), req.opaque, cas, 0, &[], extras, &[], value);
}

/// A reply carrying JSON text (configs, manifests, error bodies).
pub fn json(out: &mut Vec<u8>, req: &Request<'_>, status: Status, value: &[u8]) {
    encode_response(out, req.opcode, status.code(), req.opaque, 0, Datatype::JSON.0, &[], &[], &[], value);
}

/// The 16-byte mutation token extras (vbuuid, seqno), when the client negotiated MutationSeqno.
pub fn token(session: &Session, m: &MutationResult) -> ([u8; 16], usize) {
    let mut t = [0u8; 16];
    if !session.has(Feature::MutationSeqno) {
        return (t, 0);
    }
    t[..8].copy_from_slice(&m.vbuuid.to_be_bytes());
    t[8..].copy_from_slice(&m.seqno.to_be_bytes());
    (t, 16)
}

/// A success reply to a mutation: the new CAS and the mutation token.
pub fn mutation(out: &mut Vec<u8>, req: &Request<'_>, session: &Session, m: &MutationResult) {
    let (t, n) = token(session, m);
    encode_response(out, req.opcode, 0, req.opaque, m.cas, 0, &[], &t[..n], &[], &[]);
}

/// A document body reply (GET family): the JSON bit only for clients that negotiated JSON, Snappy when negotiated
/// and worthwhile.
#[allow(clippy::too_many_arguments)]
/// Whether [`document`] would Snappy-compress a reply body of `len` bytes for this session (it then keeps the
/// compressed form only if it saves an eighth).
pub fn may_compress(session: &Session, len: usize) -> bool {
    len >= SNAPPY_REPLY_BYTES_MIN && session.has(Feature::Snappy)
}

pub fn document(
    out: &mut Vec<u8>,
    req: &Request<'_>,
    session: &Session,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    body: &[u8],
    datatype: Datatype,
) {
    let mut dt = Datatype::RAW;
    if datatype.is_json() && session.has(Feature::Json) {
        dt = dt.with(Datatype::JSON);
    }
    if may_compress(session, body.len()) {
        let mut enc = snap::raw::Encoder::new();
        if let Ok(compressed) = enc.compress_vec(body) {
            if compressed.len() < body.len() - body.len() / 8 {
                encode_response(
                    out,
                    req.opcode,
                    0,
                    req.opaque,
                    cas,
                    dt.with(Datatype::SNAPPY).0,
                    &[],
                    extras,
                    key,
                    &compressed,
                );
                return;
            }
        }
    }
    encode_response(out, req.opcode, 0, req.opaque, cas, dt.0, &[], extras, key, body);
}

/// A cluster-map change notification (magic 0x82, opcode 0x01; PROTOCOL.md §6.1): extras are the 16-byte
/// (epoch, rev); the key names the bucket (empty for the global config); `config` is the full config for clients
/// that asked for full notifications, empty for brief ones. Clients do not answer it.
pub fn clustermap_notification(out: &mut Vec<u8>, bucket: &str, epoch: i64, rev: i64, config: &[u8]) {
    let key = bucket.as_bytes();
    let body_len = 16 + key.len() + config.len();
    out.push(0x82);
    out.push(0x01);
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.push(16);
    out.push(if config.is_empty() { 0 } else { 0x01 });
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(config);
}
