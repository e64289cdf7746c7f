//! `POST /controller/resetAdminPassword` (what `couchbase-cli reset-admin-password` calls) and the node-to-node
//! secret a joining node asks for.
//!
//! As ns_server: the caller logs in as `@localtoken` with the token in `<data-dir>/localtoken` (`auth::local_token`),
//! from 127.0.0.1 or ::1 only; `password=X` sets the administrator's password, `?generate=1` a random one; the
//! answer is `{"password": ...}`. The new password reaches every node through the cluster metadata
//! (`Node::propose_admin_password`) and the old one is refused from then on. Nodes keep calling each other with the
//! cluster's node-to-node secret, which the reset does not touch. Any other caller is refused: the token is the
//! only way in (401 without it or with a wrong one, 403 for a real user, as ns_server's `local` permission).

use std::net::IpAddr;

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use rand::Rng;
use serde_json::{json, Value};

use super::auth::{authenticate, basic_credentials, Caller};
use super::conn_info::ConnAddrs;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::{events, Addrs, Identity};
use crate::auth::LOCAL_TOKEN_USER;

/// Length of a generated password (ns_server: the password policy's minimum, at least 8).
const GENERATED_CHARS_MIN: usize = 16;
/// Largest form accepted (a password and little else).
const FORM_BYTES_MAX: usize = 64 << 10;
/// Attempts at a generated password the policy accepts before giving up (ns_server tries 10 times).
const GENERATE_ATTEMPTS_MAX: usize = 10;

#[derive(serde::Deserialize)]
pub(crate) struct ResetQuery {
    generate: Option<String>,
}

/// `POST /controller/resetAdminPassword`.
pub(crate) async fn reset_admin_password(
    State(state): State<RestState>,
    Query(query): Query<ResetQuery>,
    request: Request,
) -> Result<Json<Value>, RestError> {
    let (parts, body) = request.into_parts();
    let addrs = parts.extensions.get::<ConnectInfo<ConnAddrs>>().map(|c| c.0 .0).unwrap_or_default();
    check_local_token(&state, &parts.headers, addrs).await?;
    if !addrs.remote.is_some_and(|a| is_localhost(a.ip())) {
        return Err(RestError::text(StatusCode::BAD_REQUEST, "API is accessible from localhost only"));
    }
    if !state.node.has_peer_secret() {
        // Its nodes call each other with the administrator's password: changing it would cut them off.
        let message = "The administrator password cannot be reset on a cluster formed by a settee older than the \
                       node-to-node secret: its nodes authenticate each other with the administrator's password";
        return Err(RestError::global(StatusCode::BAD_REQUEST, message));
    }
    let password = if query.generate.as_deref() == Some("1") {
        generate_password(&state)?
    } else {
        let body = axum::body::to_bytes(body, FORM_BYTES_MAX)
            .await
            .map_err(|e| RestError::global(StatusCode::BAD_REQUEST, format!("cannot read the request: {e}")))?;
        let form = Form::parse(&body);
        let password =
            form.get("password").ok_or_else(|| RestError::field("password", "Password should be supplied"))?;
        if let Some(message) = state.node.security().password_policy.violation(password) {
            return Err(RestError::field("password", message));
        }
        password.to_owned()
    };
    if password.contains('\0') {
        return Err(RestError::field("password", "The password must not contain a NUL character"));
    }
    if let Err(e) = state.node.propose_admin_password(&password).await {
        return Err(RestError::global(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("resetting the password failed: {e}"),
        ));
    }
    let admin = state.node.config.username.clone();
    tracing::info!(user = %admin, "the administrator's password was reset with the local token");
    let token_user = Identity { domain: "builtin", user: LOCAL_TOKEN_USER.to_owned() };
    let changed = crate::audit_fields![("identity", json!({"domain": "builtin", "user": admin}))];
    state.node.audit.log(events::PASSWORD_CHANGE, Some(token_user.clone()), addrs, changed);
    state.node.audit.log(events::ADMIN_PASSWORD_RESET, Some(token_user), addrs, serde_json::Map::new());
    Ok(Json(json!({ "password": password })))
}

/// Admits only `@localtoken` with this node's token: 401 without credentials or with a wrong token (audited as an
/// authentication failure), 403 for any real user, whose credentials are checked first so that a wrong password
/// still reads 401.
async fn check_local_token(state: &RestState, headers: &HeaderMap, addrs: Addrs) -> Result<(), RestError> {
    let Some((id, password)) = basic_credentials(headers) else { return Err(RestError::Unauthorized) };
    if id != LOCAL_TOKEN_USER {
        authenticate(state, &id, &password).await?;
        return Err(RestError::Forbidden("local".to_owned()));
    }
    if state.node.local_token.get().is_some_and(|t| t.matches(&password)) {
        return Ok(());
    }
    tracing::info!(remote = ?addrs.remote, "@localtoken login refused: wrong token");
    let fields = crate::audit_fields![("reason", "wrong local token")];
    let who = Identity { domain: "builtin", user: LOCAL_TOKEN_USER.to_owned() };
    state.node.audit.log(events::REST_AUTH_FAILURE, Some(who), addrs, fields);
    Err(RestError::Unauthorized)
}

/// ns_server's `misc:is_localhost`: 127.0.0.1 and ::1 only (not the rest of 127.0.0.0/8), and an IPv4-mapped
/// 127.0.0.1 as a dual-stack socket reports it.
fn is_localhost(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST),
    }
}

/// A random password of letters and digits that the cluster's password policy accepts.
fn generate_password(state: &RestState) -> Result<String, RestError> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let policy = state.node.security().password_policy.clone();
    let length = GENERATED_CHARS_MIN.max(usize::try_from(policy.min_length).unwrap_or(0));
    let mut rng = rand::rngs::OsRng;
    for _ in 0..GENERATE_ATTEMPTS_MAX {
        let password: String = (0..length).map(|_| char::from(LETTERS[rng.gen_range(0..LETTERS.len())])).collect();
        if policy.violation(&password).is_none() {
            return Ok(password);
        }
    }
    // Only a policy that demands special characters refuses letters and digits; add one of each class then.
    let mut password: String = (0..length).map(|_| char::from(LETTERS[rng.gen_range(0..LETTERS.len())])).collect();
    password.push_str("aA1#");
    match policy.violation(&password) {
        None => Ok(password),
        Some(message) => Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, message)),
    }
}

/// `GET /settee/node/peerSecret` (`settee_cluster::peer::PeerSecretRequest`), settee-only: the cluster's
/// node-to-node secret, for a node joining the cluster. Administrators only.
pub(crate) async fn peer_secret(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<settee_cluster::peer::PeerSecretReply>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.security!write".into())?;
    Ok(Json(settee_cluster::peer::PeerSecretReply { secret: state.node.peer_secret() }))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::http::StatusCode;

    use super::super::testing::{TestApp, ADMIN};
    use crate::auth::LocalToken;

    const RESET: &str = "/controller/resetAdminPassword";
    const SECRET: &str = "the-node-to-node-secret";

    fn loopback() -> Option<SocketAddr> {
        Some("127.0.0.1:40000".parse().expect("address"))
    }

    /// A node with a local token (returned) and a node-to-node secret, as `service` and the cluster driver give it.
    fn app_with_token() -> (TestApp, String) {
        let app = TestApp::new();
        let dir = app.state.node.config.data_dir.clone();
        std::fs::create_dir_all(&dir).expect("data dir");
        app.state.node.local_token.set(LocalToken::create(&dir).expect("token")).expect("first token");
        app.state.node.set_peer_secret(Some(SECRET));
        let text = std::fs::read_to_string(dir.join("localtoken")).expect("token file");
        (app, text.trim().to_owned())
    }

    #[tokio::test]
    async fn reset_with_the_local_token_replaces_the_password_and_refuses_the_old() {
        // Proves the reset answers the new password, that the old one is refused and the new one accepted at once,
        // and that the node-to-node secret still authenticates the administrator afterwards.
        let (app, token) = app_with_token();
        let reply =
            app.call_from(loopback(), "POST", RESET, Some(("@localtoken", &token)), Some("password=n3w-pass")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.json, serde_json::json!({"password": "n3w-pass"}));
        assert_eq!(app.call("GET", "/pools/default", Some(ADMIN), None).await.status, StatusCode::UNAUTHORIZED);
        let new = Some(("Administrator", "n3w-pass"));
        assert_eq!(app.call("GET", "/pools/default", new, None).await.status, StatusCode::OK);
        let peer = Some(("Administrator", SECRET));
        assert_eq!(app.call("GET", "/pools/default", peer, None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn generate_answers_a_random_password_that_logs_in() {
        // Proves `?generate=1` needs no form, answers a password of at least 16 letters and digits, and that it works.
        let (app, token) = app_with_token();
        let reply = app
            .call_from(loopback(), "POST", &format!("{RESET}?generate=1"), Some(("@localtoken", &token)), None)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        let password = reply.json["password"].as_str().expect("a password").to_owned();
        assert!(password.len() >= 16 && password.chars().all(|c| c.is_ascii_alphanumeric()), "{password}");
        let login = Some(("Administrator", password.as_str()));
        assert_eq!(app.call("GET", "/pools/default", login, None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn only_the_token_from_localhost_is_let_in() {
        // Proves a wrong token and no credentials get 401, the administrator's own credentials 403 (the token is
        // the only way in), the right token from 127.0.0.2 or another host 400 "localhost only" (ns_server's
        // is_localhost: 127.0.0.1 and ::1), a missing password 400 on `password`, and that none of these changed it.
        let (app, token) = app_with_token();
        let form = Some("password=other-pass");
        let wrong = app.call_from(loopback(), "POST", RESET, Some(("@localtoken", "0123")), form).await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.call_from(loopback(), "POST", RESET, None, form).await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(app.call_from(loopback(), "POST", RESET, Some(ADMIN), form).await.status, StatusCode::FORBIDDEN);
        for remote in ["127.0.0.2:40000", "10.1.2.3:40000"] {
            let remote = Some(remote.parse().expect("address"));
            let far = app.call_from(remote, "POST", RESET, Some(("@localtoken", &token)), form).await;
            assert_eq!(far.status, StatusCode::BAD_REQUEST, "{remote:?}");
            assert_eq!(far.json, serde_json::json!("API is accessible from localhost only"));
        }
        let v6 = Some("[::1]:40000".parse().expect("address"));
        let empty = app.call_from(v6, "POST", RESET, Some(("@localtoken", &token)), Some("")).await;
        assert_eq!(empty.status, StatusCode::BAD_REQUEST);
        assert_eq!(empty.json["errors"]["password"], "Password should be supplied");
        let short = app.call_from(v6, "POST", RESET, Some(("@localtoken", &token)), Some("password=abc")).await;
        assert_eq!(short.status, StatusCode::BAD_REQUEST, "the password policy applies");
        assert_eq!(app.call("GET", "/pools/default", Some(ADMIN), None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_node_without_a_node_to_node_secret_refuses_the_reset() {
        // Proves a node whose cluster predates the secret (its peers use the administrator's password) refuses the
        // reset instead of cutting its nodes off from each other.
        let (app, token) = app_with_token();
        app.state.node.set_peer_secret(None);
        let reply =
            app.call_from(loopback(), "POST", RESET, Some(("@localtoken", &token)), Some("password=n3w-pass")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(app.call("GET", "/pools/default", Some(ADMIN), None).await.status, StatusCode::OK);
    }
}
