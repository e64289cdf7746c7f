//! Couchbase's per-node network configuration endpoints, as `couchbase-cli node-to-node-encryption` drives them:
//! `enableExternalListener`, `setupNetConfig` and `disableUnusedExternalListeners` on every node in turn (and
//! `disableExternalListener`). settee's TLS ports always listen, so only `setupNetConfig` changes anything: it
//! records the node's `nodeEncryption` in the cluster metadata (`NodeInfo::node_encryption`), and the cluster's
//! `clusterEncryptionLevel` applies once every node has it on (`cluster::peer_links`). The validators and their
//! messages are ns_server's (`menelaus_web_node`): auto-failover must be off, and node encryption cannot be turned
//! off while the level is `all` or `strict`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use settee_cluster::{ClusterMetadata, MetaCommand};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::auth::{ClientCertState, EncryptionLevel, SecuritySettings};

/// What a request asks for, once its fields are valid.
#[derive(Debug, Default, PartialEq, Eq)]
struct NetConfig {
    node_encryption: Option<bool>,
}

/// `POST /node/controller/enableExternalListener`: checked as ns_server checks it; settee's TLS listeners already run.
pub(crate) async fn enable_external_listener(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    validated(&state, &caller, &body, true)?;
    Ok(StatusCode::OK)
}

/// `POST /node/controller/disableExternalListener`: settee keeps both kinds of listener, as Couchbase does for the
/// one in use; only the form is checked (ns_server's "safe" validators).
pub(crate) async fn disable_external_listener(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    validated(&state, &caller, &body, false)?;
    Ok(StatusCode::OK)
}

/// `POST /node/controller/disableUnusedExternalListeners`: nothing to close in settee (its ports are its command
/// line's), so 200.
pub(crate) async fn disable_unused_external_listeners(caller: Caller) -> Result<StatusCode, RestError> {
    require_admin(&caller)?;
    Ok(StatusCode::OK)
}

/// `POST /node/controller/setupNetConfig` with `nodeEncryption=on|off` (and `afamily=ipv4`): records this node's
/// node encryption in the cluster metadata, which every node applies (see the module doc).
pub(crate) async fn setup_net_config(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let asked = validated(&state, &caller, &body, true)?;
    let (Some(on), Some(cluster)) = (asked.node_encryption, state.node.cluster()) else { return Ok(StatusCode::OK) };
    let meta = cluster.metadata();
    let Some(mine) = meta.nodes.get(&cluster.me) else { return Ok(StatusCode::OK) };
    if mine.node_encryption != on {
        // This node's own entry: the metadata version it records is its own, whatever an older leader left.
        let meta_version = crate::cluster::meta_version();
        let info = settee_cluster::NodeInfo { node_encryption: on, meta_version, ..mine.clone() };
        cluster.propose(MetaCommand::UpdateNode(info)).await.map_err(|e| {
            RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the node's encryption failed: {e}"))
        })?;
        tracing::info!(node_encryption = on, "node-to-node encryption setting of this node changed");
    }
    Ok(StatusCode::OK)
}

fn require_admin(caller: &Caller) -> Result<(), RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin.setup!write".to_owned())
}

/// Parses and checks the form; `changes` applies ns_server's checks of a change to the network configuration.
fn validated(state: &RestState, caller: &Caller, body: &[u8], changes: bool) -> Result<NetConfig, RestError> {
    require_admin(caller)?;
    let fields = Form::parse(body).into_pairs();
    let asked = parse(&fields).map_err(RestError::fields)?;
    if !changes {
        return Ok(asked);
    }
    let Some(cluster) = state.node.cluster() else { return Ok(asked) };
    let meta = cluster.metadata();
    let settings = SecuritySettings::from_metadata(&meta.security);
    refusal(&meta, &settings, &asked, tls_ports_on(state)).map_or(Ok(asked), Err)
}

/// Whether this node serves the TLS ports node-to-node encryption needs (KV and management).
fn tls_ports_on(state: &RestState) -> bool {
    state.node.config.kv_tls_port != 0 && state.node.config.mgmt_tls_port != 0
}

/// ns_server's form validators: `nodeEncryption` on/off, `afamily` ipv4 (settee does not change address family),
/// `afamilyOnly` and `clientCertVerification` booleans, nothing else, and at least one field.
fn parse(fields: &[(String, String)]) -> Result<NetConfig, Map<String, Value>> {
    let mut asked = NetConfig::default();
    let mut errors = Map::new();
    if fields.is_empty() {
        errors.insert("_".to_owned(), json!("Request should have form parameters"));
    }
    for (name, value) in fields {
        let error = match (name.as_str(), value.as_str()) {
            ("nodeEncryption", "on") => {
                asked.node_encryption = Some(true);
                continue;
            }
            ("nodeEncryption", "off") => {
                asked.node_encryption = Some(false);
                continue;
            }
            ("nodeEncryption", _) => "The value must be one of the following: [on,off]",
            ("afamily", "ipv4") | ("afamilyOnly", "false") | ("clientCertVerification", "false") => continue,
            ("afamily", "ipv6") => "settee does not change a node's address family",
            ("afamily", _) => "The value must be one of the following: [ipv4,ipv6]",
            ("afamilyOnly", "true") => "settee does not change a node's address family",
            ("clientCertVerification", "true") => "settee does not verify client certificates between nodes",
            ("afamilyOnly" | "clientCertVerification", _) => "The value must be one of the following: [true,false]",
            _ => "Unsupported key",
        };
        errors.insert(name.clone(), json!(error));
    }
    if errors.is_empty() {
        Ok(asked)
    } else {
        Err(errors)
    }
}

/// ns_server's `verify_net_config_allowed`, and settee's own need for the TLS ports: the refusal, if any.
fn refusal(meta: &ClusterMetadata, settings: &SecuritySettings, asked: &NetConfig, tls_on: bool) -> Option<RestError> {
    let encrypted = !meta.nodes.is_empty() && meta.nodes.values().all(|n| n.node_encryption);
    if meta.auto_failover.enabled {
        return Some(RestError::global(
            StatusCode::BAD_REQUEST,
            "Can't change network configuration when auto-failover is enabled.",
        ));
    }
    let level = settings.cluster_encryption_level;
    if encrypted && level >= EncryptionLevel::All && asked.node_encryption == Some(false) {
        let message =
            format!("Can't disable nodeEncryption when the cluster encryption level has been set to {}", level.name());
        return Some(RestError::field("nodeEncryption", message));
    }
    if asked.node_encryption == Some(true) && settings.client_cert_auth.state == ClientCertState::Mandatory {
        return Some(RestError::field(
            "nodeEncryption",
            "Can't enable nodeEncryption while client certificate authentication is 'mandatory': nodes present no client certificate to each other",
        ));
    }
    if asked.node_encryption == Some(true) && !tls_on {
        return Some(RestError::field(
            "nodeEncryption",
            "Can't enable nodeEncryption on a node whose KV or management TLS port is off (--kv-tls-port, --mgmt-tls-port)",
        ));
    }
    None
}

/// Whether every node of the cluster has node encryption on (ns_server's `is_cluster_encryption_fully_enabled`);
/// false for a node outside a cluster.
pub(crate) fn node_encryption_everywhere(state: &RestState) -> bool {
    state.node.cluster().is_some_and(|c| {
        let meta = c.metadata();
        !meta.nodes.is_empty() && meta.nodes.values().all(|n| n.node_encryption)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Proves the form is read as ns_server's validators read it: on/off, ipv4, and each bad field named with
    /// ns_server's message.
    #[test]
    fn parse_accepts_what_couchbase_cli_sends_and_names_bad_fields() {
        assert_eq!(parse(&form(&[("nodeEncryption", "on")])), Ok(NetConfig { node_encryption: Some(true) }));
        let ipv4 = form(&[("afamily", "ipv4"), ("afamilyOnly", "false"), ("nodeEncryption", "off")]);
        assert_eq!(parse(&ipv4), Ok(NetConfig { node_encryption: Some(false) }));
        let errors = parse(&form(&[("nodeEncryption", "yes"), ("bogus", "1")])).expect_err("refused");
        assert_eq!(errors["nodeEncryption"], "The value must be one of the following: [on,off]");
        assert_eq!(errors["bogus"], "Unsupported key");
        assert!(parse(&[]).expect_err("no fields").contains_key("_"));
    }

    /// Proves ns_server's refusals: any change while auto-failover is on; turning node encryption off while the
    /// level is `all` or `strict` (with the level in the message); turning it on without TLS ports.
    #[test]
    fn refusal_follows_ns_server_and_needs_the_tls_ports() {
        let mut meta = ClusterMetadata::default();
        let tls_ports = settee_cluster::TlsPorts { kv: 11207, mgmt: 18091, query: 18093 };
        let node = settee_cluster::NodeInfo {
            tls_ports,
            node_encryption: true,
            ..settee_cluster::NodeInfo::new(1, "127.0.0.1", 8091)
        };
        meta.nodes.insert(1, node);
        let on = NetConfig { node_encryption: Some(true) };
        let off = NetConfig { node_encryption: Some(false) };
        let all = SecuritySettings { cluster_encryption_level: EncryptionLevel::All, ..SecuritySettings::default() };
        assert!(refusal(&meta, &all, &on, true).is_some(), "auto-failover is on by default");
        meta.auto_failover.enabled = false;
        let text = |e: Option<RestError>| format!("{:?}", e.expect("refused"));
        assert!(text(refusal(&meta, &all, &off, true)).contains("encryption level has been set to all"));
        assert!(refusal(&meta, &SecuritySettings::default(), &off, true).is_none(), "at control it may go off");
        assert!(text(refusal(&meta, &all, &on, false)).contains("TLS port is off"));
        assert!(refusal(&meta, &all, &on, true).is_none());
        let mut mandatory = all.clone();
        mandatory.client_cert_auth.state = ClientCertState::Mandatory;
        assert!(text(refusal(&meta, &mandatory, &on, true)).contains("'mandatory'"), "nodes present no certificate");
    }
}
