//! The node's TLS certificates over REST, as ns_server serves them: the CA clients trust
//! (`/pools/default/certificate`, `/pools/default/trustedCAs`), `loadTrustedCAs`, which adds the CAs an operator put
//! in `<data-dir>/inbox/CA/`, and `reloadCertificate`, which installs the certificate put in `<data-dir>/inbox/`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::RestState;
use crate::audit::events;
use settee_cluster::peer::ClusterCaReply;

/// `GET /pools/default/certificate`: the cluster CA, PEM.
pub(crate) async fn certificate(State(state): State<RestState>, _caller: Caller) -> Response {
    let pem = state.node.tls.ca_pem();
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], pem).into_response()
}

/// `GET /pools/default/trustedCAs`: every CA the node trusts, one object each.
pub(crate) async fn trusted_cas(State(state): State<RestState>, _caller: Caller) -> Json<Value> {
    let cas = state.node.tls.trusted_cas();
    let list: Vec<Value> = cas
        .into_iter()
        .enumerate()
        .map(|(id, (pem, generated))| json!({ "id": id, "type": if generated { "generated" } else { "uploaded" }, "pem": pem }))
        .collect();
    Json(Value::Array(list))
}

/// `POST /node/controller/loadTrustedCAs`: adds the certificates in `<data-dir>/inbox/CA/` to the trusted CAs;
/// answers those newly added. 400 with the reason when the directory is missing, empty or holds a bad file.
pub(crate) async fn load_trusted_cas(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".into())?;
    let tls = state.node.tls.clone();
    match tokio::task::spawn_blocking(move || tls.load_trusted_cas()).await {
        Ok(Ok(added)) => {
            caller.audit(&state, events::UPLOAD_CLUSTER_CA, crate::audit_fields![("added", added.len())]);
            Ok(Json(Value::Array(added.into_iter().map(|pem| json!({ "pem": pem })).collect())))
        }
        Ok(Err(e)) => Err(RestError::text(StatusCode::BAD_REQUEST, &e.to_string())),
        Err(e) => Err(RestError::text(StatusCode::INTERNAL_SERVER_ERROR, &format!("loading trusted CAs failed: {e}"))),
    }
}

/// `GET /settee/tls/ca`, settee-only: the cluster's CA with its key, for a node joining the cluster
/// (`settee_cluster::peer::ClusterCaRequest`). Administrator only.
pub(crate) async fn cluster_ca(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<ClusterCaReply>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.security!write".into())?;
    Ok(Json(ClusterCaReply { ca: state.node.tls.cluster_ca() }))
}

/// `POST /node/controller/reloadCertificate`: installs `<data-dir>/inbox/chain.pem` and `pkey.pem`; the next TLS
/// handshakes present it. 400 with the reason when the files are missing, do not match, or do not chain to the
/// trusted CA; the current certificate stays then.
pub(crate) async fn reload_certificate(State(state): State<RestState>, caller: Caller) -> Result<Response, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security!write".into())?;
    let tls = state.node.tls.clone();
    match tokio::task::spawn_blocking(move || tls.reload_from_inbox()).await {
        Ok(Ok(())) => {
            caller.audit(&state, events::RELOAD_NODE_CERTIFICATE, serde_json::Map::new());
            Ok(StatusCode::OK.into_response())
        }
        Ok(Err(e)) => Err(RestError::text(StatusCode::BAD_REQUEST, &e.to_string())),
        Err(e) => Err(RestError::text(StatusCode::INTERNAL_SERVER_ERROR, &format!("certificate reload failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::{TestApp, ADMIN};

    #[tokio::test]
    async fn certificate_is_the_generated_ca_pem_for_any_authenticated_user() {
        // Proves a node with no supplied certificate serves the CA it generated, as PEM, to an authenticated
        // caller, and lists it in trustedCAs as "generated"; an anonymous caller gets 401.
        let app = TestApp::new();
        app.add_user("reader", "reader-pw", "data_reader[default]");
        let reply = app.call("GET", "/pools/default/certificate", Some(("reader", "reader-pw")), None).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(reply.text.starts_with("-----BEGIN CERTIFICATE-----"), "{}", reply.text);
        assert_eq!(reply.text, app.state.node.tls.ca_pem());
        let anonymous = app.call("GET", "/pools/default/certificate", None, None).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
        let cas = app.get_ok("/pools/default/trustedCAs").await;
        assert_eq!(cas[0]["type"], "generated");
        assert_eq!(cas[0]["pem"], app.state.node.tls.ca_pem());
    }

    #[tokio::test]
    async fn reload_and_load_trusted_cas_refuse_missing_files_and_non_admins() {
        // Proves reloadCertificate and loadTrustedCAs need the security-write privilege (403 otherwise) and answer
        // 400 naming the missing file or directory when the inbox is empty, leaving the current certificate in place.
        let app = TestApp::new();
        app.add_user("reader", "reader-pw", "data_reader[default]");
        let before = app.state.node.tls.current_chain();
        let denied = app.call("POST", "/node/controller/reloadCertificate", Some(("reader", "reader-pw")), None).await;
        assert_eq!(denied.status, StatusCode::FORBIDDEN);
        let missing = app.call("POST", "/node/controller/reloadCertificate", Some(ADMIN), None).await;
        assert_eq!(missing.status, StatusCode::BAD_REQUEST);
        assert!(missing.text.contains("chain.pem"), "{}", missing.text);
        assert_eq!(app.state.node.tls.current_chain(), before);
        let no_inbox = app.call("POST", "/node/controller/loadTrustedCAs", Some(ADMIN), None).await;
        assert_eq!(no_inbox.status, StatusCode::BAD_REQUEST);
        assert!(no_inbox.text.contains("CA"), "{}", no_inbox.text);
        let denied = app.call("POST", "/node/controller/loadTrustedCAs", Some(("reader", "reader-pw")), None).await;
        assert_eq!(denied.status, StatusCode::FORBIDDEN);
    }
}
