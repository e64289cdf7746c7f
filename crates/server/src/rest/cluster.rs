//! Cluster management: adding nodes (`/controller/addNode` on a member, `/node/controller/doJoinCluster` on the
//! newcomer), hard failover, the activation part of rebalance, auto-failover settings, and the Raft endpoints of
//! the metadata store (admin only).
//!
//! Node names: ns_server's `otpNode` is `ns_1@<host>`; several settee nodes may share a host (different ports on
//! one machine), and then their otpNodes are `n_<id>@<host>`. Either form, and `host:mgmtport`, names a node.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use settee_cluster::peer::{self, HoldReply, HoldRequest, JoinRequest, SeqnoReport, VbSeqnos};
use settee_cluster::{
    vbmap, AutoFailoverSettings, ClusterMetadata, Membership, MetaCommand, NodeId, NodeInfo, ProposeError,
    RebalanceSettings, Recovery,
};
use tower::ServiceExt;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::audit::events;
use crate::cluster::peers::{self, PeerError};
use crate::cluster::ClusterHandle;

/// How long a member waits for a newcomer to finish joining.
const JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) fn require_admin(caller: &Caller) -> Result<(), RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())
}

pub(crate) fn cluster(state: &RestState) -> Result<&std::sync::Arc<ClusterHandle>, RestError> {
    state.node.cluster().ok_or_else(|| RestError::global(StatusCode::SERVICE_UNAVAILABLE, "This node has no cluster"))
}

/// How every administrator form handler starts: the caller must be an administrator, the node in a cluster.
fn admin_form<'s>(
    state: &'s RestState,
    caller: &Caller,
    body: &[u8],
) -> Result<(&'s std::sync::Arc<ClusterHandle>, Form), RestError> {
    require_admin(caller)?;
    Ok((cluster(state)?, Form::parse(body)))
}

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::global(StatusCode::BAD_REQUEST, message)
}

fn unavailable(e: impl std::fmt::Display) -> RestError {
    RestError::global(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
}

/// `otpNode` of `n` in `meta`.
pub(crate) fn otp_node(meta: &ClusterMetadata, n: &NodeInfo) -> String {
    let shared = meta.nodes.values().filter(|o| o.hostname == n.hostname).count() > 1;
    if shared {
        format!("n_{}@{}", n.id, n.hostname)
    } else {
        format!("ns_1@{}", n.hostname)
    }
}

/// The node an `otpNode`, `n_<id>@host` or `host:port` names.
fn find_node(meta: &ClusterMetadata, name: &str) -> Option<NodeId> {
    meta.nodes
        .values()
        .find(|n| otp_node(meta, n) == name || n.mgmt_addr() == name || format!("ns_1@{}", n.hostname) == name)
        .map(|n| n.id)
}

/// The node `name` designates, or ns_server's error for an unknown one.
fn named_node(meta: &ClusterMetadata, name: &str) -> Result<NodeId, RestError> {
    find_node(meta, name).ok_or_else(|| bad_request(format!("Unknown server given: {name}")))
}

/// `/settee/raft/...`: the metadata store's Raft traffic between nodes, with the administrator's credentials.
pub(crate) async fn raft(State(state): State<RestState>, caller: Caller, request: Request) -> Response {
    if let Err(e) = require_admin(&caller) {
        return e.into_response();
    }
    let Some(cluster) = state.node.cluster() else { return RestError::NotFound.into_response() };
    match cluster.raft_router().oneshot(request).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// `POST /controller/addNode` (`hostname`, `user`, `password`): asks the node at `hostname` to join this
/// node's cluster and waits until it has. Answers `{"otpNode": ...}`.
pub(crate) async fn add_node(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let (otp, _) = join_node(&state, &caller, cluster, &form, None).await?;
    Ok(Json(json!({ "otpNode": otp })))
}

/// Asks the node the form's `hostname` names to join this node's cluster, registering itself in server group
/// `group` (uuid; None: the default group), and waits until it has; answers its `otpNode` and id (None if the
/// metadata does not list it yet). Shared by `/controller/addNode` and `/pools/default/serverGroups/<uuid>/addNode`.
pub(crate) async fn join_node(
    state: &RestState,
    caller: &Caller,
    cluster: &std::sync::Arc<ClusterHandle>,
    form: &Form,
    group: Option<&str>,
) -> Result<(String, Option<NodeId>), RestError> {
    let hostname =
        form.get("hostname").filter(|h| !h.is_empty()).ok_or_else(|| bad_request("Hostname is required."))?;
    if hostname.starts_with("https://") {
        // settee's node-to-node calls use the plain management port; ns_server would switch to TLS here.
        let message =
            "give the node's plain management address (host:--mgmt-port); settee does not add nodes over HTTPS";
        return Err(bad_request(format!("Cannot add {hostname}: {message}")));
    }
    let target = with_default_port(hostname.trim_start_matches("http://"));
    let user = form.get("user").unwrap_or(&state.node.config.username).to_owned();
    let password = form.get("password").unwrap_or(&state.node.config.password).to_owned();
    let (my_host, my_port) = cluster.addr.rsplit_once(':').unwrap_or((cluster.addr.as_str(), ""));
    let join = JoinRequest {
        host: my_host.to_owned(),
        port: my_port.parse().unwrap_or(JoinRequest::DEFAULT_PORT),
        user: user.clone(),
        password: password.clone(),
        group: group.map(str::to_owned),
    };
    // The node's driver refused to start with a peer source that is not an address, so none is lost here.
    match peers::call(&target, &state.node.peer_links, Some((&user, &password)), &join, JOIN_TIMEOUT).await {
        Ok(()) => {}
        Err(PeerError::Refused { status, body, .. }) => {
            let reason = if status == 401 { "Authentication failed. Verify username and password." } else { "" };
            let message = format!("Prepare join failed. {reason}{}", body.trim());
            return Err(RestError::global(StatusCode::BAD_REQUEST, message));
        }
        Err(e) => return Err(bad_request(format!("Failed to reach {target}: {e}"))),
    }
    let meta = cluster.metadata();
    let added = meta.nodes.values().find(|n| n.mgmt_addr() == target);
    let otp = added.map_or_else(|| format!("ns_1@{}", target), |n| otp_node(&meta, n));
    tracing::info!(node = %target, "node added to the cluster");
    let services = added.map(|n| n.services.clone()).unwrap_or_default();
    let (host, port) = target.rsplit_once(':').unwrap_or((target.as_str(), ""));
    let mut fields = crate::audit_fields![
        ("node", otp),
        ("hostname", host),
        ("port", port.parse::<u16>().ok()),
        ("services", services),
        ("user", user),
    ];
    if let Some(group) = group {
        fields.insert("groupUUID".into(), group.into());
    }
    caller.audit(state, events::ADD_NODE, fields);
    Ok((otp, added.map(|n| n.id)))
}

/// `POST /node/controller/doJoinCluster` (`clusterMemberHostIp`, `clusterMemberPort`): this node leaves its
/// own one-node cluster (dropping its buckets, as Couchbase does) and joins that member's cluster.
pub(crate) async fn do_join_cluster(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let join = JoinRequest::from_form(|k| form.get(k)).map_err(|e| bad_request(e.to_string()))?;
    let seed = format!("{}:{}", bracket(&join.host), join.port);
    if seed == cluster.addr {
        return Err(bad_request("A node cannot join itself."));
    }
    cluster.rejoin(seed, join.group).await.map_err(|e| bad_request(e.to_string()))?;
    Ok(StatusCode::OK)
}

/// What both failover controllers start from: the administrator's request, its form, and the node its `otpNode`
/// names in the metadata.
struct FailoverTarget<'s> {
    cluster: &'s std::sync::Arc<ClusterHandle>,
    form: Form,
    meta: std::sync::Arc<ClusterMetadata>,
    id: NodeId,
}

fn failover_target<'s>(state: &'s RestState, caller: &Caller, body: &[u8]) -> Result<FailoverTarget<'s>, RestError> {
    let (cluster, form) = admin_form(state, caller, body)?;
    let meta = cluster.metadata();
    let id = named_node(&meta, form.get("otpNode").unwrap_or_default())?;
    Ok(FailoverTarget { cluster, form, meta, id })
}

/// `POST /controller/failOver` (`otpNode`, `allowUnsafe`): hard failover. Replicas of the node's vBuckets are
/// promoted at once; a failover that would leave vBuckets without any copy needs `allowUnsafe=true`.
pub(crate) async fn fail_over(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let FailoverTarget { cluster, form, meta, id } = failover_target(&state, &caller, &body)?;
    if meta.nodes.get(&id).is_some_and(|n| n.membership == Membership::InactiveFailed) {
        return Err(bad_request("The node is already failed over."));
    }
    let unsafe_ok = form.get("allowUnsafe") == Some("true");
    let at_risk: usize = meta.buckets.values().map(|b| vbmap::data_loss_risk(&b.map, &[id]).len()).sum();
    if at_risk > 0 && !unsafe_ok {
        return Err(RestError::global(
            StatusCode::BAD_REQUEST,
            format!("Failover would lose data: {at_risk} vBuckets have no other copy. Use allowUnsafe=true to fail over anyway."),
        ));
    }
    match cluster.failover(id).await {
        Ok(_) => {
            tracing::warn!(node = id, "hard failover");
            let fields = crate::audit_fields![("nodes", [node_name(&meta, id)]), ("type", "hard")];
            caller.audit(&state, events::FAILOVER_NODES, fields);
            Ok(StatusCode::OK)
        }
        Err(ProposeError::Rejected(e)) => Err(bad_request(e.to_string())),
        Err(e) => Err(unavailable(e)),
    }
}

/// `POST /controller/startGracefulFailover` (`otpNode`): fails a live node over without losing a write. The node
/// stops serving its active vBuckets (clients get NOT_MY_VBUCKET and retry), the replicas to be promoted catch up
/// with the seqnos it stopped at, then the failover commits as a hard one would. Answers once it is done (within
/// a minute); if the replicas cannot catch up the node serves again and the call fails.
pub(crate) async fn graceful_fail_over(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let FailoverTarget { cluster, meta, id, .. } = failover_target(&state, &caller, &body)?;
    // ns_server refuses a graceful failover during a rebalance (503 "Cannot failover during rebalance"): the
    // rebalance this node runs, or one another node runs while copies are being built.
    if cluster.rebalance.lock().running || meta.buckets.values().any(|b| !b.building.is_empty()) {
        return Err(RestError::text(StatusCode::SERVICE_UNAVAILABLE, "Cannot failover during rebalance"));
    }
    if !meta.nodes.get(&id).is_some_and(|n| n.membership == Membership::Active) {
        return Err(bad_request("Only an active node can be failed over gracefully."));
    }
    let unreplicated: usize = meta
        .buckets
        .values()
        .map(|b| {
            b.map.chains.iter().filter(|c| c.first() == Some(&Some(id)) && c.get(1).is_none_or(|r| r.is_none())).count()
        })
        .sum();
    if unreplicated > 0 {
        return Err(bad_request(format!(
            "Failover cannot be graceful: {unreplicated} vBuckets of the node have no replica."
        )));
    }
    match cluster.graceful_failover(id).await {
        Ok(()) => {
            tracing::warn!(node = id, "graceful failover");
            let fields = crate::audit_fields![("nodes", [node_name(&meta, id)]), ("type", "graceful")];
            caller.audit(&state, events::FAILOVER_NODES, fields);
            Ok(StatusCode::OK)
        }
        Err(e) => Err(unavailable(e)),
    }
}

/// `POST /settee/node/drain` (a JSON `HoldRequest`), internal to graceful failover and rebalance: this node stops
/// (or resumes) serving its active vBuckets, or only the listed ones; answers a `HoldReply` with the high seqno
/// each of them stopped at.
pub(crate) async fn drain(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<HoldReply>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let request: HoldRequest =
        peer::decode_request(&body).map_err(|e| bad_request(format!("Not a hold request: {e}")))?;
    let covered: std::collections::HashSet<(String, u16)> = cluster.hold(request).await.into_iter().collect();
    wait_for_warmup(&state).await;
    let (stopped, _) = seqnos(&state, |b, vb, _, _| covered.contains(&(b.to_owned(), vb)).then_some(Section::Copies));
    Ok(Json(HoldReply { stopped }))
}

/// `GET /settee/node/seqnos`, internal to graceful failover and rebalance: a `SeqnoReport` with the high seqno of
/// every active or replica vBucket here, and under `kept` the dead vBuckets that still hold data (a failed-over
/// node's copies, which delta recovery resumes from).
pub(crate) async fn replica_seqnos(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<SeqnoReport>, RestError> {
    require_admin(&caller)?;
    wait_for_warmup(&state).await;
    use settee_engine::VbState;
    // Read before the seqnos: the states they are read from are at least this new.
    let rev = state.node.cluster().map_or(0, |c| c.applied_rev());
    let (buckets, kept) = seqnos(&state, |_, _, st, high| match st {
        VbState::Active | VbState::Replica => Some(Section::Copies),
        VbState::Dead if high > 0 => Some(Section::Kept),
        _ => None,
    });
    let data_requests = crate::timings::data_requests(&state.node);
    Ok(Json(SeqnoReport { buckets, kept, rev, data_requests }))
}

/// How long a seqno report waits for the node's buckets to finish their warmup (callers give up after 10 s).
const WARMUP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits, up to [`WARMUP_WAIT`], until no bucket of the node is warming up.
async fn wait_for_warmup(state: &RestState) {
    let deadline = tokio::time::Instant::now() + WARMUP_WAIT;
    while state.node.buckets().iter().any(|b| b.is_warming_up()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Which part of a seqno report a vBucket goes in.
enum Section {
    /// Its copies (active, replica, held).
    Copies,
    /// Data kept in a dead vBucket.
    Kept,
}

/// (copies, kept) in one pass over every vBucket: `section` says where a vBucket goes (by bucket, id, state and
/// high seqno), if anywhere. Every bucket is listed in both, even without vBuckets. A bucket still warming up
/// reports no vBucket: seqnos warmup has not loaded yet would understate what the node holds (a takeover would
/// then stop waiting too early).
fn seqnos(
    state: &RestState,
    section: impl Fn(&str, u16, settee_engine::VbState, u64) -> Option<Section>,
) -> (VbSeqnos, VbSeqnos) {
    let (mut copies, mut kept) = (VbSeqnos::default(), VbSeqnos::default());
    for b in state.node.buckets() {
        let name = b.name();
        copies.add_bucket(&name);
        kept.add_bucket(&name);
        if b.is_warming_up() {
            continue;
        }
        for vb in 0..settee_types::limits::NUM_VBUCKETS {
            let Some(vbucket) = b.vbucket(settee_types::VbId(vb)) else { continue };
            let high = vbucket.high_seqno();
            match section(&name, vb, vbucket.state(), high) {
                Some(Section::Copies) => copies.insert(&name, vb, high),
                Some(Section::Kept) => kept.insert(&name, vb, high),
                None => {}
            }
        }
    }
    (copies, kept)
}

/// `POST /controller/rebalance` (`knownNodes`, `ejectedNodes`): starts moving vBuckets to a balanced map over the
/// nodes that stay (added nodes become active, ejected ones are removed at the end) and answers at once; progress
/// shows in `/pools/default/tasks`.
pub(crate) async fn rebalance(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let meta = cluster.metadata();
    let names = |key: &str| -> Result<Vec<NodeId>, RestError> {
        form.get(key)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|n| find_node(&meta, n).ok_or_else(|| bad_request(format!("Unknown server given: {n}"))))
            .collect()
    };
    let ejected = names("ejectedNodes")?;
    let known = names("knownNodes")?;
    if ejected.contains(&cluster.me) {
        return Err(bad_request("This node cannot eject itself: ask another node to rebalance it out."));
    }
    let ejected_names: Vec<String> = ejected.iter().map(|&n| node_name(&meta, n)).collect();
    let known_names: Vec<String> = known.iter().map(|&n| node_name(&meta, n)).collect();
    cluster.start_rebalance(ejected).await.map_err(|e| bad_request(e.to_string()))?;
    for name in &ejected_names {
        caller.audit(&state, events::REMOVE_NODE, crate::audit_fields![("node", name)]);
    }
    let fields = crate::audit_fields![
        ("known_nodes", known_names),
        ("ejected_nodes", ejected_names),
        ("delta_recovery_buckets", "all"),
    ];
    caller.audit(&state, events::REBALANCE_INITIATED, fields);
    Ok(StatusCode::OK)
}

/// `POST /controller/stopRebalance`: moves still building their copies are given up, takeovers under way finish,
/// and the rebalance ends; finished moves are kept.
pub(crate) async fn stop_rebalance(State(state): State<RestState>, caller: Caller) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    cluster(&state)?.rebalance.lock().stop_requested = true;
    Ok(StatusCode::OK)
}

/// `POST /controller/setRecoveryType` (`otpNode`, `recoveryType=delta|full`): marks a failed-over node to come back
/// at the next rebalance, keeping its data and catching it up (delta) or rebuilding it (full). Answers `[]`; a
/// bad field gets ns_server's `{"field": "message"}`.
pub(crate) async fn set_recovery_type(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let otp = form.get("otpNode").unwrap_or_default();
    mark_recovery(&state, &caller, cluster, otp, form.get("recoveryType")).await
}

/// Marks the failed-over node `otp` for `recovery_type` recovery (`setRecoveryType`, `reAddNode`).
async fn mark_recovery(
    state: &RestState,
    caller: &Caller,
    cluster: &ClusterHandle,
    otp: &str,
    recovery_type: Option<&str>,
) -> Result<Json<Value>, RestError> {
    let invalid = |field: &str, message: &str| RestError::Json(StatusCode::BAD_REQUEST, json!({ field: message }));
    let recovery = match recovery_type {
        Some("delta") => Recovery::Delta,
        Some("full") => Recovery::Full,
        _ => return Err(invalid("recoveryType", "recoveryType must be one of: delta, full")),
    };
    let meta = cluster.metadata();
    let not_failed = "invalid node name or node can't be used for delta recovery";
    let id = find_node(&meta, otp).ok_or_else(|| invalid("otpNode", not_failed))?;
    let cmd = MetaCommand::SetRecovery { node: id, recovery: Some(recovery) };
    propose_or(cluster, cmd, |_| invalid("otpNode", not_failed)).await?;
    tracing::info!(node = id, recovery = recovery.as_str(), "node marked for recovery");
    let fields = crate::audit_fields![("node", node_name(&meta, id)), ("type", recovery.as_str())];
    caller.audit(state, events::ENTER_NODE_RECOVERY, fields);
    Ok(Json(json!([])))
}

/// `POST /controller/reAddNode` (`otpNode`): couchbase-cli's `server-readd`, the pre-4.0 name of a full recovery.
pub(crate) async fn re_add_node(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    mark_recovery(&state, &caller, cluster, form.get("otpNode").unwrap_or_default(), Some("full")).await
}

/// `GET /settings/rebalance`.
pub(crate) async fn get_rebalance_settings(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.can_read_settings(), || "cluster.settings!read".to_owned())?;
    let moves = cluster(&state)?.metadata().rebalance.moves_per_node;
    Ok(Json(json!({ "rebalanceMovesPerNode": moves })))
}

/// `POST /settings/rebalance` (`rebalanceMovesPerNode`, 1 to 64): how many vBucket moves a node takes part in at
/// once during a rebalance.
pub(crate) async fn set_rebalance_settings(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let max = RebalanceSettings::MOVES_PER_NODE_MAX;
    let moves = form
        .get("rebalanceMovesPerNode")
        .and_then(|m| m.parse::<u32>().ok())
        .filter(|m| (1..=max).contains(m))
        .ok_or_else(|| {
            RestError::field("rebalanceMovesPerNode", format!("The value must be in range from 1 to {max}"))
        })?;
    propose(cluster, MetaCommand::SetRebalanceSettings(RebalanceSettings { moves_per_node: moves })).await?;
    Ok(Json(json!({ "rebalanceMovesPerNode": moves })))
}

/// `GET /pools/default/tasks`: the rebalance this node orchestrates, as ns_server reports it.
pub(crate) async fn tasks(State(state): State<RestState>, caller: Caller) -> Json<Value> {
    let status = state.node.cluster().map(|c| c.rebalance.lock().clone()).unwrap_or_default();
    let mut task = if status.running {
        let progress = if status.total == 0 { 0.0 } else { 100.0 * status.done as f64 / status.total as f64 };
        // couchbase-cli's rebalance-status and progress bar read `recommendedRefreshPeriod` (seconds) and
        // `detailedProgress`; settee moves every bucket's vBuckets in one plan, so there is no current bucket.
        let buckets = state.node.buckets().len();
        json!({
            "type": "rebalance",
            "subtype": "rebalance",
            "status": "running",
            "progress": progress,
            "recommendedRefreshPeriod": 0.25,
            "detailedProgress": {"bucketsCount": buckets},
        })
    } else {
        json!({"type": "rebalance", "status": "notRunning", "statusIsStale": false, "masterRequestTimedOut": false})
    };
    if let Some(e) = status.last_error {
        task["errorMessage"] = json!(e);
    }
    task["movesDone"] = json!(status.done);
    task["movesTotal"] = json!(status.total);
    let mut tasks = vec![task];
    // Replications name buckets, remote clusters and their errors: only for those who may read XDCR settings.
    if caller.can_read_xdcr() {
        tasks.extend(state.node.xdcr.task_entries(&state.node));
    }
    Json(Value::Array(tasks))
}

/// `GET /pools/default/rebalanceProgress`.
pub(crate) async fn rebalance_progress(State(state): State<RestState>, _caller: Caller) -> Json<Value> {
    let status = state.node.cluster().map(|c| c.rebalance.lock().clone()).unwrap_or_default();
    if status.running {
        let progress = if status.total == 0 { 0.0 } else { status.done as f64 / status.total as f64 };
        Json(json!({"status": "running", "progress": progress}))
    } else {
        Json(json!({"status": "none"}))
    }
}

/// settee's own (`GET /settee/cluster/versions`): the metadata version each node reads, the cluster's (the
/// lowest) and the command forms it implies, for an operator following a rolling upgrade. Couchbase's
/// `clusterCompatibility` keeps the Couchbase version settee answers as: couchbase-cli and the SDKs read it so.
pub(crate) async fn versions(State(state): State<RestState>, _caller: Caller) -> Result<Json<Value>, RestError> {
    use settee_cluster::metadata::compat::{AddInGroupForm, FailoverForm};
    use settee_cluster::metadata::CommandForms;
    let meta = cluster(&state)?.metadata();
    let forms = CommandForms::of(&meta);
    let nodes: Vec<Value> = meta
        .nodes
        .values()
        .map(|n| json!({"otpNode": otp_node(&meta, n), "nodeUUID": format!("{:016x}", n.id), "metaVersion": n.meta_version}))
        .collect();
    Ok(Json(json!({
        "clusterMetaVersion": meta.meta_version(),
        "thisNodeMetaVersion": crate::cluster::meta_version(),
        "buildMetaVersion": settee_cluster::metadata::META_VERSION,
        "nodes": nodes,
        "commandForms": {
            "gracefulFailover": match forms.graceful_failover {
                FailoverForm::Draining => "failoverDraining",
                FailoverForm::Separate => "failoverThenRepair",
            },
            "addNodeInGroup": match forms.add_in_group {
                AddInGroupForm::OneChange => "addNodeInGroup",
                AddInGroupForm::AddThenMove => "addNodeThenMove",
            },
        },
    })))
}

async fn propose(cluster: &ClusterHandle, cmd: MetaCommand) -> Result<(), RestError> {
    propose_or(cluster, cmd, |e| bad_request(e.to_string())).await
}

/// Proposes `cmd`; a refusal by the metadata becomes `rejected`'s error, no quorum a 503.
async fn propose_or(
    cluster: &ClusterHandle,
    cmd: MetaCommand,
    rejected: impl FnOnce(settee_cluster::MetaError) -> RestError,
) -> Result<(), RestError> {
    match cluster.propose(cmd).await {
        Ok(_) => Ok(()),
        Err(ProposeError::Rejected(e)) => Err(rejected(e)),
        Err(e) => Err(unavailable(e)),
    }
}

/// `GET /settings/autoFailover`.
pub(crate) async fn get_auto_failover(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.can_read_settings(), || "cluster.settings!read".to_owned())?;
    let s = cluster(&state)?.metadata().auto_failover.clone();
    Ok(Json(json!({"enabled": s.enabled, "timeout": s.timeout_secs, "count": s.count, "maxCount": s.max_count})))
}

/// `POST /settings/autoFailover` (`enabled`, `timeout` 5-3600 s, `maxCount`).
pub(crate) async fn set_auto_failover(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let (cluster, form) = admin_form(&state, &caller, &body)?;
    let mut s = cluster.metadata().auto_failover.clone();
    s.enabled = form.get_bool("enabled")?.ok_or_else(|| RestError::field("enabled", super::form::BOOL_EXPECTED))?;
    if let Some(t) = form.get("timeout") {
        let min = AutoFailoverSettings::TIMEOUT_SECS_MIN;
        let max = AutoFailoverSettings::TIMEOUT_SECS_MAX;
        s.timeout_secs = t.parse().ok().filter(|t| (min..=max).contains(t)).ok_or_else(|| {
            RestError::field("timeout", format!("The value must be an integer between {min} and {max}"))
        })?;
    }
    if let Some(m) = form.get("maxCount") {
        let max = AutoFailoverSettings::MAX_COUNT_MAX;
        s.max_count =
            m.parse().ok().filter(|m| (1..=max).contains(m)).ok_or_else(|| {
                RestError::field("maxCount", format!("The value must be an integer between 1 and {max}"))
            })?;
    }
    let audited = if s.enabled {
        let fields = crate::audit_fields![("timeout", s.timeout_secs), ("max_nodes", s.max_count)];
        (events::ENABLE_AUTO_FAILOVER, fields)
    } else {
        (events::DISABLE_AUTO_FAILOVER, serde_json::Map::new())
    };
    propose(cluster, MetaCommand::SetAutoFailover(s)).await?;
    caller.audit(&state, audited.0, audited.1);
    Ok(StatusCode::OK)
}

/// `POST /settings/autoFailover/resetCount`.
pub(crate) async fn reset_auto_failover_count(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let s = AutoFailoverSettings { count: 0, ..cluster.metadata().auto_failover.clone() };
    propose(cluster, MetaCommand::SetAutoFailover(s)).await?;
    caller.audit(&state, events::RESET_AUTO_FAILOVER_COUNT, serde_json::Map::new());
    Ok(StatusCode::OK)
}

/// A node as the audit events name it: its otpNode (`ns_1@host`), or its id if it is no longer a member.
fn node_name(meta: &ClusterMetadata, id: NodeId) -> String {
    meta.nodes.get(&id).map_or_else(|| id.to_string(), |n| otp_node(meta, n))
}

fn with_default_port(addr: &str) -> String {
    let has_port = match addr.rsplit_once(':') {
        Some((host, port)) => port.parse::<u16>().is_ok() && (!host.contains(':') || host.ends_with(']')),
        None => false,
    };
    if has_port {
        addr.to_owned()
    } else {
        format!("{}:8091", bracket(addr))
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_get_the_default_port() {
        // Proves ns_server's hostname forms (bare host, host:port, IPv6) all resolve to host:port.
        assert_eq!(with_default_port("10.0.0.2"), "10.0.0.2:8091");
        assert_eq!(with_default_port("10.0.0.2:9000"), "10.0.0.2:9000");
        assert_eq!(with_default_port("::1"), "[::1]:8091");
        assert_eq!(with_default_port("[::1]:9000"), "[::1]:9000");
    }
}
