//! `/settings/security`, `/settings/clientCertAuth` and `/settings/passwordPolicy`: the cluster's security settings (`auth::SecuritySettings`),
//! replicated and applied by every node without a restart. Reading them needs `cluster.admin.security!read`;
//! changing them only the full administrator: these settings decide who a certificate authenticates as (an
//! administrator included) and how passwords travel, so a local security administrator, who may not make anyone an
//! administrator, may not change them either.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::events;
use crate::auth::{ClientCertAuth, ClientCertState, PasswordPolicy, SecuritySettings};

/// `GET /settings/security`.
pub(crate) async fn get_settings(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(current(&state).to_json(super::net_config::node_encryption_everywhere(&state))))
}

/// `POST /settings/security` with any of `tlsMinVersion`, `scramSha1Enabled`, `scramSha256Enabled`,
/// `scramSha512Enabled`, `allowPlainAuthWithoutTls` (settee's) and `clusterEncryptionLevel` (control, all or strict;
/// refused until every node has node encryption on, as ns_server refuses it).
pub(crate) async fn set_settings(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    let fields = Form::parse(&body).into_pairs();
    let next = current(&state).edited(&fields).map_err(RestError::fields)?;
    let level_asked = fields.iter().any(|(k, _)| k == "clusterEncryptionLevel");
    if level_asked && !super::net_config::node_encryption_everywhere(&state) {
        // ns_server's `get_cluster_encryption`: a level means nothing until every node has node encryption on.
        let message = "Can't set cluster encryption level when cluster encryption is disabled.";
        return Err(RestError::field("clusterEncryptionLevel", message));
    }
    if level_asked && next.client_cert_auth.state == ClientCertState::Mandatory {
        // ns_server's refusal for nodes that present no client certificate to each other, as settee's do.
        let message = format!(
            "Can't set cluster encryption level to '{}' when client certificate authentication state is set to \
             'mandatory'.",
            next.cluster_encryption_level.name()
        );
        return Err(RestError::field("clusterEncryptionLevel", message));
    }
    let fields = crate::audit_fields![("settings", next.to_json(true))];
    save(&state, next).await?;
    caller.audit(&state, events::SECURITY_SETTINGS, fields);
    Ok(StatusCode::OK)
}

/// `GET /settings/clientCertAuth`: `{"state": ..., "prefixes": [...]}`.
pub(crate) async fn get_client_cert_auth(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(current(&state).client_cert_auth.to_json()))
}

/// `POST /settings/clientCertAuth` with a JSON body `{"state": "disable|enable|mandatory", "prefixes": [{"path",
/// "prefix", "delimiter"}...]}`: 202 when the settings changed, 200 when they already were these, 400 with the
/// list of errors otherwise (ns_server's answers).
pub(crate) async fn set_client_cert_auth(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    let json: Value =
        serde_json::from_slice(&body).map_err(|_| RestError::Json(StatusCode::BAD_REQUEST, "Invalid JSON".into()))?;
    let auth = ClientCertAuth::from_request(&json).map_err(|errors| {
        let errors = errors.into_iter().map(Value::String).collect();
        RestError::Json(StatusCode::BAD_REQUEST, Value::Array(errors))
    })?;
    if auth.state == ClientCertState::Mandatory && super::net_config::node_encryption_everywhere(&state) {
        // Nodes present no client certificate to each other's TLS ports: `mandatory` would cut them off. ns_server
        // refuses it at `all` (before 7.9) for the same reason.
        let message = "Cannot set 'state' to 'mandatory' while node-to-node encryption is on: nodes present no \
                       client certificate to each other";
        return Err(RestError::Json(StatusCode::BAD_REQUEST, Value::Array(vec![Value::String(message.into())])));
    }
    let settings = current(&state);
    if settings.client_cert_auth == auth {
        return Ok(StatusCode::OK);
    }
    let fields = crate::audit_fields![("settings", auth.to_json())];
    save(&state, SecuritySettings { client_cert_auth: auth, ..(*settings).clone() }).await?;
    caller.audit(&state, events::CLIENT_CERT_AUTH, fields);
    Ok(StatusCode::ACCEPTED)
}

/// `GET /settings/passwordPolicy`.
pub(crate) async fn get_password_policy(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(serde_json::to_value(&current(&state).password_policy).unwrap_or(Value::Null)))
}

/// `POST /settings/passwordPolicy` with `minLength` (required) and the `enforce*` flags: applies to passwords set
/// from now on.
pub(crate) async fn set_password_policy(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    let policy = PasswordPolicy::from_form(&Form::parse(&body).into_pairs()).map_err(RestError::fields)?;
    let fields = crate::audit_fields![("policy", serde_json::to_value(&policy).unwrap_or(Value::Null))];
    save(&state, SecuritySettings { password_policy: policy, ..(*current(&state)).clone() }).await?;
    caller.audit(&state, events::PASSWORD_POLICY, fields);
    Ok(StatusCode::OK)
}

/// Refuses (403) anyone but a full administrator.
fn require_admin(caller: &Caller) -> Result<(), RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.security.admin!write".to_owned())
}

/// The cluster's settings as last committed (a change just proposed by another node may not be applied here yet).
fn current(state: &RestState) -> std::sync::Arc<SecuritySettings> {
    match state.node.cluster() {
        Some(cluster) => std::sync::Arc::new(SecuritySettings::from_metadata(&cluster.metadata().security)),
        None => state.node.security(),
    }
}

async fn save(state: &RestState, next: SecuritySettings) -> Result<(), RestError> {
    state.node.propose_security_settings(next).await.map_err(|e| {
        RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the security settings failed: {e}"))
    })?;
    tracing::info!("security settings saved");
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::TestApp;

    #[tokio::test]
    async fn only_a_full_administrator_changes_the_security_settings() {
        // Regression (review): a local security admin could write certificate rules mapping a certificate it holds
        // to the administrator, around the guard on administrative roles. Proves it may read the settings but not
        // change any of the three, and the administrator may.
        let app = TestApp::new();
        app.add_user("sec", "password", "security_admin_local");
        let sec = Some(("sec", "password"));
        let admin = Some(("Administrator", "password"));
        let rules = r#"{"state":"enable","prefixes":[{"path":"subject.cn","prefix":"","delimiter":""}]}"#;
        for path in ["/settings/security", "/settings/clientCertAuth", "/settings/passwordPolicy"] {
            assert_eq!(app.call("GET", path, sec, None).await.status, StatusCode::OK, "{path}");
        }
        assert_eq!(app.call("POST", "/settings/clientCertAuth", sec, Some(rules)).await.status, StatusCode::FORBIDDEN);
        let tls = Some("tlsMinVersion=tlsv1.3");
        assert_eq!(app.call("POST", "/settings/security", sec, tls).await.status, StatusCode::FORBIDDEN);
        let policy = Some("minLength=1");
        assert_eq!(app.call("POST", "/settings/passwordPolicy", sec, policy).await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.call("POST", "/settings/clientCertAuth", admin, Some(rules)).await.status, StatusCode::ACCEPTED);
    }
}
