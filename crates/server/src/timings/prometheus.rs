//! `kv_cmd_duration_seconds{bucket,opcode}` in `GET /metrics`: each bucket's per-opcode histograms as Prometheus
//! histograms (`_bucket` with `le`, `_sum`, `_count`), labelled as Couchbase 7 labels them (`opcode="GET"`).
//! Only opcodes that ran are reported. The `le` boundaries are powers of two of a nanosecond (1.024 µs to 34.4 s,
//! see [`super::histogram::Snapshot::prometheus_buckets`]): they are boundaries of the recorded histogram, so every
//! bucket count is exact.

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::node::Node;

const NAME: &str = "kv_cmd_duration_seconds";
const HELP: &str = "KV command latency from the request decoded to its reply queued, by bucket and opcode";

/// Appends the family to a scrape (nothing when no command ran yet).
pub fn encode(node: &Node, encoder: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
    let mut series = Vec::new();
    for b in node.buckets() {
        let name = b.name();
        for opcode in b.timings.recorded_opcodes() {
            let snapshot = b.timings.snapshot(opcode);
            if snapshot.count() == 0 {
                continue;
            }
            let op = super::opcode_label(opcode);
            series.push((vec![("bucket", name.clone()), ("opcode", op)], snapshot));
        }
    }
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(NAME, HELP, None, MetricType::Histogram)?;
    for (labels, snapshot) in &series {
        let mut sample = metric.encode_family(labels)?;
        let sum_seconds = snapshot.sum_ns as f64 / 1e9;
        sample.encode_histogram::<NoLabelSet>(sum_seconds, snapshot.count(), &snapshot.prometheus_buckets(), None)?;
    }
    Ok(())
}
