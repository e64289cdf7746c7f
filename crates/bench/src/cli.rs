//! The `settee bench` command line. Option names follow cbc-pillowfight where it has one (`-U/--spec`,
//! `-I/--num-items`, `-m/-M`, `-r/--set-pct`, `-B/--batch-size`, `-t/--num-threads`, `-c/--num-cycles`,
//! `--sequential`, `--no-population`, `--populate-only`, `--rate-limit`, `--durability`, `--collection`).

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::distribution::RequestDistribution;
use crate::keys::KeyFormat;
use crate::query_request::{QueryMode, ScanConsistency};
use crate::workload::Workload;

/// `settee bench`: run a workload, or `plot` / `compare` result files.
#[derive(Clone, Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub command: Option<BenchSubcommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Clone, Debug, Subcommand)]
pub enum BenchSubcommand {
    /// Render result files (`--json`) as an SVG chart: throughput over time, latency by percentile, ops/s.
    Plot(PlotArgs),
    /// Print a table of result files grouped by case and label, with each label's ratio to a baseline label.
    Compare(CompareArgs),
}

/// Durability levels of synchronous writes (the spellings of Couchbase's SDKs and of cbc-pillowfight).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Durability {
    #[value(name = "none")]
    None,
    #[value(name = "majority")]
    Majority,
    #[value(name = "majorityAndPersistActive", alias = "majority_and_persist_to_active")]
    MajorityAndPersistActive,
    #[value(name = "persistToMajority", alias = "persist_to_majority")]
    PersistToMajority,
}

impl Durability {
    /// The level byte of the durability frame info; None for no requirement.
    pub(crate) fn wire(self) -> Option<u8> {
        match self {
            Durability::None => None,
            Durability::Majority => Some(1),
            Durability::MajorityAndPersistActive => Some(2),
            Durability::PersistToMajority => Some(3),
        }
    }
}

/// Options of a benchmark run.
#[derive(Clone, Debug, Args, Serialize)]
pub struct RunArgs {
    /// What to drive: couchbase://HOST[:KVPORT][,HOST...][/BUCKET] (smart client), couchbases://... (the same over
    /// TLS: KV TLS ports, with --cacert) or memcached://HOST[:PORT].
    #[arg(short = 'U', long, default_value = "couchbase://127.0.0.1/default")]
    pub spec: String,
    /// The CA certificate (PEM) a couchbases:// run trusts: a node's `GET /pools/default/certificate`.
    #[arg(long)]
    pub cacert: Option<std::path::PathBuf>,
    /// User name (couchbase:// only).
    #[arg(short = 'u', long, default_value = "Administrator")]
    pub username: String,
    /// Password (couchbase:// only).
    #[arg(short = 'p', long, default_value = "password")]
    #[serde(skip)]
    pub password: String,
    /// Collection as scope.collection (couchbase:// only); the default collection otherwise.
    #[arg(long)]
    pub collection: Option<String>,
    /// Number of distinct keys (YCSB: records).
    #[arg(short = 'I', long, default_value_t = 1000)]
    pub num_items: u64,
    /// Smallest value in bytes (pillowfight mix).
    #[arg(short = 'm', long, default_value_t = 50)]
    pub min_size: usize,
    /// Largest value in bytes (pillowfight mix).
    #[arg(short = 'M', long, default_value_t = 5120)]
    pub max_size: usize,
    /// Percentage of operations that are SETs (pillowfight mix; the rest are GETs).
    #[arg(short = 'r', long, default_value_t = 33, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub set_pct: u32,
    /// Requests in flight per connection (a batch is written with one write).
    #[arg(short = 'B', long, default_value_t = 100)]
    pub batch_size: usize,
    /// Worker threads, each with its own event loop.
    #[arg(short = 't', long, default_value_t = 1)]
    pub num_threads: usize,
    /// Connections per thread (with couchbase://, one socket per KV node each).
    #[arg(long = "connections", default_value_t = 1)]
    pub connections_per_thread: usize,
    /// Measured run time in seconds (after --warmup); 10 unless --num-cycles is given.
    #[arg(short = 'd', long, conflicts_with = "num_cycles")]
    pub duration: Option<f64>,
    /// Stop after this many batches per connection (each connection issues cycles × batch-size operations).
    #[arg(short = 'c', long)]
    pub num_cycles: Option<u64>,
    /// Seconds to run before measuring.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Walk the keys in order (each connection its own slice) instead of choosing them at random.
    #[arg(long)]
    pub sequential: bool,
    /// Skip the load phase that first stores every key.
    #[arg(short = 'n', long)]
    pub no_population: bool,
    /// Run the load phase only.
    #[arg(long, conflicts_with = "no_population")]
    pub populate_only: bool,
    /// Target operations per second over all connections: open loop, latency measured from each request's
    /// intended send time when the server held it up (use one connection per thread for sub-millisecond
    /// schedules).
    #[arg(long)]
    pub rate_limit: Option<u64>,
    /// Durability level of every SET (couchbase:// only).
    #[arg(long, value_enum)]
    pub durability: Option<Durability>,
    /// Send random JSON documents instead of random bytes.
    #[arg(long)]
    pub json_docs: bool,
    /// A YCSB core workload (records of 10 fields × 100 bytes as JSON) instead of the pillowfight mix; E's scans
    /// go through the query service.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// One kind of query through the query service over YCSB records, instead of KV operations: point lookups
    /// (use-keys, meta-id), lookups by field0's value through a secondary index (field-eq; field-eq-covered answers
    /// from the index alone), YCSB E's range scans alone (scan), LIMIT/OFFSET pages of the primary index (page),
    /// COUNT(*) (count).
    #[arg(long, value_enum, conflicts_with = "workload")]
    pub query: Option<QueryMode>,
    /// The query service's port on every KV node (default: each node's `nodesExt[].services.n1ql`).
    #[arg(long)]
    pub query_port: Option<u16>,
    /// Fields per YCSB record (YCSB's `fieldcount`).
    #[arg(long, default_value_t = crate::values::YCSB_FIELD_COUNT,
          value_parser = clap::value_parser!(u64).range(1..=crate::values::YCSB_FIELD_COUNT_MAX as u64).map(|n| n as usize))]
    pub field_count: usize,
    /// Characters per YCSB field (YCSB's `fieldlength`).
    #[arg(long, default_value_t = crate::values::YCSB_FIELD_BYTES,
          value_parser = clap::value_parser!(u64).range(1..=crate::values::YCSB_FIELD_BYTES_MAX as u64).map(|n| n as usize))]
    pub field_length: usize,
    /// Longest YCSB E scan (lengths are uniform in 1..=N), and the LIMIT of a page.
    #[arg(long, default_value_t = 100)]
    pub scan_length: u64,
    /// scan_consistency of the queries: not_bounded (the SDKs' default) or request_plus.
    #[arg(long, value_enum, default_value = "not_bounded")]
    pub scan_consistency: ScanConsistency,
    /// Key choice: uniform (pillowfight default), zipfian (YCSB A, B, C, F) or latest (YCSB D).
    #[arg(long, value_enum)]
    pub request_distribution: Option<RequestDistribution>,
    /// Key shape: number (pillowfight), uuid (36 bytes) or ycsb ("user" + hash); ycsb with --workload.
    #[arg(long, value_enum)]
    pub key_format: Option<KeyFormat>,
    /// Text in front of every key (number and uuid formats).
    #[arg(long, default_value = "")]
    pub key_prefix: String,
    /// Seed of the random streams (each connection derives its own).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the full latency distributions (HdrHistogram percentile text, µs) to this file.
    #[arg(long, value_name = "FILE")]
    pub histogram: Option<PathBuf>,
    /// Label of this target in results and comparisons (default: the spec's scheme).
    #[arg(long)]
    pub label: Option<String>,
    /// Name of this case in results and comparisons (default: a description of the workload).
    #[arg(long)]
    pub case: Option<String>,
    /// Seconds without a reply after which a connection gives up; a request is not retried (NOT_MY_VBUCKET, a node
    /// leaving the map) past this many seconds after its first send either.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Retry TMPFAIL answers after a backoff, as the SDKs do (counted under retries; an error only once --timeout
    /// or the retry limit is reached), instead of counting each as an error: a loader that must write every item
    /// into a bucket whose quota fills faster than its disk drains.
    #[arg(long)]
    pub retry_tmpfail: bool,
    /// No progress line and no table (the JSON file is still written).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl RunArgs {
    /// Parses options as `settee bench` would (for tests and embedding).
    pub fn from_argv<I, T>(argv: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            run: RunArgs,
        }
        let argv = std::iter::once(std::ffi::OsString::from("settee-bench")).chain(argv.into_iter().map(Into::into));
        Wrapper::try_parse_from(argv).map(|w| w.run)
    }
}

#[derive(Clone, Debug, Args)]
pub struct PlotArgs {
    /// Result files written with --json.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(short, long, default_value = "bench.svg")]
    pub output: PathBuf,
    /// Chart title.
    #[arg(long)]
    pub title: Option<String>,
}

#[derive(Clone, Debug, Args)]
pub struct CompareArgs {
    /// Result files written with --json (several rounds of the same case and label are summarised by median).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The label the others are compared with.
    #[arg(long, default_value = "memcached")]
    pub baseline: String,
    /// Also write the table (Markdown) to this file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}
