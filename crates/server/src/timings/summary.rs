//! The per-opcode latency percentiles as JSON, for `GET /settee/timings` (the console's latency view): this node's
//! histograms in kv_engine's GET_CMD_TIMER JSON (the shape `settee timings` already reads and merges over nodes,
//! [`MicrosHistogram`]), and their summaries (count, p50/p90/p99/p99.9, max), computed exactly as `settee timings`
//! prints them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::histogram::MicrosHistogram;
use crate::node::Node;

/// Histograms by bucket, then by opcode name.
pub type NodeHistograms = BTreeMap<String, BTreeMap<String, MicrosHistogram>>;

/// The percentiles reported, as `settee timings` prints them.
pub const PERCENTILES: [(&str, f64); 4] = [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)];

/// This node's histograms as kv_engine's JSON, by bucket and opcode name; opcodes that never ran are left out.
pub fn node_json(node: &Node) -> Value {
    let mut buckets = serde_json::Map::new();
    for b in node.buckets() {
        let mut ops = serde_json::Map::new();
        for opcode in b.timings.recorded_opcodes() {
            let snapshot = b.timings.snapshot(opcode);
            if snapshot.count() > 0 {
                ops.insert(super::opcode_label(opcode), snapshot.to_kv_json());
            }
        }
        buckets.insert(b.name().to_string(), Value::Object(ops));
    }
    Value::Object(buckets)
}

/// Reads back what [`node_json`] wrote (from this node or a peer); None when it is not that shape.
pub fn parse_node_json(v: &Value) -> Option<NodeHistograms> {
    let mut out = NodeHistograms::new();
    for (bucket, ops) in v.as_object()? {
        let entry = out.entry(bucket.clone()).or_default();
        for (op, h) in ops.as_object()? {
            entry.insert(op.clone(), MicrosHistogram::from_kv_json(h)?);
        }
    }
    Some(out)
}

/// Adds `other`'s operations to `into`, bucket by bucket and opcode by opcode.
pub fn merge(into: &mut NodeHistograms, other: &NodeHistograms) {
    for (bucket, ops) in other {
        let entry = into.entry(bucket.clone()).or_default();
        for (op, h) in ops {
            entry.entry(op.clone()).or_default().merge(h);
        }
    }
}

/// `{bucket: {opcode: {"count", "p50", "p90", "p99", "p99.9", "max"}}}` in microseconds; a percentile is the upper
/// bound of its microsecond bucket, capped at the largest value (as `settee timings` shows it).
pub fn summaries(h: &NodeHistograms) -> Value {
    let mut out = serde_json::Map::new();
    for (bucket, ops) in h {
        let mut by_op = serde_json::Map::new();
        for (op, hist) in ops {
            by_op.insert(op.clone(), summary(hist));
        }
        out.insert(bucket.clone(), Value::Object(by_op));
    }
    Value::Object(out)
}

fn summary(h: &MicrosHistogram) -> Value {
    let max_us = h.max_us();
    let mut v = json!({"count": h.count(), "max": max_us});
    for (name, q) in PERCENTILES {
        let us = h.percentile_us(q).map(|us| max_us.map_or(us as f64, |m| m.min(us as f64)));
        v[name] = json!(us);
    }
    v
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn node_json_reads_back_and_summarises_each_opcode() {
        // Proves the node's JSON carries every opcode that ran with its count, reads back into histograms, and that
        // merging two nodes' histograms adds their counts while the percentiles stay within the values recorded.
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        node.create_bucket(node.default_bucket_config().expect("config")).expect("bucket");
        let bucket = node.bucket("default").expect("default bucket");
        for us in [10u64, 20, 30, 40, 5000] {
            bucket.timings.record(settee_mcbp::Opcode::Get as u8, Duration::from_micros(us));
        }
        bucket.timings.record(settee_mcbp::Opcode::Set as u8, Duration::from_micros(100));
        let json = node_json(&node);
        let mut parsed = parse_node_json(&json).expect("reads back");
        assert_eq!(parsed["default"]["GET"].count(), 5);
        assert_eq!(parsed["default"]["SET"].count(), 1);
        let copy = parsed.clone();
        merge(&mut parsed, &copy);
        let s = summaries(&parsed);
        assert_eq!(s["default"]["GET"]["count"], 10);
        let p50 = s["default"]["GET"]["p50"].as_f64().expect("p50");
        assert!((20.0..=40.0).contains(&p50), "p50 {p50} lies among the middle values");
        let max = s["default"]["GET"]["max"].as_f64().expect("max");
        assert!((5000.0..=5001.0).contains(&max), "max {max} is the largest value");
        assert!(parse_node_json(&json!({"default": 3})).is_none(), "another shape is refused");
    }
}
