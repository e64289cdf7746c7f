//! The cluster-wide settings that tools such as `couchbase-cli` read and write but that change nothing in how
//! settee serves data: `POST /pools/default` (`clusterName` and the service quotas), `/settings/indexes`,
//! `/settings/stats` (`setting-notification`), `/settings/retryRebalance` and `pendingRetryRebalance`; and
//! `/internalSettings`, whose `enforceLimits` turns the per-user limits (`auth::limits`) on.
//!
//! Each endpoint owns one section of the metadata's opaque `settings` object, replaced whole through Raft
//! (`MetaCommand::SetSettings`), so every node answers the same and a restart keeps it. Values are validated as
//! ns_server validates them (`{"errors": {field: message}}`, unknown keys refused); docs/compat.md says which are
//! only recorded.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Map, Value};
use settee_cluster::{ClusterMetadata, MetaCommand, ProposeError};

use super::auth::Caller;
use super::error::RestError;
use super::form::{Form, BOOL_EXPECTED};
use super::RestState;

/// The section of `POST /pools/default`.
const POOL: &str = "pool";
/// The section of `/settings/indexes`.
const INDEXES: &str = "indexes";
/// The section of `/settings/stats`.
const STATS: &str = "stats";
/// The section of `/internalSettings`.
const INTERNAL: &str = "internal";

/// ns_server's smallest data-service quota, in MiB.
const DATA_QUOTA_MB_MIN: u64 = 256;
/// The other services' smallest quotas, in MiB, by form field (ns_server's `memory_quota:min_quota`).
const QUOTA_FIELDS: [(&str, u64); 6] = [
    ("memoryQuota", DATA_QUOTA_MB_MIN),
    ("indexMemoryQuota", 256),
    ("ftsMemoryQuota", 256),
    ("cbasMemoryQuota", 1024),
    ("eventingMemoryQuota", 256),
    ("queryMemoryQuota", 0),
];
/// Longest cluster name ns_server accepts.
const CLUSTER_NAME_CHARS_MAX: usize = 256;

/// One section of the settings in `meta`, or null.
pub(crate) fn section<'m>(meta: &'m ClusterMetadata, key: &str) -> &'m Value {
    meta.settings.get(key).unwrap_or(&Value::Null)
}

/// What `POST /pools/default` stored (`clusterName`, quotas), for `/pools/default` to report.
pub(crate) fn pool_settings(state: &RestState) -> Value {
    state.node.cluster().map_or(Value::Null, |c| section(&c.metadata(), POOL).clone())
}

fn cluster_meta(state: &RestState) -> Result<std::sync::Arc<ClusterMetadata>, RestError> {
    let cluster = state
        .node
        .cluster()
        .ok_or_else(|| RestError::global(StatusCode::SERVICE_UNAVAILABLE, "This node has no cluster"))?;
    Ok(cluster.metadata())
}

/// Proposes `value` as section `key`; refusals are bugs of this file's validation, no quorum a 503.
async fn store(state: &RestState, key: &str, value: Value) -> Result<(), RestError> {
    let cluster = state
        .node
        .cluster()
        .ok_or_else(|| RestError::global(StatusCode::SERVICE_UNAVAILABLE, "This node has no cluster"))?;
    match cluster.propose(MetaCommand::SetSettings { key: key.to_owned(), value }).await {
        Ok(_) => Ok(()),
        Err(ProposeError::Rejected(e)) => Err(RestError::global(StatusCode::BAD_REQUEST, e.to_string())),
        Err(e) => Err(RestError::global(StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
    }
}

fn require_admin(caller: &Caller) -> Result<(), RestError> {
    caller.require(caller.user.is_admin(), || "cluster.settings!write".to_owned())
}

fn require_reader(caller: &Caller) -> Result<(), RestError> {
    caller.require(caller.user.can_read_settings(), || "cluster.settings!read".to_owned())
}

/// Refuses any key of `form` not in `known`, as ns_server's validators do ("Unsupported key").
fn refuse_unknown(form: &Form, known: &[&str]) -> Result<(), RestError> {
    let errors: Map<String, Value> = form
        .clone()
        .into_pairs()
        .into_iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, _)| (k, json!("Unsupported key")))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(RestError::fields(errors))
    }
}

/// The current section `key` as an object (empty when never set).
fn current(meta: &ClusterMetadata, key: &str) -> Map<String, Value> {
    section(meta, key).as_object().cloned().unwrap_or_default()
}

/// `POST /pools/default` (`memoryQuota`, `indexMemoryQuota`, `ftsMemoryQuota`, `cbasMemoryQuota`,
/// `eventingMemoryQuota`, `queryMemoryQuota` in MiB, `clusterName`): couchbase-cli's `setting-cluster` and
/// `cluster-init`. The data quota may not be under what the node's buckets already hold.
pub(crate) async fn set_pool(State(state): State<RestState>, caller: Caller, body: Bytes) -> Result<(), RestError> {
    require_admin(&caller)?;
    let form = Form::parse(&body);
    let mut known: Vec<&str> = QUOTA_FIELDS.iter().map(|(f, _)| *f).collect();
    known.push("clusterName");
    refuse_unknown(&form, &known)?;
    let meta = cluster_meta(&state)?;
    let mut pool = current(&meta, POOL);
    let mut errors = Map::new();
    let buckets_mb = state.node.buckets().iter().map(|b| b.config().ram_quota_bytes).sum::<u64>() / (1024 * 1024);
    for (field, min) in QUOTA_FIELDS {
        let Some(text) = form.get(field) else { continue };
        match text.trim().parse::<u64>() {
            Ok(mb) if mb < min => {
                errors.insert(field.to_owned(), json!(format!("The {field} must be at least {min} MB.")));
            }
            Ok(mb) if field == "memoryQuota" && mb < buckets_mb => {
                let message = format!("The data quota cannot be less than the {buckets_mb} MB the buckets hold.");
                errors.insert(field.to_owned(), json!(message));
            }
            Ok(mb) => {
                pool.insert(field.to_owned(), json!(mb));
            }
            Err(_) => {
                errors.insert(field.to_owned(), json!("The value must be an integer."));
            }
        }
    }
    if let Some(name) = form.get("clusterName") {
        if name.chars().count() > CLUSTER_NAME_CHARS_MAX {
            let message = format!("Cluster name cannot be longer than {CLUSTER_NAME_CHARS_MAX} characters.");
            errors.insert("clusterName".to_owned(), json!(message));
        } else {
            pool.insert("clusterName".to_owned(), json!(name));
        }
    }
    if !errors.is_empty() {
        return Err(RestError::fields(errors));
    }
    store(&state, POOL, Value::Object(pool)).await?;
    tracing::info!(settings = %String::from_utf8_lossy(&body), "cluster pool settings changed");
    Ok(())
}

/// ns_server's index settings as a 7.6 cluster with no index node reports them. settee's indexes are in memory
/// (snapshotted to disk), so the storage mode is `memory_optimized`; the other values are recorded only.
fn index_defaults() -> Map<String, Value> {
    let defaults = json!({
        "redistributeIndexes": false,
        "numReplica": 0,
        "enablePageBloomFilter": false,
        "enableShardAffinity": false,
        "indexerThreads": 0,
        "memorySnapshotInterval": 200,
        "stableSnapshotInterval": 5000,
        "maxRollbackPoints": 2,
        "logLevel": "info",
        "storageMode": "memory_optimized",
    });
    defaults.as_object().cloned().unwrap_or_default()
}

fn index_settings(meta: &ClusterMetadata) -> Map<String, Value> {
    let mut settings = index_defaults();
    settings.extend(current(meta, INDEXES));
    settings
}

/// `GET /settings/indexes`.
pub(crate) async fn get_indexes(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    require_reader(&caller)?;
    Ok(Json(Value::Object(index_settings(&*cluster_meta(&state)?))))
}

/// One index setting parsed from its form text, or the message ns_server gives for it.
fn parse_index_setting(field: &str, text: &str) -> Result<Value, String> {
    let int_in = |min: u64, max: u64| {
        text.parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .map(|n| json!(n))
            .ok_or_else(|| format!("The value must be an integer between {min} and {max}"))
    };
    match field {
        "indexerThreads" => int_in(0, 1024),
        "memorySnapshotInterval" | "stableSnapshotInterval" => int_in(1, u64::from(u32::MAX)),
        "maxRollbackPoints" => int_in(1, u64::from(u32::MAX)),
        "numReplica" => int_in(0, 16),
        "redistributeIndexes" | "enablePageBloomFilter" | "enableShardAffinity" => match text {
            "true" => Ok(json!(true)),
            "false" => Ok(json!(false)),
            _ => Err(BOOL_EXPECTED.to_owned()),
        },
        "logLevel" => ["silent", "fatal", "error", "warn", "info", "verbose", "timing", "debug", "trace"]
            .contains(&text)
            .then(|| json!(text))
            .ok_or_else(|| {
                "logLevel must be one of silent, fatal, error, warn, info, verbose, timing, debug, trace".to_owned()
            }),
        // The in-memory index is the only one settee has; ns_server also refuses changing the mode of a cluster
        // whose indexes exist.
        "storageMode" => (text == "memory_optimized")
            .then(|| json!(text))
            .ok_or_else(|| "settee's indexes are memory_optimized; the storage mode cannot be changed".to_owned()),
        _ => Err("Unsupported key".to_owned()),
    }
}

/// `POST /settings/indexes`: answers the settings after the change, as ns_server does.
pub(crate) async fn set_indexes(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let form = Form::parse(&body);
    let meta = cluster_meta(&state)?;
    let mut stored = current(&meta, INDEXES);
    let mut errors = Map::new();
    for (field, text) in form.into_pairs() {
        match parse_index_setting(&field, text.trim()) {
            Ok(value) => {
                stored.insert(field, value);
            }
            Err(message) => {
                errors.insert(field, json!(message));
            }
        }
    }
    if !errors.is_empty() {
        return Err(RestError::fields(errors));
    }
    store(&state, INDEXES, Value::Object(stored)).await?;
    Ok(Json(Value::Object(index_settings(&*cluster_meta(&state)?))))
}

/// `GET /settings/stats`: whether the cluster may send usage statistics (settee never sends any).
pub(crate) async fn get_stats(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    require_reader(&caller)?;
    let send = section(&*cluster_meta(&state)?, STATS).get("sendStats").cloned().unwrap_or(json!(false));
    Ok(Json(json!({ "sendStats": send })))
}

/// `POST /settings/stats` (`sendStats=true|false`): couchbase-cli's `setting-notification`. Recorded and reported;
/// settee has no phone-home to turn on.
pub(crate) async fn set_stats(State(state): State<RestState>, caller: Caller, body: Bytes) -> Result<(), RestError> {
    require_admin(&caller)?;
    let form = Form::parse(&body);
    refuse_unknown(&form, &["sendStats"])?;
    let send = form.get_bool("sendStats")?.ok_or_else(|| RestError::field("sendStats", BOOL_EXPECTED))?;
    store(&state, STATS, json!({ "sendStats": send })).await
}

/// Whether the cluster enforces per-user limits (`enforceLimits` of `/internalSettings`; off by default, as in
/// Couchbase).
pub(crate) fn limits_enforced(meta: &ClusterMetadata) -> bool {
    section(meta, INTERNAL).get("enforceLimits").and_then(Value::as_bool).unwrap_or(false)
}

/// `GET /internalSettings`: the internal settings settee has (`enforceLimits`).
pub(crate) async fn get_internal(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    require_reader(&caller)?;
    Ok(Json(json!({ "enforceLimits": limits_enforced(&*cluster_meta(&state)?) })))
}

/// `POST /internalSettings` with `enforceLimits=true|false`: turns the users' limits on or off cluster-wide (each
/// node counts its own connections and rates). ns_server's other internal settings tune its own processes and
/// are refused as unknown.
pub(crate) async fn set_internal(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let form = Form::parse(&body);
    refuse_unknown(&form, &["enforceLimits"])?;
    let mut section = current(&*cluster_meta(&state)?, INTERNAL);
    if let Some(on) = form.get_bool("enforceLimits")? {
        section.insert("enforceLimits".to_owned(), json!(on));
        // Applied on this node by the proposal's own reconcile before `store` returns, as on every other node.
        store(&state, INTERNAL, Value::Object(section)).await?;
        tracing::info!(enforce_limits = on, "internal settings changed");
    }
    Ok(Json(json!({})))
}

/// `GET /settings/retryRebalance`: settee does not retry a failed rebalance on its own, so it is always off.
pub(crate) async fn get_retry_rebalance(caller: Caller) -> Result<Json<Value>, RestError> {
    require_reader(&caller)?;
    Ok(Json(json!({"enabled": false, "afterTimePeriod": 300, "maxAttempts": 1})))
}

/// `POST /settings/retryRebalance` (`enabled`, `afterTimePeriod` 5-3600 s, `maxAttempts` 1-3): accepted while it
/// keeps retries off; turning them on is refused with a clear reason instead of being silently ignored.
pub(crate) async fn set_retry_rebalance(caller: Caller, body: Bytes) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let form = Form::parse(&body);
    refuse_unknown(&form, &["enabled", "afterTimePeriod", "maxAttempts"])?;
    let enabled = form.get_bool("enabled")?.unwrap_or(false);
    let in_range = |field: &str, min: u32, max: u32| -> Result<(), RestError> {
        match form.get(field) {
            Some(v) if !v.trim().parse::<u32>().is_ok_and(|n| (min..=max).contains(&n)) => {
                Err(RestError::field(field, format!("The value must be an integer between {min} and {max}")))
            }
            _ => Ok(()),
        }
    };
    in_range("afterTimePeriod", 5, 3600)?;
    in_range("maxAttempts", 1, 3)?;
    if enabled {
        return Err(RestError::field(
            "enabled",
            "settee does not retry failed rebalances automatically; start the rebalance again instead",
        ));
    }
    Ok(Json(json!({"enabled": false, "afterTimePeriod": 300, "maxAttempts": 1})))
}

/// `GET /pools/default/pendingRetryRebalance`: never a pending retry (see `set_retry_rebalance`).
pub(crate) async fn pending_retry_rebalance(caller: Caller) -> Result<Json<Value>, RestError> {
    require_reader(&caller)?;
    Ok(Json(json!({"retry_rebalance": "not_pending"})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_settings_are_validated_as_ns_server_does() {
        // Proves each index setting parses its legal values and refuses bad ones with a message, and that only
        // the in-memory storage mode is accepted.
        assert_eq!(parse_index_setting("indexerThreads", "4"), Ok(json!(4)));
        assert!(parse_index_setting("indexerThreads", "2000").is_err());
        assert_eq!(parse_index_setting("redistributeIndexes", "true"), Ok(json!(true)));
        assert!(parse_index_setting("redistributeIndexes", "1").is_err());
        assert_eq!(parse_index_setting("logLevel", "debug"), Ok(json!("debug")));
        assert!(parse_index_setting("logLevel", "loud").is_err());
        assert_eq!(parse_index_setting("storageMode", "memory_optimized"), Ok(json!("memory_optimized")));
        assert!(parse_index_setting("storageMode", "plasma").unwrap_err().contains("memory_optimized"));
        assert_eq!(parse_index_setting("nonsense", "1"), Err("Unsupported key".to_owned()));
    }
}
