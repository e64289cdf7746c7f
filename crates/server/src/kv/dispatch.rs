//! Hot path: from a decoded request to a handler. The checks every command shares live here, in the order
//! kv_engine applies them: known opcode, authenticated (or on the pre-auth allow-list), bucket selected, request
//! syntax; handlers then see only well-formed requests.

use crate::kv::pending::{Fetch, Out};
use settee_engine::EngineError;
use settee_mcbp::{Opcode, Request};
use settee_types::Status;

use super::handlers::{bucket, dcp, mutation, retrieval, session as sess, subdoc, timings, with_meta};
use super::reply;
use super::session::Session;
use crate::node::Node;

/// Why a handler did not write a success reply.
#[derive(Debug)]
pub enum KvError {
    Status(Status),
    Engine(EngineError),
}

impl From<Status> for KvError {
    fn from(s: Status) -> KvError {
        KvError::Status(s)
    }
}
impl From<EngineError> for KvError {
    fn from(e: EngineError) -> KvError {
        KvError::Engine(e)
    }
}

pub type KvResult = Result<(), KvError>;

pub fn dispatch(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) {
    let Some(op) = Opcode::from_byte(req.opcode) else {
        tracing::debug!(opcode = req.opcode, peer = %s.peer, "unknown opcode");
        return reply::status(out, req, Status::UnknownCommand);
    };
    let flags = op.flags();
    if s.user.is_none() && !flags.pre_auth {
        return reply::status(out, req, Status::Eaccess);
    }
    if !check_user_still_exists(node, s) {
        return;
    }
    if let Some(b) = &s.bucket {
        if b.is_deleted() {
            // kv_engine disconnects clients of a deleted bucket; they reconnect and learn it is gone.
            tracing::info!(peer = %s.peer, "closing connection bound to a deleted bucket");
            s.close = true;
            return;
        }
    }
    if flags.needs_bucket && s.bucket.is_none() {
        return reply::status(out, req, Status::NoBucket);
    }
    // One branch for a user without limits (or while they are not enforced).
    let metered = match &s.meter {
        Some(m) if m.active() && counts_against_limits(op, flags) => {
            if let Err(status) = m.admit(request_bytes(req)) {
                tracing::debug!(peer = %s.peer, user = ?s.user, ?status, "kv command over the user's limits");
                return reply::status(out, req, status);
            }
            true
        }
        _ => false,
    };
    let written = out.buf.len();
    let result = match op {
        Opcode::Hello => sess::hello(s, req, out),
        Opcode::SaslListMechs => sess::sasl_list_mechs(node, s, req, out),
        Opcode::SaslAuth => sess::sasl_auth(node, s, req, out),
        Opcode::SaslStep => sess::sasl_step(node, s, req, out),
        Opcode::GetErrorMap => sess::get_error_map(req, out),
        Opcode::SelectBucket => sess::select_bucket(node, s, req, out),
        Opcode::GetClusterConfig => sess::get_cluster_config(node, s, req, out),
        Opcode::Noop => sess::noop(req, out),
        Opcode::Version => sess::version(req, out),
        Opcode::Get | Opcode::GetReplica => retrieval::get(s, req, out, op),
        Opcode::Gat | Opcode::Touch => retrieval::touch(s, req, out, op),
        Opcode::GetLocked => retrieval::get_locked(s, req, out),
        Opcode::Unlock => retrieval::unlock(s, req, out),
        Opcode::GetMeta => retrieval::get_meta(s, req, out),
        Opcode::GetRandomKey => retrieval::get_random_key(s, req, out),
        Opcode::Set | Opcode::Add | Opcode::Replace => mutation::store(s, req, out, op),
        Opcode::Delete => mutation::delete(s, req, out),
        Opcode::SetWithMeta | Opcode::AddWithMeta | Opcode::DelWithMeta => with_meta::write(s, req, out, op),
        Opcode::Increment | Opcode::Decrement => mutation::arithmetic(s, req, out, op),
        Opcode::Append | Opcode::Prepend => mutation::concat(s, req, out, op),
        Opcode::Stat => bucket::stat(node, s, req, out),
        Opcode::ObserveSeqno => bucket::observe_seqno(s, req, out),
        Opcode::SetParam => bucket::set_param(s, req, out),
        Opcode::GetCollectionsManifest => bucket::get_collections_manifest(s, req, out),
        Opcode::GetCollectionId => bucket::get_collection_id(s, req, out),
        Opcode::GetCmdTimer => timings::get_cmd_timer(node, s, req, out),
        Opcode::SubdocMultiLookup => subdoc::multi_lookup(s, req, out),
        Opcode::SubdocMultiMutation => subdoc::multi_mutation(s, req, out),
        op if op.is_single_path_subdoc() => subdoc::single_path(s, req, out, op),
        Opcode::DcpOpen => dcp::open(node, s, req, out),
        op if op.is_dcp() => dcp::not_open(s, req),
        _ => Err(KvError::Status(Status::UnknownCommand)),
    };
    match result {
        Err(e) => write_error(node, s, req, out, e),
        // One atomic load when document events are off (the default).
        Ok(()) if node.audit.wants_data() => audit_document(node, s, req, op),
        Ok(()) => {}
    }
    if metered {
        if let Some(m) = &s.meter {
            m.sent(out.buf.len().saturating_sub(written) as u64);
        }
    }
}

/// Whether a command is counted against its user's KV limits: data commands; not the session's own (HELLO, SASL,
/// SELECT_BUCKET), nor the cluster-map and collection-id look-ups an SDK makes on its own every few seconds, which
/// would otherwise spend a small budget without the application asking for anything.
fn counts_against_limits(op: Opcode, flags: settee_mcbp::OpcodeFlags) -> bool {
    flags.needs_bucket
        && !matches!(
            op,
            Opcode::GetClusterConfig | Opcode::GetCollectionsManifest | Opcode::GetCollectionId | Opcode::Noop
        )
}

/// The bytes a request took on the wire.
fn request_bytes(req: &Request<'_>) -> u64 {
    (24 + req.framing.len() + req.extras.len() + req.key.len() + req.value.len()) as u64
}

/// Writes the document event (kv_engine's 20488-20491) of a request that succeeded, if it names a document.
#[cold]
fn audit_document(node: &Node, s: &Session, req: &Request<'_>, op: Opcode) {
    use crate::audit::events::*;
    let id = match op {
        Opcode::Get | Opcode::GetReplica | Opcode::Gat | Opcode::SubdocMultiLookup => DOCUMENT_READ,
        Opcode::SubdocGet | Opcode::SubdocExists | Opcode::SubdocGetCount => DOCUMENT_READ,
        Opcode::GetLocked => DOCUMENT_LOCKED,
        Opcode::Delete => DOCUMENT_DELETE,
        op if op.flags().mutation || op == Opcode::Touch || op.is_single_path_subdoc() => DOCUMENT_MODIFY,
        Opcode::SubdocMultiMutation => DOCUMENT_MODIFY,
        _ => return,
    };
    if !node.audit.wants(id) {
        return;
    }
    let Some(bucket) = &s.bucket else { return };
    let (collection, key) = if s.collections() {
        match settee_mcbp::decode_leb128(req.key) {
            Some((cid, used)) => (cid, &req.key[used..]),
            None => return,
        }
    } else {
        (0, req.key)
    };
    node.audit.log_document(id, s.identity(), s.addrs(), bucket.name(), collection, key);
}

/// Re-reads the connection's user when the user store changed since the connection last looked (one atomic load
/// per request otherwise): roles may have changed, so what the connection may do with its bucket is recomputed;
/// a deleted user's connection is closed, as kv_engine disconnects the connections of a removed user. False when
/// the connection must close (nothing is answered).
fn check_user_still_exists(node: &Node, s: &mut Session) -> bool {
    let Some(user) = s.user.as_deref() else { return true };
    let generation = node.users.generation();
    if generation == s.users_generation {
        return true;
    }
    let Some(current) = node.users.get(user) else {
        tracing::info!(peer = %s.peer, user, "closing kv connection: its user was deleted");
        s.close = true;
        return false;
    };
    if let Some(b) = s.bucket.clone() {
        s.set_access(&current, &b.name());
    }
    if let Some(m) = &mut s.meter {
        m.refresh(&current);
    }
    s.users_generation = generation;
    true
}

/// Writes an error reply. NOT_MY_VBUCKET carries the bucket config so the client can re-route; unknown
/// collections and scopes carry the manifest uid.
fn write_error(node: &Node, s: &Session, req: &Request<'_>, out: &mut Out, e: KvError) {
    let status = match &e {
        KvError::Status(st) => *st,
        KvError::Engine(err) => err.status(),
    };
    match (&e, &s.bucket) {
        (KvError::Engine(EngineError::NeedFetch), Some(b)) => {
            // No reply yet: the connection fetches the item and runs the request again.
            let mut key = Vec::with_capacity(req.key.len() + 1);
            if !s.collections() {
                settee_mcbp::encode_leb128(0, &mut key);
            }
            key.extend_from_slice(req.key);
            out.fetch = Some(Fetch { bucket: b.clone(), vb: settee_types::VbId(req.vbucket), key });
        }
        (KvError::Engine(EngineError::NotMyVbucket), Some(b)) => {
            // A config that no longer lists this node (failed over, or rebalanced out while still running) is
            // left out: the Go SDK applies an NMVB's config on the connection that received it, and closing that
            // very connection there deadlocks it (gocbcore 10.8.1, found by tests/jepsen). Couchbase has no such
            // reply: a node out of the bucket no longer holds it. The client learns the config from the others.
            let config = node.bucket_config(b);
            if crate::cluster_config::lists_this_node(&config) {
                let body = serde_json::to_vec(&config).unwrap_or_default();
                reply::json(out, req, status, &body);
            } else {
                reply::status(out, req, status);
            }
        }
        (
            KvError::Engine(
                EngineError::UnknownCollection { manifest_uid } | EngineError::UnknownScope { manifest_uid },
            ),
            _,
        ) => {
            let body = format!(r#"{{"manifest_uid":"{manifest_uid:x}"}}"#);
            reply::json(out, req, status, body.as_bytes());
        }
        (KvError::Engine(EngineError::Invalid(why)), _) => {
            // kv_engine's error context, which the SDKs put in the exception they raise.
            let body = serde_json::json!({ "error": { "context": why } });
            reply::json(out, req, status, body.to_string().as_bytes());
        }
        _ => reply::status(out, req, status),
    }
}
