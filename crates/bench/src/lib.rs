//! `settee bench`: a load generator in the spirit of cbc-pillowfight and YCSB that drives settee (or Couchbase)
//! through the smart client, and plain memcached through its binary protocol, with the same requests, so the two
//! can be measured side by side.
//!
//! - [`BenchCommand`] / [`run`]: the command line (`settee bench ...`, `settee bench plot ...`,
//!   `settee bench compare ...`).
//! - [`run_bench`]: one run (load phase, run phase) returning a [`BenchResult`], the JSON document `--json` writes.
//! - Workloads: the pillowfight GET/SET mix and YCSB core workloads A to F with YCSB's zipfian, uniform and
//!   latest key choice. Latency goes into HdrHistograms per operation type; `--rate-limit` runs open loop.
//! - Queries: YCSB E's range scans and `--query` (point lookups by key or by a field's value, LIMIT/OFFSET pages,
//!   COUNT(*)) go to the query service over kept-alive HTTP/1.1 connections (`http_link`, `query_driver`), with
//!   the bodies the SDKs send (`query_request`) and answers read down to rows and error codes (`query_answer`); the
//!   index the queries need (primary, or secondary on `field0`) is created, and waited for, before the run.
//! - On `couchbase://` the connections follow the cluster map like an SDK's: NOT_MY_VBUCKET is retried on the node
//!   the new map names (`retry`), pushed and fetched configs are applied, and a new node list is followed without
//!   losing requests in flight (`follow`, `link`). Retries are counted apart from errors.
//!
//! It depends on the client and the codec only, never on the server or the engine.

mod cli;
mod compare;
mod distribution;
mod driver;
mod follow;
mod http_link;
mod keys;
mod link;
mod plot;
mod progress;
mod query_answer;
mod query_driver;
mod query_request;
mod query_setup;
mod report;
mod retry;
mod rng;
mod runner;
mod spec;
mod stats;
mod values;
mod workload;

pub use cli::{BenchCommand, BenchSubcommand, CompareArgs, Durability, PlotArgs, RunArgs};
pub use distribution::RequestDistribution;
pub use keys::KeyFormat;
pub use query_request::{QueryMode, ScanConsistency};
pub use report::{BenchResult, LatencySummary, OpResult, PhaseResult, TimelinePoint, RESULT_FORMAT_VERSION};
pub use runner::run_bench;
pub use spec::{Spec, SpecError};
pub use workload::Workload;

/// Why `settee bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Client(#[from] settee_client::ClientError),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("query service: {0}")]
    QueryService(String),
}

/// Runs `settee bench` as parsed from its command line.
pub fn run(cmd: BenchCommand) -> Result<(), BenchError> {
    match cmd.command {
        Some(BenchSubcommand::Plot(p)) => plot::plot_files(&p),
        Some(BenchSubcommand::Compare(c)) => compare::compare_files(&c),
        None => run_bench(&cmd.run).map(|_| ()),
    }
}

/// Reads a result file written with `--json`.
pub fn read_result(path: &std::path::Path) -> Result<BenchResult, BenchError> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| BenchError::Invalid(format!("{}: {e}", path.display())))
}
