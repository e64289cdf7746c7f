//! `settee timings`: per-command latency of a node, or of every node of its cluster, from GET_CMD_TIMER over KV (so
//! it needs only a user with the stats privilege and the KV port, as Couchbase's `mctimings`). It prints count,
//! p50/p90/p99/p99.9 and max per opcode; `--cluster` merges the nodes' histograms bucket by bucket (never their
//! percentiles); `--watch SECS` prints the operations of each interval again and again.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use settee_client::Connection;
use settee_mcbp::Opcode;
use settee_types::Status;

use super::histogram::MicrosHistogram;

/// `settee timings` flags.
#[derive(Clone, Debug, clap::Args)]
pub struct TimingsCommand {
    /// A node's KV address (`host:port`).
    #[arg(long, default_value = "127.0.0.1:11210")]
    pub host: String,
    /// A user with the stats privilege on the bucket (for all buckets: one that reads cluster settings).
    #[arg(long, short = 'u', default_value = "Administrator")]
    pub username: String,
    #[arg(long, short = 'p', default_value = "password")]
    pub password: String,
    /// Report this bucket only; without it, every bucket the user may see plus the commands run outside a bucket
    /// (GET_CMD_TIMER's `/all/`).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Ask every node of the cluster (from the node's cluster config) and merge their histograms.
    #[arg(long)]
    pub cluster: bool,
    /// Print again every SECS seconds, each time the operations of the last interval.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub watch: Option<u64>,
}

/// Per opcode, the merged histogram.
type Table = BTreeMap<u8, MicrosHistogram>;

pub fn run(cmd: TimingsCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run_async(cmd))
}

async fn run_async(cmd: TimingsCommand) -> anyhow::Result<()> {
    let mut nodes = connect_nodes(&cmd).await?;
    let key = cmd.bucket.clone().unwrap_or_else(|| "/all/".to_owned());
    let scope = cmd.bucket.as_deref().unwrap_or("all buckets");
    let names: Vec<&str> = nodes.iter().map(|(addr, _)| addr.as_str()).collect();
    let nodes_line = names.join(", ");
    let mut previous: Option<Table> = None;
    loop {
        let current = gather(&mut nodes, key.as_bytes()).await?;
        let (shown, span) = match (&previous, cmd.watch) {
            (Some(before), Some(secs)) => (since(&current, before), format!("last {secs} s")),
            _ => (current.clone(), "since the nodes started".to_owned()),
        };
        let header = format!("{scope} on {nodes_line}, {span}");
        print!("{}", render(&shown, &header));
        let Some(secs) = cmd.watch else { return Ok(()) };
        previous = Some(current);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        println!();
    }
}

/// One authenticated connection per node asked (the given node, or every node of its cluster).
async fn connect_nodes(cmd: &TimingsCommand) -> anyhow::Result<Vec<(String, Connection)>> {
    let seed = connect(&cmd.host, cmd).await?;
    if !cmd.cluster {
        return Ok(vec![(cmd.host.clone(), seed)]);
    }
    let mut seed = seed;
    let reply = seed.call(Opcode::GetClusterConfig as u8, b"", &[], &[], 0, 0).await?;
    if reply.status != Status::Success.code() {
        bail!("GET_CLUSTER_CONFIG on {} failed with status 0x{:02x}", cmd.host, reply.status);
    }
    let seed_host = cmd.host.rsplit_once(':').map_or(cmd.host.as_str(), |(h, _)| h);
    let addrs = kv_nodes(&reply.value, seed_host).context("reading the cluster config")?;
    let mut nodes = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let conn = connect(&addr, cmd).await?;
        nodes.push((addr, conn));
    }
    Ok(nodes)
}

async fn connect(addr: &str, cmd: &TimingsCommand) -> anyhow::Result<Connection> {
    let sock = settee_client::resolve(addr).await.with_context(|| format!("resolving {addr}"))?;
    Connection::connect(sock, &cmd.username, &cmd.password, cmd.bucket.as_deref(), &[])
        .await
        .with_context(|| format!("connecting to {addr} as {}", cmd.username))
}

/// The KV endpoints of a cluster config's `nodesExt` (`$HOST` or no hostname means the node asked).
fn kv_nodes(config: &[u8], seed_host: &str) -> anyhow::Result<Vec<String>> {
    let v: serde_json::Value = serde_json::from_slice(config)?;
    let Some(list) = v["nodesExt"].as_array() else { bail!("the config has no nodesExt") };
    let nodes: Vec<String> = list
        .iter()
        .filter_map(|n| {
            let port = n["services"]["kv"].as_u64()?;
            let host = match n["hostname"].as_str() {
                None | Some("$HOST") => seed_host,
                Some(h) => h,
            };
            Some(if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            })
        })
        .collect();
    if nodes.is_empty() {
        bail!("the config lists no KV node");
    }
    Ok(nodes)
}

/// Every opcode's histogram, summed over the nodes; opcodes no node ran are left out.
async fn gather(nodes: &mut [(String, Connection)], key: &[u8]) -> anyhow::Result<Table> {
    let mut table = Table::new();
    for (addr, conn) in nodes.iter_mut() {
        for op in Opcode::ALL {
            let opcode = *op as u8;
            let reply = conn.call(Opcode::GetCmdTimer as u8, key, &[opcode], &[], 0, 0).await?;
            if reply.status == Status::Eaccess.code() {
                bail!("{addr}: the user may not read these timings (it needs the bucket's stats privilege)");
            }
            if reply.status != Status::Success.code() {
                bail!("{addr}: GET_CMD_TIMER failed with status 0x{:02x}", reply.status);
            }
            let json: serde_json::Value = serde_json::from_slice(&reply.value)
                .with_context(|| format!("{addr}: GET_CMD_TIMER's reply is not JSON"))?;
            let Some(h) = MicrosHistogram::from_kv_json(&json) else {
                bail!("{addr}: GET_CMD_TIMER's reply is not a histogram: {json}");
            };
            if h.count() > 0 {
                table.entry(opcode).or_default().merge(&h);
            }
        }
    }
    Ok(table)
}

/// The operations counted between two readings.
fn since(now: &Table, before: &Table) -> Table {
    let empty = MicrosHistogram::default();
    now.iter().map(|(op, h)| (*op, h.since(before.get(op).unwrap_or(&empty)))).filter(|(_, h)| h.count() > 0).collect()
}

/// A duration given in microseconds, in the unit that suits it.
fn human(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

/// The table `settee timings` prints. Percentiles are upper bounds of the microsecond bucket they fall in, capped
/// at the largest value.
pub fn render(table: &Table, header: &str) -> String {
    let mut out = format!("{header}\n");
    let _ = writeln!(
        out,
        "{:<28} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "opcode", "count", "p50", "p90", "p99", "p99.9", "max"
    );
    if table.is_empty() {
        out.push_str("(no operations)\n");
        return out;
    }
    for (opcode, h) in table {
        let name = super::opcode_label(*opcode);
        // A percentile is its bucket's upper bound, which may lie above the exact maximum: show the maximum then.
        let max_us = h.max_us();
        let p = |q: f64| {
            let us = h.percentile_us(q).map(|us| max_us.map_or(us as f64, |m| m.min(us as f64)));
            us.map_or_else(|| "-".to_owned(), human)
        };
        let max = max_us.map_or_else(|| "-".to_owned(), human);
        let _ = writeln!(
            out,
            "{name:<28} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}",
            h.count(),
            p(50.0),
            p(90.0),
            p(99.0),
            p(99.9),
            max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_config_nodes_resolve_host_placeholders() {
        // Proves the KV endpoints are read from nodesExt, `$HOST` and a missing hostname becoming the node asked.
        let config = br#"{"nodesExt":[{"services":{"kv":11210,"mgmt":8091},"thisNode":true},
            {"hostname":"10.0.0.2","services":{"kv":11211}},{"hostname":"$HOST","services":{"mgmt":8091}}]}"#;
        assert_eq!(kv_nodes(config, "127.0.0.1").expect("nodes"), vec!["127.0.0.1:11210", "10.0.0.2:11211"]);
        assert!(kv_nodes(br#"{"nodesExt":[]}"#, "h").is_err());
    }

    #[test]
    fn the_table_names_each_opcode_with_its_percentiles() {
        // Proves the printed table has a row per opcode with its count and percentiles in readable units.
        let mut h = MicrosHistogram::default();
        h.buckets.insert(3, 99);
        h.buckets.insert(2500, 1);
        h.max_ns = Some(2_400_000);
        let table: Table = [(0x00u8, h)].into_iter().collect();
        let text = render(&table, "default on n1");
        let row = text.lines().find(|l| l.starts_with("GET ")).expect("GET row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "100");
        assert_eq!(&cells[2..4], ["3", "µs"]);
        assert_eq!(&cells[cells.len() - 4..], ["2.4", "ms", "2.4", "ms"], "p99.9 capped at the maximum: {row}");
        assert!(render(&Table::new(), "x").contains("(no operations)"));
        let mut one = MicrosHistogram::default();
        one.buckets.insert(362, 1);
        one.max_ns = Some(360_400);
        let text = render(&[(0xb5u8, one)].into_iter().collect(), "x");
        assert!(!text.contains("362 µs"), "no percentile above the maximum: {text}");
    }
}
