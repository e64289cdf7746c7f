//! Scopes and collections: `GET/POST .../buckets/<b>/scopes`, `DELETE .../scopes/<s>`,
//! `POST .../scopes/<s>/collections`, `PATCH/DELETE .../collections/<c>` (PROTOCOL.md §11.1).
//!
//! Success is 200 `{"uid":"<hex manifest uid>"}`. Failures carry ns_server's texts in `{"errors":{"_":...}}`,
//! because the SDKs tell ScopeExists, ScopeNotFound, CollectionExists and CollectionNotFound apart by substrings
//! ("Scope with name ", " already exists", " is not found") and treat any other 404 as "bucket not found".
//! Every change bumps the node's config revision, so clients watching configs learn the new manifest uid.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use settee_engine::{Manifest, ManifestError, COLLECTIONS_MAX, SCOPES_MAX};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::events;
use crate::cluster::ClusterOpError;
use crate::node::BucketHandle;

/// `GET .../scopes`: the manifest, `_default` included, with hex uids.
pub(crate) async fn list(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_see_bucket(&bucket), || format!("cluster.collection[{bucket}:.:.].collections!read"))?;
    let handle = state.node.bucket(&bucket).ok_or(RestError::NotFound)?;
    Ok(Json(handle.manifest().to_json()))
}

/// `POST .../scopes` with form `name`.
pub(crate) async fn create_scope(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let handle = manageable(&state, &caller, &bucket)?;
    let form = Form::parse(&body);
    let name = required_name(&form)?;
    let left = SCOPES_MAX.saturating_sub(counted_elsewhere(&state, &bucket, Manifest::user_scope_count));
    let audited = (&caller, events::CREATE_SCOPE, crate::audit_fields![("scope_name", name)]);
    edit(&state, &handle, |m| m.create_scope_limited(name, left).map(drop), audited).await
}

/// `DELETE .../scopes/<s>`.
pub(crate) async fn drop_scope(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope)): Path<(String, String)>,
) -> Result<Json<Value>, RestError> {
    let handle = manageable(&state, &caller, &bucket)?;
    let audited = (&caller, events::DROP_SCOPE, crate::audit_fields![("scope_name", scope)]);
    edit(&state, &handle, |m| m.drop_scope(&scope).map(drop), audited).await
}

/// `POST .../scopes/<s>/collections` with form `name` and optional `maxTTL`, `history`.
pub(crate) async fn create_collection(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let handle = manageable(&state, &caller, &bucket)?;
    let form = Form::parse(&body);
    let name = required_name(&form)?;
    let max_ttl = parse_max_ttl(&form)?;
    let history = form.get_bool("history")?.unwrap_or(false);
    let left = COLLECTIONS_MAX.saturating_sub(counted_elsewhere(&state, &bucket, Manifest::user_collection_count));
    let fields = crate::audit_fields![("scope_name", scope), ("collection_name", name), ("max_ttl", max_ttl)];
    let audited = (&caller, events::CREATE_COLLECTION, fields);
    edit(&state, &handle, |m| m.create_collection_limited(&scope, name, max_ttl, history, left).map(drop), audited)
        .await
}

/// What `count` finds in the manifests of every bucket but `bucket`: ns_server's scope and collection limits are
/// for the whole cluster (every bucket exists on every node, so this node sees them all). Two creations in two
/// buckets at the same moment may each pass; the engine's per-bucket limit still holds.
fn counted_elsewhere(state: &RestState, bucket: &str, count: impl Fn(&Manifest) -> usize) -> usize {
    state.node.buckets().iter().filter(|b| b.name() != bucket).map(|b| count(&b.manifest())).sum()
}

/// `PATCH .../scopes/<s>/collections/<c>`: changes `maxTTL`; a field not sent keeps its value. The history flag
/// is fixed at creation (the engine cannot change it), so a PATCH asking to flip it is refused.
pub(crate) async fn update_collection(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope, collection)): Path<(String, String, String)>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let handle = manageable(&state, &caller, &bucket)?;
    let form = Form::parse(&body);
    let max_ttl = parse_max_ttl(&form)?;
    if let Some(wanted) = form.get_bool("history")? {
        let manifest = handle.manifest();
        let current = manifest.scope(&scope).and_then(|s| s.collections.iter().find(|c| c.name == collection));
        if current.is_some_and(|c| c.history != wanted) {
            return Err(RestError::global(StatusCode::BAD_REQUEST, "Cannot modify history of an existing collection"));
        }
    }
    let change = |m: &mut Manifest| {
        // Read the current maxTTL from the manifest being changed, so that a PATCH without maxTTL cannot clear it.
        let current = m.scope(&scope).and_then(|s| s.collections.iter().find(|c| c.name == collection));
        let ttl = max_ttl.or(current.and_then(|c| c.max_ttl));
        m.update_collection(&scope, &collection, ttl).map(drop)
    };
    let fields = crate::audit_fields![("scope_name", scope), ("collection_name", collection), ("max_ttl", max_ttl)];
    edit(&state, &handle, change, (&caller, events::MODIFY_COLLECTION, fields)).await
}

/// `DELETE .../scopes/<s>/collections/<c>`.
pub(crate) async fn drop_collection(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, scope, collection)): Path<(String, String, String)>,
) -> Result<Json<Value>, RestError> {
    let handle = manageable(&state, &caller, &bucket)?;
    let fields = crate::audit_fields![("scope_name", scope), ("collection_name", collection)];
    edit(
        &state,
        &handle,
        |m| m.drop_collection(&scope, &collection).map(drop),
        (&caller, events::DROP_COLLECTION, fields),
    )
    .await
}

/// The bucket, when it exists and the caller may change its collections.
fn manageable(state: &RestState, caller: &Caller, bucket: &str) -> Result<std::sync::Arc<BucketHandle>, RestError> {
    caller
        .require(caller.can_manage_bucket(bucket), || format!("cluster.collection[{bucket}:.:.].collections!write"))?;
    state.node.bucket(bucket).ok_or(RestError::NotFound)
}

/// The audit event a manifest change writes once it succeeded: who, the event id, and its fields besides the
/// bucket and the new manifest uid.
type Audited<'a> = (&'a Caller, u32, serde_json::Map<String, Value>);

/// Applies one manifest change, bumps the config revision and answers with the new uid.
async fn edit(
    state: &RestState,
    handle: &BucketHandle,
    change: impl FnOnce(&mut Manifest) -> Result<(), ManifestError>,
    audited: Audited<'_>,
) -> Result<Json<Value>, RestError> {
    let uid = match state.node.propose_manifest_change(handle, change).await {
        Ok(uid) => uid,
        Err(ClusterOpError::Manifest(e)) => return Err(manifest_error(e)),
        Err(e) => return Err(super::bucket_settings::cluster_error(e)),
    };
    tracing::info!(bucket = %handle.name(), manifest_uid = uid, "collections manifest changed");
    let (caller, id, mut fields) = audited;
    fields.insert("bucket_name".into(), json!(handle.name()));
    fields.insert("new_manifest_uid".into(), json!(format!("{uid:x}")));
    caller.audit(state, id, fields);
    Ok(Json(json!({"uid": format!("{uid:x}")})))
}

/// ns_server's status and body for each manifest refusal; the texts come from `ManifestError`'s Display.
fn manifest_error(e: ManifestError) -> RestError {
    let status = match e {
        ManifestError::ScopeNotFound(_) | ManifestError::CollectionNotFound(..) => StatusCode::NOT_FOUND,
        ManifestError::InvalidName(_) => return RestError::field("name", e.to_string()),
        ManifestError::ScopeExists(_)
        | ManifestError::CollectionExists(..)
        | ManifestError::DefaultScope
        | ManifestError::TooManyScopes
        | ManifestError::TooManyCollections => StatusCode::BAD_REQUEST,
    };
    RestError::global(status, e.to_string())
}

fn required_name(form: &Form) -> Result<&str, RestError> {
    form.get("name").filter(|n| !n.is_empty()).ok_or_else(|| RestError::field("name", "The value must be supplied"))
}

/// `maxTTL` in seconds; 0 means "the bucket's". Couchbase 7.6's -1 ("never expire, whatever the bucket says")
/// has no representation in the engine's manifest yet and is refused rather than silently changed.
fn parse_max_ttl(form: &Form) -> Result<Option<u32>, RestError> {
    let Some(v) = form.get("maxTTL") else { return Ok(None) };
    match v.parse::<i64>() {
        Ok(ttl) if (0..=i64::from(i32::MAX)).contains(&ttl) => Ok(u32::try_from(ttl).ok()),
        Ok(-1) => Err(RestError::field("maxTTL", "maxTTL -1 (no expiry) is not supported by settee yet")),
        _ => Err(RestError::field("maxTTL", "The value must be an integer between 0 and 2147483647")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    const SCOPES: &str = "/pools/default/buckets/default/scopes";

    #[tokio::test]
    async fn scope_and_collection_lifecycle_answers_hex_uids() {
        // Proves create/patch/drop each answer 200 {"uid":hex}, the uid grows, GET lists them, rev is bumped.
        let app = TestApp::new();
        let rev = app.state.node.rev();
        let created = app.call("POST", SCOPES, Some(ADMIN), Some("name=inventory")).await;
        assert_eq!(created.status, StatusCode::OK, "{}", created.text);
        assert_eq!(created.json, json!({"uid": "1"}));
        assert!(app.state.node.rev() > rev);
        let coll = format!("{SCOPES}/inventory/collections");
        let reply = app.call("POST", &coll, Some(ADMIN), Some("name=airline&maxTTL=30&history=false")).await;
        assert_eq!(reply.json, json!({"uid": "2"}));
        let patched = app.call("PATCH", &format!("{coll}/airline"), Some(ADMIN), Some("maxTTL=60")).await;
        assert_eq!(patched.json, json!({"uid": "3"}));
        let listed = app.get_ok(SCOPES).await;
        assert_eq!(listed["uid"], "3");
        let scope = listed["scopes"].as_array().unwrap().iter().find(|s| s["name"] == "inventory").unwrap().clone();
        assert_eq!(scope["collections"][0]["name"], "airline");
        assert_eq!(scope["collections"][0]["maxTTL"], 60);
        assert!(scope["collections"][0]["uid"].is_string());
        assert!(listed["scopes"].as_array().unwrap().iter().any(|s| s["name"] == "_default"));
        let history_only = app.call("PATCH", &format!("{coll}/airline"), Some(ADMIN), Some("history=false")).await;
        assert_eq!(history_only.status, StatusCode::OK);
        assert_eq!(app.get_ok(SCOPES).await["scopes"][1]["collections"][0]["maxTTL"], 60, "maxTTL kept");
        assert_eq!(app.call("DELETE", &format!("{coll}/airline"), Some(ADMIN), None).await.status, StatusCode::OK);
        assert_eq!(app.call("DELETE", &format!("{SCOPES}/inventory"), Some(ADMIN), None).await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn refusals_carry_the_texts_the_sdks_match() {
        // Proves the exists / not-found bodies and statuses the C++ and Go SDKs pattern-match.
        let app = TestApp::new();
        app.call("POST", SCOPES, Some(ADMIN), Some("name=s")).await;
        let dup = app.call("POST", SCOPES, Some(ADMIN), Some("name=s")).await;
        assert_eq!(dup.status, StatusCode::BAD_REQUEST);
        assert_eq!(dup.json["errors"]["_"], "Scope with name \"s\" already exists");
        let coll = format!("{SCOPES}/s/collections");
        app.call("POST", &coll, Some(ADMIN), Some("name=c")).await;
        let dup = app.call("POST", &coll, Some(ADMIN), Some("name=c")).await;
        assert_eq!(dup.status, StatusCode::BAD_REQUEST);
        assert!(dup.text.contains("Collection with name ") && dup.text.contains(" already exists"));
        let no_scope = app.call("POST", &format!("{SCOPES}/nope/collections"), Some(ADMIN), Some("name=c")).await;
        assert_eq!(no_scope.status, StatusCode::NOT_FOUND);
        assert_eq!(no_scope.json["errors"]["_"], "Scope with name \"nope\" is not found");
        let no_coll = app.call("DELETE", &format!("{coll}/nope"), Some(ADMIN), None).await;
        assert_eq!(no_coll.status, StatusCode::NOT_FOUND);
        assert!(no_coll.text.contains("Collection with name ") && no_coll.text.contains(" is not found"));
        let no_drop = app.call("DELETE", &format!("{SCOPES}/nope"), Some(ADMIN), None).await;
        assert_eq!(no_drop.status, StatusCode::NOT_FOUND);
        let default = app.call("DELETE", &format!("{SCOPES}/_default"), Some(ADMIN), None).await;
        assert_eq!(default.status, StatusCode::BAD_REQUEST);
        let bad_name = app.call("POST", SCOPES, Some(ADMIN), Some("name=a.b")).await;
        assert!(bad_name.json["errors"]["name"].is_string());
        let no_name = app.call("POST", SCOPES, Some(ADMIN), Some("")).await;
        assert!(no_name.json["errors"]["name"].is_string());
        let ttl = app.call("POST", &coll, Some(ADMIN), Some("name=d&maxTTL=-1")).await;
        assert_eq!(ttl.status, StatusCode::BAD_REQUEST);
        let flip = app.call("PATCH", &format!("{coll}/c"), Some(ADMIN), Some("history=true")).await;
        assert_eq!(flip.status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn scopes_and_collections_past_the_cluster_limit_get_ns_servers_refusal() {
        // Regression (issue 17): scopes had no limit (10,000 created, ~48 KiB of memory each). Proves the limits
        // count every bucket, as ns_server's do: with 600 scopes in another bucket, `default` takes 400 more, the
        // next gets 400 {"errors":{"_":"Maximum number of scopes has been reached"}}, and the same for collections.
        let app = TestApp::new();
        let node = &app.state.node;
        let mut config = node.default_bucket_config().expect("a bucket config");
        config.name = "other".into();
        let other = node.create_bucket(config).expect("second bucket");
        node.propose_manifest_change(&other, |m| {
            (0..600).try_for_each(|i| m.create_scope(&format!("o{i}")).map(drop))?;
            (0..600).try_for_each(|i| m.create_collection("o0", &format!("c{i}"), None, false).map(drop))
        })
        .await
        .unwrap();
        let default = node.bucket("default").unwrap();
        node.propose_manifest_change(&default, |m| {
            (0..399).try_for_each(|i| m.create_scope(&format!("d{i}")).map(drop))?;
            (0..399).try_for_each(|i| m.create_collection("d0", &format!("c{i}"), None, false).map(drop))
        })
        .await
        .unwrap();
        assert_eq!(app.call("POST", SCOPES, Some(ADMIN), Some("name=last")).await.status, StatusCode::OK);
        let refused = app.call("POST", SCOPES, Some(ADMIN), Some("name=too-many")).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.json, json!({"errors": {"_": "Maximum number of scopes has been reached"}}));
        let coll = format!("{SCOPES}/last/collections");
        assert_eq!(app.call("POST", &coll, Some(ADMIN), Some("name=last")).await.status, StatusCode::OK);
        let refused = app.call("POST", &coll, Some(ADMIN), Some("name=too-many")).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.json, json!({"errors": {"_": "Maximum number of collections has been reached"}}));
    }

    #[tokio::test]
    async fn unknown_bucket_is_the_plain_404_and_readers_cannot_write() {
        // Proves a missing bucket gives the generic 404 (read as BucketNotFound) and data_reader gets 403 on writes.
        let app = TestApp::new();
        let missing = app.call("GET", "/pools/default/buckets/nope/scopes", Some(ADMIN), None).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert!(!missing.text.contains("Scope with name"));
        app.add_user("reader", "password", "data_reader[default]");
        let me = Some(("reader", "password"));
        assert_eq!(app.call("GET", SCOPES, me, None).await.status, StatusCode::OK);
        assert_eq!(app.call("POST", SCOPES, me, Some("name=s")).await.status, StatusCode::FORBIDDEN);
    }
}
