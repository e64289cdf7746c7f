//! `/settings/security`, `/settings/clientCertAuth` and `/settings/passwordPolicy`: the cluster's security settings (`auth::SecuritySettings`),
//! replicated and applied by every node without a restart. Reading and changing them needs
//! `cluster.admin.security!read` / `!write`: the full administrator or a security administrator.

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
use crate::auth::{ClientCertAuth, PasswordPolicy, SecuritySettings};

/// `GET /settings/security`.
pub(crate) async fn get_settings(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(current(&state).to_json()))
}

/// `POST /settings/security` with any of `tlsMinVersion`, `scramSha1Enabled`, `scramSha256Enabled`,
/// `scramSha512Enabled`, `allowPlainAuthWithoutTls` (settee's) and `clusterEncryptionLevel` (only `control`).
pub(crate) async fn set_settings(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".to_owned())?;
    let fields = Form::parse(&body).into_pairs();
    let next = current(&state).edited(&fields).map_err(RestError::fields)?;
    let fields = crate::audit_fields![("settings", next.to_json())];
    save(&state, next).await?;
    caller.audit(&state, events::SECURITY_SETTINGS, fields);
    Ok(StatusCode::OK)
}

/// `GET /settings/clientCertAuth`: `{"state": ..., "prefixes": [...]}`.
pub(crate) async fn get_client_cert_auth(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!read".to_owned())?;
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
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".to_owned())?;
    let json: Value =
        serde_json::from_slice(&body).map_err(|_| RestError::Json(StatusCode::BAD_REQUEST, "Invalid JSON".into()))?;
    let auth = ClientCertAuth::from_request(&json).map_err(|errors| {
        let errors = errors.into_iter().map(Value::String).collect();
        RestError::Json(StatusCode::BAD_REQUEST, Value::Array(errors))
    })?;
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
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".to_owned())?;
    let policy = PasswordPolicy::from_form(&Form::parse(&body).into_pairs()).map_err(RestError::fields)?;
    let fields = crate::audit_fields![("policy", serde_json::to_value(&policy).unwrap_or(Value::Null))];
    save(&state, SecuritySettings { password_policy: policy, ..(*current(&state)).clone() }).await?;
    caller.audit(&state, events::PASSWORD_POLICY, fields);
    Ok(StatusCode::OK)
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
