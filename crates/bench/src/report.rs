//! The result of a run: the JSON document `--json` writes (and `plot` and `compare` read), the final table, and
//! the full latency distributions `--histogram` writes (HdrHistogram's percentile-distribution text format).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::{new_histogram, PhaseStats, OP_KINDS};

/// The version of the result document's layout.
pub const RESULT_FORMAT_VERSION: u32 = 1;

/// Percentiles kept in the result for latency-by-percentile charts: denser towards the tail.
const CURVE_PERCENTILES: &[f64] = &[
    0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.5, 95.0, 96.25, 97.5, 98.75, 99.0, 99.5,
    99.75, 99.9, 99.95, 99.99, 99.995, 99.999, 100.0,
];

/// One run of `settee bench`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    pub format_version: u32,
    /// The spec, normalised (`couchbase://127.0.0.1:11210/default`).
    pub spec: String,
    /// `couchbase` or `memcached`.
    pub target: String,
    /// `--label`, or the target.
    pub label: String,
    /// `--case`, or a description of the workload.
    pub case: String,
    /// `pillowfight` or `ycsb-a` ... `ycsb-f`.
    pub workload: String,
    /// Every option of the run (the password left out).
    pub options: serde_json::Value,
    pub started_unix_ms: u64,
    pub load: Option<PhaseResult>,
    pub run: Option<PhaseResult>,
}

/// One phase (load or run).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    /// The measured time: from the end of the warm-up to the end of the phase.
    pub duration_s: f64,
    pub connections: usize,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub errors: u64,
    pub not_found: u64,
    /// Errors by kind (`TMPFAIL (0x86)`, `timeout`, ...).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Requests sent again, as the SDKs do, after NOT_MY_VBUCKET or because their node had no connection or left
    /// the map (a rebalance, a failover). Not errors: an operation that succeeds after retries counts once, with
    /// the latency of all its attempts. (Absent from files written before retries existed: 0.)
    #[serde(default)]
    pub retries: u64,
    /// Latency over all operation types.
    pub latency_us: LatencySummary,
    /// Latency at [`CURVE_PERCENTILES`] over all operation types: `[percentile, microseconds]`.
    pub percentiles_us: Vec<[f64; 2]>,
    /// Per operation type (`get`, `set`, `insert`, `rmw`).
    pub operations: BTreeMap<String, OpResult>,
    /// One point per reporting interval (about a second).
    pub timeline: Vec<TimelinePoint>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpResult {
    pub ops: u64,
    pub ops_per_sec: f64,
    pub errors: u64,
    pub not_found: u64,
    /// Result rows of the queries of this type (absent for KV operations and from older files: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows: u64,
    pub latency_us: LatencySummary,
    pub percentiles_us: Vec<[f64; 2]>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the end of the warm-up, at the end of the interval.
    pub t_s: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub errors: u64,
    /// Requests sent again during the interval.
    #[serde(default)]
    pub retries: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

pub(crate) fn summary(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    LatencySummary {
        min: us(h.min()),
        mean: h.mean() / 1000.0,
        p50: us(h.value_at_quantile(0.50)),
        p95: us(h.value_at_quantile(0.95)),
        p99: us(h.value_at_quantile(0.99)),
        p99_9: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}

fn curve(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    CURVE_PERCENTILES.iter().map(|&p| [p, us(h.value_at_quantile(p / 100.0))]).collect()
}

impl PhaseResult {
    pub(crate) fn from_stats(
        stats: &PhaseStats,
        duration_s: f64,
        connections: usize,
        timeline: Vec<TimelinePoint>,
    ) -> PhaseResult {
        let secs = duration_s.max(1e-9);
        let mut all = new_histogram();
        let mut operations = BTreeMap::new();
        let (mut ops, mut errors, mut not_found) = (0, 0, 0);
        for kind in OP_KINDS {
            let Some(t) = &stats.ops[kind as usize] else { continue };
            // Same bounds on both sides: adding cannot fail.
            let _ = all.add(&t.latency);
            ops += t.ops();
            errors += t.errors;
            not_found += t.not_found;
            operations.insert(
                kind.name().to_owned(),
                OpResult {
                    ops: t.ops(),
                    ops_per_sec: t.ops() as f64 / secs,
                    errors: t.errors,
                    not_found: t.not_found,
                    rows: t.rows,
                    latency_us: summary(&t.latency),
                    percentiles_us: curve(&t.latency),
                },
            );
        }
        PhaseResult {
            duration_s,
            connections,
            ops,
            ops_per_sec: ops as f64 / secs,
            errors,
            not_found,
            errors_by_kind: stats.errors_by.clone(),
            retries: stats.retries,
            latency_us: summary(&all),
            percentiles_us: curve(&all),
            operations,
            timeline,
        }
    }
}

/// The final table: one row per operation type and phase, then the totals.
pub(crate) fn table(result: &BenchResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:<7} {:>11} {:>12} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "phase", "op", "ops", "ops/s", "errors", "not found", "p50 µs", "p95 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    let phases = [("load", &result.load), ("run", &result.run)];
    for (name, phase) in phases {
        let Some(p) = phase else { continue };
        let mut row = |op: &str, ops: u64, rate: f64, errors: u64, nf: u64, l: &LatencySummary| {
            let _ = writeln!(
                out,
                "{name:<6} {op:<7} {ops:>11} {rate:>12.0} {errors:>8} {nf:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                l.p50, l.p95, l.p99, l.p99_9, l.max
            );
        };
        for (op, r) in &p.operations {
            row(op, r.ops, r.ops_per_sec, r.errors, r.not_found, &r.latency_us);
        }
        if p.operations.len() > 1 {
            row("total", p.ops, p.ops_per_sec, p.errors, p.not_found, &p.latency_us);
        }
    }
    for (name, phase) in phases {
        if let Some(p) = phase {
            for (op, r) in p.operations.iter().filter(|(_, r)| r.rows > 0) {
                let per = r.rows as f64 / r.ops.max(1) as f64;
                let _ = writeln!(out, "{name} {op} rows: {} ({per:.1} per query)", r.rows);
            }
            for (kind, n) in &p.errors_by_kind {
                let _ = writeln!(out, "{name} errors: {kind}: {n}");
            }
            if p.retries > 0 {
                let _ = writeln!(
                    out,
                    "{name} retries: {} (requests sent again after NOT_MY_VBUCKET, a node change or, with --retry-tmpfail, TMPFAIL)",
                    p.retries
                );
            }
        }
    }
    out
}

/// HdrHistogram's percentile distribution (`outputPercentileDistribution`, values in microseconds), one section
/// per operation type, each headed by a `# <phase> <op>` line.
pub(crate) fn histogram_text(sections: &[(String, Histogram<u64>)]) -> String {
    let mut out = String::new();
    for (name, h) in sections {
        let _ = writeln!(out, "# {name}");
        let _ = writeln!(out, "{:>12} {:>14} {:>10} {:>14}\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
        let mut total = 0u64;
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value = us(v.value_iterated_to());
            if q < 1.0 {
                let _ = writeln!(out, "{value:>12.3} {q:>14.12} {total:>10} {:>14.2}", 1.0 / (1.0 - q));
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>14.12} {total:>10}");
            }
        }
        let _ =
            writeln!(out, "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]", h.mean() / 1000.0, h.stdev() / 1000.0);
        let _ = writeln!(out, "#[Max     = {:>12.3}, Total count    = {:>12}]", us(h.max()), h.len());
        let _ = writeln!(out, "#[Buckets = {:>12}, SubBuckets     = {:>12}]\n", h.buckets(), h.distinct_values());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Completion, OpKind, Outcome};

    fn stats() -> PhaseStats {
        let mut s = PhaseStats::new();
        for i in 1..=1000u64 {
            s.record(&Completion { kind: OpKind::Get, latency_ns: i * 1000, outcome: Outcome::Ok, rows: 0 });
        }
        s.record(&Completion { kind: OpKind::Set, latency_ns: 5000, outcome: Outcome::Status(0x86), rows: 0 });
        s.record(&Completion { kind: OpKind::Scan, latency_ns: 9000, outcome: Outcome::Ok, rows: 30 });
        s.record_retries(7);
        s
    }

    /// Counts, rates and percentiles come out of the recorded histograms, in microseconds.
    #[test]
    fn phase_result_from_stats() {
        let p = PhaseResult::from_stats(&stats(), 2.0, 4, Vec::new());
        assert_eq!((p.ops, p.errors, p.not_found, p.connections), (1002, 1, 0, 4));
        assert!((p.ops_per_sec - 501.0).abs() < 1e-9);
        assert_eq!((p.operations["scan"].rows, p.operations["get"].rows), (30, 0));
        let get = &p.operations["get"];
        assert_eq!(get.ops, 1000);
        assert!((get.latency_us.p50 - 500.0).abs() < 1.0 && (get.latency_us.max - 1000.0).abs() < 1.0);
        assert_eq!(p.percentiles_us.len(), CURVE_PERCENTILES.len());
        assert_eq!(p.errors_by_kind["TMPFAIL (0x86)"], 1);
        assert_eq!(p.retries, 7);
    }

    /// The result document survives a JSON round trip, and the table names every operation.
    #[test]
    fn result_round_trips_and_renders() {
        let r = BenchResult {
            format_version: RESULT_FORMAT_VERSION,
            spec: "memcached://h:1".into(),
            target: "memcached".into(),
            label: "memcached".into(),
            case: "c".into(),
            workload: "pillowfight".into(),
            options: serde_json::json!({"batch_size": 1}),
            started_unix_ms: 1,
            load: None,
            run: Some(PhaseResult::from_stats(&stats(), 1.0, 1, Vec::new())),
        };
        let back: BenchResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.run.as_ref().unwrap().ops, 1002);
        assert_eq!(back.run.as_ref().unwrap().operations["scan"].rows, 30);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text.matches("\"rows\"").count(), 1, "KV operations carry no rows member");
        let t = table(&back);
        assert!(t.contains("run scan rows: 30 (30.0 per query)"), "{t}");
        assert!(t.contains("get") && t.contains("set") && t.contains("total") && t.contains("TMPFAIL"), "{t}");
        assert!(t.contains("run retries: 7"), "{t}");
        let mut old = serde_json::to_value(&r).unwrap();
        old["run"].as_object_mut().unwrap().remove("retries");
        let back: BenchResult = serde_json::from_value(old).unwrap();
        assert_eq!(back.run.unwrap().retries, 0, "files written before retries existed still read");
    }

    /// The histogram text ends each section at the 100th percentile with the total count.
    #[test]
    fn histogram_text_layout() {
        let s = stats();
        let h = s.ops[OpKind::Get as usize].as_ref().unwrap().latency.clone();
        let text = histogram_text(&[("run get".into(), h)]);
        assert!(text.starts_with("# run get\n"));
        assert!(text.contains("1.000000000000       1000"), "{text}");
        assert!(text.contains("Total count    =         1000"));
    }
}
