//! Changing buckets: create (`POST /pools/default/buckets`), edit (`POST .../buckets/<b>`), delete and flush.
//!
//! Fields are validated all at once and refused as ns_server refuses them: 400 with `{"errors":{field: message}}`
//! (both SDKs read every value as a string; "Bucket with given name already exists" maps to BucketExists).
//! `conflictResolutionType` (`seqno` or `lww`) is taken at creation only. Fields settee accepts without acting on
//! them: compressionMode, storageBackend, replicaIndex, numVBuckets (always 1024) and the history-retention
//! settings.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use settee_engine::{BucketConfig, BucketKind, ConflictMode, EvictionPolicy};
use settee_types::DurabilityLevel;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::events;
use crate::cluster::ClusterOpError;
use crate::node::{BucketError, BUCKET_RAM_MB_MIN};

const MIB: u64 = 1024 * 1024;
/// Couchbase's default replica count for a new bucket.
const DEFAULT_REPLICAS: u8 = 1;
/// Most replicas a bucket may have.
const REPLICAS_MAX: u8 = 3;

/// The settings a create or edit form names; `None` means "not sent".
#[derive(Debug, Default)]
struct SettingsForm {
    ram_quota_mb: Option<u64>,
    replicas: Option<u8>,
    eviction: Option<EvictionPolicy>,
    max_ttl: Option<u32>,
    flush_enabled: Option<bool>,
    durability: Option<Option<DurabilityLevel>>,
    /// Only at creation (an edit that sends it is refused, as by ns_server).
    conflict_resolution: Option<ConflictMode>,
}

/// `POST /pools/default/buckets`: 202 with an empty body, as ns_server (gocb checks for exactly 202).
pub(crate) async fn create(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_create_buckets(), || "cluster.buckets!create".to_owned())?;
    let form = Form::parse(&body);
    let mut errors = Map::new();
    let name = form.get("name").unwrap_or_default().to_owned();
    if name.is_empty() {
        errors.insert("name".into(), json!("Bucket name needs to be specified"));
    }
    let kind = match form.get("bucketType") {
        None | Some("couchbase" | "membase") => BucketKind::Couchbase,
        Some("ephemeral") => BucketKind::Ephemeral,
        Some("memcached") => {
            errors.insert("bucketType".into(), json!("memcached buckets are not supported"));
            BucketKind::Couchbase
        }
        Some(_) => {
            errors.insert("bucketType".into(), json!("invalid bucket type"));
            BucketKind::Couchbase
        }
    };
    let mut settings = parse_settings(&form, kind, &mut errors);
    settings.conflict_resolution = parse_conflict_resolution(&form, &mut errors);
    if settings.ram_quota_mb.is_none() && !errors.contains_key("ramQuota") {
        errors.insert("ramQuota".into(), json!("RAM quota must be specified"));
    }
    if !errors.is_empty() {
        return Err(validation_failed(&state, errors, settings.ram_quota_mb));
    }
    let audited = crate::audit_fields![("bucket_name", name), ("type", bucket_type_name(kind))];
    let config = BucketConfig {
        name,
        uuid: String::new(),
        kind,
        ram_quota_bytes: settings.ram_quota_mb.unwrap_or(BUCKET_RAM_MB_MIN).saturating_mul(MIB),
        replicas: settings.replicas.unwrap_or(DEFAULT_REPLICAS),
        eviction: settings.eviction.unwrap_or(EvictionPolicy::default_for(kind)),
        max_ttl: settings.max_ttl.unwrap_or(0),
        flush_enabled: settings.flush_enabled.unwrap_or(false),
        durability_min_level: settings.durability.flatten(),
        conflict_resolution: settings.conflict_resolution.unwrap_or_default(),
    };
    match state.node.propose_create_bucket(config).await {
        Ok(()) => {
            caller.audit(&state, events::CREATE_BUCKET, audited);
            Ok(StatusCode::ACCEPTED)
        }
        Err(ClusterOpError::Bucket(e)) => {
            let key = if e == BucketError::Exists { "name" } else { "_" };
            errors.insert(key.into(), json!(e.to_string()));
            Err(validation_failed(&state, errors, settings.ram_quota_mb))
        }
        Err(e) => Err(cluster_error(e)),
    }
}

/// `POST /pools/default/buckets/<b>`: applies the fields sent; 200 with an empty body.
pub(crate) async fn edit(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_manage_bucket(&bucket), || format!("cluster.bucket[{bucket}].settings!write"))?;
    let handle = state.node.bucket(&bucket).ok_or(RestError::NotFound)?;
    let kind = handle.config().kind;
    let form = Form::parse(&body);
    let mut errors = Map::new();
    let same_kind = match form.get("bucketType") {
        None => true,
        Some("couchbase" | "membase") => kind == BucketKind::Couchbase,
        Some(other) => other == "ephemeral" && kind == BucketKind::Ephemeral,
    };
    if !same_kind {
        errors.insert("bucketType".into(), json!("Cannot change bucket type."));
    }
    let settings = parse_settings(&form, kind, &mut errors);
    if form.get("conflictResolutionType").is_some() {
        errors.insert("conflictResolutionType".into(), json!("Conflict resolution type not allowed in update bucket"));
    }
    if !errors.is_empty() {
        return Err(validation_failed(&state, errors, settings.ram_quota_mb));
    }
    let edited = state.node.propose_update_bucket(&handle, |c| {
        if let Some(mb) = settings.ram_quota_mb {
            c.ram_quota_bytes = mb.saturating_mul(MIB);
        }
        c.replicas = settings.replicas.unwrap_or(c.replicas);
        c.eviction = settings.eviction.unwrap_or(c.eviction);
        c.max_ttl = settings.max_ttl.unwrap_or(c.max_ttl);
        c.flush_enabled = settings.flush_enabled.unwrap_or(c.flush_enabled);
        c.durability_min_level = settings.durability.unwrap_or(c.durability_min_level);
    });
    edited.await.map_err(cluster_error)?;
    tracing::info!(%bucket, "bucket settings changed");
    let fields = crate::audit_fields![("bucket_name", bucket), ("type", bucket_type_name(kind))];
    caller.audit(&state, events::MODIFY_BUCKET, fields);
    Ok(StatusCode::OK)
}

/// The bucket type as ns_server's audit events name it.
fn bucket_type_name(kind: BucketKind) -> &'static str {
    match kind {
        BucketKind::Couchbase => "membase",
        BucketKind::Ephemeral => "ephemeral",
    }
}

/// A cluster change that failed for another reason than the request itself: ns_server's global error.
pub(crate) fn cluster_error(e: ClusterOpError) -> RestError {
    let status = match e {
        ClusterOpError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    };
    RestError::global(status, e.to_string())
}

/// `DELETE /pools/default/buckets/<b>`.
pub(crate) async fn delete(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_manage_bucket(&bucket), || format!("cluster.bucket[{bucket}]!delete"))?;
    match state.node.propose_delete_bucket(&bucket).await {
        Ok(()) => {
            caller.audit(&state, events::DELETE_BUCKET, crate::audit_fields![("bucket_name", bucket)]);
            Ok(StatusCode::OK)
        }
        Err(ClusterOpError::Bucket(BucketError::NotFound)) => Err(RestError::NotFound),
        Err(e) => Err(cluster_error(e)),
    }
}

/// `POST /pools/default/buckets/<b>/controller/doFlush`. A bucket without flush enabled gets ns_server's
/// top-level `{"_": "Flush is disabled for the bucket"}`, which both SDKs map to BucketNotFlushable.
pub(crate) async fn flush(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_manage_bucket(&bucket), || format!("cluster.bucket[{bucket}]!flush"))?;
    let handle = state.node.bucket(&bucket).ok_or(RestError::NotFound)?;
    if !handle.config().flush_enabled {
        return Err(RestError::Json(StatusCode::BAD_REQUEST, json!({"_": "Flush is disabled for the bucket"})));
    }
    flush_here(handle).await?;
    flush_other_nodes(&state, &bucket).await?;
    tracing::info!(%bucket, "bucket flushed");
    caller.audit(&state, events::FLUSH_BUCKET, crate::audit_fields![("bucket_name", bucket)]);
    Ok(StatusCode::OK)
}

/// How long another node may take to flush its part of a bucket.
const NODE_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Flushes this node's part of `handle` (`Bucket::flush`) on the blocking pool: it walks every vBucket under its
/// lock.
async fn flush_here(handle: std::sync::Arc<crate::node::BucketHandle>) -> Result<(), RestError> {
    tokio::task::spawn_blocking(move || handle.flush())
        .await
        .map_err(|e| RestError::global(StatusCode::INTERNAL_SERVER_ERROR, format!("flush failed: {e}")))
}

/// Asks every other active member to flush its part of `bucket` (each flushes its own actives; a node's flush
/// alone left the documents whose actives live elsewhere).
async fn flush_other_nodes(state: &RestState, bucket: &str) -> Result<(), RestError> {
    use settee_cluster::{peer::FlushRequest, Membership};
    let Some(cluster) = state.node.cluster() else { return Ok(()) };
    let meta = cluster.metadata();
    let links = &state.node.peer_links;
    let request = FlushRequest { bucket: bucket.to_owned() };
    let (user, password) = state.node.peer_credentials();
    let credentials = Some((user.as_str(), password.as_str()));
    // All at once: the slowest node bounds the flush, not the sum of them.
    let asked = meta.nodes.values().filter(|n| n.id != cluster.me && n.membership == Membership::Active).map(|n| {
        let (addr, request) = (n.mgmt_addr(), &request);
        async move {
            let done = crate::cluster::peers::call(&addr, links, credentials, request, NODE_FLUSH_TIMEOUT).await;
            done.map_err(|e| format!("flush failed on {addr}: {e}"))
        }
    });
    let failed: Vec<String> = futures_util::future::join_all(asked).await.into_iter().filter_map(Result::err).collect();
    if !failed.is_empty() {
        return Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, failed.join("; ")));
    }
    Ok(())
}

/// `POST /settee/node/flush` (a JSON `FlushRequest`, administrators): the node-to-node step of a bucket flush.
pub(crate) async fn node_flush(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<axum::Json<settee_cluster::peer::FlushReply>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    let request: settee_cluster::peer::FlushRequest = settee_cluster::peer::decode_request(&body)
        .map_err(|e| RestError::global(StatusCode::BAD_REQUEST, format!("Not a flush request: {e}")))?;
    let handle = state.node.bucket(&request.bucket).ok_or(RestError::NotFound)?;
    flush_here(handle).await?;
    tracing::info!(bucket = %request.bucket, "this node's part of the bucket flushed");
    Ok(axum::Json(settee_cluster::peer::FlushReply {}))
}

/// `POST .../controller/compactBucket`: starts a compaction (tombstone purge and space reclaim) and answers at
/// once, as Couchbase does; progress shows in the log and in `basicStats.diskUsed`.
pub(crate) async fn compact(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_manage_bucket(&bucket), || format!("cluster.bucket[{bucket}]!compact"))?;
    let handle = state.node.bucket(&bucket).ok_or(RestError::NotFound)?;
    let node = state.node.clone();
    tokio::spawn(async move {
        if let Err(e) = node.compact_bucket(&handle).await {
            tracing::error!(%bucket, error = %e, "compaction failed");
        }
    });
    Ok(StatusCode::OK)
}

/// Parses every settings field `form` carries, recording a message per invalid field in `errors`.
/// `conflictResolutionType` of a new bucket: `seqno` (the default) or `lww`, both in every edition; `custom`
/// (Couchbase's developer preview) is refused.
fn parse_conflict_resolution(form: &Form, errors: &mut Map<String, Value>) -> Option<ConflictMode> {
    let name = form.get("conflictResolutionType")?;
    match ConflictMode::from_name(name) {
        Some(mode) => Some(mode),
        None if name == "custom" => {
            let why = "Conflict resolution type 'custom' is not supported by settee; use 'seqno' or 'lww'";
            errors.insert("conflictResolutionType".into(), json!(why));
            None
        }
        None => {
            let why = "Conflict resolution type must be 'seqno' or 'lww' or 'custom'";
            errors.insert("conflictResolutionType".into(), json!(why));
            None
        }
    }
}

fn parse_settings(form: &Form, kind: BucketKind, errors: &mut Map<String, Value>) -> SettingsForm {
    let mut out = SettingsForm::default();
    let mut fail = |field: &str, message: &str| {
        errors.insert(field.to_owned(), json!(message));
    };
    if let Some(v) = form.get_any(&["ramQuota", "ramQuotaMB"]) {
        match v.parse::<u64>() {
            Ok(mb) if mb >= BUCKET_RAM_MB_MIN => out.ram_quota_mb = Some(mb),
            Ok(_) => fail("ramQuota", &format!("RAM quota cannot be less than {BUCKET_RAM_MB_MIN} MiB")),
            Err(_) => fail("ramQuota", "The RAM Quota must be specified and must be a positive integer."),
        }
    }
    if let Some(v) = form.get("replicaNumber") {
        match v.parse::<u8>() {
            Ok(n) if n <= REPLICAS_MAX => out.replicas = Some(n),
            Ok(_) => fail("replicaNumber", "Replica number larger than 3 is not supported."),
            Err(_) => fail("replicaNumber", "The replica number must be specified and must be a non-negative integer."),
        }
    }
    if let Some(v) = form.get("evictionPolicy") {
        match (kind, EvictionPolicy::parse(v)) {
            (BucketKind::Couchbase, Some(p @ (EvictionPolicy::ValueOnly | EvictionPolicy::FullEviction))) => {
                out.eviction = Some(p)
            }
            (BucketKind::Ephemeral, Some(p @ (EvictionPolicy::NoEviction | EvictionPolicy::NruEviction))) => {
                out.eviction = Some(p)
            }
            (BucketKind::Couchbase, _) => fail(
                "evictionPolicy",
                "Eviction policy must be either 'valueOnly' or 'fullEviction' for couchbase buckets",
            ),
            (BucketKind::Ephemeral, _) => fail(
                "evictionPolicy",
                "Eviction policy must be either 'noEviction' or 'nruEviction' for ephemeral buckets",
            ),
        }
    }
    if let Some(v) = form.get("maxTTL") {
        match v.parse::<u32>() {
            Ok(ttl) if ttl <= i32::MAX as u32 => out.max_ttl = Some(ttl),
            _ => fail("maxTTL", "Max TTL must be an integer between 0 and 2147483647"),
        }
    }
    if let Some(v) = form.get("flushEnabled") {
        match v {
            "1" | "true" => out.flush_enabled = Some(true),
            "0" | "false" => out.flush_enabled = Some(false),
            _ => fail("flushEnabled", "flushEnabled can only be 1 or 0"),
        }
    }
    if let Some(v) = form.get("durabilityMinLevel") {
        match (kind, parse_durability(v)) {
            (BucketKind::Ephemeral, Some(Some(level))) if level.needs_persistence() => fail(
                "durabilityMinLevel",
                "Durability minimum level must be either 'none' or 'majority' for ephemeral buckets",
            ),
            (_, Some(level)) => out.durability = Some(level),
            (_, None) => fail(
                "durabilityMinLevel",
                "Durability minimum level must be one of none, majority, majorityAndPersistActive, persistToMajority",
            ),
        }
    }
    for (field, allowed) in [
        ("compressionMode", &["off", "passive", "active"][..]),
        ("storageBackend", &["couchstore", "magma"][..]),
        ("replicaIndex", &["0", "1"][..]),
    ] {
        if let Some(v) = form.get(field) {
            if !allowed.contains(&v) {
                fail(field, &format!("{field} must be one of {}", allowed.join(", ")));
            }
        }
    }
    out
}

/// `none` is `Some(None)`; an unknown name is `None`.
fn parse_durability(name: &str) -> Option<Option<DurabilityLevel>> {
    Some(match name {
        "none" => None,
        "majority" => Some(DurabilityLevel::Majority),
        "majorityAndPersistActive" => Some(DurabilityLevel::MajorityAndPersistActive),
        "persistToMajority" => Some(DurabilityLevel::PersistToMajority),
        _ => return None,
    })
}

/// The REST name of a minimum durability level.
pub(crate) fn durability_name(level: Option<DurabilityLevel>) -> &'static str {
    match level {
        None => "none",
        Some(DurabilityLevel::Majority) => "majority",
        Some(DurabilityLevel::MajorityAndPersistActive) => "majorityAndPersistActive",
        Some(DurabilityLevel::PersistToMajority) => "persistToMajority",
    }
}

/// ns_server's validation answer: the errors plus a RAM summary of the quota the request asked for.
fn validation_failed(state: &RestState, errors: Map<String, Value>, ram_quota_mb: Option<u64>) -> RestError {
    let other: u64 = state.node.buckets().iter().map(|b| b.config().ram_quota_bytes).sum();
    let this = ram_quota_mb.unwrap_or(0).saturating_mul(MIB);
    let body = json!({
        "errors": errors,
        "summaries": {
            "ramSummary": {"total": other.saturating_add(this), "otherBuckets": other, "nodesCount": 1,
                           "perNodeMegs": ram_quota_mb.unwrap_or(0), "thisAlloc": this, "thisUsed": 0, "free": 0},
            "hddSummary": {"total": 0, "otherData": 0, "otherBuckets": 0, "thisUsed": 0, "free": 0},
        },
    });
    RestError::Json(StatusCode::BAD_REQUEST, body)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    #[tokio::test]
    async fn create_then_read_back_round_trips_the_settings() {
        // Proves 202 on create and that quota, replicas, eviction, maxTTL, flush and durability read back.
        let app = TestApp::new();
        let form = "name=b1&bucketType=couchbase&ramQuotaMB=128&replicaNumber=0&evictionPolicy=fullEviction\
                    &maxTTL=60&flushEnabled=1&durabilityMinLevel=majority&compressionMode=active&numVBuckets=1024";
        let reply = app.call("POST", "/pools/default/buckets", Some(ADMIN), Some(form)).await;
        assert_eq!((reply.status, reply.text.as_str()), (StatusCode::ACCEPTED, ""));
        let b = app.get_ok("/pools/default/buckets/b1").await;
        assert_eq!(b["bucketType"], "membase");
        assert_eq!(b["quota"]["rawRAM"], 128 * MIB);
        assert_eq!(b["replicaNumber"], 0);
        assert_eq!(b["evictionPolicy"], "fullEviction");
        assert_eq!(b["maxTTL"], 60);
        assert_eq!(b["controllers"]["flush"], "/pools/default/buckets/b1/controller/doFlush");
        assert_eq!(b["durabilityMinLevel"], "majority");
        assert_eq!(b["storageBackend"], "couchstore");
    }

    #[tokio::test]
    async fn create_refusals_use_ns_server_error_shapes() {
        // Proves duplicate names, memcached, bad fields and a missing quota each give 400 with string errors.
        let app = TestApp::new();
        let post = |form: &'static str| app.call("POST", "/pools/default/buckets", Some(ADMIN), Some(form));
        let dup = post("name=default&ramQuota=100").await;
        assert_eq!(dup.status, StatusCode::BAD_REQUEST);
        assert_eq!(dup.json["errors"]["name"], "Bucket with given name already exists");
        assert!(dup.json["summaries"]["ramSummary"].is_object());
        let memcached = post("name=m&ramQuota=100&bucketType=memcached").await;
        assert_eq!(memcached.json["errors"]["bucketType"], "memcached buckets are not supported");
        let bad = post("name=x&ramQuota=50&replicaNumber=9&evictionPolicy=noEviction&durabilityMinLevel=no").await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        for field in ["ramQuota", "replicaNumber", "evictionPolicy", "durabilityMinLevel"] {
            assert!(bad.json["errors"][field].is_string(), "{field}: {}", bad.text);
        }
        assert!(post("name=y").await.json["errors"]["ramQuota"].is_string());
        assert!(post("ramQuota=100").await.json["errors"]["name"].is_string());
        let persist = post("name=e&ramQuota=100&bucketType=ephemeral&durabilityMinLevel=persistToMajority").await;
        assert!(persist.json["errors"]["durabilityMinLevel"].is_string());
        assert!(app.state.node.bucket("x").is_none());
    }

    #[tokio::test]
    async fn edit_changes_settings_and_bumps_the_config_revision() {
        // Proves 200 on edit, the new values read back, rev grows, and edits of unknown buckets are 404.
        let app = TestApp::new();
        let rev = app.state.node.rev();
        let uri = "/pools/default/buckets/default";
        let reply = app
            .call("POST", uri, Some(ADMIN), Some("ramQuotaMB=300&flushEnabled=1&maxTTL=5&bucketType=ephemeral"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert!(app.state.node.rev() > rev);
        let b = app.get_ok(uri).await;
        assert_eq!((b["quota"]["rawRAM"].as_u64(), b["maxTTL"].as_u64()), (Some(300 * MIB), Some(5)));
        assert!(b["controllers"]["flush"].is_string());
        let kind = app.call("POST", uri, Some(ADMIN), Some("bucketType=couchbase")).await;
        assert_eq!(kind.status, StatusCode::BAD_REQUEST);
        let missing = app.call("POST", "/pools/default/buckets/nope", Some(ADMIN), Some("ramQuota=100")).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn flush_needs_flush_enabled_and_delete_removes_the_bucket() {
        // Proves flush's 400 body for a disabled bucket, 200 once enabled, and delete 200 then 404.
        let app = TestApp::new();
        let flush = "/pools/default/buckets/default/controller/doFlush";
        let refused = app.call("POST", flush, Some(ADMIN), None).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.json, json!({"_": "Flush is disabled for the bucket"}));
        app.call("POST", "/pools/default/buckets/default", Some(ADMIN), Some("flushEnabled=1")).await;
        assert_eq!(app.call("POST", flush, Some(ADMIN), None).await.status, StatusCode::OK);
        let uri = "/pools/default/buckets/default";
        assert_eq!(app.call("DELETE", uri, Some(ADMIN), None).await.status, StatusCode::OK);
        let again = app.call("DELETE", uri, Some(ADMIN), None).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND);
        assert!(again.text.contains("Requested resource not found."));
        assert_eq!(app.call("POST", flush, Some(ADMIN), None).await.status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn bucket_admin_manages_only_its_bucket() {
        // Proves bucket_admin[default] may edit default but not create buckets or edit others.
        let app = TestApp::new();
        app.add_user("ba", "password", "bucket_admin[default]");
        let me = Some(("ba", "password"));
        assert_eq!(
            app.call("POST", "/pools/default/buckets/default", me, Some("maxTTL=1")).await.status,
            StatusCode::OK
        );
        let create = app.call("POST", "/pools/default/buckets", me, Some("name=z&ramQuota=100")).await;
        assert_eq!(create.status, StatusCode::FORBIDDEN);
        let other = app.call("DELETE", "/pools/default/buckets/other", me, None).await;
        assert_eq!(other.status, StatusCode::FORBIDDEN);
    }
}
