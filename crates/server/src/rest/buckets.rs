//! Reading buckets: the full settings JSON the bucket managers parse, and the terse configs clients bootstrap from
//! over HTTP.
//!
//! The C++ SDK aborts on a missing required field, so `bucket_json` carries everything
//! `bucket_settings_json.hxx` reads with `at()`: name, uuid, quota.rawRAM, replicaNumber, bucketType,
//! evictionPolicy, conflictResolutionType, controllers, and nodes[] with status/hostname/version/services/ports.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};
use settee_engine::BucketKind;

use super::auth::Caller;
use super::bucket_settings::durability_name;
use super::error::RestError;
use super::pools::{cluster_nodes_json, replace_host_placeholder, request_host};
use super::RestState;
use crate::cluster_config::BUCKET_CAPABILITIES;
use crate::node::BucketHandle;

/// What ends each config in a streaming config response (gocbcore splits the stream on it).
const STREAM_CONFIG_SEPARATOR: &str = "\n\n\n\n";

/// `GET /pools/default/buckets`: every bucket the caller may see.
pub(crate) async fn list(State(state): State<RestState>, caller: Caller, headers: HeaderMap) -> Json<Value> {
    let host = request_host(&state, &headers);
    let buckets: Vec<Value> = state
        .node
        .buckets()
        .iter()
        .filter(|b| caller.can_see_bucket(&b.name()))
        .map(|b| bucket_json(&state, &host, b))
        .collect();
    Json(Value::Array(buckets))
}

/// `GET /pools/default/buckets/<b>`.
pub(crate) async fn get(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, RestError> {
    let handle = visible_bucket(&state, &caller, &bucket)?;
    Ok(Json(bucket_json(&state, &request_host(&state, &headers), &handle)))
}

/// `GET /pools/default/b/<b>`: the terse config, as GET_CLUSTER_CONFIG returns it.
pub(crate) async fn terse(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<Json<Value>, RestError> {
    let handle = visible_bucket(&state, &caller, &bucket)?;
    Ok(Json(state.node.bucket_config(&handle)))
}

/// `GET /pools/default/bs/<b>` and `/pools/default/bucketsStreaming/<b>`: gocbcore's HTTP fallback when CCCP fails.
///
/// Couchbase keeps this response open and sends each new config; settee sends the current config with its
/// separator and ends the response, and gocbcore reconnects when a stream ends, so it still sees changes. A
/// body that stays open needs a `Stream` type the crate does not depend on yet (`futures-core`).
pub(crate) async fn streaming(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
) -> Result<impl IntoResponse, RestError> {
    let handle = visible_bucket(&state, &caller, &bucket)?;
    let body = format!("{}{STREAM_CONFIG_SEPARATOR}", state.node.bucket_config(&handle));
    Ok(([(header::CONTENT_TYPE, "application/json")], body))
}

/// The bucket, when it exists and the caller may see it. Permission comes first, so that callers without access
/// cannot probe which buckets exist.
fn visible_bucket(state: &RestState, caller: &Caller, bucket: &str) -> Result<std::sync::Arc<BucketHandle>, RestError> {
    caller.require(caller.can_see_bucket(bucket), || format!("cluster.bucket[{bucket}].settings!read"))?;
    state.node.bucket(bucket).ok_or(RestError::NotFound)
}

/// A bucket's full settings, as ns_server's bucket details.
pub(crate) fn bucket_json(state: &RestState, host: &str, b: &BucketHandle) -> Value {
    let cfg = b.config();
    let (name, uuid) = (&cfg.name, &cfg.uuid);
    let base = format!("/pools/default/buckets/{name}");
    let mut controllers = json!({
        "compactAll": format!("{base}/controller/compactBucket"),
        "compactDB": format!("{base}/controller/compactDatabases"),
        "purgeDeletes": format!("{base}/controller/unsafePurgeBucket"),
        "startRecovery": format!("{base}/controller/startRecovery"),
    });
    if cfg.flush_enabled {
        controllers["flush"] = json!(format!("{base}/controller/doFlush"));
    }
    let mut vbucket_map = state.node.bucket_config(b)["vBucketServerMap"].take();
    replace_host_placeholder(&mut vbucket_map, host);
    let mem_used = b.mem_used();
    let quota_percent =
        if cfg.ram_quota_bytes == 0 { 0.0 } else { mem_used as f64 * 100.0 / cfg.ram_quota_bytes as f64 };
    let mut nodes = cluster_nodes_json(state, host);
    for node in &mut nodes {
        node["replication"] = json!(0);
        if node["thisNode"] == true && b.is_warming_up() {
            // Couchbase shows a bucket that is loading from disk as warming up on its node.
            node["status"] = json!("warmup");
        }
    }
    let mut out = json!({
        "name": name,
        "nodeLocator": "vbucket",
        "bucketType": match cfg.kind { BucketKind::Couchbase => "membase", BucketKind::Ephemeral => "ephemeral" },
        "uuid": uuid,
        "uri": format!("{base}?bucket_uuid={uuid}"),
        "streamingUri": format!("/pools/default/bucketsStreaming/{name}?bucket_uuid={uuid}"),
        "numVBuckets": b.num_vbuckets(),
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": BUCKET_CAPABILITIES,
        "collectionsManifestUid": format!("{:x}", b.manifest().uid),
        "ddocs": {"uri": format!("{base}/ddocs")},
        "vBucketServerMap": vbucket_map,
        "localRandomKeyUri": format!("{base}/localRandomKey"),
        "controllers": controllers,
        "nodes": nodes,
        "stats": {
            "uri": format!("{base}/stats"),
            "directoryURI": format!("{base}/stats/Directory"),
            "nodeStatsListURI": format!("{base}/nodes"),
        },
        "authType": "sasl",
        "autoCompactionSettings": false,
        "replicaNumber": cfg.replicas,
        "threadsNumber": 3,
        "quota": {"ram": cfg.ram_quota_bytes, "rawRAM": cfg.ram_quota_bytes},
        "basicStats": {
            "quotaPercentUsed": quota_percent,
            // This node's data operations per second over the last sampled second (not the cluster's sum).
            "opsPerSec": state.node.stats_history.lock().latest(name, "ops").unwrap_or(0.0),
            "diskFetches": 0,
            "itemCount": b.item_counts().active,
            "diskUsed": b.persistence.as_ref().map_or(0, |p| p.store.disk_bytes()),
            "dataUsed": mem_used,
            "memUsed": mem_used,
            "vbActiveNumNonResident": 0,
        },
        "evictionPolicy": cfg.eviction.as_str(),
        "durabilityMinLevel": durability_name(cfg.durability_min_level),
        "pitrEnabled": false,
        "conflictResolutionType": cfg.conflict_resolution.name(),
        "maxTTL": cfg.max_ttl,
        "compressionMode": "passive",
    });
    // ns_server shows the storage backend and replica indexes only for buckets that persist.
    if cfg.kind == BucketKind::Couchbase {
        out["storageBackend"] = json!("couchstore");
        out["replicaIndex"] = json!(false);
    }
    out
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::TestApp;
    use super::*;

    #[tokio::test]
    async fn bucket_details_have_every_field_the_cxx_parser_requires() {
        // Proves the default bucket's JSON carries the fields bucket_settings_json.hxx reads with at().
        let app = TestApp::new();
        let b = app.get_ok("/pools/default/buckets/default").await;
        assert_eq!(b["name"], "default");
        assert_eq!(b["uuid"].as_str().unwrap().len(), 32);
        assert_eq!(b["bucketType"], "ephemeral");
        assert_eq!(b["quota"]["rawRAM"], 256 * 1024 * 1024);
        assert_eq!(b["quota"]["ram"], 256 * 1024 * 1024);
        assert_eq!(b["replicaNumber"], 0);
        assert_eq!(b["evictionPolicy"], "noEviction");
        assert_eq!(b["conflictResolutionType"], "seqno");
        assert_eq!(b["durabilityMinLevel"], "none");
        assert_eq!(b["numVBuckets"], 1024);
        assert!(b["controllers"].is_object() && b["controllers"].get("flush").is_none());
        let n = &b["nodes"][0];
        assert!(n["status"].is_string() && n["hostname"].is_string() && n["version"].is_string());
        assert!(n["services"].is_array() && n["ports"]["direct"].is_u64());
        assert_eq!(b["vBucketServerMap"]["vBucketMap"].as_array().unwrap().len(), 1024);
        assert_eq!(b["basicStats"]["itemCount"], 0);
        assert_eq!(b["basicStats"]["opsPerSec"], 0.0, "no sample yet");
    }

    #[tokio::test]
    async fn ops_per_sec_is_the_last_sampled_rate() {
        // Regression: basicStats.opsPerSec was always 0 (the console and couchbase-cli show it).
        let app = TestApp::new();
        // `ops` is sampled as a running total; the history turns two samples into a rate.
        let total = |n: f64| std::collections::BTreeMap::from([(("default".to_owned(), "ops"), n)]);
        app.state.node.stats_history.lock().record(1_000, &total(1_000.0));
        app.state.node.stats_history.lock().record(3_000, &total(1_250.0));
        let b = app.get_ok("/pools/default/buckets/default").await;
        assert_eq!(b["basicStats"]["opsPerSec"], 125.0);
    }

    #[tokio::test]
    async fn bucket_list_is_an_array_filtered_by_access() {
        // Proves the admin sees the default bucket and a user with roles elsewhere sees an empty list.
        let app = TestApp::new();
        let all = app.get_ok("/pools/default/buckets").await;
        assert_eq!(all.as_array().unwrap().len(), 1);
        app.add_user("other", "password", "data_reader[elsewhere]");
        let reply = app.call("GET", "/pools/default/buckets", Some(("other", "password")), None).await;
        assert_eq!((reply.status, reply.json), (StatusCode::OK, json!([])));
    }

    #[tokio::test]
    async fn unknown_bucket_is_404_and_a_hidden_one_403() {
        // Proves the 404 text gocb maps to BucketNotFound, and 403 for a user without access to the bucket.
        let app = TestApp::new();
        let missing = app.call("GET", "/pools/default/buckets/nope", Some(super::super::testing::ADMIN), None).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert!(missing.text.contains("Requested resource not found."));
        app.add_user("other", "password", "data_reader[elsewhere]");
        let hidden = app.call("GET", "/pools/default/buckets/default", Some(("other", "password")), None).await;
        assert_eq!(hidden.status, StatusCode::FORBIDDEN);
        assert_eq!(hidden.json["permissions"][0], "cluster.bucket[default].settings!read");
    }

    #[tokio::test]
    async fn terse_and_streaming_configs_match_the_cccp_config() {
        // Proves /b/ is the terse config and /bs/ the same config followed by the four-newline separator.
        let app = TestApp::new();
        let terse = app.get_ok("/pools/default/b/default").await;
        assert_eq!(terse["name"], "default");
        assert_eq!(terse["nodeLocator"], "vbucket");
        for uri in ["/pools/default/bs/default", "/pools/default/bucketsStreaming/default"] {
            let reply = app.call("GET", uri, Some(super::super::testing::ADMIN), None).await;
            assert_eq!(reply.status, StatusCode::OK);
            let config = reply.text.strip_suffix(STREAM_CONFIG_SEPARATOR).expect("separator ends the chunk");
            let parsed: Value = serde_json::from_str(config).unwrap();
            assert_eq!(parsed["uuid"], terse["uuid"]);
        }
    }
}
