//! The query service (SQL++ on the query port): the HTTP front (`http`, `request`, `response`), the node as a
//! datastore (`datastore`), the node's indexes, their feeders (`indexes`) and snapshots (`index_snapshots`), query privileges (`auth`) and the
//! request log (`requests`). The language itself is the `settee-query` crate.

pub mod auth;
pub mod datastore;
pub mod http;
mod index_snapshots;
pub mod index_stats;
pub mod indexes;
pub mod peer;
pub mod request;
pub mod requests;
pub mod response;
pub(crate) mod routing;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use settee_query::exec::SystemRows;
use settee_query::plan::SystemKeyspace;
use settee_query::value::{Object, Value};
use settee_query::Engine;

use crate::node::Node;

/// Requests executing at once per node, beyond which they wait (Couchbase's servicers: 4 per core).
const SERVICERS_PER_CORE: usize = 4;
/// Requests admitted at once (running, waiting for a servicer, or waiting for their client to read); past it a
/// request is refused with 1201 "Request queue full" (HTTP 503), so slow clients cannot pile up threads.
const ADMITTED_MAX: usize = 256;
/// How long a request waits for its client to take more of the answer before it is cancelled.
pub const SEND_STALL_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(60);
/// The memory a request may hold (ORDER BY, GROUP BY, DISTINCT, subquery results) when it does not say
/// (`memory_quota`), in MiB: a bad query fails with 5500 instead of taking the node's memory.
pub const MEMORY_QUOTA_DEFAULT_MB: u64 = 1024;

/// The node's query service state.
pub struct QueryService {
    pub engine: Engine,
    pub indexes: Arc<indexes::IndexRegistry>,
    pub requests: requests::RequestLog,
    /// Servicers: held while a request executes, given back while it waits for its client.
    pub limiter: Arc<tokio::sync::Semaphore>,
    /// Admission: held from the start of a request to its end.
    pub admitted: Arc<tokio::sync::Semaphore>,
    /// How long a request may wait for its client to read (milliseconds).
    pub send_stall_timeout_ms: std::sync::atomic::AtomicU64,
    pub servicers: usize,
    pub completed: AtomicU64,
    pub memory_quota_mb: u64,
    /// The client for other nodes' query ports, made on first use (it needs the node's credentials).
    pub peers: std::sync::OnceLock<Arc<peer::PeerClient>>,
}

impl Default for QueryService {
    fn default() -> QueryService {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let servicers = SERVICERS_PER_CORE * cores;
        QueryService {
            engine: Engine::new(),
            indexes: Arc::default(),
            requests: Default::default(),
            limiter: Arc::new(tokio::sync::Semaphore::new(servicers)),
            admitted: Arc::new(tokio::sync::Semaphore::new(ADMITTED_MAX)),
            send_stall_timeout_ms: AtomicU64::new(SEND_STALL_TIMEOUT_DEFAULT.as_millis() as u64),
            servicers,
            completed: AtomicU64::new(0),
            memory_quota_mb: MEMORY_QUOTA_DEFAULT_MB,
            peers: std::sync::OnceLock::new(),
        }
    }
}

/// The rows only the service knows, for the `system:` keyspaces.
pub struct SystemCatalog<'a> {
    pub node: Arc<Node>,
    pub requests: &'a requests::RequestLog,
    pub engine: &'a Engine,
}

impl SystemRows for SystemCatalog<'_> {
    fn rows(&self, which: SystemKeyspace) -> Vec<(Arc<str>, Value)> {
        match which {
            SystemKeyspace::ActiveRequests => self.requests.active_rows(),
            SystemKeyspace::CompletedRequests => self.requests.completed_rows(),
            SystemKeyspace::Prepareds => {
                let node = format!("{}:{}", self.node.config.host, self.node.config.query_port);
                self.engine
                    .prepareds
                    .list()
                    .into_iter()
                    .map(|p| {
                        let mut o = Object::new();
                        o.insert("name".into(), Value::from(p.name.clone()));
                        o.insert("statement".into(), Value::from(p.text.clone()));
                        o.insert("uses".into(), Value::int(p.uses.load(std::sync::atomic::Ordering::Relaxed) as i64));
                        o.insert("namespace".into(), Value::string("default"));
                        o.insert("queryContext".into(), Value::from(p.context.key()));
                        o.insert("node".into(), Value::from(node.clone()));
                        o.insert("encoded_plan".into(), Value::string(""));
                        (Arc::from(format!("[{node}]{}", p.name)), Value::object(o))
                    })
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    fn datastore_url(&self) -> String {
        format!("http://{}:{}", self.node.config.host, self.node.config.mgmt_port)
    }
}
