//! Server groups (rack awareness), ns_server's `/pools/default/serverGroups` API: list, create, rename, delete,
//! move nodes between groups at a revision, and add a node straight into a group. The groups live in the cluster
//! metadata (`settee_cluster::metadata::server_groups`); the vBucket planners read them at the next rebalance.
//! Answers and errors are ns_server's, bodies included (`[]` on success, `{"name": "already exists"}`, 409 on a
//! stale revision).

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Map, Value};
use settee_cluster::metadata::check_group_name;
use settee_cluster::{ClusterMetadata, MetaCommand, MetaError, NodeId, ProposeError};

use super::auth::Caller;
use super::cluster::{cluster, join_node, otp_node, require_admin};
use super::error::RestError;
use super::form::Form;
use super::pools::{cluster_nodes_json, request_host};
use super::RestState;
use crate::audit::events;

const BASE: &str = "/pools/default/serverGroups";

fn group_uri(uuid: &str) -> String {
    format!("{BASE}/{uuid}")
}

/// ns_server's success body.
fn ok() -> Json<Value> {
    Json(json!([]))
}

/// A status with a JSON body exactly as given (ns_server's group errors are not wrapped in `errors`).
fn answer(status: StatusCode, body: Value) -> RestError {
    RestError::Json(status, body)
}

fn bad_input() -> RestError {
    answer(StatusCode::BAD_REQUEST, json!("Bad input"))
}

/// A refused or failed proposal in ns_server's words for the group commands.
fn proposal_error(e: ProposeError) -> RestError {
    match e {
        ProposeError::Rejected(MetaError::ServerGroupExists(_)) => {
            answer(StatusCode::BAD_REQUEST, json!({"name": "already exists"}))
        }
        ProposeError::Rejected(MetaError::UnknownServerGroup(_)) => answer(StatusCode::NOT_FOUND, json!([])),
        ProposeError::Rejected(MetaError::ServerGroupNotEmpty(_)) => {
            answer(StatusCode::BAD_REQUEST, json!({"_": "group is not empty"}))
        }
        ProposeError::Rejected(MetaError::StaleServerGroups { .. }) => answer(StatusCode::CONFLICT, json!([])),
        ProposeError::Rejected(MetaError::InvalidServerGroupMembers(_)) => bad_input(),
        ProposeError::Rejected(e) => answer(StatusCode::BAD_REQUEST, json!({"_": e.to_string()})),
        e => RestError::global(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// `GET /pools/default/serverGroups`: every group with its uri, addNodeURI and nodes (as `/pools/default` lists
/// them), and the listing's revision in `uri` (`?rev=`), which a move must send back.
pub(crate) async fn list(
    State(state): State<RestState>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.can_read_settings(), || "cluster.pools!read".to_owned())?;
    let cluster = cluster(&state)?;
    let meta = cluster.metadata();
    let nodes = cluster_nodes_json(&state, &request_host(&state, &headers));
    let by_otp: BTreeMap<&str, &Value> = nodes.iter().filter_map(|n| Some((n["otpNode"].as_str()?, n))).collect();
    let view = meta.server_groups();
    let groups: Vec<Value> = view
        .groups
        .iter()
        .map(|g| {
            let members: Vec<Value> = g
                .nodes
                .iter()
                .filter_map(|id| meta.nodes.get(id))
                .filter_map(|n| by_otp.get(otp_node(&meta, n).as_str()).map(|j| (*j).clone()))
                .collect();
            json!({
                "name": g.name,
                "uri": group_uri(&g.uuid),
                "addNodeURI": format!("{}/addNode", group_uri(&g.uuid)),
                "nodes": members,
            })
        })
        .collect();
    Ok(Json(json!({"groups": groups, "uri": format!("{BASE}?rev={}", view.rev)})))
}

/// The `name` form field as ns_server validates it; the errors are its `{field: message}` object.
fn group_name(form: &Form) -> Result<String, RestError> {
    let mut errors = Map::new();
    let unknown: Vec<&str> = form.keys().filter(|k| *k != "name").collect();
    if !unknown.is_empty() {
        errors.insert("_".into(), json!(format!("unknown parameters: {}", unknown.join(", "))));
    }
    let name = match form.get("name") {
        None => Err("is missing"),
        Some(name) => check_group_name(name),
    };
    match name {
        Ok(name) if errors.is_empty() => Ok(name),
        Ok(_) => Err(answer(StatusCode::BAD_REQUEST, Value::Object(errors))),
        Err(why) => {
            errors.insert("name".into(), json!(why));
            Err(answer(StatusCode::BAD_REQUEST, Value::Object(errors)))
        }
    }
}

/// `POST /pools/default/serverGroups` (`name`): creates an empty group.
pub(crate) async fn create(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let name = group_name(&Form::parse(&body))?;
    let uuid = crate::node::random_hex32(state.node.clock.now_nanos());
    cluster
        .propose(MetaCommand::CreateServerGroup { uuid: uuid.clone(), name: name.clone() })
        .await
        .map_err(proposal_error)?;
    tracing::info!(group = %name, %uuid, "server group created");
    caller.audit(&state, events::ADD_GROUP, crate::audit_fields![("group_name", name), ("uuid", uuid)]);
    Ok(ok())
}

/// `PUT /pools/default/serverGroups/<uuid>` (`name`): renames a group.
pub(crate) async fn rename(
    State(state): State<RestState>,
    caller: Caller,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let name = group_name(&Form::parse(&body))?;
    cluster
        .propose(MetaCommand::RenameServerGroup { uuid: uuid.clone(), name: name.clone() })
        .await
        .map_err(proposal_error)?;
    tracing::info!(group = %name, %uuid, "server group renamed");
    audit_update(&state, &caller, &cluster.metadata(), &[uuid]);
    Ok(ok())
}

/// `DELETE /pools/default/serverGroups/<uuid>`: deletes an empty group.
pub(crate) async fn delete(
    State(state): State<RestState>,
    caller: Caller,
    Path(uuid): Path<String>,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let name = cluster.metadata().server_groups().find(&uuid).map(|g| g.name.clone()).unwrap_or_default();
    cluster.propose(MetaCommand::DeleteServerGroup { uuid: uuid.clone() }).await.map_err(proposal_error)?;
    tracing::info!(%uuid, "server group deleted");
    caller.audit(&state, events::DELETE_GROUP, crate::audit_fields![("group_name", name), ("uuid", uuid)]);
    Ok(ok())
}

/// `PUT /pools/default/serverGroups?rev=N` with `{"groups": [{"uri", "nodes": [{"otpNode"}]}]}`: every group
/// with its new members at once. A listing from another revision gets 409, a malformed one "Bad input", and
/// none is taken while a rebalance runs (503), as in ns_server.
pub(crate) async fn set_members(
    State(state): State<RestState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    let meta = cluster.metadata();
    let body: Value = serde_json::from_slice(&body).map_err(|_| bad_input())?;
    let members = parse_members(&meta, &body).ok_or_else(bad_input)?;
    let Some(rev) = query.get("rev").and_then(|r| r.parse::<u64>().ok()) else {
        return Err(answer(StatusCode::CONFLICT, json!([])));
    };
    if cluster.rebalance.lock().running {
        let message = "Cannot update server group while rebalance is running";
        return Err(answer(StatusCode::SERVICE_UNAVAILABLE, json!(message)));
    }
    let uuids: Vec<String> = members.keys().cloned().collect();
    let meta = cluster.propose(MetaCommand::SetServerGroupMembers { rev, members }).await.map_err(proposal_error)?;
    tracing::info!(rev, "server group members changed; a rebalance applies them to the vBucket maps");
    audit_update(&state, &caller, &meta, &uuids);
    Ok(ok())
}

/// ns_server's "update group" event for each of `uuids` as `meta` has it (name, uuid, its nodes' otpNode names):
/// one for a rename, one per group for a move, as ns_server writes them.
fn audit_update(state: &RestState, caller: &Caller, meta: &ClusterMetadata, uuids: &[String]) {
    let view = meta.server_groups();
    for group in uuids.iter().filter_map(|uuid| view.find(uuid)) {
        let nodes: Vec<String> =
            group.nodes.iter().filter_map(|id| meta.nodes.get(id)).map(|n| otp_node(meta, n)).collect();
        let fields =
            crate::audit_fields![("group_name", group.name.clone()), ("uuid", group.uuid.clone()), ("nodes", nodes)];
        caller.audit(state, events::UPDATE_GROUP, fields);
    }
}

/// The members per group uuid a move listing asks for, or None for ns_server's "Bad input": not an object with a
/// `groups` array, a group without a known `uri` or with a `name` other than its own (no renaming here), a node
/// entry without a known `otpNode`. Completeness (every group, every node once) is the metadata's check.
fn parse_members(meta: &ClusterMetadata, body: &Value) -> Option<BTreeMap<String, BTreeSet<NodeId>>> {
    let view = meta.server_groups();
    let mut members = BTreeMap::new();
    for group in body.get("groups")?.as_array()? {
        let uri = group.get("uri")?.as_str()?;
        let known = view.groups.iter().find(|g| group_uri(&g.uuid) == uri)?;
        if group.get("name").is_some_and(|n| n.as_str() != Some(known.name.as_str())) {
            return None;
        }
        let mut nodes = BTreeSet::new();
        for node in group.get("nodes")?.as_array()? {
            let otp = node.get("otpNode")?.as_str()?;
            let id = meta.nodes.values().find(|n| otp_node(meta, n) == otp)?.id;
            if !nodes.insert(id) {
                return None;
            }
        }
        if members.insert(known.uuid.clone(), nodes).is_some() {
            return None;
        }
    }
    Some(members)
}

/// `POST /pools/default/serverGroups/<uuid>/addNode` (`hostname`, `user`, `password`): adds a node as
/// `/controller/addNode` does, into that group: the newcomer registers itself there (`AddNodeInGroup`, one
/// metadata change), so it is never listed in another group.
pub(crate) async fn add_node(
    State(state): State<RestState>,
    caller: Caller,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    require_admin(&caller)?;
    let cluster = cluster(&state)?;
    if cluster.metadata().server_groups().find(&uuid).is_none() {
        return Err(answer(StatusCode::NOT_FOUND, json!([format!("Could not find group with uuid: {uuid}")])));
    }
    let form = Form::parse(&body);
    let (otp, _) = join_node(&state, &caller, cluster, &form, Some(&uuid)).await?;
    tracing::info!(node = %otp, group = %uuid, "node added into a server group");
    Ok(Json(json!({ "otpNode": otp })))
}
