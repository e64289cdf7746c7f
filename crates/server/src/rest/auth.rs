//! HTTP Basic authentication and the privilege checks REST handlers make.
//!
//! Verifying a password costs a PBKDF2 derivation (milliseconds), so it runs on the blocking pool
//! (`auth::run_derivation`, a bounded number at once for the process), unless the
//! process-wide cache of verified PLAIN passwords (`auth::PlainCache`, shared with the KV port's SASL PLAIN) already
//! holds it for the user's current credentials.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use axum::extract::ConnectInfo;

use super::conn_info::ConnAddrs;
use super::error::RestError;
use super::RestState;
use crate::audit::{events, Addrs, Identity};
use crate::auth::{run_derivation, verify_password, ClusterRole, Role, User};

/// An authenticated caller.
pub(crate) struct Caller {
    pub(crate) user: Arc<User>,
    /// True for the administrator named on the command line: Couchbase's built-in admin (domain "admin").
    pub(crate) builtin: bool,
    /// The connection's two ends, for the audit log (unknown in unit tests that call the router directly).
    pub(crate) addrs: Addrs,
}

impl FromRequestParts<RestState> for Caller {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, state: &RestState) -> Result<Caller, RestError> {
        let audit = &state.node.audit;
        match authenticate_request(state, &parts.headers, &parts.extensions).await {
            Ok(caller) => {
                if audit.wants(events::LOGIN_SUCCESS) {
                    let roles: Vec<String> = caller.user.all_roles().map(|r| r.to_string()).collect();
                    let fields = crate::audit_fields![("roles", roles)];
                    audit.log(events::LOGIN_SUCCESS, Some(caller.identity()), caller.addrs, fields);
                }
                Ok(caller)
            }
            Err(refused) => {
                if let (Some(user), true) = (refused.user, audit.wants(events::REST_AUTH_FAILURE)) {
                    let fields = crate::audit_fields![("reason", refused.reason)];
                    audit.log(
                        events::REST_AUTH_FAILURE,
                        Some(Identity { domain: "local", user }),
                        refused.addrs,
                        fields,
                    );
                }
                Err(RestError::Unauthorized)
            }
        }
    }
}

/// Why a request was not authenticated, for the audit log.
pub(crate) struct Refused {
    /// The user it claimed (None without any credentials: nothing to audit).
    pub(crate) user: Option<String>,
    pub(crate) reason: &'static str,
    pub(crate) addrs: Addrs,
}

/// Authenticates a management or query request: by its client certificate when `/settings/clientCertAuth` is
/// enabled and the connection gave one (as ns_server, the certificate wins over an Authorization header, and one
/// that maps to no user is refused), else by its Basic credentials.
pub(crate) async fn authenticate_request(
    state: &RestState,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> Result<Caller, Refused> {
    let conn = extensions.get::<ConnectInfo<ConnAddrs>>().map(|c| &c.0);
    let addrs = conn.map(|c| c.0).unwrap_or_default();
    let names = conn.and_then(|c| c.1.as_deref());
    let caller = match state.node.certificate_user(names) {
        Err(_) => {
            tracing::info!(remote = ?addrs.remote, ?names, "rest request refused: the client certificate maps to no user");
            let reason = "client certificate maps to no user";
            return Err(Refused { user: Some(String::new()), reason, addrs });
        }
        Ok(Some(user)) => Caller { builtin: user.id == state.node.config.username, user, addrs: Addrs::default() },
        Ok(None) => {
            let Some((id, password)) = basic_credentials(headers) else {
                return Err(Refused { user: None, reason: "no credentials", addrs });
            };
            authenticate(state, &id, &password).await.map_err(|_| Refused {
                user: Some(id),
                reason: "wrong user name or password",
                addrs,
            })?
        }
    };
    Ok(Caller { addrs, ..caller })
}

/// Checks `password` for user `id`. An unknown user costs the same derivation as a known one with a wrong
/// password (`auth::verify_password` checks it against a decoy), as the KV port's PLAIN does, so that response
/// times do not tell which user names exist.
pub(crate) async fn authenticate(state: &RestState, id: &str, password: &str) -> Result<Caller, RestError> {
    let user = state.node.users.get(id);
    // A peer node: the administrator's name with the cluster's node-to-node secret (`auth::peer_secret`).
    if id == state.node.config.username && state.node.is_peer_secret(password.as_bytes()) {
        if let Some(user) = user {
            return Ok(Caller { builtin: true, user, addrs: Addrs::default() });
        }
    }
    let remembered = user.as_ref().is_some_and(|u| u.credentials.plain_remembered(password.as_bytes()));
    if !remembered {
        let credentials = user.as_ref().map(|u| u.credentials.clone());
        let candidate = password.to_owned();
        let verify = run_derivation(move || verify_password(credentials.as_ref(), candidate.as_bytes()));
        if !verify.await.unwrap_or(false) {
            return Err(RestError::Unauthorized);
        }
    }
    // Only a known user's own credentials can verify: the decoy never does.
    let user = user.ok_or(RestError::Unauthorized)?;
    Ok(Caller { builtin: id == state.node.config.username, user, addrs: Addrs::default() })
}

/// The user and password of an `Authorization: Basic` header.
pub(crate) fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(BASE64.decode(encoded.trim()).ok()?).ok()?;
    let (id, password) = decoded.split_once(':')?;
    Some((id.to_owned(), password.to_owned()))
}

impl Caller {
    /// The caller as the audit log names it: the command line's administrator is ns_server's `builtin` domain.
    pub(crate) fn identity(&self) -> Identity {
        Identity { domain: if self.builtin { "builtin" } else { "local" }, user: self.user.id.clone() }
    }

    /// The caller's identity as an event field (`identity` of ns_server's user events).
    pub(crate) fn identity_json(&self) -> serde_json::Value {
        let i = self.identity();
        serde_json::json!({"domain": i.domain, "user": i.user})
    }

    /// Writes audit event `id` for this caller's request, with the event's own `fields`.
    pub(crate) fn audit(&self, state: &RestState, id: u32, fields: serde_json::Map<String, serde_json::Value>) {
        state.node.audit.log(id, Some(self.identity()), self.addrs, fields);
    }

    /// Refuses with 403 naming `permission` unless `allowed`.
    pub(crate) fn require(&self, allowed: bool, permission: impl FnOnce() -> String) -> Result<(), RestError> {
        if allowed {
            Ok(())
        } else {
            Err(RestError::Forbidden(permission()))
        }
    }

    fn has(&self, role: ClusterRole) -> bool {
        self.user.all_roles().any(|r| *r == Role::Cluster(role))
    }

    /// May list `bucket` and read its settings: any access to it, or the right to read cluster settings.
    pub(crate) fn can_see_bucket(&self, bucket: &str) -> bool {
        self.user.can_read_settings() || self.user.any_access(bucket)
    }

    /// May edit, flush or delete `bucket` and manage its scopes and collections.
    pub(crate) fn can_manage_bucket(&self, bucket: &str) -> bool {
        self.user.bucket_access(bucket).manage
    }

    /// May create buckets (`cluster.buckets!create`): admin and cluster_admin.
    pub(crate) fn can_create_buckets(&self) -> bool {
        self.user.is_admin() || self.has(ClusterRole::ClusterAdmin)
    }

    /// May create, change and delete local users (`cluster.admin.security.local!write`).
    pub(crate) fn can_write_security(&self) -> bool {
        self.user.is_admin() || self.has(ClusterRole::SecurityAdmin) || self.has(ClusterRole::SecurityAdminLocal)
    }

    /// Refuses (403, `cluster.admin.security.admin!write`) unless the caller may hand out, change or take away
    /// `roles`: only a full administrator may touch the administrative roles (admin and the security
    /// administrators), as ns_server guards them, so a security_admin_local cannot make anyone, itself included, an
    /// administrator.
    pub(crate) fn require_grantable<'r>(&self, roles: impl IntoIterator<Item = &'r Role>) -> Result<(), RestError> {
        let administrative = |r: &&Role| {
            matches!(
                r,
                Role::Cluster(
                    ClusterRole::Admin
                        | ClusterRole::SecurityAdmin
                        | ClusterRole::SecurityAdminLocal
                        | ClusterRole::SecurityAdminExternal
                )
            )
        };
        let touches_admin = roles.into_iter().any(|r| administrative(&r));
        self.require(!touches_admin || self.user.is_admin(), || "cluster.admin.security.admin!write".to_owned())
    }

    /// May scrape `/metrics` (Couchbase's `cluster.stats!read`): the administrators, ro_admin and
    /// external_stats_reader.
    pub(crate) fn can_read_stats(&self) -> bool {
        self.user.can_read_settings() || self.has(ClusterRole::ExternalStatsReader)
    }

    /// May manage XDCR: remote clusters and replications (`cluster.xdcr.remote_clusters!write`,
    /// `cluster.bucket[].xdcr!write`): admin, cluster_admin and replication_admin.
    pub(crate) fn can_manage_xdcr(&self) -> bool {
        self.user.is_admin() || self.has(ClusterRole::ClusterAdmin) || self.has(ClusterRole::ReplicationAdmin)
    }

    /// May list remote clusters and replications: those who manage them and ro_admin.
    pub(crate) fn can_read_xdcr(&self) -> bool {
        self.can_manage_xdcr() || self.user.can_read_settings()
    }

    /// May list users and roles.
    pub(crate) fn can_read_security(&self) -> bool {
        self.can_write_security() || self.user.can_read_settings()
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    #[test]
    fn basic_header_parsing_accepts_only_well_formed_basic() {
        // Proves scheme case-insensitivity, colons inside passwords, and None for other schemes or bad base64.
        let headers = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        let encoded = BASE64.encode("user:pa:ss");
        assert_eq!(basic_credentials(&headers(&format!("basic {encoded}"))), Some(("user".into(), "pa:ss".into())));
        assert_eq!(basic_credentials(&headers(&format!("Bearer {encoded}"))), None);
        assert_eq!(basic_credentials(&headers("Basic !!!")), None);
        assert_eq!(basic_credentials(&headers(&format!("Basic {}", BASE64.encode("nocolon")))), None);
        assert_eq!(basic_credentials(&HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn missing_or_wrong_credentials_get_401_with_the_basic_challenge() {
        // Proves 401 + WWW-Authenticate for no header, a wrong password and an unknown user, and 200 for the admin.
        let app = TestApp::new();
        for auth in [None, Some(("Administrator", "wrong")), Some(("nobody", "password"))] {
            let reply = app.call("GET", "/pools/default", auth, None).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
            assert_eq!(reply.headers[header::WWW_AUTHENTICATE], super::super::error::BASIC_CHALLENGE);
        }
        assert_eq!(app.call("GET", "/pools/default", Some(ADMIN), None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn unknown_user_pays_the_derivation_a_wrong_password_pays() {
        // Regression (issue 17): an existing user with a wrong password was answered ~10x slower than an unknown
        // user, so user names could be enumerated by timing. Proves an unknown user's Basic credentials are checked
        // against the decoy (one PBKDF2 derivation, counted without timing) and refused with the same 401.
        let app = TestApp::new();
        let before = crate::auth::decoy_checks();
        let reply = app.call("GET", "/pools/default", Some(("nobody-at-all", "some-password")), None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.headers[header::WWW_AUTHENTICATE], super::super::error::BASIC_CHALLENGE);
        assert!(crate::auth::decoy_checks() > before, "the unknown user was checked against the decoy");
    }

    #[tokio::test]
    async fn cached_login_is_forgotten_when_the_password_changes() {
        // Proves a changed password is refused at once although the old one was verified (and cached) before.
        let app = TestApp::new();
        app.add_user("u", "old-password", "admin");
        assert_eq!(app.call("GET", "/pools", Some(("u", "old-password")), None).await.status, StatusCode::OK);
        app.state.node.users.upsert("u", "", Some("new-password"), Role::parse_list("admin").unwrap()).unwrap();
        assert_eq!(app.call("GET", "/pools", Some(("u", "old-password")), None).await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.call("GET", "/pools", Some(("u", "new-password")), None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_user_without_the_privilege_gets_403_naming_the_permission() {
        // Proves the 403 body shape: ns_server's message and the permission list.
        let app = TestApp::new();
        app.add_user("reader", "password", "data_reader[default]");
        let reply = app.call("POST", "/pools/default/buckets", Some(("reader", "password")), Some("name=x")).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN);
        assert_eq!(reply.json["message"], "Forbidden. User needs one of the following permissions");
        assert_eq!(reply.json["permissions"][0], "cluster.buckets!create");
    }
}
