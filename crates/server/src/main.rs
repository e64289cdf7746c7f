//! The `settee` binary.

use clap::{Parser, Subcommand};
use settee_server::config::ServerConfig;

#[derive(Parser)]
#[command(
    name = "settee",
    version,
    about = "A memory-first JSON document and key-value database that speaks Couchbase's protocols"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Server(ServerConfig),
    /// Generate load against settee, Couchbase or memcached (pillowfight and YCSB workloads); `bench plot` and
    /// `bench compare` read result files.
    Bench(Box<settee_bench::BenchCommand>),
    /// Operate a running cluster over its REST API (rolling restarts and upgrades).
    #[command(subcommand)]
    Cluster(settee_server::cli::ClusterCommand),
    /// Back up and restore buckets, cbbackupmgr-style: `backup config|backup|restore|info|remove`.
    Backup(settee_backup::BackupCommand),
    /// Per-command latency (count, p50/p90/p99/p99.9, max) of a node or a whole cluster, read over KV with
    /// GET_CMD_TIMER; `--watch SECS` repeats it for each interval.
    Timings(Box<settee_server::timings::cli::TimingsCommand>),
}

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, which it reads before `main` (the `_RJEM_MALLOC_CONF` environment variable still overrides
/// them): background threads return freed pages to the kernel on their own, where without them a server that goes
/// quiet after a burst of frees (a flusher backlog written out, values ejected) keeps those pages until it allocates
/// again; freed pages go back after about a second instead of ten, and at once (`MADV_DONTNEED`) instead of lazily
/// (`MADV_FREE`, which the kernel takes back only under memory pressure and RSS counts until then). Measured: a
/// persistent bucket of 2 M items with every value ejected held 983 MiB of RSS with jemalloc's defaults and 388 MiB
/// with these (BENCHMARKS.md, "Memory per item: a variable-length header").
#[cfg(feature = "jemalloc")]
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Server(config) => config.log_format,
        _ => Default::default(),
    };
    settee_server::logging::init(format);
    match cli.command {
        Command::Server(config) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(settee_server::run(config))
        }
        Command::Bench(cmd) => Ok(settee_bench::run(*cmd)?),
        Command::Cluster(cmd) => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(settee_server::cli::run(cmd))
        }
        Command::Backup(cmd) => Ok(settee_backup::run(cmd)?),
        Command::Timings(cmd) => settee_server::timings::cli::run(*cmd),
    }
}
