//! The node's settings: the `settee server` command line, the product's CLI contract.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BucketTypeArg {
    Couchbase,
    Ephemeral,
}

/// `settee server` flags. The names and defaults are a contract: scripts and docs depend on them.
#[derive(Clone, Debug, Args)]
pub struct ServerConfig {
    /// Where the node keeps its metadata (and, with persistent buckets, its data).
    #[arg(long, default_value = "./settee-data")]
    pub data_dir: PathBuf,
    /// Address to bind and to advertise to clients.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Memcached binary protocol (KV) port.
    #[arg(long, default_value_t = 11210)]
    pub kv_port: u16,
    /// REST management port.
    #[arg(long, default_value_t = 8091)]
    pub mgmt_port: u16,
    /// Query service port.
    #[arg(long, default_value_t = 8093)]
    pub query_port: u16,
    /// KV port over TLS (Couchbase's 11207, `couchbases://`); 0 turns it off.
    #[arg(long, default_value_t = 11207)]
    pub kv_tls_port: u16,
    /// REST management port over TLS (Couchbase's 18091); 0 turns it off.
    #[arg(long, default_value_t = 18091)]
    pub mgmt_tls_port: u16,
    /// Query service port over TLS (Couchbase's 18093); 0 turns it off.
    #[arg(long, default_value_t = 18093)]
    pub query_tls_port: u16,
    /// The node's certificate chain (PEM, the node's certificate first) for the TLS ports, instead of the one the
    /// node generates at first start; needs `--tls-key` and `--tls-ca`.
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM, PKCS#8, PKCS#1 or SEC1) of `--tls-cert`.
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_ca"])]
    pub tls_key: Option<PathBuf>,
    /// The CA certificate(s) (PEM) that sign `--tls-cert`: served at `/pools/default/certificate` for clients to
    /// trust, and the authority a reloaded certificate must chain to.
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
    /// Seconds a client may take to complete its TLS handshake on a TLS port; a slower one is closed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub tls_handshake_timeout_secs: u64,
    /// Administrator user name.
    #[arg(long, default_value = "Administrator")]
    pub username: String,
    /// Administrator password.
    #[arg(long, default_value = "password")]
    pub password: String,
    /// Bucket created on first start when no bucket exists.
    #[arg(long, default_value = "default")]
    pub bucket: String,
    /// Type of that bucket: `couchbase` (persistent, memory-first) or `ephemeral` (memory only).
    #[arg(long, value_enum, default_value_t = BucketTypeArg::Couchbase)]
    pub bucket_type: BucketTypeArg,
    /// RAM quota of that bucket, in MiB (at least 1 here; the REST API keeps Couchbase's 100 MiB floor).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub bucket_ram_mb: u64,
    /// Replica count of that bucket (0-3).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub replicas: u8,
    /// Tombstones (deleted documents) older than this many seconds are purged from memory and disk by the
    /// pagers and compaction (Couchbase's metadata purge interval, 3 days).
    #[arg(long, default_value_t = 3 * 24 * 60 * 60)]
    pub metadata_purge_age_secs: u32,
    /// Join the cluster of the node whose management address is HOST:PORT on first start, instead of forming a
    /// one-node cluster (no default bucket is created then). Ignored once the node belongs to a cluster.
    #[arg(long, value_name = "HOST:MGMTPORT")]
    pub join: Option<String>,
    /// Open the node's connections to other nodes (Raft, the cluster's node-to-node calls, DCP replication) from
    /// `--host` instead of the address the kernel picks, so that a peer sees this node's address as their source
    /// (firewall rules between nodes, and the black-box checker's partitions, match on it). `--host` must then be
    /// an IP address of this machine.
    #[arg(long)]
    pub bind_peer_connections: bool,
    /// Most concurrent KV connections; further connections are closed at once.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds a KV connection may stay unauthenticated: one that has not completed SASL by then is closed, so
    /// silent or half-open connections cannot pile up. When every connection slot is taken, the oldest
    /// unauthenticated connection is closed to admit a new one.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub kv_auth_timeout_secs: u64,
    /// MiB that all KV connections together may hold in their read buffers for frames still arriving (large
    /// SETs): a connection that would pass it stops reading until others' frames complete (back-pressure).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub kv_read_buffer_mb: u64,
    /// Seconds a KV connection may take to send a frame that needed read-buffer budget once it started receiving
    /// it; a slower one is closed so it cannot keep the budget.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub kv_frame_timeout_secs: u64,
    /// Seconds a KV connection may take to accept a write of replies; a client that stops reading is closed after
    /// this, so it cannot hold the connection's buffers and its durable-write waiters forever.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub kv_write_timeout_secs: u64,
    /// Seconds a management-port connection may take none of an answer before it is closed (a client that
    /// stopped reading), and may stay open without sending anything after it was accepted.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub rest_write_timeout_secs: u64,
    /// Milliseconds a KV operation may take (frame decoded to reply queued) before it is logged as a "Slow
    /// operation" WARN line (at most 10 lines a second), as Couchbase's 500 ms default; 0 turns the log off.
    #[arg(long, default_value_t = 500)]
    pub slow_op_threshold_ms: u64,
    /// How log lines are written to stderr: `text`, or `json` (one object per line, for log shippers). The
    /// filter comes from `SETTEE_LOG` and changes at run time with `POST /settings/logLevel`.
    #[arg(long, value_enum, default_value_t = crate::logging::LogFormat::Text)]
    pub log_format: crate::logging::LogFormat,
    /// Threads serving KV connections, each running its own single-threaded event loop with the connections
    /// given to it (as memcached's worker threads); 0 means one per CPU.
    #[arg(long, default_value_t = 0)]
    pub kv_threads: usize,
    /// Seconds between snapshots of a couchbase bucket's indexes to disk (also written when an index comes online
    /// and at shutdown): after a crash, an index catches up from its last snapshot instead of being rebuilt.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub index_snapshot_secs: u64,
    /// MiB of memory the node's indexes may hold (Couchbase's `indexMemoryQuota`, 512 by default): once they hold
    /// it, CREATE INDEX and BUILD INDEX fail with a clear error; the existing indexes keep being maintained.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub index_memory_quota_mb: u64,
    /// For tests only: serve `POST /settee/testing/faults`, which makes a persistent bucket's disk slow, failing
    /// or full on request. Never set in production.
    #[arg(long, hide = true)]
    pub testing_fault_injection: bool,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--bind-peer-connections needs --host to be an IP address of this machine, not {0:?}")]
    PeerSourceNotAnAddress(String),
}

impl ServerConfig {
    /// The address the node's connections to its peers come from: `--host` with `--bind-peer-connections`, else
    /// none (the kernel picks one per connection). A wildcard host (`0.0.0.0`, `::`) binds nothing.
    pub fn peer_source(&self) -> Result<Option<IpAddr>, ConfigError> {
        if !self.bind_peer_connections {
            return Ok(None);
        }
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = host.parse().map_err(|_| ConfigError::PeerSourceNotAnAddress(self.host.clone()))?;
        Ok((!ip.is_unspecified()).then_some(ip))
    }

    /// The defaults with a fresh data directory under the system temp dir, so tests never write into the
    /// working directory, and an ephemeral default bucket, so unit tests open no store.
    pub fn for_tests() -> ServerConfig {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut c = ServerConfig::defaults();
        c.bucket_type = BucketTypeArg::Ephemeral;
        c.tls_off();
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        c.data_dir = std::env::temp_dir().join(format!("settee-unit-{}-{n}", std::process::id()));
        c
    }

    /// Turns the three TLS ports off: tests that run many nodes at once must not all bind Couchbase's defaults.
    pub fn tls_off(&mut self) {
        (self.kv_tls_port, self.mgmt_tls_port, self.query_tls_port) = (0, 0, 0);
    }

    /// The configuration a test or an embedding program starts from: the CLI defaults.
    pub fn defaults() -> ServerConfig {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            cfg: ServerConfig,
        }
        Wrapper::parse_from(["settee"]).cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the flag the kernel picks the source address; with it, `--host` is the source, a wildcard host
    /// binds nothing, and a host name is refused at start rather than silently ignored.
    #[test]
    fn peer_source_is_the_host_only_when_asked_for() {
        let mut c = ServerConfig::for_tests();
        c.host = "127.0.0.12".into();
        assert_eq!(c.peer_source().unwrap(), None);
        c.bind_peer_connections = true;
        assert_eq!(c.peer_source().unwrap(), Some("127.0.0.12".parse().unwrap()));
        c.host = "[::1]".into();
        assert_eq!(c.peer_source().unwrap(), Some("::1".parse().unwrap()));
        c.host = "0.0.0.0".into();
        assert_eq!(c.peer_source().unwrap(), None);
        c.host = "localhost".into();
        assert!(matches!(c.peer_source(), Err(ConfigError::PeerSourceNotAnAddress(h)) if h == "localhost"));
    }
}
