//! `POST /nodeInit`: couchbase-cli's `node-init`, which sets a node's name (`hostname`), address family and data
//! paths before it joins a cluster.
//!
//! A settee node's name, address and data directory come from its command line (`--host`, `--data-dir`) and are
//! in the cluster's metadata from its first start, so they cannot change at run time. The endpoint accepts what
//! already holds (the CLI's usual call names the node's own host and paths) and refuses anything else with the
//! flag to restart with, instead of answering success for a change it did not make.

use std::path::Path;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;

/// The fields of `/nodeInit` and what each must equal here, or the refusal naming the flag that sets it.
fn check_field(state: &RestState, field: &str, value: &str) -> Result<(), String> {
    let config = &state.node.config;
    let same_dir = |v: &str| {
        Path::new(v) == config.data_dir || std::fs::canonicalize(v).ok() == config.data_dir.canonicalize().ok()
    };
    match field {
        "hostname" => (value == config.host || value == state.node.advertised_host())
            .then_some(())
            .ok_or_else(|| format!("The node's name is {}; start it with --host {value} to change it", config.host)),
        "afamily" => {
            let ipv6 = config.host.contains(':');
            match value {
                "ipv4" if !ipv6 => Ok(()),
                "ipv6" if ipv6 => Ok(()),
                "ipv4" | "ipv6" => Err(format!("The node's address family follows --host ({})", config.host)),
                _ => Err("afamily must be ipv4 or ipv6".to_owned()),
            }
        }
        "dataPath" | "indexPath" | "analyticsPath" | "eventingPath" => same_dir(value).then_some(()).ok_or_else(|| {
            format!(
                "settee keeps everything under --data-dir ({}); restart with --data-dir to move it",
                config.data_dir.display()
            )
        }),
        "javaHome" => value.is_empty().then_some(()).ok_or_else(|| "settee has no analytics service".to_owned()),
        _ => Err("Unsupported key".to_owned()),
    }
}

/// `POST /nodeInit` (`hostname`, `afamily`, `dataPath`, `indexPath`, `analyticsPath`, `eventingPath`, `javaHome`).
pub(crate) async fn node_init(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    let errors: Map<String, Value> = Form::parse(&body)
        .into_pairs()
        .into_iter()
        .filter_map(|(field, value)| check_field(&state, &field, value.trim()).err().map(|e| (field, json!(e))))
        .collect();
    if !errors.is_empty() {
        return Err(RestError::fields(errors));
    }
    Ok(StatusCode::OK)
}
