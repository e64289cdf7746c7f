//! `/settings/audit` and `/settings/audit/descriptors`: Couchbase's audit configuration, cluster-wide (the settings
//! go through the replicated metadata and every node applies them without a restart). Reading and changing them
//! needs `cluster.admin.security!read` / `!write`: the full administrator or a security administrator.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::{events, AuditSettings};

/// `GET /settings/audit`.
pub(crate) async fn get_settings(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!read".to_owned())?;
    let audit = &state.node.audit;
    let settings = audit.settings();
    Ok(Json(settings.to_json(&audit.log_dir_for(&settings))))
}

/// `POST /settings/audit` with any of `auditdEnabled`, `logPath`, `rotateInterval`, `rotateSize`, `disabled`
/// (event ids) and `disabledUsers` (`name/local` entries); fields not named keep their values.
pub(crate) async fn set_settings(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".to_owned())?;
    let form = Form::parse(&body);
    let current = match state.node.cluster() {
        Some(cluster) => AuditSettings::from_metadata(&cluster.metadata().audit),
        None => state.node.audit.settings(),
    };
    let form_field = |k: &str| form.get(k).map(str::to_owned);
    // Checking logPath touches the disk: off the async workers.
    let checked = tokio::task::spawn_blocking({
        let current = current.clone();
        let pairs: Vec<(String, Option<String>)> =
            ["auditdEnabled", "logPath", "rotateInterval", "rotateSize", "disabled", "disabledUsers"]
                .iter()
                .map(|k| (k.to_string(), form_field(k)))
                .collect();
        move || current.edited(|k| pairs.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.clone()))
    })
    .await
    .map_err(|e| RestError::global(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let next = checked.map_err(RestError::fields)?;
    state.node.propose_audit_settings(&next).await.map_err(|e| {
        RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the audit settings failed: {e}"))
    })?;
    if current.enabled || next.enabled {
        // Written even when this change turns audit off: the writer still writes what was queued.
        let audit = &state.node.audit;
        let fields = next.event_fields(&audit.log_dir_for(&next));
        audit.log_anyway(events::MODIFY_AUDIT_SETTINGS, Some(caller.identity()), caller.addrs, fields);
    }
    tracing::info!(enabled = next.enabled, "audit settings saved");
    Ok(StatusCode::OK)
}

/// `GET /settings/audit/descriptors`: the events `disabled` may name.
pub(crate) async fn descriptors(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!read".to_owned())?;
    let list: Vec<Value> = events::EVENTS
        .iter()
        .filter(|d| d.filterable)
        .map(|d| json!({"id": d.id, "name": d.name, "module": d.module, "description": d.description}))
        .collect();
    Ok(Json(Value::Array(list)))
}
