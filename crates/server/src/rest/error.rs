//! The failures REST handlers return, each rendered exactly as ns_server renders it: the SDKs decide the error
//! type from the status code and from substrings of the body.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// ns_server's body for an unknown bucket or path; gocb looks for "resource not found".
pub(crate) const NOT_FOUND_TEXT: &str = "Requested resource not found.\r\n";
/// The Basic challenge ns_server sends with every 401.
pub(crate) const BASIC_CHALLENGE: &str = "Basic realm=\"Couchbase Server Admin / REST\"";

#[derive(Debug)]
pub(crate) enum RestError {
    /// 401 with the Basic challenge and an empty body: no or wrong credentials.
    Unauthorized,
    /// 403: the caller is authenticated but lacks `permission` (ns_server's permission name).
    Forbidden(String),
    /// 404 "Requested resource not found.": an unknown bucket or path.
    NotFound,
    /// Any status with a JSON body.
    Json(StatusCode, Value),
}

impl RestError {
    /// 400 `{"errors":{field: message}}`, ns_server's shape for one invalid form field.
    pub(crate) fn field(field: &str, message: impl Into<String>) -> RestError {
        let mut errors = Map::new();
        errors.insert(field.to_owned(), Value::String(message.into()));
        RestError::fields(errors)
    }

    /// 400 `{"errors":{...}}` for several invalid fields at once.
    pub(crate) fn fields(errors: Map<String, Value>) -> RestError {
        RestError::Json(StatusCode::BAD_REQUEST, json!({ "errors": errors }))
    }

    /// `{"errors":{"_": message}}`, ns_server's "global" error for a request that is well-formed but refused.
    pub(crate) fn global(status: StatusCode, message: impl Into<String>) -> RestError {
        RestError::Json(status, json!({ "errors": { "_": message.into() } }))
    }

    /// A status with a bare JSON string body, as ns_server answers for unknown users (`"Unknown user."`).
    pub(crate) fn text(status: StatusCode, message: &str) -> RestError {
        RestError::Json(status, Value::String(message.to_owned()))
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            RestError::Unauthorized => StatusCode::UNAUTHORIZED,
            RestError::Forbidden(_) => StatusCode::FORBIDDEN,
            RestError::NotFound => StatusCode::NOT_FOUND,
            RestError::Json(status, _) => *status,
        }
    }
}

/// Why a request failed, attached to the response for the logging middleware (`super::log_failures`).
#[derive(Clone, Debug)]
pub(crate) struct FailureReason(pub(crate) String);

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let status = self.status();
        let (mut response, reason) = match self {
            RestError::Unauthorized => {
                let mut r = (status, "").into_response();
                r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(BASIC_CHALLENGE));
                (r, "authentication failed".to_owned())
            }
            RestError::Forbidden(permission) => {
                let body = json!({
                    "message": "Forbidden. User needs one of the following permissions",
                    "permissions": [permission],
                });
                ((status, axum::Json(body)).into_response(), format!("missing permission {permission}"))
            }
            RestError::NotFound => {
                let r = (status, [(header::CONTENT_TYPE, "text/plain")], NOT_FOUND_TEXT).into_response();
                (r, "not found".to_owned())
            }
            RestError::Json(status, body) => {
                let reason = body.to_string();
                ((status, axum::Json(body)).into_response(), reason)
            }
        };
        response.extensions_mut().insert(FailureReason(reason));
        response
    }
}
