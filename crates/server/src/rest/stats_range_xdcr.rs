//! XDCR's metrics in Couchbase 7's statistics API (`GET /pools/default/stats/range/xdcr_<name>`), as ns_server
//! answers them from goxdcr's Prometheus metrics: one series per replication (and node, unless aggregated),
//! labelled `sourceBucketName`, `targetClusterUUID`, `targetBucketName`, `pipelineType`, and filtered by those
//! labels when the request gives them. settee answers from each node's sampled history of its replications
//! (section `@xdcr-<bucket>`, see `stats_history::XDCR_STATS`).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use settee_cluster::peer::BucketSamplesRequest;

use super::bucket_stats::{gather, node_addrs};
use super::error::RestError;
use super::stats_range::{push_series, resample, RangeParams};
use super::RestState;
use crate::stats_history::Tier;

/// The sampled statistic behind an XDCR metric and the factor from its unit to the metric's.
pub(crate) fn xdcr_metric(name: &str) -> Option<(&'static str, f64)> {
    Some(match name {
        "xdcr_changes_left_total" => ("changes_left", 1.0),
        "xdcr_docs_checked_total" => ("docs_checked", 1.0),
        "xdcr_docs_received_from_dcp_total" => ("docs_received_from_dcp", 1.0),
        "xdcr_docs_written_total" => ("docs_written", 1.0),
        "xdcr_docs_filtered_total" => ("docs_filtered", 1.0),
        "xdcr_docs_failed_cr_source_total" => ("docs_failed_cr_source", 1.0),
        "xdcr_num_checkpoints_total" => ("num_checkpoints", 1.0),
        "xdcr_set_docs_written_total" => ("set_docs_written", 1.0),
        "xdcr_deletion_docs_written_total" => ("deletion_docs_written", 1.0),
        "xdcr_expiry_docs_written_total" => ("expiry_docs_written", 1.0),
        "xdcr_set_failed_cr_source_total" => ("set_failed_cr_source", 1.0),
        "xdcr_deletion_failed_cr_source_total" => ("deletion_failed_cr_source", 1.0),
        "xdcr_expiry_failed_cr_source_total" => ("expiry_failed_cr_source", 1.0),
        "xdcr_set_received_from_dcp_total" => ("set_received_from_dcp", 1.0),
        "xdcr_deletion_received_from_dcp_total" => ("deletion_received_from_dcp", 1.0),
        "xdcr_expiry_received_from_dcp_total" => ("expiry_received_from_dcp", 1.0),
        "xdcr_data_replicated_bytes" => ("data_replicated", 1.0),
        "xdcr_size_rep_queue_bytes" => ("size_rep_queue", 1.0),
        "xdcr_wtavg_docs_latency_seconds" => ("wtavg_docs_latency", 0.001),
        _ => return None,
    })
}

/// A replication's series: (source bucket, target cluster uuid, target bucket) → each node's points.
type BySeries = BTreeMap<(String, String, String), Vec<(String, Vec<(u64, f64)>)>>;

/// The time range asked for (seconds).
pub(crate) struct Span {
    pub start: u64,
    pub end: u64,
    pub step: u64,
}

/// `replications/<uuid>/<source>/<target>/<stat>` → (uuid, source, target).
fn replication_of<'a>(series: &'a str, stat: &str) -> Option<(&'a str, &'a str, &'a str)> {
    let rest = series.strip_prefix("replications/")?.strip_suffix(stat)?.strip_suffix('/')?;
    let mut parts = rest.splitn(3, '/');
    Some((parts.next()?, parts.next()?, parts.next()?))
}

/// The series of XDCR metric `name` (statistic `stat`, times `scale`), and the nodes that could not answer.
pub(crate) async fn answer(
    state: &RestState,
    name: &str,
    stat: &str,
    scale: f64,
    params: &RangeParams,
    span: Span,
) -> Result<(Vec<Value>, Vec<Value>), RestError> {
    let tier = Tier::covering(span.end.saturating_sub(span.start).saturating_mul(1000));
    let lookback = (tier.interval_ms / 1000).max(span.step).max(1) * 2;
    let sources: Vec<String> = match &params.source_bucket {
        Some(b) => vec![b.clone()],
        None => state.node.buckets().iter().map(|b| b.name()).collect(),
    };
    let wanted = |addr: &str| params.nodes.as_deref().is_none_or(|n| n.split(',').any(|x| x == addr));
    let mut nodes: Vec<String> = node_addrs(state).into_iter().filter(|a| wanted(a)).collect();
    nodes.sort();
    let keep = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    let mut found = BySeries::new();
    let mut errors = Vec::new();
    for source in &sources {
        let section = format!("@xdcr-{source}");
        let request = BucketSamplesRequest { bucket: section, zoom: tier.zoom.to_owned(), since_ms: None };
        for (addr, samples) in gather(state, &request, &nodes).await {
            let samples = match samples {
                Ok(s) => s,
                Err(e) => {
                    errors.push(json!({"node": addr, "error": e}));
                    continue;
                }
            };
            for (series, values) in &samples.series {
                let Some((uuid, from, to)) = replication_of(series, stat) else { continue };
                if from != source || !keep(&params.target_cluster, uuid) || !keep(&params.target_bucket, to) {
                    continue;
                }
                let points = resample(&samples.times, values, span.start, span.end, span.step, lookback);
                let points = points.into_iter().map(|(t, v)| (t, v * scale)).collect();
                let key = (from.to_owned(), uuid.to_owned(), to.to_owned());
                found.entry(key).or_default().push((addr.clone(), points));
            }
        }
    }
    let mut data = Vec::new();
    for ((source, uuid, target), per_node) in found {
        let labels = |nodes: Vec<String>| {
            json!({"name": name, "sourceBucketName": source, "targetClusterUUID": uuid, "targetBucketName": target,
                   "pipelineType": "Main", "nodes": nodes})
        };
        push_series(&mut data, per_node, params.aggregation.as_deref(), labels)?;
    }
    Ok((data, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves Couchbase's XDCR metric names map to the sampled statistics (latency from ms to seconds) and a
    /// section's series name gives its replication's labels, only for the statistic asked.
    #[test]
    fn xdcr_metrics_map_to_their_replications_series() {
        assert_eq!(xdcr_metric("xdcr_docs_written_total"), Some(("docs_written", 1.0)));
        assert_eq!(xdcr_metric("xdcr_wtavg_docs_latency_seconds"), Some(("wtavg_docs_latency", 0.001)));
        assert_eq!(xdcr_metric("xdcr_data_replicated_bytes"), Some(("data_replicated", 1.0)));
        assert_eq!(xdcr_metric("xdcr_bandwidth_usage_bytes_per_second"), None, "goxdcr does not export it");
        let series = "replications/abc/src/dst/docs_written";
        assert_eq!(replication_of(series, "docs_written"), Some(("abc", "src", "dst")));
        assert_eq!(replication_of(series, "written"), None);
        assert_eq!(replication_of("replication_changes_left", "changes_left"), None);
    }
}
