//! `settee bench compare`: result files grouped by case and label, summarised by the median over rounds, with each
//! label's throughput and p99 as a ratio to the baseline label's (ratio > 1 means more ops/s; for p99, > 1 means
//! slower).

use std::fmt::Write as _;

use crate::cli::CompareArgs;
use crate::report::BenchResult;
use crate::{read_result, BenchError};

/// The median-of-rounds summary of one (case, label).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub case: String,
    pub label: String,
    pub rounds: usize,
    pub ops_per_sec: f64,
    pub ops_min: f64,
    pub ops_max: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
}

pub(crate) fn compare_files(args: &CompareArgs) -> Result<(), BenchError> {
    let results: Vec<BenchResult> = args.files.iter().map(|f| read_result(f)).collect::<Result<_, _>>()?;
    let table = render(&rows(&results), &args.baseline);
    print!("{table}");
    if let Some(path) = &args.output {
        std::fs::write(path, &table)?;
    }
    Ok(())
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Groups run phases by (case, label) in order of first appearance.
pub(crate) fn rows(results: &[BenchResult]) -> Vec<Row> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in results {
        let k = (r.case.clone(), r.label.clone());
        if r.run.is_some() && !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(case, label)| {
            let runs: Vec<_> =
                results.iter().filter(|r| r.case == case && r.label == label).filter_map(|r| r.run.as_ref()).collect();
            let ops: Vec<f64> = runs.iter().map(|p| p.ops_per_sec).collect();
            Row {
                rounds: runs.len(),
                ops_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
                ops_max: ops.iter().copied().fold(0.0, f64::max),
                ops_per_sec: median(ops),
                p50_us: median(runs.iter().map(|p| p.latency_us.p50).collect()),
                p99_us: median(runs.iter().map(|p| p.latency_us.p99).collect()),
                errors: runs.iter().map(|p| p.errors).sum(),
                case,
                label,
            }
        })
        .collect()
}

/// A Markdown table: per case, the baseline first, then the other labels with their ratios.
pub(crate) fn render(rows: &[Row], baseline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| case | target | rounds | ops/s (median) | ops/s (min–max) | p50 µs | p99 µs | errors | ops/s ratio | p99 ratio |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut cases: Vec<&str> = Vec::new();
    for r in rows {
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
    }
    for case in cases {
        let base = rows.iter().find(|r| r.case == case && r.label == baseline);
        let mut in_case: Vec<&Row> = rows.iter().filter(|r| r.case == case).collect();
        in_case.sort_by_key(|r| r.label != baseline);
        for r in in_case {
            let (ratio, p99_ratio) = match base {
                Some(b) if r.label != baseline && b.ops_per_sec > 0.0 && b.p99_us > 0.0 => {
                    (format!("{:.2}", r.ops_per_sec / b.ops_per_sec), format!("{:.2}", r.p99_us / b.p99_us))
                }
                Some(_) if r.label == baseline => ("1.00 (baseline)".to_owned(), "1.00".to_owned()),
                _ => ("–".to_owned(), "–".to_owned()),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {:.0}–{:.0} | {:.1} | {:.1} | {} | {} | {} |",
                r.case,
                r.label,
                r.rounds,
                r.ops_per_sec,
                r.ops_min,
                r.ops_max,
                r.p50_us,
                r.p99_us,
                r.errors,
                ratio,
                p99_ratio
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{LatencySummary, PhaseResult, RESULT_FORMAT_VERSION};

    fn result(case: &str, label: &str, ops: f64, p99: f64) -> BenchResult {
        BenchResult {
            format_version: RESULT_FORMAT_VERSION,
            spec: String::new(),
            target: String::new(),
            label: label.into(),
            case: case.into(),
            workload: "pillowfight".into(),
            options: serde_json::Value::Null,
            started_unix_ms: 0,
            load: None,
            run: Some(PhaseResult {
                duration_s: 1.0,
                connections: 1,
                ops: ops as u64,
                ops_per_sec: ops,
                errors: 0,
                not_found: 0,
                errors_by_kind: Default::default(),
                retries: 0,
                latency_us: LatencySummary { p50: p99 / 2.0, p99, ..Default::default() },
                percentiles_us: vec![],
                operations: Default::default(),
                timeline: vec![],
            }),
        }
    }

    /// Rounds are summarised by their median, and ratios are taken against the baseline of the same case.
    #[test]
    fn medians_and_ratios() {
        let rs = vec![
            result("get", "memcached", 100.0, 10.0),
            result("get", "settee", 90.0, 20.0),
            result("get", "memcached", 300.0, 30.0),
            result("get", "settee", 120.0, 20.0),
            result("get", "memcached", 200.0, 20.0),
            result("get", "settee", 150.0, 20.0),
        ];
        let rows = rows(&rs);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].rounds, rows[0].ops_per_sec, rows[0].p99_us), (3, 200.0, 20.0));
        assert_eq!((rows[1].ops_min, rows[1].ops_max), (90.0, 150.0));
        let t = render(&rows, "memcached");
        assert!(t.contains("| get | settee | 3 | 120 | 90–150 | 10.0 | 20.0 | 0 | 0.60 | 1.00 |"), "{t}");
        assert!(t.contains("1.00 (baseline)"));
        assert_eq!(median(vec![1.0, 4.0]), 2.5);
    }
}
