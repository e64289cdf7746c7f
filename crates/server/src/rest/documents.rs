//! Couchbase's REST document endpoint, which its console's document editor uses:
//!
//! - `GET /pools/default/buckets/<b>/scopes/<s>/collections/<c>/docs/<id>` (and `/pools/default/buckets/<b>/docs/<id>`
//!   for the default collection): `{"meta": {"id", "rev", "expiration", "flags", "type"}, "json": <value>,
//!   "xattrs": {}}`, or `"base64"` in place of `"json"` for a body that is not JSON; 404 with no body when missing;
//! - `POST` with a form body `value=<JSON>&flags=<n>&expiry=<s>` stores the document (an upsert, durability none)
//!   and answers `[]`;
//! - `DELETE` removes it and answers `[]` (404 when missing).
//!
//! Documents are read and written through the query service's datastore (`query::datastore`): the engine's
//! normal read and write path for the vBuckets this node holds and the typed peer calls for the others, so the
//! endpoint works on any node of a cluster. Privileges are the KV port's: reading needs the bucket's read access,
//! writing and deleting its write access.
//!
//! Deviations (docs/compat.md): the value must be JSON (a JSON document is what the console edits); it is stored
//! re-encoded by the query value model, so insignificant whitespace goes and object fields come back in the
//! model's order; `rev`'s sequence number part is always 0 (the datastore does not report a document's revision
//! seqno); `xattrs` is always empty.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use base64::Engine as _;
use serde_json::{json, Value as Json_};
use settee_query::datastore::{Datastore, Document, Durability, KeyspaceName, Mutation, MutationKind};
use settee_query::value::Value;
use settee_query::{DmlReason, QueryError};
use settee_types::limits::KEY_BYTES_MAX;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::query::datastore::{NodeDatastore, JSON_COMMON_FLAGS};

/// `GET .../docs/<id>` on the default collection.
pub(crate) async fn get_default(
    state: State<RestState>,
    caller: Caller,
    Path((bucket, id)): Path<(String, String)>,
) -> Result<Json<Json_>, RestError> {
    get(state, caller, Path((bucket, "_default".into(), "_default".into(), id))).await
}

/// `POST .../docs/<id>` on the default collection.
pub(crate) async fn post_default(
    state: State<RestState>,
    caller: Caller,
    Path((bucket, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Json_>, RestError> {
    post(state, caller, Path((bucket, "_default".into(), "_default".into(), id)), headers, body).await
}

/// `DELETE .../docs/<id>` on the default collection.
pub(crate) async fn delete_default(
    state: State<RestState>,
    caller: Caller,
    Path((bucket, id)): Path<(String, String)>,
) -> Result<Json<Json_>, RestError> {
    delete(state, caller, Path((bucket, "_default".into(), "_default".into(), id))).await
}

/// `GET .../scopes/<s>/collections/<c>/docs/<id>`.
pub(crate) async fn get(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope, collection, id)): Path<(String, String, String, String)>,
) -> Result<Json<Json_>, RestError> {
    let allowed = caller.user.collection_access(&bucket, &scope, &collection).read;
    caller.require(allowed, || format!("cluster.collection[{bucket}:{scope}:{collection}].data.docs!read"))?;
    let name = KeyspaceName::new(&bucket, &scope, &collection);
    let key: Arc<str> = checked_key(&id)?.into();
    let found = blocking(&state, &caller, move |ds| {
        let keyspace = ds.keyspace(&name)?;
        Ok(keyspace.fetch(std::slice::from_ref(&key))?.pop().flatten())
    })
    .await?;
    match found {
        Some(doc) => Ok(Json(render(&doc))),
        None => Err(RestError::Json(StatusCode::NOT_FOUND, Json_::Null)),
    }
}

/// `POST .../scopes/<s>/collections/<c>/docs/<id>`: stores the form's `value`.
pub(crate) async fn post(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope, collection, id)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Json_>, RestError> {
    let allowed = caller.user.collection_access(&bucket, &scope, &collection).write;
    caller.require(allowed, || format!("cluster.collection[{bucket}:{scope}:{collection}].data.docs!upsert"))?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if content_type.is_some_and(|t| !t.starts_with("application/x-www-form-urlencoded")) {
        return Err(bad_request("Must use 'application/x-www-form-urlencoded'"));
    }
    let form = Form::parse(&body);
    let value = Value::from_json(form.get("value").unwrap_or_default().as_bytes())
        .map_err(|e| bad_request(&format!("the value is not a JSON document: {e}")))?;
    let flags = match form.get("flags") {
        None => JSON_COMMON_FLAGS,
        Some(f) => f
            .parse::<u32>()
            .ok()
            .filter(|f| *f > 0)
            .ok_or_else(|| RestError::text(StatusCode::BAD_REQUEST, "'flags' must be a valid positive integer"))?,
    };
    let expiration = match form.get("expiry") {
        None => 0,
        Some(e) => absolute_expiry(e, state.node.clock.now_secs())?,
    };
    let mutation = Mutation {
        kind: MutationKind::Upsert,
        key: checked_key(&id)?.into(),
        value,
        expiration,
        preserve_expiry: false,
        flags: Some(flags),
        durability: Durability::None,
    };
    let name = KeyspaceName::new(&bucket, &scope, &collection);
    blocking(&state, &caller, move |ds| ds.keyspace(&name)?.mutate(&mutation).map(drop)).await?;
    tracing::info!(%bucket, %scope, %collection, user = %caller.user.id, "document stored through REST");
    Ok(Json(json!([])))
}

/// `DELETE .../scopes/<s>/collections/<c>/docs/<id>`.
pub(crate) async fn delete(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope, collection, id)): Path<(String, String, String, String)>,
) -> Result<Json<Json_>, RestError> {
    let allowed = caller.user.collection_access(&bucket, &scope, &collection).write;
    caller.require(allowed, || format!("cluster.collection[{bucket}:{scope}:{collection}].data.docs!delete"))?;
    let mutation = Mutation {
        kind: MutationKind::Delete { cas: 0 },
        key: checked_key(&id)?.into(),
        value: Value::Null,
        expiration: 0,
        preserve_expiry: false,
        flags: None,
        durability: Durability::None,
    };
    let name = KeyspaceName::new(&bucket, &scope, &collection);
    blocking(&state, &caller, move |ds| ds.keyspace(&name)?.mutate(&mutation).map(drop)).await?;
    tracing::info!(%bucket, %scope, %collection, user = %caller.user.id, "document deleted through REST");
    Ok(Json(json!([])))
}

fn checked_key(id: &str) -> Result<&str, RestError> {
    if id.is_empty() || id.len() > KEY_BYTES_MAX {
        return Err(bad_request(&format!("a document id is 1 to {KEY_BYTES_MAX} bytes")));
    }
    Ok(id)
}

/// The stored expiry (absolute seconds, 0 for none) for the form's `expiry` at `now`.
fn absolute_expiry(text: &str, now: u32) -> Result<u32, RestError> {
    let secs: u32 = text.parse().ok().filter(|s| *s <= i32::MAX as u32).ok_or_else(|| {
        RestError::text(StatusCode::BAD_REQUEST, "'expiry' must be a valid integer between 0 and 2147483647")
    })?;
    // memcached's rule, as the KV port applies it: up to 30 days is relative to now, larger is absolute.
    Ok(settee_engine::absolute_expiry(secs, now))
}

fn bad_request(reason: &str) -> RestError {
    RestError::Json(StatusCode::BAD_REQUEST, json!({"error": "bad_request", "reason": reason}))
}

/// Runs `work` with a datastore for the caller on the blocking pool (the datastore's calls block).
async fn blocking<T: Send + 'static>(
    state: &RestState,
    caller: &Caller,
    work: impl FnOnce(&NodeDatastore) -> Result<T, QueryError> + Send + 'static,
) -> Result<T, RestError> {
    let ds = NodeDatastore {
        node: state.node.clone(),
        registry: state.node.query.indexes.clone(),
        user: Some(caller.user.clone()),
        runtime: tokio::runtime::Handle::current(),
    };
    match tokio::task::spawn_blocking(move || work(&ds)).await {
        Ok(r) => r.map_err(rest_error),
        Err(e) => Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, format!("the document call failed: {e}"))),
    }
}

fn rest_error(e: QueryError) -> RestError {
    match e {
        QueryError::KeyspaceNotFound(_) | QueryError::ScopeNotFound(_) => RestError::NotFound,
        QueryError::Dml { reason: DmlReason::KeyNotFound, .. } => RestError::Json(StatusCode::NOT_FOUND, Json_::Null),
        e => {
            let status = StatusCode::SERVICE_UNAVAILABLE;
            RestError::Json(status, json!({"error": "retry_needed", "reason": e.to_string()}))
        }
    }
}

/// ns_server's shape of a document: its metadata, then the body as JSON or base64.
fn render(doc: &Document) -> Json_ {
    let m = &doc.meta;
    let rev = format!("0-{:016x}{:08x}{:08x}", m.cas, m.expiration, m.flags);
    let (kind, body) = match &doc.value {
        Value::Binary(bytes) => ("base64", Json_::String(base64::engine::general_purpose::STANDARD.encode(bytes))),
        v => ("json", crate::query::http::to_json(v)),
    };
    json!({
        "meta": {"id": doc.key.as_ref(), "rev": rev, "expiration": m.expiration, "flags": m.flags, "type": kind},
        kind: body,
        "xattrs": {},
    })
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use crate::rest::testing::TestApp;

    const DOC: &str = "/pools/default/buckets/default/scopes/_default/collections/_default/docs/";

    #[tokio::test]
    async fn a_document_posted_reads_back_and_deletes() {
        // Proves the round trip the console's editor makes: POST a form value, GET it back with its metadata
        // (JSON flags, no expiry), DELETE it, and GET answers 404 afterwards.
        let app = TestApp::new();
        let posted = app
            .call("POST", &format!("{DOC}k1"), Some(crate::rest::testing::ADMIN), Some("value=%7B%22a%22%3A1%7D"))
            .await;
        assert_eq!((posted.status, posted.json.clone()), (StatusCode::OK, json!([])));
        let got = app.get_ok(&format!("{DOC}k1")).await;
        assert_eq!(got["json"], json!({"a": 1}));
        assert_eq!((got["meta"]["id"].as_str(), got["meta"]["flags"].as_u64()), (Some("k1"), Some(0x0200_0006)));
        assert_eq!(got["meta"]["type"], "json");
        let same = app.get_ok("/pools/default/buckets/default/docs/k1").await;
        assert_eq!(same["json"], json!({"a": 1}), "the default-collection form names the same document");
        let deleted = app.call("DELETE", &format!("{DOC}k1"), Some(crate::rest::testing::ADMIN), None).await;
        assert_eq!(deleted.status, StatusCode::OK);
        let gone = app.call("GET", &format!("{DOC}k1"), Some(crate::rest::testing::ADMIN), None).await;
        assert_eq!(gone.status, StatusCode::NOT_FOUND);
        let again = app.call("DELETE", &format!("{DOC}k1"), Some(crate::rest::testing::ADMIN), None).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn a_value_that_is_not_json_is_refused_with_a_reason() {
        // Proves bad input gets a 400 naming the problem and stores nothing.
        let app = TestApp::new();
        let r = app.call("POST", &format!("{DOC}k2"), Some(crate::rest::testing::ADMIN), Some("value=%7Bnope")).await;
        assert_eq!((r.status, r.json["error"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")));
        let r = app.call("POST", &format!("{DOC}k2"), Some(crate::rest::testing::ADMIN), Some("value=1&flags=x")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let gone = app.call("GET", &format!("{DOC}k2"), Some(crate::rest::testing::ADMIN), None).await;
        assert_eq!(gone.status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn documents_need_the_kv_read_and_write_privileges() {
        // Proves the KV port's rules: a data reader reads but cannot write, a user without access to the bucket
        // can do neither, and an unknown collection is a 404.
        let app = TestApp::new();
        app.add_user("reader", "password", "data_reader[default]");
        app.add_user("other", "password", "data_reader[elsewhere]");
        let admin = Some(crate::rest::testing::ADMIN);
        assert_eq!(app.call("POST", &format!("{DOC}k3"), admin, Some("value=2")).await.status, StatusCode::OK);
        let reader = Some(("reader", "password"));
        assert_eq!(app.call("GET", &format!("{DOC}k3"), reader, None).await.status, StatusCode::OK);
        assert_eq!(app.call("POST", &format!("{DOC}k3"), reader, Some("value=3")).await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.call("DELETE", &format!("{DOC}k3"), reader, None).await.status, StatusCode::FORBIDDEN);
        let other = Some(("other", "password"));
        assert_eq!(app.call("GET", &format!("{DOC}k3"), other, None).await.status, StatusCode::FORBIDDEN);
        let missing = "/pools/default/buckets/default/scopes/_default/collections/nope/docs/k3";
        assert_eq!(app.call("GET", missing, admin, None).await.status, StatusCode::NOT_FOUND);
    }
}
