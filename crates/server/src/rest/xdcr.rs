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
use crate::xdcr::model::{RemoteCluster, RemoteTls, ReplSettings, Replication};
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

/// `POST /pools/default/remoteClusters`: name, hostname, username, password, and for full encryption
/// `demandEncryption=1` (or `secureType=full`) with the remote's CA as `certificate`. The remote is asked for its
/// uuid (over TLS when encrypted), so a wrong address, password or CA fails here.
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
    let username = field("username").unwrap_or_default();
    let password = form.get("password").unwrap_or_default().to_owned();
    let encryption = encryption_of(&form, &hostname)?;
    let identity = client_identity_of(&form, encryption.as_ref().is_some_and(|(_, half)| !half), &username, &password)?;
    let encryption = match encryption {
        None => None,
        Some((certificate, half)) => {
            // The CA must parse before anything is dialled; then the TLS management port, as goxdcr finds it.
            let (client_certificate, client_key) = identity.unwrap_or_default();
            let probe = RemoteTls { certificate, mgmt_tls: String::new(), half, client_certificate, client_key };
            probe.client(&hostname).map_err(|e| {
                if probe.client_certificate.is_empty() {
                    RestError::field("certificate", e)
                } else {
                    RestError::field(
                        "InvalidClientCertKeyPair",
                        format!("failed to parse client certificate/key pair; err={e}"),
                    )
                }
            })?;
            let mgmt_tls = remote::tls_mgmt_addr(&hostname).await.map_err(|e| RestError::field("_", e))?;
            Some(RemoteTls { mgmt_tls, ..probe })
        }
    };
    let mut reference = RemoteCluster { name, uuid: String::new(), hostname, username, password, encryption };
    reference.uuid = remote::cluster_uuid(&reference).await.map_err(|e| RestError::field("_", e))?;
    let (name, uuid) = (reference.name.clone(), reference.uuid.clone());
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
    let answer = reference.to_json();
    model.remotes.push(reference);
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    Ok(Json(answer))
}

/// The remote's CA and whether encryption is half when the form asks for encryption, as goxdcr reads it:
/// `secureType` (none, half, full) wins over `demandEncryption` (1/true/on) with `encryptionType` (full when not
/// given); full needs `certificate` (PEM), none refuses one. Half needs one here too: goxdcr makes a half-encrypted
/// reference's management calls with SCRAM-SHA over HTTP, or over HTTPS when the remote does not take that (as
/// settee's REST service does not), which needs the remote's CA; without one it fails as goxdcr does.
fn encryption_of(form: &Form, hostname: &str) -> Result<Option<(String, bool)>, RestError> {
    let secure = match form.get("secureType").map(str::trim).filter(|v| !v.is_empty()) {
        Some(t) => t.to_owned(),
        None if matches!(form.get("demandEncryption").map(str::trim), Some("1" | "true" | "on")) => {
            form.get("encryptionType").map(str::trim).filter(|v| !v.is_empty()).unwrap_or("full").to_owned()
        }
        None => "none".to_owned(),
    };
    let certificate = form.get("certificate").map(str::trim).filter(|c| !c.is_empty());
    match (secure.as_str(), certificate) {
        ("none", None) => Ok(None),
        ("none", Some(_)) => {
            Err(RestError::field("certificate", "certificate cannot be given when secure type is none"))
        }
        ("full", Some(pem)) => Ok(Some((pem.to_owned(), false))),
        ("full", None) => Err(RestError::field("certificate", "certificate must be given when secure type is full")),
        ("half", Some(pem)) => Ok(Some((pem.to_owned(), true))),
        ("half", None) => Err(RestError::field(
            "_",
            format!(
                "Cannot connect to target {hostname} using \"half\" secure mode. Cannot use https because server \
                 certificate has not been provided."
            ),
        )),
        (other, _) => Err(RestError::field("encryptionType", format!("{other} is not one of none, half, full"))),
    }
}

/// The credentials' rules, as goxdcr checks them: outside full encryption a username and password are needed
/// and no client certificate or key may be given; under full encryption either a username (with its password) or
/// a client certificate (with its key, and no password), not both. Returns the certificate and key when given.
fn client_identity_of(
    form: &Form,
    full: bool,
    username: &str,
    password: &str,
) -> Result<Option<(String, String)>, RestError> {
    let pem = |k: &str| form.get(k).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let (certificate, key) = (pem("clientCertificate"), pem("clientKey"));
    if !full {
        if username.is_empty() {
            return Err(RestError::field("username", "username is missing"));
        }
        if password.is_empty() {
            return Err(RestError::field("password", "password is missing"));
        }
        if certificate.is_some() {
            let e = "client certificate cannot be given when secure type is not full";
            return Err(RestError::field("clientCertificate", e));
        }
        if key.is_some() {
            return Err(RestError::field("clientKey", "client key cannot be given when secure type is not full"));
        }
        return Ok(None);
    }
    match (username.is_empty(), certificate) {
        (true, None) => {
            Err(RestError::field("_", "either username or client certificate must be given when secure type is full"))
        }
        (false, Some(_)) => {
            Err(RestError::field("_", "username and client certificate cannot both be given when secure type is full"))
        }
        (false, None) if password.is_empty() => {
            Err(RestError::field("password", "password must be given when username is specified"))
        }
        (false, None) if key.is_some() => {
            Err(RestError::field("clientKey", "client key cannot be given when client certificate is not specified"))
        }
        (false, None) => Ok(None),
        (true, Some(_)) if !password.is_empty() => {
            Err(RestError::field("password", "password cannot be given when username is not specified"))
        }
        (true, Some(cert)) => match key {
            Some(key) => Ok(Some((cert, key))),
            None => Err(RestError::field("clientKey", "client key must be given when client certificate is specified")),
        },
    }
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
        restreams: 0,
    });
    node.xdcr.save(node, &model).await.map_err(unavailable)?;
    tracing::info!(replication = %id, "xdcr replication created");
    Ok(Json(json!({ "id": id })))
}

/// The target bucket exists on the remote and resolves conflicts as the source does (`conflict_resolution`): two
/// buckets that resolve differently would not converge (goxdcr refuses such a replication with the same words).
async fn check_target_bucket(remote: &RemoteCluster, bucket: &str, conflict_resolution: &str) -> Result<(), RestError> {
    let path = format!("/pools/default/buckets/{bucket}");
    let reply = remote::get(remote, &path).await.map_err(|e| RestError::field("toCluster", e))?;
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
/// A new filter expression without `filterSkipRestream=true` restarts the replication from seqno 0
/// (`Replication::edit`).
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
    r.edit(|k| form.get(k).map(str::to_owned)).map_err(|(f, e)| RestError::field(&f, e))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The form field a 400 names.
    fn field_of(e: RestError) -> String {
        match e {
            RestError::Json(StatusCode::BAD_REQUEST, body) => {
                body["errors"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default()
            }
            _ => panic!("not a field error"),
        }
    }

    /// Proves the encryption fields are read as goxdcr reads them: none by default, demandEncryption meaning full
    /// unless encryptionType says otherwise, secureType winning, a certificate required by full and half (settee's
    /// REST has no SCRAM-SHA, so half's management calls need HTTPS) and refused by none.
    #[test]
    fn encryption_is_full_when_demanded_and_needs_a_certificate() {
        let form = |body: &str| Form::parse(body.as_bytes());
        let of = |body: &str| encryption_of(&form(body), "h:1");
        let full = Some(("PEM".to_owned(), false));
        assert_eq!(of("name=a").unwrap(), None);
        assert_eq!(of("demandEncryption=1&certificate=PEM").unwrap(), full);
        assert_eq!(of("secureType=full&certificate=PEM").unwrap(), full);
        assert_eq!(field_of(of("demandEncryption=1").unwrap_err()), "certificate");
        assert_eq!(field_of(of("certificate=PEM").unwrap_err()), "certificate");
        let half = of("demandEncryption=true&encryptionType=half&certificate=PEM").unwrap();
        assert_eq!(half, Some(("PEM".to_owned(), true)));
        assert_eq!(of("secureType=half&certificate=PEM").unwrap(), half);
        assert_eq!(field_of(of("secureType=half").unwrap_err()), "_");
        assert_eq!(
            field_of(of("demandEncryption=1&encryptionType=quarter&certificate=PEM").unwrap_err()),
            "encryptionType"
        );
        assert_eq!(of("secureType=none&demandEncryption=1").unwrap(), None, "secureType wins");
    }

    /// Proves goxdcr's credential rules: a username and password outside full encryption, and under it either a
    /// username with its password or a client certificate with its key (no password), never both.
    #[test]
    fn credentials_are_a_password_or_a_client_certificate_when_full() {
        let check = |body: &str, full: bool, user: &str, password: &str| {
            client_identity_of(&Form::parse(body.as_bytes()), full, user, password)
        };
        assert_eq!(check("", false, "u", "p").unwrap(), None);
        assert_eq!(field_of(check("", false, "", "p").unwrap_err()), "username");
        assert_eq!(field_of(check("", false, "u", "").unwrap_err()), "password");
        assert_eq!(field_of(check("clientCertificate=C", false, "u", "p").unwrap_err()), "clientCertificate");
        assert_eq!(field_of(check("clientKey=K", false, "u", "p").unwrap_err()), "clientKey");
        assert_eq!(check("", true, "u", "p").unwrap(), None);
        let both = Some(("C".to_owned(), "K".to_owned()));
        assert_eq!(check("clientCertificate=C&clientKey=K", true, "", "").unwrap(), both);
        assert_eq!(field_of(check("", true, "", "").unwrap_err()), "_");
        assert_eq!(field_of(check("clientCertificate=C&clientKey=K", true, "u", "p").unwrap_err()), "_");
        assert_eq!(field_of(check("clientCertificate=C", true, "", "").unwrap_err()), "clientKey");
        assert_eq!(field_of(check("clientCertificate=C&clientKey=K", true, "", "p").unwrap_err()), "password");
        assert_eq!(field_of(check("clientKey=K", true, "u", "p").unwrap_err()), "clientKey");
        assert_eq!(field_of(check("", true, "u", "").unwrap_err()), "password");
    }
}
