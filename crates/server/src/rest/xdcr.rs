//! XDCR's REST API, Couchbase's names and shapes: `/pools/default/remoteClusters[/<name>]`,
//! `/controller/createReplication`, `/settings/replications[/<id>]`, `/controller/cancelXDCR/<id>`. The model is
//! cluster-wide (`xdcr::model`, Raft metadata); the runners follow it (`xdcr::manage`). Managing needs admin,
//! cluster_admin or replication_admin; reading also ro_admin.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::xdcr::model::{RemoteCluster, ReplSettings, Replication};
use crate::xdcr::remote;

const MANAGE: &str = "cluster.xdcr.remote_clusters!write";
const READ: &str = "cluster.xdcr.remote_clusters!read";

fn unavailable(e: String) -> RestError {
    RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the XDCR settings failed: {e}"))
}

/// `GET /pools/default/remoteClusters`.
pub(crate) async fn list_remotes(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_xdcr(), || READ.to_owned())?;
    let model = state.node.xdcr.model(&state.node);
    Ok(Json(Value::Array(model.remotes.iter().map(RemoteCluster::to_json).collect())))
}

/// `POST /pools/default/remoteClusters`: name, hostname, username, password (demandEncryption=1 is refused: no
/// TLS to remotes yet). The remote is asked for its uuid, so a wrong address or password fails here.
pub(crate) async fn create_remote(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    upsert_remote(state, caller, None, body).await
}

/// `POST /pools/default/remoteClusters/<name>`: edits a reference (the same fields).
pub(crate) async fn edit_remote(
    State(state): State<RestState>,
    caller: Caller,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    upsert_remote(state, caller, Some(name), body).await
}

async fn upsert_remote(
    state: RestState,
    caller: Caller,
    existing: Option<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_manage_xdcr(), || MANAGE.to_owned())?;
    let form = Form::parse(&body);
    let field = |k: &str| form.get(k).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let name = field("name").ok_or_else(|| RestError::field("name", "cluster name is missing"))?;
    let hostname = field("hostname").ok_or_else(|| RestError::field("hostname", "hostname (ip) is missing"))?;
    let hostname = remote::normalise_hostname(&hostname).map_err(|e| RestError::field("hostname", e))?;
    let username = field("username").ok_or_else(|| RestError::field("username", "username is missing"))?;
    let password = form.get("password").unwrap_or_default().to_owned();
    if password.is_empty() {
        return Err(RestError::field("password", "password is missing"));
    }
    if matches!(form.get("demandEncryption"), Some("1" | "true" | "on")) {
        return Err(RestError::field("demandEncryption", "encrypted XDCR connections are not supported yet"));
    }
    let uuid = remote::cluster_uuid(&hostname, &username, &password).await.map_err(|e| RestError::field("_", e))?;
    let node = &state.node;
    let mut model = node.xdcr.model(node);
    let taken = model.remotes.iter().any(|r| r.name == name && existing.as_deref() != Some(&name));
    if taken {
        return Err(RestError::field("name", "duplicate cluster names are not allowed"));
    }
    if let Some(old) = &existing {
        let Some(pos) = model.remotes.iter().position(|r| &r.name == old) else { return Err(RestError::NotFound) };
        model.remotes.remove(pos);
    }
    if model.remotes.iter().any(|r| r.uuid == uuid) {
        return Err(RestError::field("_", "a reference to the same remote cluster already exists"));
    }
    let reference = RemoteCluster { name, uuid, hostname, username, password };
    let answer = reference.to_json();
    model.remotes.push(reference);
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    Ok(Json(answer))
}

/// `DELETE /pools/default/remoteClusters/<name>`: refused while a replication uses it.
pub(crate) async fn delete_remote(
    State(state): State<RestState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_manage_xdcr(), || MANAGE.to_owned())?;
    let node = &state.node;
    let mut model = node.xdcr.model(node);
    let Some(pos) = model.remotes.iter().position(|r| r.name == name) else { return Err(RestError::NotFound) };
    let uuid = model.remotes[pos].uuid.clone();
    if model.replications.iter().any(|r| r.remote_uuid == uuid) {
        return Err(RestError::field(
            "_",
            format!("Cannot delete remote cluster `{name}` since it is referenced by replications"),
        ));
    }
    model.remotes.remove(pos);
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    Ok(Json(json!("ok")))
}

/// `POST /controller/createReplication`: fromBucket, toCluster, toBucket, replicationType=continuous and the
/// settings of `/settings/replications`.
pub(crate) async fn create_replication(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_manage_xdcr(), || MANAGE.to_owned())?;
    let form = Form::parse(&body);
    let field = |k: &str| form.get(k).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let from = field("fromBucket").ok_or_else(|| RestError::field("fromBucket", "source bucket is missing"))?;
    let to_cluster = field("toCluster").ok_or_else(|| RestError::field("toCluster", "target cluster is missing"))?;
    let to_bucket = field("toBucket").ok_or_else(|| RestError::field("toBucket", "target bucket is missing"))?;
    if let Some(t) = field("replicationType") {
        if t != "continuous" {
            return Err(RestError::field("replicationType", "only continuous replications are supported"));
        }
    }
    let node = &state.node;
    let Some(source) = node.bucket(&from) else {
        return Err(RestError::field("fromBucket", format!("Bucket `{from}` does not exist")));
    };
    let conflict_resolution = source.conflict_resolution().name();
    let remote = node
        .xdcr
        .model(node)
        .remote(&to_cluster)
        .cloned()
        .ok_or_else(|| RestError::field("toCluster", format!("unknown remote cluster `{to_cluster}`")))?;
    let settings =
        ReplSettings::default().edited(|k| form.get(k).map(str::to_owned)).map_err(|(f, e)| RestError::field(&f, e))?;
    // The remote call may take seconds: the model is read again after it, so a change made meanwhile is kept.
    check_target_bucket(&remote, &to_bucket, conflict_resolution).await?;
    let mut model = node.xdcr.model(node);
    if model.remote(&to_cluster).is_none_or(|r| r.uuid != remote.uuid) {
        return Err(RestError::field("toCluster", format!("remote cluster `{to_cluster}` changed meanwhile")));
    }
    let id = Replication::id_of(&remote.uuid, &from, &to_bucket);
    if model.replication(&id).is_some() {
        return Err(RestError::field("_", "Replication to the same remote cluster and bucket already exists"));
    }
    let remote_uuid = remote.uuid.clone();
    model.replications.push(Replication {
        id: id.clone(),
        source_bucket: from,
        remote_uuid,
        target_bucket: to_bucket,
        settings,
    });
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    tracing::info!(replication = %id, "xdcr replication created");
    Ok(Json(json!({ "id": id })))
}

/// The target bucket exists on the remote and resolves conflicts as the source does (`conflict_resolution`): two
/// buckets that resolve differently would not converge (goxdcr refuses such a replication with the same words).
async fn check_target_bucket(remote: &RemoteCluster, bucket: &str, conflict_resolution: &str) -> Result<(), RestError> {
    let path = format!("/pools/default/buckets/{bucket}");
    let creds = Some((remote.username.as_str(), remote.password.as_str()));
    let body = settee_cluster::peer::Body::Empty;
    let timeout = std::time::Duration::from_secs(10);
    let reply = crate::cluster::rest_client::call(&remote.hostname, None, None, "GET", &path, creds, &body, timeout)
        .await
        .map_err(|e| RestError::field("toCluster", format!("cannot reach the remote cluster: {e}")))?;
    match reply.status {
        200 => {
            let target: Value = serde_json::from_str(&reply.body).unwrap_or_default();
            // A target that does not say (not settee, not Couchbase) resolves by revision, Couchbase's default.
            let theirs = target["conflictResolutionType"].as_str().unwrap_or("seqno");
            if theirs != conflict_resolution {
                let why = "Replication between buckets with different ConflictResolutionType setting is not allowed";
                return Err(RestError::field("_", why));
            }
            Ok(())
        }
        404 => Err(RestError::field("toBucket", format!("Bucket `{bucket}` does not exist on the remote cluster"))),
        s => Err(RestError::field("toBucket", format!("the remote cluster answered HTTP {s} for bucket `{bucket}`"))),
    }
}

/// `GET /settings/replications`: the defaults a new replication gets.
pub(crate) async fn default_settings(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_xdcr(), || READ.to_owned())?;
    Ok(Json(ReplSettings::default().to_json()))
}

/// `GET /settings/replications/<id>`.
pub(crate) async fn get_settings(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_xdcr(), || READ.to_owned())?;
    let model = state.node.xdcr.model(&state.node);
    let r = model.replication(&id).ok_or(RestError::NotFound)?;
    Ok(Json(r.settings.to_json()))
}

/// `POST /settings/replications/<id>`: pauseRequested and the other settings; fields not named keep their values.
pub(crate) async fn set_settings(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_manage_xdcr(), || MANAGE.to_owned())?;
    let form = Form::parse(&body);
    let node = &state.node;
    let mut model = node.xdcr.model(node);
    let r = model.replications.iter_mut().find(|r| r.id == id).ok_or(RestError::NotFound)?;
    r.settings = r.settings.edited(|k| form.get(k).map(str::to_owned)).map_err(|(f, e)| RestError::field(&f, e))?;
    let answer = r.settings.to_json();
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    Ok(Json(answer))
}

/// `DELETE /controller/cancelXDCR/<id>`: deletes the replication (its runners stop, its checkpoints go).
pub(crate) async fn cancel(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_manage_xdcr(), || MANAGE.to_owned())?;
    let node = &state.node;
    let mut model = node.xdcr.model(node);
    let before = model.replications.len();
    model.replications.retain(|r| r.id != id);
    if model.replications.len() == before {
        return Err(RestError::NotFound);
    }
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    tracing::info!(replication = %id, "xdcr replication cancelled");
    Ok(StatusCode::OK)
}
