//! `GET /pools/default/stats/range/<metric>[/<function>]`, Couchbase 7's statistics API (the console and
//! Prometheus-minded tools read it), answered from every node's sampled history (`stats_history`): the Couchbase 7
//! names of the statistics settee samples, `start` / `end` (seconds; negative: before now) and `step`, labels
//! `bucket` and `nodes`, `aggregationFunction` (sum, avg, min, max) across nodes, and for counters the `rate` /
//! `irate` functions. settee keeps counters as per-second rates, not totals, so a counter asked for without a
//! function is answered in `errors`, as Couchbase reports a query it cannot run. XDCR's `xdcr_*` metrics are
//! answered by `stats_range_xdcr`.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};
use settee_cluster::peer::BucketSamplesRequest;

use super::auth::Caller;
use super::bucket_stats::{gather, my_addr, node_addrs};
use super::error::RestError;
use super::RestState;
use crate::stats_history::Tier;

/// A Couchbase 7 metric the history answers: the sampled statistic, whether it is a counter (kept as a rate) and
/// the factor from the sampled unit to the metric's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RangeMetric {
    pub stat: &'static str,
    pub counter: bool,
    pub scale: f64,
}

/// The Couchbase 7 names settee can answer, from the statistics it samples.
pub(crate) fn range_metric(name: &str) -> Option<RangeMetric> {
    let (stat, counter, scale) = match name {
        "kv_curr_items" => ("curr_items", false, 1.0),
        "kv_curr_items_tot" => ("curr_items_tot", false, 1.0),
        "kv_mem_used_bytes" => ("mem_used", false, 1.0),
        "kv_ep_max_size_bytes" => ("ep_max_size", false, 1.0),
        "kv_ep_mem_low_wat_bytes" => ("ep_mem_low_wat", false, 1.0),
        "kv_ep_mem_high_wat_bytes" => ("ep_mem_high_wat", false, 1.0),
        "kv_ep_queue_size" => ("ep_queue_size", false, 1.0),
        "kv_disk_write_queue" => ("disk_write_queue", false, 1.0),
        "kv_curr_connections" => ("curr_connections", false, 1.0),
        "kv_vb_perc_mem_resident_ratio" => ("vb_active_resident_items_ratio", false, 0.01),
        "kv_ops" => ("ops", true, 1.0),
        "kv_ep_num_value_ejects" => ("ep_num_value_ejects", true, 1.0),
        "kv_ep_bg_fetched" => ("ep_bg_fetched", true, 1.0),
        "kv_ep_tmp_oom_errors" => ("ep_tmp_oom_errors", true, 1.0),
        _ => return None,
    };
    Some(RangeMetric { stat, counter, scale })
}

/// The value of a series at each step from `start` to `end` (seconds), as Prometheus evaluates a range: the
/// latest sample at or before the step, if it is no older than `lookback` seconds; steps without one are left out.
pub(crate) fn resample(
    times_ms: &[u64],
    values: &[Option<f64>],
    start: u64,
    end: u64,
    step: u64,
    lookback: u64,
) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut t = start;
    while t <= end {
        while at < times_ms.len() && times_ms[at] / 1000 <= t {
            at += 1;
        }
        let latest = (0..at).rev().find_map(|i| values.get(i).copied().flatten().map(|v| (times_ms[i] / 1000, v)));
        if let Some((_, v)) = latest.filter(|(when, _)| t - when <= lookback) {
            out.push((t, v));
        }
        t += step.max(1);
    }
    out
}

/// Each node's series combined by `function` (sum, avg, min, max) at every step any node has.
pub(crate) fn aggregate(series: &[Vec<(u64, f64)>], function: &str) -> Option<Vec<(u64, f64)>> {
    let mut by_time: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for s in series {
        for (t, v) in s {
            by_time.entry(*t).or_default().push(*v);
        }
    }
    let combine = |vs: &[f64]| -> Option<f64> {
        match function {
            "sum" => Some(vs.iter().sum()),
            "avg" => Some(vs.iter().sum::<f64>() / vs.len() as f64),
            "min" => vs.iter().copied().reduce(f64::min),
            "max" => vs.iter().copied().reduce(f64::max),
            _ => None,
        }
    };
    by_time.into_iter().map(|(t, vs)| combine(&vs).map(|v| (t, v))).collect()
}

#[derive(serde::Deserialize)]
pub(crate) struct RangeParams {
    start: Option<i64>,
    end: Option<i64>,
    step: Option<u64>,
    bucket: Option<String>,
    pub(crate) nodes: Option<String>,
    #[serde(rename = "aggregationFunction")]
    pub(crate) aggregation: Option<String>,
    /// The labels of XDCR's metrics (`stats_range_xdcr`).
    #[serde(rename = "sourceBucketName")]
    pub(crate) source_bucket: Option<String>,
    #[serde(rename = "targetClusterUUID")]
    pub(crate) target_cluster: Option<String>,
    #[serde(rename = "targetBucketName")]
    pub(crate) target_bucket: Option<String>,
}

pub(crate) async fn range(
    state: State<RestState>,
    caller: Caller,
    Path(metric): Path<String>,
    params: Query<RangeParams>,
) -> Result<Json<Value>, RestError> {
    answer(state, caller, metric, None, params).await
}

pub(crate) async fn range_with_function(
    state: State<RestState>,
    caller: Caller,
    Path((metric, function)): Path<(String, String)>,
    params: Query<RangeParams>,
) -> Result<Json<Value>, RestError> {
    answer(state, caller, metric, Some(function), params).await
}

async fn answer(
    State(state): State<RestState>,
    caller: Caller,
    name: String,
    function: Option<String>,
    Query(params): Query<RangeParams>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_stats(), || "cluster.stats!read".to_owned())?;
    let now = state.node.clock.now_secs() as i64;
    let when = |v: Option<i64>, default: i64| match v.unwrap_or(default) {
        v if v <= 0 => (now + v).max(0) as u64,
        v => v as u64,
    };
    let (start, end, step) = (when(params.start, -60), when(params.end, 0), params.step.unwrap_or(10).max(1));
    let mut errors = Vec::new();
    if let Some((stat, scale)) = super::stats_range_xdcr::xdcr_metric(&name) {
        if let Some(f) = function {
            errors.push(json!({"node": my_addr(&state), "error": format!("function {f} is not supported on {name}")}));
            return Ok(Json(reply(vec![], errors, start, end)));
        }
        let span = super::stats_range_xdcr::Span { start, end, step };
        let (data, errors) = super::stats_range_xdcr::answer(&state, &name, stat, scale, &params, span).await?;
        return Ok(Json(reply(data, errors, start, end)));
    }
    let Some(metric) = range_metric(&name) else {
        errors.push(json!({"node": my_addr(&state), "error": format!("settee does not sample {name}")}));
        return Ok(Json(reply(vec![], errors, start, end)));
    };
    match (metric.counter, function.as_deref()) {
        (true, Some("rate" | "irate")) | (false, None) => {}
        (true, _) => {
            let why = format!("{name} is a counter: settee keeps its per-second rate, ask for {name}/rate");
            errors.push(json!({"node": my_addr(&state), "error": why}));
            return Ok(Json(reply(vec![], errors, start, end)));
        }
        (false, Some(f)) => {
            errors.push(json!({"node": my_addr(&state), "error": format!("function {f} is not supported on {name}")}));
            return Ok(Json(reply(vec![], errors, start, end)));
        }
    }
    let tier = Tier::covering(end.saturating_sub(start).saturating_mul(1000));
    let lookback = (tier.interval_ms / 1000).max(step).max(1) * 2;
    let buckets: Vec<String> = match &params.bucket {
        Some(b) => vec![b.clone()],
        None => state.node.buckets().iter().map(|b| b.name()).collect(),
    };
    let wanted = |addr: &str| params.nodes.as_deref().is_none_or(|n| n.split(',').any(|x| x == addr));
    let mut nodes: Vec<String> = node_addrs(&state).into_iter().filter(|a| wanted(a)).collect();
    nodes.sort();
    let mut data = Vec::new();
    for bucket in &buckets {
        let request = BucketSamplesRequest { bucket: bucket.clone(), zoom: tier.zoom.to_owned(), since_ms: None };
        let mut per_node = Vec::new();
        for (addr, samples) in gather(&state, &request, &nodes).await {
            match samples {
                Ok(s) => {
                    let values = s.series.get(metric.stat).cloned().unwrap_or_default();
                    let points = resample(&s.times, &values, start, end, step, lookback);
                    let points: Vec<(u64, f64)> = points.into_iter().map(|(t, v)| (t, v * metric.scale)).collect();
                    per_node.push((addr.clone(), points));
                }
                Err(e) => errors.push(json!({"node": addr, "error": e})),
            }
        }
        let labels = |nodes: Vec<String>| json!({"name": name, "bucket": bucket, "nodes": nodes});
        push_series(&mut data, per_node, params.aggregation.as_deref(), labels)?;
    }
    Ok(Json(reply(data, errors, start, end)))
}

/// Adds one metric's series to `data`: one per node (`aggregation` none), or the nodes' series folded by the
/// aggregation function into one; `labels` makes the `metric` object for the nodes a series covers.
pub(crate) fn push_series(
    data: &mut Vec<Value>,
    per_node: Vec<(String, Vec<(u64, f64)>)>,
    aggregation: Option<&str>,
    labels: impl Fn(Vec<String>) -> Value,
) -> Result<(), RestError> {
    match aggregation {
        None | Some("none") => {
            for (addr, points) in per_node {
                data.push(json!({"metric": labels(vec![addr]), "values": values_json(&points)}));
            }
        }
        Some(f) => {
            let series: Vec<Vec<(u64, f64)>> = per_node.iter().map(|(_, p)| p.clone()).collect();
            let Some(points) = aggregate(&series, f) else {
                return Err(RestError::field("aggregationFunction", "The value must be sum, avg, min or max"));
            };
            let all = per_node.into_iter().map(|(a, _)| a).collect();
            data.push(json!({"metric": labels(all), "values": values_json(&points)}));
        }
    }
    Ok(())
}

pub(crate) fn values_json(points: &[(u64, f64)]) -> Value {
    Value::Array(points.iter().map(|(t, v)| json!([t, format_value(*v)])).collect())
}

/// A value as Prometheus writes one: text, whole numbers without a fraction.
fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn reply(data: Vec<Value>, errors: Vec<Value>, start: u64, end: u64) -> Value {
    json!({"data": data, "errors": errors, "startTimestamp": start, "endTimestamp": end})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves each step takes the latest sample at or before it, steps with only a stale sample (older than the
    /// lookback) or none are left out, and absent samples are skipped.
    #[test]
    fn steps_take_the_latest_recent_sample() {
        let times = [1_000, 2_000, 3_000, 9_000];
        let values = [Some(1.0), None, Some(3.0), Some(9.0)];
        assert_eq!(resample(&times, &values, 0, 12, 2, 3), vec![(2, 1.0), (4, 3.0), (6, 3.0), (10, 9.0), (12, 9.0)]);
    }

    /// Nodes' points are combined per step by the aggregation function; an unknown function is refused.
    #[test]
    fn aggregation_combines_nodes_per_step() {
        let a = vec![(10, 1.0), (20, 4.0)];
        let b = vec![(10, 3.0)];
        assert_eq!(aggregate(&[a.clone(), b.clone()], "sum"), Some(vec![(10, 4.0), (20, 4.0)]));
        assert_eq!(aggregate(&[a.clone(), b.clone()], "avg"), Some(vec![(10, 2.0), (20, 4.0)]));
        assert_eq!(aggregate(&[a.clone(), b.clone()], "max"), Some(vec![(10, 3.0), (20, 4.0)]));
        assert_eq!(aggregate(&[a, b], "median"), None);
    }

    #[test]
    fn couchbase_names_map_to_sampled_statistics() {
        assert_eq!(range_metric("kv_ops"), Some(RangeMetric { stat: "ops", counter: true, scale: 1.0 }));
        assert_eq!(range_metric("kv_vb_perc_mem_resident_ratio").map(|m| m.scale), Some(0.01));
        assert_eq!(range_metric("sys_cpu_utilization_rate"), None);
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.5), "0.5");
    }
}
