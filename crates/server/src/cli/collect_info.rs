//! `settee cluster collect-info`: one ZIP file with what a bug report needs from every node, as Couchbase's
//! cbcollect_info gathers it: the cluster and node views, buckets and their statistics history, tasks, settings,
//! per-command latency, the Prometheus metrics, and log files the operator names (a node logs to its standard
//! error, so its log is wherever the operator sends that). Passwords never appear: nothing read holds them.
//!
//! A node or an endpoint that does not answer is recorded in `collect-info.json` and the rest is still collected.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use super::zip::ZipWriter;
use super::ClusterAccess;

const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// A log file larger than this keeps only its end.
const LOG_BYTES_MAX: u64 = 64 << 20;

/// What every node answers for itself.
const NODE_PATHS: &[&str] =
    &["/nodes/self", "/pools/default", "/pools/default/tasks", "/metrics", "/settings/logLevel", "/settee/timings"];
/// Cluster-wide settings, read once.
const CLUSTER_PATHS: &[&str] = &[
    "/pools",
    "/pools/default/buckets",
    "/settings/autoFailover",
    "/settings/security",
    "/settings/clientCertAuth",
    "/settings/passwordPolicy",
    "/settings/audit",
    "/settings/rbac/users",
    "/settings/rbac/groups",
];

#[derive(Args, Debug)]
pub struct CollectInfoArgs {
    #[command(flatten)]
    pub access: ClusterAccess,
    /// Where to write the ZIP file.
    #[arg(long, default_value = "settee-collect-info.zip")]
    pub output: PathBuf,
    /// A log file to include (a node's standard error as it was redirected); may be repeated.
    #[arg(long = "log-file")]
    pub log_files: Vec<PathBuf>,
}

/// Collects and writes the bundle; fails only when the seed cannot be read or the file cannot be written.
pub async fn run(args: CollectInfoArgs) -> anyhow::Result<()> {
    let access = &args.access;
    let seed = access.seed();
    let pool =
        get(access, &seed, "/pools/default").await.with_context(|| format!("reading the cluster from {seed}"))?;
    let pool: Value = serde_json::from_slice(&pool).context("/pools/default is not JSON")?;
    let nodes: Vec<String> = pool["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["hostname"].as_str().map(str::to_owned))
        .collect();
    let mut bundle = Bundle::default();
    for path in CLUSTER_PATHS {
        bundle.put(&seed, path, format!("cluster/{}", file_name(path)), get(access, &seed, path).await);
    }
    let buckets: Vec<String> = bundle
        .files
        .iter()
        .find(|(n, _)| n == "cluster/pools_default_buckets.json")
        .and_then(|(_, b)| serde_json::from_slice::<Value>(b).ok())
        .and_then(|v| v.as_array().map(|a| a.iter().filter_map(|b| b["name"].as_str().map(str::to_owned)).collect()))
        .unwrap_or_default();
    for node in &nodes {
        for path in NODE_PATHS {
            bundle.put(node, path, format!("{}/{}", dir_name(node), file_name(path)), get(access, node, path).await);
        }
        for bucket in &buckets {
            let path = format!("/pools/default/buckets/{bucket}/stats?zoom=hour");
            let name = format!("{}/bucket_{bucket}_stats_hour.json", dir_name(node));
            bundle.put(node, &path, name, get(access, node, &path).await);
        }
    }
    for log in &args.log_files {
        let base = log.file_name().map_or_else(|| "log".into(), |n| n.to_string_lossy().into_owned());
        let read = read_tail(log).with_context(|| format!("reading {}", log.display()));
        bundle.put("local", &log.display().to_string(), format!("logs/{base}"), read);
    }
    let summary = json!({
        "seed": seed,
        "nodes": nodes,
        "buckets": buckets,
        "collectedAtUnixSecs": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "settee": env!("CARGO_PKG_VERSION"),
        "failures": bundle.failures,
    });
    // Straight into the file: the collected files are held once, not again as an archive in memory.
    let writing = || format!("writing {}", args.output.display());
    let file = std::fs::File::create(&args.output).with_context(writing)?;
    let mut zip = ZipWriter::new(std::io::BufWriter::new(file));
    zip.add("collect-info.json", serde_json::to_string_pretty(&summary)?.as_bytes())?;
    let files = bundle.files;
    for (name, bytes) in &files {
        zip.add(name, bytes)?;
    }
    let bytes = zip.finish()?.into_inner().map_err(|e| e.into_error()).with_context(writing)?.metadata()?.len();
    let failed = summary["failures"].as_array().map_or(0, Vec::len);
    println!(
        "wrote {} ({} files, {} bytes, {} nodes){}",
        args.output.display(),
        files.len() + 1,
        bytes,
        nodes.len(),
        if failed > 0 { format!("; {failed} calls failed, listed in collect-info.json") } else { String::new() }
    );
    Ok(())
}

/// The files collected so far, and the calls that failed.
#[derive(Default)]
struct Bundle {
    files: Vec<(String, Vec<u8>)>,
    failures: Vec<Value>,
}

impl Bundle {
    fn put(&mut self, addr: &str, path: &str, name: String, body: anyhow::Result<Vec<u8>>) {
        match body {
            Ok(bytes) => self.files.push((name, bytes)),
            Err(e) => self.failures.push(json!({"node": addr, "path": path, "error": format!("{e:#}")})),
        }
    }
}

async fn get(access: &ClusterAccess, addr: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    access.get_bytes(addr, path, CALL_TIMEOUT).await
}

/// `/pools/default/tasks` → `pools_default_tasks.json` (`/metrics` → `metrics.txt`).
fn file_name(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let stem = path.trim_matches('/').replace('/', "_");
    if path == "/metrics" {
        format!("{stem}.txt")
    } else {
        format!("{stem}.json")
    }
}

/// A node's directory in the bundle: its `host:port` with `:` replaced.
fn dir_name(node: &str) -> String {
    format!("node_{}", node.replace([':', '/', '[', ']'], "_"))
}

/// The file, or its last [`LOG_BYTES_MAX`] bytes.
fn read_tail(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(LOG_BYTES_MAX)))?;
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bundle names are flat, portable and tell what they hold.
    #[test]
    fn names_follow_the_endpoint_and_the_node() {
        assert_eq!(file_name("/pools/default/tasks"), "pools_default_tasks.json");
        assert_eq!(file_name("/metrics"), "metrics.txt");
        assert_eq!(file_name("/pools/default/buckets/b/stats?zoom=hour"), "pools_default_buckets_b_stats.json");
        assert_eq!(dir_name("127.0.0.1:8091"), "node_127.0.0.1_8091");
    }
}
