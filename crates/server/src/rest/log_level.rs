//! `GET/POST /settings/logLevel` (settee-only; Couchbase changes its components' levels through `/diag/eval`):
//! the node's log filter, in tracing's directive syntax (`info`, `warn,settee_server::kv=debug`), read and replaced
//! while the node runs, on this node only. Administrators only.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use crate::logging::{self, FilterError};

pub(crate) async fn get_log_level(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.diag!read".to_owned())?;
    let filter = logging::current_filter().ok_or_else(not_managed)?;
    Ok(Json(json!({ "filter": filter })))
}

pub(crate) async fn set_log_level(caller: Caller, body: Bytes) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.diag!write".to_owned())?;
    let form = Form::parse(&body);
    let filter = form.get("filter").filter(|f| !f.trim().is_empty()).ok_or_else(|| {
        RestError::field("filter", "The value must be a log filter such as info or warn,settee_server::kv=debug")
    })?;
    match logging::set_filter(filter) {
        Ok(()) => {
            tracing::warn!(filter, "log filter changed over REST");
            Ok(Json(json!({ "filter": filter })))
        }
        Err(e @ FilterError::Invalid(..)) => Err(RestError::field("filter", e.to_string())),
        Err(FilterError::NotManaged) => Err(not_managed()),
        Err(e @ FilterError::Reload(_)) => Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

fn not_managed() -> RestError {
    RestError::global(StatusCode::NOT_IMPLEMENTED, FilterError::NotManaged.to_string())
}
