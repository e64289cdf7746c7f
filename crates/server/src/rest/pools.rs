//! The cluster and node views: `/`, `/whoami`, `/pools`, `/pools/default`, `/pools/nodes`, `nodeServices`.
//!
//! The C++ SDK's `cluster_describe` and tools such as cbc read `/pools/default`; gocb's `WaitUntilReady` needs a
//! 200 from `/whoami` and the C++ ping one from `/`.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{Html, IntoResponse};
use axum::Json;
use serde_json::{json, Value};

use super::auth::{self, Caller};
use super::error::RestError;
use super::roles::role_json;
use super::RestState;
use settee_cluster::{vbmap, Membership, NodeId};

use crate::cluster_config::host_port;
use crate::node::{BUCKETS_MAX, COUCHBASE_VERSION};

/// Cluster compatibility version for 7.6 (`major * 0x10000 + minor`), as ns_server reports it.
const CLUSTER_COMPATIBILITY: u32 = 7 * 0x10000 + 6;
/// Quota reported beyond what the buckets hold. settee enforces no cluster-wide quota; reporting headroom lets
/// tools that compute "free quota" before creating a bucket go ahead.
const QUOTA_HEADROOM_BYTES: u64 = 4096 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// `GET /`: Couchbase serves its web console here. Unauthenticated, like ns_server; the SDKs' ping needs a 200.
pub(crate) async fn root() -> impl IntoResponse {
    Html("<!DOCTYPE html><html><head><title>settee</title></head><body>settee: a Couchbase-compatible server</body></html>")
}

/// `GET /whoami`.
pub(crate) async fn whoami(caller: Caller) -> Json<Value> {
    let roles: Vec<Value> = caller.user.all_roles().map(role_json).collect();
    let domain = if caller.builtin { "admin" } else { "local" };
    Json(json!({"id": caller.user.id, "domain": domain, "roles": roles, "name": caller.user.name}))
}

/// `GET /pools`. Without credentials it still answers 200 (ns_server does; readiness probes rely on it), with
/// `isAdminCreds: false`; wrong credentials get 401; 503 until the node has joined or formed its cluster.
pub(crate) async fn pools(State(state): State<RestState>, headers: HeaderMap) -> Result<Json<Value>, RestError> {
    // Readiness: a node that is still forming, joining or restoring its cluster is not ready (its Raft endpoints
    // already answer on this port, since joining needs them).
    if state.node.cluster().is_some_and(|c| !c.has_started()) {
        return Err(RestError::global(axum::http::StatusCode::SERVICE_UNAVAILABLE, "The node is starting."));
    }
    let caller = match auth::basic_credentials(&headers) {
        Some((id, password)) => Some(auth::authenticate(&state, &id, &password).await?),
        None if headers.contains_key(header::AUTHORIZATION) => return Err(RestError::Unauthorized),
        None => None,
    };
    let is_admin = caller.as_ref().is_some_and(|c| c.user.is_admin());
    let is_ro_admin = caller.as_ref().is_some_and(|c| c.user.can_read_settings()) && !is_admin;
    let uuid = &state.node.uuid;
    Ok(Json(json!({
        "isAdminCreds": is_admin,
        "isROAdminCreds": is_ro_admin,
        "isEnterprise": true,
        "allowedServices": ["kv", "n1ql"],
        "isDeveloperPreview": false,
        "packageVariant": "linux",
        "pools": [{
            "name": "default",
            "uri": format!("/pools/default?uuid={uuid}"),
            "streamingUri": format!("/poolsStreaming/default?uuid={uuid}"),
        }],
        "settings": {},
        "uuid": uuid,
        "implementationVersion": COUCHBASE_VERSION,
        "componentsVersion": {"ns_server": COUCHBASE_VERSION, "settee": env!("CARGO_PKG_VERSION")},
    })))
}

/// `GET /pools/default`, and `GET /pools/nodes` (the same view under its older name).
pub(crate) async fn pool_default(State(state): State<RestState>, caller: Caller, headers: HeaderMap) -> Json<Value> {
    Json(pool_json(&state, &caller, &request_host(&state, &headers)))
}

/// `GET /nodes/self` (couchbase-cli's `server-info`): this node as `/pools/default` lists it, with ns_server's
/// storage paths, storage totals and the service quotas.
pub(crate) async fn node_self(State(state): State<RestState>, caller: Caller, headers: HeaderMap) -> Json<Value> {
    let host = request_host(&state, &headers);
    let pool = pool_json(&state, &caller, &host);
    let empty = Vec::new();
    let listed = pool["nodes"].as_array().unwrap_or(&empty);
    let mut me = listed.iter().find(|n| n["thisNode"] == true).cloned().unwrap_or_else(|| node_json(&state, &host));
    let data_dir = state.node.config.data_dir.display().to_string();
    me["storage"] = json!({
        "hdd": [{
            "path": data_dir,
            "index_path": data_dir,
            "cbas_dirs": [data_dir],
            "eventing_path": data_dir,
            "java_home": "",
            "quotaMb": "none",
            "state": "ok",
        }],
        "ssd": [],
    });
    me["storageTotals"] = pool["storageTotals"].clone();
    me["availableStorage"] = json!({"hdd": [{"path": data_dir, "sizeKBytes": 0, "usagePercent": 0}]});
    for quota in ["memoryQuota", "indexMemoryQuota", "ftsMemoryQuota", "cbasMemoryQuota", "eventingMemoryQuota"] {
        me[quota] = pool[quota].clone();
    }
    Json(me)
}

/// The server groups' revision, as `serverGroupsUri` and `serverGroups?rev=` carry it (0 without a cluster).
pub(crate) fn server_groups_rev(state: &RestState) -> u64 {
    state.node.cluster().map_or(0, |c| c.metadata().server_groups().rev)
}

/// ns_server's `balanced`: false while a rebalance would change anything: a node added, failed over or marked for
/// recovery, copies still being built, or a bucket's map other than the balanced one for the active nodes and their
/// server groups (a stopped rebalance, a hard failover that promoted replicas, nodes moved between groups).
fn is_balanced(state: &RestState) -> bool {
    let Some(cluster) = state.node.cluster() else { return true };
    let meta = cluster.metadata();
    if meta.nodes.values().any(|n| n.membership != Membership::Active) || !meta.recovery.is_empty() {
        return false;
    }
    let active: Vec<NodeId> = meta.nodes.keys().copied().collect();
    let groups = meta.node_groups();
    meta.buckets.values().all(|b| {
        let replicas = usize::from(b.spec.replicas);
        let target = vbmap::rebalance(&b.map, &active, &groups, replicas);
        b.building.is_empty() && vbmap::moves(&b.map, &target).is_empty()
    })
}

/// `GET /pools/default/nodeServices`: the bucket-less config (`nodesExt`), as clients bootstrap from over HTTP.
/// `GET /nodes/self/xdcrSSLPorts`, answered without credentials as ns_server does: the TLS management port a
/// remote cluster's XDCR uses once it has found it here (404 when this node has TLS off).
pub(crate) async fn xdcr_ssl_ports(State(state): State<RestState>) -> Result<Json<Value>, RestError> {
    match state.node.config.mgmt_tls_port {
        0 => Err(RestError::NotFound),
        port => Ok(Json(json!({ "httpsMgmt": port }))),
    }
}

pub(crate) async fn node_services(State(state): State<RestState>, _caller: Caller, headers: HeaderMap) -> Json<Value> {
    let mut config = state.node.global_config();
    replace_host_placeholder(&mut config, &request_host(&state, &headers));
    Json(config)
}

fn pool_json(state: &RestState, caller: &Caller, host: &str) -> Value {
    let node = &state.node;
    let buckets: Vec<_> = node.buckets().into_iter().filter(|b| caller.can_see_bucket(&b.name())).collect();
    let bucket_names: Vec<Value> = buckets
        .iter()
        .map(|b| {
            let cfg = b.config();
            json!({"bucketName": cfg.name, "uuid": cfg.uuid})
        })
        .collect();
    let (quota_used, mem_used) = node
        .buckets()
        .iter()
        .fold((0u64, 0u64), |(q, m), b| (q.saturating_add(b.config().ram_quota_bytes), m.saturating_add(b.mem_used())));
    let settings = super::cluster_settings::pool_settings(state);
    let quota_mb = |field: &str, default: u64| settings.get(field).and_then(Value::as_u64).unwrap_or(default);
    // A data quota set with `POST /pools/default` is reported as given (settee records it; buckets' own quotas are
    // what it enforces); without one, the buckets' quotas plus headroom.
    let quota_total = settings
        .get("memoryQuota")
        .and_then(Value::as_u64)
        .map_or(quota_used.saturating_add(QUOTA_HEADROOM_BYTES), |mb| mb.saturating_mul(MIB).max(quota_used));
    let nodes = cluster_nodes_json(state, host);
    let global = node.global_config();
    let running = state.node.cluster().is_some_and(|c| c.rebalance.lock().running);
    json!({
        "name": "default",
        "clusterName": settings.get("clusterName").cloned().unwrap_or(json!("")),
        "nodes": nodes,
        "bucketNames": bucket_names,
        "buckets": {
            "uri": format!("/pools/default/buckets?v={}&uuid={}", node.rev(), node.uuid),
            "terseBucketsBase": "/pools/default/b/",
            "terseStreamingBucketsBase": "/pools/default/bs/",
        },
        "memoryQuota": quota_total / MIB,
        "indexMemoryQuota": quota_mb("indexMemoryQuota", node.config.index_memory_quota_mb),
        "ftsMemoryQuota": quota_mb("ftsMemoryQuota", 512),
        "cbasMemoryQuota": quota_mb("cbasMemoryQuota", 1024),
        "eventingMemoryQuota": quota_mb("eventingMemoryQuota", 256),
        "queryMemoryQuota": quota_mb("queryMemoryQuota", 0),
        "storageTotals": {
            "ram": {
                "total": quota_total,
                "quotaTotal": quota_total,
                "quotaUsed": quota_used,
                "used": mem_used,
                "usedByData": mem_used,
                "quotaUsedPerNode": quota_used,
                "quotaTotalPerNode": quota_total,
            },
            "hdd": {"total": 0, "quotaTotal": 0, "used": 0, "usedByData": 0, "free": 0},
        },
        "rebalanceStatus": if running { "running" } else { "none" },
        "serverGroupsUri": format!("/pools/default/serverGroups?v={}", server_groups_rev(state)),
        "balanced": is_balanced(state),
        "maxBucketCount": BUCKETS_MAX,
        "clusterCapabilitiesVer": global["clusterCapabilitiesVer"],
        "clusterCapabilities": global["clusterCapabilities"],
    })
}

/// Every node of the cluster as `/pools/default` lists them: this one with its statistics, the others with their
/// membership and the health this node's probes see.
pub(crate) fn cluster_nodes_json(state: &RestState, host: &str) -> Vec<Value> {
    let Some(cluster) = state.node.cluster() else { return vec![node_json(state, host)] };
    let meta = cluster.metadata();
    if !meta.nodes.contains_key(&cluster.me) {
        return vec![node_json(state, host)];
    }
    let groups = meta.server_groups();
    meta.nodes
        .values()
        .map(|n| {
            let mut j = if n.id == cluster.me {
                node_json(state, host)
            } else {
                json!({
                    "hostname": host_port(&n.hostname, n.mgmt_port),
                    "thisNode": false,
                    "version": COUCHBASE_VERSION,
                    "os": format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
                    "recoveryType": "none",
                    "clusterCompatibility": CLUSTER_COMPATIBILITY,
                    "services": n.services,
                    "ports": ports_json(n.kv_port, n.tls_ports.mgmt),
                    "nodeEncryption": false,
                    "addressFamily": "inet",
                })
            };
            j["otpNode"] = json!(super::cluster::otp_node(&meta, n));
            // ns_server's per-node setting (`setupNetConfig`), as couchbase-cli node-to-node-encryption --get reads it.
            j["nodeEncryption"] = json!(n.node_encryption);
            j["nodeEncryptionClientCertVerification"] = json!(false);
            j["addressFamilyOnly"] = json!(false);
            j["clusterMembership"] = json!(n.membership.as_str());
            j["recoveryType"] = json!(meta.recovery.get(&n.id).map_or("none", |r| r.as_str()));
            j["status"] = json!(cluster.health.status(n.id, cluster.me).as_str());
            if n.id == cluster.me && state.node.buckets().iter().any(|b| b.is_warming_up()) {
                // ns_server's status of a node whose buckets are still loading.
                j["status"] = json!("warmup");
            }
            j["nodeUUID"] = json!(format!("{:016x}", n.id));
            // ns_server's node name and REST port as configured, whatever host the client addressed.
            j["configuredHostname"] = json!(host_port(&n.hostname, n.mgmt_port));
            j["serverGroup"] = json!(groups.of(n.id).map(|g| g.name.as_str()).unwrap_or_default());
            j
        })
        .collect()
}

/// This node as `/pools/default` and bucket details list it. `ports` holds only numbers: the C++ SDK reads every
/// entry as a u16.
pub(crate) fn node_json(state: &RestState, host: &str) -> Value {
    let node = &state.node;
    let (items, items_tot, mem_used) = node.buckets().iter().fold((0u64, 0u64, 0u64), |(i, t, m), b| {
        let counts = b.item_counts();
        (i.saturating_add(counts.active), t.saturating_add(counts.total), m.saturating_add(b.mem_used()))
    });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    json!({
        "hostname": host_port(host, node.config.mgmt_port),
        "configuredHostname": host_port(host, node.config.mgmt_port),
        "otpNode": format!("ns_1@{host}"),
        "nodeUUID": node.uuid,
        "thisNode": true,
        "version": COUCHBASE_VERSION,
        "os": format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        "status": "healthy",
        "clusterMembership": "active",
        "recoveryType": "none",
        "clusterCompatibility": CLUSTER_COMPATIBILITY,
        "uptime": state.started.elapsed().as_secs().to_string(),
        "cpuCount": cpus,
        "services": ["kv", "n1ql"],
        "ports": ports_json(node.config.kv_port, node.config.mgmt_tls_port),
        "interestingStats": {"curr_items": items, "curr_items_tot": items_tot, "mem_used": mem_used},
        "nodeEncryption": false,
        "addressFamily": "inet",
        "serverGroup": settee_cluster::metadata::DEFAULT_GROUP_NAME,
    })
}

/// A node's `ports` object: the KV port, and ns_server's `httpsMgmt` when the management TLS port is on.
fn ports_json(kv: u16, https_mgmt: u16) -> Value {
    let mut ports = json!({"direct": kv});
    if https_mgmt != 0 {
        ports["httpsMgmt"] = json!(https_mgmt);
    }
    ports
}

/// The host to show in REST answers: the advertised one, or, when the node listens on every interface, the host
/// the client addressed (its `Host` header).
pub(crate) fn request_host(state: &RestState, headers: &HeaderMap) -> String {
    let advertised = state.node.advertised_host();
    if advertised != "$HOST" {
        return advertised.to_owned();
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    strip_port(host).to_owned()
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.split_once(':') {
        Some((h, port)) if !port.contains(':') => h,
        _ => host,
    }
}

/// Replaces the `$HOST` placeholder of terse configs in every string of `value`.
pub(crate) fn replace_host_placeholder(value: &mut Value, host: &str) {
    match value {
        Value::String(s) if s.contains("$HOST") => *s = s.replace("$HOST", host),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_host_placeholder(v, host)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_host_placeholder(v, host)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::TestApp;
    use super::*;

    #[tokio::test]
    async fn root_and_whoami_answer_200_for_the_sdk_readiness_checks() {
        // Proves `/` needs no credentials and `/whoami` describes the built-in admin as ns_server does.
        let app = TestApp::new();
        assert_eq!(app.call("GET", "/", None, None).await.status, StatusCode::OK);
        let me = app.get_ok("/whoami").await;
        assert_eq!(
            me,
            json!({"id": "Administrator", "domain": "admin", "roles": [{"role": "admin"}], "name": "Administrator"})
        );
        app.add_user("reader", "password", "data_reader[default]");
        let me = app.call("GET", "/whoami", Some(("reader", "password")), None).await.json;
        assert_eq!((me["domain"].as_str(), me["roles"][0]["bucket_name"].as_str()), (Some("local"), Some("default")));
    }

    #[tokio::test]
    async fn pools_reports_version_and_admin_flag_with_or_without_credentials() {
        // Proves GET /pools is 200 anonymously (isAdminCreds false), 200 for the admin (true), 401 for bad creds.
        let app = TestApp::new();
        let anonymous = app.call("GET", "/pools", None, None).await;
        assert_eq!(anonymous.status, StatusCode::OK);
        assert_eq!(anonymous.json["isAdminCreds"], false);
        let pools = app.get_ok("/pools").await;
        assert_eq!(pools["implementationVersion"], COUCHBASE_VERSION);
        assert_eq!(pools["isAdminCreds"], true);
        assert_eq!(pools["isEnterprise"], true);
        assert_eq!(pools["pools"][0]["name"], "default");
        assert_eq!(pools["uuid"], app.state.node.uuid.as_str());
        assert_eq!(
            app.call("GET", "/pools", Some(("Administrator", "bad")), None).await.status,
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test]
    async fn pools_default_has_every_field_cluster_describe_reads() {
        // Proves nodes[] carries hostname/otpNode/version/os/status/services/ports and bucketNames lists `default`.
        let app = TestApp::new();
        let pool = app.get_ok("/pools/default").await;
        let n = &pool["nodes"][0];
        assert_eq!(n["hostname"], "127.0.0.1:8091");
        assert_eq!(n["otpNode"], "ns_1@127.0.0.1");
        assert_eq!(n["version"], COUCHBASE_VERSION);
        assert!(n["os"].is_string());
        assert_eq!((n["status"].as_str(), n["clusterMembership"].as_str()), (Some("healthy"), Some("active")));
        assert_eq!(n["services"], json!(["kv", "n1ql"]));
        assert_eq!(n["ports"], json!({"direct": 11210}));
        assert_eq!(pool["clusterName"], "");
        assert_eq!(pool["bucketNames"][0]["bucketName"], "default");
        assert!(pool["memoryQuota"].as_u64().unwrap() >= 256);
        let nodes = app.get_ok("/pools/nodes").await;
        assert_eq!(nodes["nodes"][0]["configuredHostname"], "127.0.0.1:8091");
    }

    #[tokio::test]
    async fn bucket_names_are_filtered_by_access() {
        // Proves a user only sees buckets they have a role on, as Couchbase filters them.
        let app = TestApp::new();
        app.add_user("other", "password", "data_reader[elsewhere]");
        let reply = app.call("GET", "/pools/default", Some(("other", "password")), None).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.json["bucketNames"], json!([]));
    }

    #[tokio::test]
    async fn node_services_is_the_global_config() {
        // Proves nodeServices carries rev and nodesExt with the kv, mgmt and n1ql ports.
        let app = TestApp::new();
        let cfg = app.get_ok("/pools/default/nodeServices").await;
        assert!(cfg["rev"].as_u64().is_some());
        assert_eq!(cfg["nodesExt"][0]["services"]["kv"], 11210);
        assert_eq!(cfg["nodesExt"][0]["services"]["mgmt"], 8091);
    }

    #[test]
    fn host_header_ports_are_stripped_and_placeholders_replaced() {
        // Proves Host parsing for names, IPv4, bracketed IPv6, and `$HOST` replacement inside nested JSON.
        assert_eq!(strip_port("example.com:8091"), "example.com");
        assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
        assert_eq!(strip_port("[::1]:8091"), "::1");
        assert_eq!(host_port("::1", 8091), "[::1]:8091");
        let mut v = json!({"a": ["$HOST:11210", {"h": "$HOST"}], "n": 1});
        replace_host_placeholder(&mut v, "h1");
        assert_eq!(v, json!({"a": ["h1:11210", {"h": "h1"}], "n": 1}));
    }
}
