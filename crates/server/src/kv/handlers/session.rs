//! Connection setup: HELLO, SASL, error map, bucket selection, cluster configs, NOOP.

use crate::kv::pending::Out;
use std::sync::OnceLock;

use settee_mcbp::{Feature, Request};
use settee_types::Status;

use crate::auth::{self, authenticate_plain, Mechanism, ScramServer};
use crate::error_map::error_map_json;
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::reply;
use crate::kv::session::{Features, Session, SUPPORTED_FEATURES};
use crate::node::{Node, COUCHBASE_VERSION};

use super::request::be_u64;

/// HELLO: agree to the requested features settee supports, echoing them in request order. Each HELLO starts over.
pub fn hello(s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    if !req.extras.is_empty() || !req.value.len().is_multiple_of(2) {
        return Err(KvError::Status(Status::Einval));
    }
    s.agent = String::from_utf8_lossy(&req.key[..req.key.len().min(256)]).into_owned();
    let mut agreed = Features::default();
    let mut echo = Vec::with_capacity(req.value.len());
    for pair in req.value.chunks_exact(2) {
        let code = u16::from_be_bytes([pair[0], pair[1]]);
        let Some(f) = Feature::from_code(code) else { continue };
        if SUPPORTED_FEATURES.contains(&f) && !agreed.has(f) {
            agreed.insert(f);
            echo.extend_from_slice(pair);
        }
    }
    s.features = agreed;
    reply::with_value(out, req, Status::Success, 0, &[], &echo);
    Ok(())
}

pub fn sasl_list_mechs(req: &Request<'_>, out: &mut Out) -> KvResult {
    reply::with_value(out, req, Status::Success, 0, &[], auth::supported_mechanisms().as_bytes());
    Ok(())
}

pub fn sasl_auth(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    s.scram = None;
    let lookup = |user: &str| node.users.credentials(user);
    let outcome = Mechanism::parse(req.key).and_then(|mech| match mech {
        Mechanism::Plain => authenticate_plain(req.value, lookup).map(|user| (Some(user), Vec::new())),
        Mechanism::Scram(hash) => ScramServer::start(hash, req.value, lookup).map(|(server, first)| {
            s.scram = Some(server);
            (None, first)
        }),
    });
    match outcome {
        Ok((Some(user), _)) => {
            authenticated(s, user);
            reply::status(out, req, Status::Success);
        }
        Ok((None, server_first)) => reply::with_value(out, req, Status::AuthContinue, 0, &[], &server_first),
        Err(e) => {
            tracing::info!(peer = %s.peer, error = %e, "SASL authentication failed");
            reply::status(out, req, e.status());
        }
    }
    Ok(())
}

pub fn sasl_step(_node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let Some(server) = s.scram.take() else {
        return Err(KvError::Status(Status::AuthError));
    };
    match server.step(req.value) {
        Ok((user, server_final)) => {
            authenticated(s, user);
            reply::with_value(out, req, Status::Success, 0, &[], &server_final);
        }
        Err(e) => {
            tracing::info!(peer = %s.peer, error = %e, "SASL authentication failed");
            reply::status(out, req, e.status());
        }
    }
    Ok(())
}

fn authenticated(s: &mut Session, user: String) {
    tracing::debug!(peer = %s.peer, %user, "authenticated");
    s.user = Some(user);
    s.bucket = None;
    s.access = crate::auth::BucketAccess::NONE;
}

pub fn get_error_map(req: &Request<'_>, out: &mut Out) -> KvResult {
    static MAP: OnceLock<String> = OnceLock::new();
    if req.value.len() != 2 || u16::from_be_bytes([req.value[0], req.value[1]]) == 0 {
        return Err(KvError::Status(Status::Einval));
    }
    reply::json(out, req, Status::Success, MAP.get_or_init(error_map_json).as_bytes());
    Ok(())
}

/// SELECT_BUCKET: a bucket the user may not touch, or that does not exist, is EACCESS (the C++ SDK reports it as
/// bucket-not-found at once).
pub fn select_bucket(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let name = std::str::from_utf8(req.key).map_err(|_| KvError::Status(Status::Einval))?;
    if name.is_empty() {
        s.bucket = None;
        reply::status(out, req, Status::Success);
        return Ok(());
    }
    let user = s.user.as_deref().unwrap_or_default();
    s.users_generation = node.users.generation();
    let access = node.users.bucket_access(user, name);
    let bucket = node.bucket(name).filter(|_| access.any());
    match bucket {
        Some(b) => {
            s.bucket = Some(b);
            s.access = access;
            reply::status(out, req, Status::Success);
            Ok(())
        }
        None => Err(KvError::Status(Status::Eaccess)),
    }
}

/// GET_CLUSTER_CONFIG: the bucket config, or the global one without a bucket. A client that already holds this
/// revision (16-byte extras: epoch, rev) gets an empty success.
pub fn get_cluster_config(node: &Node, s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    match req.extras.len() {
        0 => {}
        16 => {
            let (epoch, rev) = (be_u64(&req.extras[..8]) as i64, be_u64(&req.extras[8..]) as i64);
            if (epoch, rev) >= (1, node.rev() as i64) {
                reply::status(out, req, Status::Success);
                return Ok(());
            }
        }
        _ => return Err(KvError::Status(Status::Einval)),
    }
    let config = match &s.bucket {
        Some(b) => node.bucket_config(b),
        None => node.global_config(),
    };
    let body = serde_json::to_vec(&config).map_err(|_| KvError::Status(Status::Einternal))?;
    reply::json(out, req, Status::Success, &body);
    Ok(())
}

pub fn noop(req: &Request<'_>, out: &mut Out) -> KvResult {
    reply::status(out, req, Status::Success);
    Ok(())
}

pub fn version(req: &Request<'_>, out: &mut Out) -> KvResult {
    reply::with_value(out, req, Status::Success, 0, &[], COUCHBASE_VERSION.as_bytes());
    Ok(())
}
