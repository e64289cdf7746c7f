//! Authentication: users, salted credentials, SASL.
//!
//! Sans-IO: the KV connection hands SASL_AUTH / SASL_STEP values in and gets reply values or an `AuthError`
//! out. The REST layer manages users through `UserStore` and checks Basic auth with `verify_password`. No password
//! is ever stored, only salted keys.
//!
//! Costs: a PLAIN or Basic check is one PBKDF2-HMAC-SHA512 derivation (milliseconds of CPU) for a wrong password
//! and for the first right one; `PlainCache` remembers right ones, keyed to the user's verifier, so a client that
//! reconnects or sends another request with the same password skips it. A derivation never runs on a KV worker
//! thread or an HTTP handler: `run_derivation` runs it on the blocking pool, a bounded number at once. SCRAM needs no
//! such care: the salted password is stored, so neither the server-first message (a real user's stored salt, or an
//! unknown user's decoy salt made with two HMACs) nor the proof check derives anything; the client does the PBKDF2.
//!
//! A connection's SASL handling, in full:
//! - SASL_LIST_MECHS: reply `SecuritySettings::mechanisms`, the mechanisms the cluster's settings allow on the
//!   connection's port.
//! - SASL_AUTH: `Mechanism::parse(key)`; PLAIN → `PlainMessage::parse`, then `verify_password` through
//!   `run_derivation` (unless `PlainCache` remembers the password); SCRAM → `ScramServer::start`, reply
//!   AUTH_CONTINUE with the server-first message and keep the `ScramServer` until SASL_STEP.
//! - SASL_STEP: `ScramServer::step`, reply SUCCESS with `v=...`.
//! - Any `AuthError`: reply `err.status()` (AUTH_ERROR) and drop the exchange; the KV connection answers each
//!   further failure later (`kv::handlers::session::auth_failure_delay`).

mod credentials;
mod derivation;
pub mod limits;
pub mod local_token;
mod mechanism;
pub mod peer_secret;
mod plain;
mod plain_cache;
mod role;
mod scram;
mod security;
mod users;

pub use credentials::{Credentials, PlainVerifier, ScramKeys, DEFAULT_ITERATIONS, SALT_BYTES};
pub use derivation::{derivations_max, run_derivation};
pub use limits::{KvMeter, Limits, QueryLimit, QueryTicket, UserLimits};
pub use local_token::{LocalToken, LOCAL_TOKEN_USER};
pub use mechanism::{Mechanism, ScramHash};
#[cfg(test)]
pub(crate) use plain::decoy_checks;
pub use plain::{authenticate_plain, verify_password, PlainMessage};
pub use role::{BucketAccess, BucketRole, ClusterRole, Role, RoleError, RoleTarget, ScopedGrant};
pub use scram::ScramServer;
pub use security::{
    CertNames, ClientCertAuth, ClientCertState, EncryptionLevel, PasswordPolicy, SecuritySettings, TlsMinVersion,
};
pub use users::{validate_id, Group, User, UserError, UserStore};

use settee_types::Status;

/// Longest SASL_AUTH or SASL_STEP value accepted; real messages are under 200 bytes.
pub const SASL_MESSAGE_BYTES_MAX: usize = 4096;

/// Why a SASL exchange ended without authenticating. All variants are AUTH_ERROR on the wire; they differ only
/// for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The message does not follow the mechanism's grammar.
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// Well-formed, but the user, password, proof, nonce or channel binding is wrong.
    #[error("authentication failed")]
    Failed,
    /// The mechanism name is not one settee offers.
    #[error("unknown SASL mechanism")]
    UnknownMechanism,
}

impl AuthError {
    /// The wire status for this error.
    pub fn status(&self) -> Status {
        match self {
            AuthError::Malformed(_) | AuthError::Failed | AuthError::UnknownMechanism => Status::AuthError,
        }
    }
}
