//! Connection setup: HELLO, SASL, error map, bucket selection, cluster configs, NOOP.

use crate::kv::pending::Out;
use std::sync::OnceLock;
use std::time::Duration;

use settee_mcbp::{Feature, Request};
use settee_types::Status;

use crate::audit::{events, Identity};
use crate::auth::{AuthError, Mechanism, PlainMessage, ScramServer};
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

/// SASL_LIST_MECHS: the mechanisms the cluster's security settings allow on this connection's port.
pub fn sasl_list_mechs(node: &Node, s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let mechanisms = node.security().mechanisms(s.tls);
    reply::with_value(out, req, Status::Success, 0, &[], mechanisms.as_bytes());
    Ok(())
}

/// An authentication step the connection loop finishes before the next request (`finish_auth`): a PLAIN password
/// to derive off the event loop, or a failure to answer after the connection's failure delay.
pub enum AuthWork {
    Plain { user: String, credentials: Option<Box<crate::auth::Credentials>>, password: Vec<u8> },
    Failed(AuthError),
}

/// The first failed attempt on a connection waits this long before its answer; each further one twice as long as the
/// previous, up to [`AUTH_FAILURE_DELAY_MAX`]. A client that mistyped a password does not notice; one that pipelines
/// thousands of guesses gets one answer every two seconds and costs one derivation per answer.
pub const AUTH_FAILURE_DELAY_FIRST: Duration = Duration::from_millis(25);
pub const AUTH_FAILURE_DELAY_MAX: Duration = Duration::from_secs(2);

/// A connection that fails this many times is closed after answering the last one: at the capped delay it has been
/// guessing for about twenty seconds, which no client that merely mistyped a password does.
pub const AUTH_FAILURES_MAX: u32 = 10;

/// How long the `failures`-th failed attempt (counting from 1) on one connection waits before it is answered.
pub fn auth_failure_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    AUTH_FAILURE_DELAY_FIRST.saturating_mul(1 << doublings).min(AUTH_FAILURE_DELAY_MAX)
}

/// SASL_AUTH. PLAIN with a password `PlainCache` remembers (a right one) and SCRAM's first step answer at once;
/// a PLAIN password that needs a derivation, and every failure, are left in `out.auth` for `finish_auth`.
pub fn sasl_auth(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    s.scram = None;
    let attempted = std::cell::RefCell::new(String::new());
    let lookup = |user: &str| {
        user.clone_into(&mut attempted.borrow_mut());
        node.users.credentials(user)
    };
    let settings = node.security();
    let allowed = |mech: Mechanism| {
        if settings.mechanism_allowed(mech, s.tls) {
            Ok(mech)
        } else {
            tracing::info!(peer = %s.peer, mechanism = mech.name(), tls = s.tls, "SASL mechanism refused by the security settings");
            Err(AuthError::UnknownMechanism)
        }
    };
    let started = Mechanism::parse(req.key).and_then(allowed).and_then(|mech| match mech {
        Mechanism::Plain => PlainMessage::parse(req.value).map(|m| {
            let credentials = lookup(m.user);
            match &credentials {
                Some(c) if c.plain_remembered(m.password) => AuthStart::Done(m.user.to_owned()),
                // A peer node's replication connection (`auth::peer_secret`).
                Some(_) if m.user == node.config.username && node.is_peer_secret(m.password) => {
                    AuthStart::Done(m.user.to_owned())
                }
                _ => AuthStart::Derive(AuthWork::Plain {
                    user: m.user.to_owned(),
                    credentials: credentials.map(Box::new),
                    password: m.password.to_vec(),
                }),
            }
        }),
        Mechanism::Scram(hash) => ScramServer::start(hash, req.value, lookup).map(|(server, first)| {
            s.scram = Some(server);
            AuthStart::Continue(first)
        }),
    });
    s.auth_attempt = attempted.into_inner();
    s.auth_mechanism = Mechanism::parse(req.key).map_or("unknown", Mechanism::name);
    match started {
        Ok(AuthStart::Done(user)) => match authenticated(node, s, user) {
            Ok(()) => reply::status(out, req, Status::Success),
            Err(Unauthenticated::Limited(status)) => reply::status(out, req, status),
            Err(Unauthenticated::UserGone) => out.auth = Some(AuthWork::Failed(AuthError::Failed)),
        },
        Ok(AuthStart::Continue(server_first)) => {
            reply::with_value(out, req, Status::AuthContinue, 0, &[], &server_first)
        }
        Ok(AuthStart::Derive(work)) => out.auth = Some(work),
        Err(e) => out.auth = Some(AuthWork::Failed(e)),
    }
    Ok(())
}

/// What SASL_AUTH could decide on the worker thread.
enum AuthStart {
    Done(String),
    Continue(Vec<u8>),
    Derive(AuthWork),
}

pub fn sasl_step(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let Some(server) = s.scram.take() else {
        out.auth = Some(AuthWork::Failed(AuthError::Malformed("SASL_STEP without SASL_AUTH")));
        return Ok(());
    };
    match server.step(req.value) {
        Ok((user, server_final)) => match authenticated(node, s, user) {
            Ok(()) => reply::with_value(out, req, Status::Success, 0, &[], &server_final),
            Err(Unauthenticated::Limited(status)) => reply::status(out, req, status),
            Err(Unauthenticated::UserGone) => out.auth = Some(AuthWork::Failed(AuthError::Failed)),
        },
        Err(e) => out.auth = Some(AuthWork::Failed(e)),
    }
    Ok(())
}

/// Finishes what SASL_AUTH or SASL_STEP left in `out.auth`, before the connection runs its next request: derives a
/// PLAIN password on the blocking pool (the worker thread serves its other connections meanwhile), and answers a
/// failure only after the connection's failure delay (a timer, never a sleep of the thread), or at once with the
/// connection closing when the node shuts down or the connection failed [`AUTH_FAILURES_MAX`] times.
pub async fn finish_auth(
    node: &Node,
    s: &mut Session,
    work: AuthWork,
    req: &Request<'_>,
    out: &mut Out,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    let outcome = match work {
        AuthWork::Plain { user, credentials, password } => {
            let verify = move || crate::auth::verify_password(credentials.as_deref(), &password);
            match crate::auth::run_derivation(verify).await {
                Some(true) => Ok(user),
                _ => Err(AuthError::Failed),
            }
        }
        AuthWork::Failed(e) => Err(e),
    };
    let outcome = outcome.and_then(|user| match authenticated(node, s, user) {
        Ok(()) => Ok(Status::Success),
        Err(Unauthenticated::Limited(status)) => Ok(status),
        Err(Unauthenticated::UserGone) => Err(AuthError::Failed),
    });
    match outcome {
        Ok(status) => reply::status(out, req, status),
        Err(e) => {
            if node.audit.wants(events::KV_AUTH_FAILED) {
                let user = Identity { domain: "local", user: std::mem::take(&mut s.auth_attempt) };
                let fields = crate::audit_fields![("reason", e.to_string()), ("mechanism", s.auth_mechanism)];
                node.audit.log(events::KV_AUTH_FAILED, Some(user), s.addrs(), fields);
            }
            s.auth_failures = s.auth_failures.saturating_add(1);
            let delay = auth_failure_delay(s.auth_failures);
            tracing::info!(peer = %s.peer, error = %e, failures = s.auth_failures, ?delay, "SASL authentication failed");
            if *shutdown.borrow() {
                s.close = true;
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => s.close = true,
                }
            }
            reply::status(out, req, e.status());
            if s.auth_failures >= AUTH_FAILURES_MAX {
                tracing::warn!(peer = %s.peer, failures = s.auth_failures, "closing kv connection: too many failed authentication attempts");
                s.close = true;
            }
        }
    }
}

/// Why a right password did not authenticate the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unauthenticated {
    /// The user was deleted while its password was being checked.
    UserGone,
    /// The user holds as many connections to this node as its limits allow (`auth::limits`): answered with this
    /// status at once, with no failure delay, as kv_engine does.
    Limited(Status),
}

/// Marks the connection authenticated as `user`, counted among the user's connections; refused (and the connection
/// left unauthenticated) when the user was deleted while its password was being checked, or holds all the
/// connections its limits allow. The user store's generation is read before the user is looked up, so a deletion
/// after the lookup moves the generation and the connection's next request finds it (`dispatch`).
pub(crate) fn authenticated(node: &Node, s: &mut Session, user: String) -> Result<(), Unauthenticated> {
    let generation = node.users.generation();
    let Some(account) = node.users.get(&user) else { return Err(Unauthenticated::UserGone) };
    // A connection that authenticates again gives up its old place first.
    s.meter = None;
    s.user = None;
    s.meter = Some(node.limits.kv_connect(&account).map_err(Unauthenticated::Limited)?);
    tracing::debug!(peer = %s.peer, %user, "authenticated");
    if node.audit.wants(events::KV_AUTH_SUCCEEDED) {
        let fields = crate::audit_fields![("mechanism", s.auth_mechanism)];
        let id = Identity { domain: "local", user: user.clone() };
        node.audit.log(events::KV_AUTH_SUCCEEDED, Some(id), s.addrs(), fields);
    }
    s.users_generation = generation;
    s.bucket = None;
    s.access = crate::auth::BucketAccess::NONE;
    s.scoped.clear();
    bind_bucket_named_as_user(node, s, &user);
    s.user = Some(user);
    Ok(())
}

/// kv_engine's rule for pre-RBAC clients (java-client 2.x, YCSB's Couchbase binding, memcached clients that log in
/// with the bucket's name and password): after authenticating as `user`, the connection is bound to the bucket of
/// the same name when it exists and the user may access it, as if it had sent SELECT_BUCKET; otherwise it stays on
/// no bucket. A later SELECT_BUCKET replaces the binding as usual.
fn bind_bucket_named_as_user(node: &Node, s: &mut Session, user: &str) {
    let Some(account) = node.users.get(user).filter(|u| u.any_access(user)) else { return };
    if let Some(bucket) = node.bucket(user) {
        tracing::debug!(peer = %s.peer, %user, "connection bound to the bucket named as its user");
        s.bucket = Some(bucket);
        s.set_access(&account, user);
    }
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
    s.users_generation = node.users.generation();
    let user = s.user.as_deref().and_then(|u| node.users.get(u));
    let bucket = node.bucket(name).filter(|_| user.as_ref().is_some_and(|u| u.any_access(name)));
    match (bucket, user) {
        (Some(b), Some(user)) => {
            s.bucket = Some(b);
            s.set_access(&user, name);
            reply::status(out, req, Status::Success);
            Ok(())
        }
        _ => Err(KvError::Status(Status::Eaccess)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_delay_doubles_from_the_first_up_to_the_cap() {
        // Proves the schedule a guessing client meets: 25 ms, then twice as long each time, never above 2 s, and no
        // overflow however many failures a connection piles up.
        assert_eq!(auth_failure_delay(1), AUTH_FAILURE_DELAY_FIRST);
        assert_eq!(auth_failure_delay(2), AUTH_FAILURE_DELAY_FIRST * 2);
        assert_eq!(auth_failure_delay(4), AUTH_FAILURE_DELAY_FIRST * 8);
        assert_eq!(auth_failure_delay(8), AUTH_FAILURE_DELAY_MAX);
        assert_eq!(auth_failure_delay(u32::MAX), AUTH_FAILURE_DELAY_MAX);
        assert!((1..40).all(|n| auth_failure_delay(n) <= auth_failure_delay(n + 1)));
    }
}
