//! The per-opcode latency percentiles over REST (settee-only; the console's latency view):
//!
//! - `GET /settee/timings` (`cluster.stats!read`): each node's percentiles by bucket and opcode, and the whole
//!   cluster's from the nodes' histograms merged (percentiles never merge; histograms do):
//!   `{"percentiles": [...], "nodes": [{"hostname", "buckets"} | {"hostname", "error"}], "cluster": {...}}`, each
//!   summary `{"count", "p50", "p90", "p99", "p99.9", "max"}` in microseconds;
//! - `GET /settee/node/timings` (administrators; node to node): this node's histograms in kv_engine's
//!   GET_CMD_TIMER JSON, by bucket and opcode.
//!
//! The histograms are the ones GET_CMD_TIMER, `/metrics` and `settee timings` read (`timings/`), summarised by
//! `timings::summary` the way `settee timings` prints them.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::bucket_stats::{my_addr, node_addrs};
use super::error::RestError;
use super::RestState;
use crate::timings::summary::{self, NodeHistograms};

/// How long a node's histograms may take to arrive; a node that does not answer in time is reported as such.
const NODE_TIMEOUT: Duration = Duration::from_secs(5);
const NODE_PATH: &str = "/settee/node/timings";

/// `GET /settee/node/timings`: this node's histograms.
pub(crate) async fn node_timings(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    Ok(Json(summary::node_json(&state.node)))
}

/// `GET /settee/timings`: every node's percentiles and the cluster's.
pub(crate) async fn cluster_timings(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_stats(), || "cluster.stats!read".to_owned())?;
    let me = my_addr(&state);
    let asked = node_addrs(&state).into_iter().map(|addr| {
        let state = &state;
        let me = &me;
        async move {
            let got = if addr == *me { Ok(summary::node_json(&state.node)) } else { ask(state, &addr).await };
            let parsed = got.and_then(|v| summary::parse_node_json(&v).ok_or_else(|| "not a histogram".to_owned()));
            (addr, parsed)
        }
    });
    let answers = futures_util::future::join_all(asked).await;
    let mut cluster = NodeHistograms::new();
    let mut nodes = Vec::new();
    for (hostname, parsed) in answers {
        match parsed {
            Ok(h) => {
                summary::merge(&mut cluster, &h);
                nodes.push(json!({"hostname": hostname, "buckets": summary::summaries(&h)}));
            }
            Err(e) => {
                tracing::info!(node = %hostname, error = %e, "a node's timings are left out");
                nodes.push(json!({"hostname": hostname, "error": e}));
            }
        }
    }
    let percentiles: Vec<&str> = summary::PERCENTILES.iter().map(|(name, _)| *name).collect();
    Ok(Json(json!({"percentiles": percentiles, "nodes": nodes, "cluster": summary::summaries(&cluster)})))
}

/// A peer's histograms, asked with the node's own credentials (as the statistics endpoints ask).
async fn ask(state: &RestState, addr: &str) -> Result<Value, String> {
    let links = &state.node.peer_links;
    let (addr, tls) = links.mgmt(addr);
    let (user, password) = state.node.peer_credentials();
    let creds = Some((user.as_str(), password.as_str()));
    let body = settee_cluster::peer::Body::Empty;
    let reply = crate::cluster::rest_client::call(
        &addr,
        links.source(),
        tls.as_ref(),
        "GET",
        NODE_PATH,
        creds,
        &body,
        NODE_TIMEOUT,
    )
    .await
    .map_err(|e| e.to_string())?;
    if reply.status != 200 {
        return Err(format!("{addr} answered {NODE_PATH} with status {}", reply.status));
    }
    serde_json::from_str(&reply.body).map_err(|e| format!("{addr}: not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::StatusCode;

    use crate::rest::testing::TestApp;

    #[tokio::test]
    async fn timings_report_each_opcode_per_node_and_for_the_cluster() {
        // Proves `/settee/timings` reports the node's recorded operations with their percentiles, the one-node
        // cluster's summary equals the node's, and a user without the stats privilege is refused.
        let app = TestApp::new();
        let bucket = app.state.node.bucket("default").expect("bucket");
        for us in [100u64, 200, 300] {
            bucket.timings.record(settee_mcbp::Opcode::Get as u8, Duration::from_micros(us));
        }
        let t = app.get_ok("/settee/timings").await;
        let node = &t["nodes"][0];
        assert!(node["hostname"].as_str().is_some_and(|h| h.contains(':')), "{t}");
        assert_eq!(node["buckets"]["default"]["GET"]["count"], 3);
        assert!(node["buckets"]["default"]["GET"]["p99"].as_f64().is_some_and(|p| p >= 200.0));
        assert_eq!(t["cluster"], node["buckets"]);
        assert_eq!(t["percentiles"], serde_json::json!(["p50", "p90", "p99", "p99.9"]));
        app.add_user("reader", "password", "data_reader[default]");
        let refused = app.call("GET", "/settee/timings", Some(("reader", "password")), None).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let refused = app.call("GET", "/settee/node/timings", Some(("reader", "password")), None).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
    }
}
