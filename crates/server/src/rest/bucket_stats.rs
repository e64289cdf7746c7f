//! Couchbase's statistics REST for a bucket, from the node's sampled history (`stats_history`):
//!
//! - `GET /pools/default/buckets/<b>/stats?zoom=minute|hour|day|week|month|year&haveTStamp=<ms>`: the whole
//!   cluster's samples (each node's, summed; percentages averaged), as the console and couchbase-cli read them:
//!   `{"op": {"samples": {<stat>: [...], "timestamp": [...]}, "samplesCount", "isPersistent", "lastTStamp",
//!   "interval"}, "hot_keys": []}`;
//! - `GET /pools/default/buckets/<b>/nodes/<host:port>/stats`: the same for one node;
//! - both for `<b>` = `@xdcr-<bucket>`, Couchbase's section of the bucket's XDCR statistics: per replication run
//!   from it, `replications/<uuid>/<bucket>/<target bucket>/<stat>` (docs_written, changes_left, ...), and
//!   `replication_changes_left`;
//! - `POST /settee/node/bucketSamples` (settee-only, administrators): one node's samples, which the first two
//!   (and `stats_range`) gather from each node.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Map, Value};
use settee_cluster::peer::{self, BucketSamples, BucketSamplesRequest};

use super::auth::Caller;
use super::error::RestError;
use super::RestState;
use crate::stats_history::{shown, Shown, Tier};

/// How long a node's samples may take to arrive; a node that does not answer in time is left out.
const SAMPLES_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(serde::Deserialize)]
pub(crate) struct StatsParams {
    zoom: Option<String>,
    #[serde(rename = "haveTStamp")]
    have_tstamp: Option<u64>,
}

/// `GET /pools/default/buckets/<b>/stats`: every node's samples of the bucket, merged.
pub(crate) async fn bucket_stats(
    State(state): State<RestState>,
    caller: Caller,
    Path(bucket): Path<String>,
    Query(params): Query<StatsParams>,
) -> Result<Json<Value>, RestError> {
    let request = checked(&state, &caller, bucket, &params)?;
    let mut parts = Vec::new();
    // This node first: the merge aligns the others on its sample times.
    for (addr, samples) in gather(&state, &request, &node_addrs(&state)).await {
        match samples {
            Ok(samples) => parts.push(samples),
            Err(e) => tracing::info!(node = %addr, error = %e, "a node's statistics are left out of the bucket's"),
        }
    }
    Ok(Json(render(&state, &request, &merge(&parts))))
}

/// `GET /pools/default/buckets/<b>/nodes/<host:port>/stats`: one node's samples of the bucket.
pub(crate) async fn node_bucket_stats(
    State(state): State<RestState>,
    caller: Caller,
    Path((bucket, node)): Path<(String, String)>,
    Query(params): Query<StatsParams>,
) -> Result<Json<Value>, RestError> {
    let request = checked(&state, &caller, bucket, &params)?;
    if !node_addrs(&state).contains(&node) {
        return Err(RestError::NotFound);
    }
    let samples = match gather(&state, &request, std::slice::from_ref(&node)).await.pop() {
        Some((_, Ok(samples))) => samples,
        Some((_, Err(e))) => {
            let why = format!("node {node}: {e}");
            return Err(RestError::global(axum::http::StatusCode::INTERNAL_SERVER_ERROR, why));
        }
        None => return Err(RestError::NotFound),
    };
    Ok(Json(render(&state, &request, &samples)))
}

/// `POST /settee/node/bucketSamples`: this node's samples (a JSON `BucketSamplesRequest`).
pub(crate) async fn node_samples(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<BucketSamples>, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    let request: BucketSamplesRequest = peer::decode_request(&body)
        .map_err(|e| RestError::global(axum::http::StatusCode::BAD_REQUEST, format!("Not a samples request: {e}")))?;
    Ok(Json(local_samples(&state, &request)?))
}

/// The request for `bucket` after the checks every statistics endpoint makes: the caller may read the bucket's
/// statistics, the bucket exists, the zoom is one of Couchbase's.
fn checked(
    state: &RestState,
    caller: &Caller,
    bucket: String,
    params: &StatsParams,
) -> Result<BucketSamplesRequest, RestError> {
    // Couchbase's XDCR section of a bucket, `@xdcr-<bucket>`, is read with the bucket's permission.
    let source = bucket.strip_prefix("@xdcr-").unwrap_or(&bucket);
    let allowed = caller.can_read_stats() || caller.user.bucket_access(source).stats;
    caller.require(allowed, || format!("cluster.bucket[{source}].stats!read"))?;
    if state.node.bucket(source).is_none() {
        return Err(RestError::NotFound);
    }
    let zoom = params.zoom.clone().unwrap_or_else(|| "minute".to_owned());
    if Tier::named(Some(&zoom)).is_none() {
        return Err(RestError::field("zoom", "The value must be one of minute, hour, day, week, month, year"));
    }
    Ok(BucketSamplesRequest { bucket, zoom, since_ms: params.have_tstamp })
}

fn local_samples(state: &RestState, request: &BucketSamplesRequest) -> Result<BucketSamples, RestError> {
    let tier = Tier::named(Some(&request.zoom)).ok_or(RestError::NotFound)?;
    let samples = state.node.stats_history.lock().samples(tier, &request.bucket, request.since_ms);
    Ok(BucketSamples { times: samples.times, series: samples.series })
}

/// This node's management address as the cluster lists it (`host:port`).
pub(crate) fn my_addr(state: &RestState) -> String {
    let me = state.node.cluster().map(|c| (c.me, c.metadata()));
    me.and_then(|(me, meta)| meta.nodes.get(&me).map(|n| n.mgmt_addr()))
        .unwrap_or_else(|| format!("{}:{}", state.node.config.host, state.node.config.mgmt_port))
}

/// The management addresses of the cluster's nodes, this node's first.
pub(crate) fn node_addrs(state: &RestState) -> Vec<String> {
    let mut addrs = vec![my_addr(state)];
    if let Some(cluster) = state.node.cluster() {
        let meta = cluster.metadata();
        addrs.extend(meta.nodes.values().filter(|n| n.id != cluster.me).map(|n| n.mgmt_addr()));
    }
    addrs
}

/// The samples of `request` from each node of `addrs` (this node's read here, the others' asked all at once),
/// in the order of `addrs`; a node that does not answer gets why.
pub(crate) async fn gather(
    state: &RestState,
    request: &BucketSamplesRequest,
    addrs: &[String],
) -> Vec<(String, Result<BucketSamples, String>)> {
    let me = my_addr(state);
    let links = &state.node.peer_links;
    let (user, password) = state.node.peer_credentials();
    let creds = (user.as_str(), password.as_str());
    let asked = addrs.iter().map(|addr| async {
        let samples = if *addr == me {
            local_samples(state, request).map_err(|_| format!("no bucket {} here", request.bucket))
        } else {
            let call = crate::cluster::peers::call(addr, links, Some(creds), request, SAMPLES_TIMEOUT);
            call.await.map_err(|e| e.to_string())
        };
        (addr.clone(), samples)
    });
    futures_util::future::join_all(asked).await
}

/// The cluster's samples from each node's: aligned on the first part's times from the newest back (nodes sample
/// on their own clocks, within a second of each other), summed per statistic, percentages averaged; a value no
/// node has stays absent.
pub(crate) fn merge(parts: &[BucketSamples]) -> BucketSamples {
    let Some(first) = parts.first() else { return BucketSamples::default() };
    let len = first.times.len();
    let mut out = BucketSamples { times: first.times.clone(), series: BTreeMap::new() };
    let names: std::collections::BTreeSet<&String> = parts.iter().flat_map(|p| p.series.keys()).collect();
    for name in names {
        let mut values = Vec::with_capacity(len);
        for i in 0..len {
            let back = len - i;
            let found: Vec<f64> = parts
                .iter()
                .filter_map(|p| {
                    let column = p.series.get(name)?;
                    column.len().checked_sub(back).and_then(|at| column[at])
                })
                .collect();
            values.push(match (found.is_empty(), shown(name)) {
                (true, _) => None,
                (false, Shown::Ratio | Shown::Average) => Some(found.iter().sum::<f64>() / found.len() as f64),
                (false, _) => Some(found.iter().sum()),
            });
        }
        out.series.insert(name.clone(), values);
    }
    out
}

fn render(state: &RestState, request: &BucketSamplesRequest, samples: &BucketSamples) -> Value {
    let tier = Tier::named(Some(&request.zoom)).unwrap_or(crate::stats_history::TIERS[0]);
    let mut map = Map::new();
    for (name, values) in &samples.series {
        map.insert(name.clone(), Value::Array(values.iter().map(|v| number(*v)).collect()));
    }
    map.insert("timestamp".to_owned(), json!(samples.times));
    let persistent = state.node.bucket(&request.bucket).is_some_and(|b| b.persistence.is_some());
    json!({
        "op": {
            "samples": map,
            "samplesCount": tier.samples,
            "isPersistent": persistent,
            "lastTStamp": samples.times.last().copied().unwrap_or(0),
            "interval": tier.interval_ms,
        },
        "hot_keys": [],
    })
}

/// A sample as JSON: whole numbers without a fraction, absent ones as null.
fn number(v: Option<f64>) -> Value {
    match v {
        Some(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => json!(v as i64),
        Some(v) => json!(v),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(times: &[u64], series: &[(&str, &[Option<f64>])]) -> BucketSamples {
        BucketSamples {
            times: times.to_vec(),
            series: series.iter().map(|(n, v)| ((*n).to_owned(), v.to_vec())).collect(),
        }
    }

    /// Proves the cluster's samples sum the nodes' values aligned from the newest sample back, average the
    /// percentages, and keep a value absent only where no node has one.
    #[test]
    fn merged_samples_sum_counts_and_average_ratios() {
        let a = part(
            &[1_000, 2_000, 3_000],
            &[
                ("ops", &[None, Some(10.0), Some(20.0)]),
                ("ep_resident_items_rate", &[Some(100.0), Some(80.0), Some(60.0)]),
            ],
        );
        let b = part(
            &[2_400, 3_400],
            &[("ops", &[Some(1.0), Some(2.0)]), ("ep_resident_items_rate", &[Some(40.0), Some(100.0)])],
        );
        let merged = merge(&[a, b]);
        assert_eq!(merged.times, vec![1_000, 2_000, 3_000]);
        assert_eq!(merged.series["ops"], vec![None, Some(11.0), Some(22.0)]);
        assert_eq!(merged.series["ep_resident_items_rate"], vec![Some(100.0), Some(60.0), Some(80.0)]);
    }

    #[test]
    fn samples_render_whole_numbers_as_integers() {
        assert_eq!(number(Some(3.0)), json!(3));
        assert_eq!(number(Some(2.5)), json!(2.5));
        assert_eq!(number(None), Value::Null);
    }
}
