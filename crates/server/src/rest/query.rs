//! The query port. `GET /admin/ping` answers 200 so the SDKs' readiness checks pass; `/query/service` answers
//! every statement with a query-service error (HTTP 500, code 1000), shaped as PROTOCOL.md §7.2 describes, so the
//! SDKs raise a clean error instead of a parsing failure. The query service itself is not implemented yet.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::auth;
use super::RestState;

/// The query service's generic error code; the SDKs map it to an internal-server failure.
const NOT_IMPLEMENTED_CODE: u32 = 1000;
/// "Insufficient credentials": both SDKs map it to an authentication failure.
const AUTH_FAILURE_CODE: u32 = 13014;

pub(crate) fn router(state: RestState) -> Router {
    Router::new()
        .route("/admin/ping", get(ping))
        .route("/query/service", get(service).post(service))
        .fallback(|| async { super::error::RestError::NotFound })
        .layer(middleware::from_fn(super::log_failures))
        .with_state(state)
}

/// `GET /admin/ping`: the query service's liveness probe, unauthenticated as in Couchbase.
async fn ping() -> Json<Value> {
    Json(json!({}))
}

/// `POST /query/service` (and GET): authenticates, then reports that queries are not implemented.
async fn service(State(state): State<RestState>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    let context_id = client_context_id(&body);
    let authenticated = match auth::basic_credentials(&headers) {
        Some((id, password)) => auth::authenticate(&state, &id, &password).await.is_ok(),
        None => false,
    };
    if !authenticated {
        let msg = "User does not have credentials to run queries. Authentication failure.";
        return (StatusCode::UNAUTHORIZED, Json(error_body(context_id, AUTH_FAILURE_CODE, msg)));
    }
    let body = error_body(context_id, NOT_IMPLEMENTED_CODE, "the query service is not implemented yet");
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body))
}

/// The `client_context_id` of a JSON request body, echoed back as the query service does.
fn client_context_id(body: &[u8]) -> Option<String> {
    let request: Value = serde_json::from_slice(body).ok()?;
    request.get("client_context_id")?.as_str().map(str::to_owned)
}

/// A fatal query answer with one error; `requestID` and `clientContextID` come first, as streaming parsers expect.
fn error_body(context_id: Option<String>, code: u32, msg: &str) -> Value {
    let mut body = json!({"requestID": request_id()});
    if let Some(id) = context_id {
        body["clientContextID"] = json!(id);
    }
    body["errors"] = json!([{"code": code, "msg": msg}]);
    body["status"] = json!("fatal");
    body["metrics"] = json!({
        "elapsedTime": "0s",
        "executionTime": "0s",
        "resultCount": 0,
        "resultSize": 0,
        "errorCount": 1,
    });
    body
}

/// A random version-4 UUID, formatted 8-4-4-4-12.
fn request_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    #[tokio::test]
    async fn ping_answers_200_without_credentials() {
        // Proves the readiness probe of the C++ and Go SDKs passes.
        let app = TestApp::new().query();
        let reply = app.call("GET", "/admin/ping", None, None).await;
        assert_eq!((reply.status, reply.json), (StatusCode::OK, json!({})));
    }

    #[tokio::test]
    async fn queries_get_a_fatal_error_the_sdks_can_parse() {
        // Proves the 500 body: requestID, echoed clientContextID, errors[{code,msg}], status, complete metrics.
        let app = TestApp::new().query();
        let reply = app
            .call(
                "POST",
                "/query/service",
                Some(ADMIN),
                Some(r#"{"statement":"SELECT 1","client_context_id":"ctx-1"}"#),
            )
            .await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        let b = reply.json;
        assert_eq!(b["requestID"].as_str().unwrap().len(), 36);
        assert_eq!(b["clientContextID"], "ctx-1");
        assert_eq!(b["errors"][0]["code"], 1000);
        assert!(b["errors"][0]["msg"].is_string());
        assert_eq!(b["status"], "fatal");
        for field in ["elapsedTime", "executionTime", "resultCount", "resultSize"] {
            assert!(!b["metrics"][field].is_null(), "{field}");
        }
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "requestID");
    }

    #[tokio::test]
    async fn queries_with_bad_credentials_get_the_auth_failure_code() {
        // Proves 401 with code 13014, which both SDKs turn into an authentication error.
        let app = TestApp::new().query();
        let reply = app.call("POST", "/query/service", Some(("Administrator", "wrong")), Some("{}")).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.json["errors"][0]["code"], 13014);
    }
}
