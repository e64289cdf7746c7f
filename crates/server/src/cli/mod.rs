//! `settee cluster ...`: operator commands that drive a running cluster over its REST API.

pub mod collect_info;
pub mod rolling_restart;
mod zip;

use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Restart every node in turn (graceful failover, restart, warmup, delta recovery, rebalance), so that clients
    /// see latency but no error; with `--binary`, upgrade every node to that executable.
    RollingRestart(rolling_restart::RollingRestartArgs),
    /// Write one ZIP file with every node's views, statistics, settings, timings and metrics, and the log files
    /// named with `--log-file`, for a bug report (Couchbase's cbcollect_info).
    CollectInfo(collect_info::CollectInfoArgs),
}

/// Where the cluster is and who the administrator is, as couchbase-cli takes them.
#[derive(Args, Clone, Debug)]
pub struct ClusterAccess {
    /// A node of the cluster: `host:port` of its management port (`http://` accepted).
    #[arg(short = 'c', long)]
    pub cluster: String,
    #[arg(short = 'u', long)]
    pub username: String,
    #[arg(short = 'p', long)]
    pub password: String,
}

impl ClusterAccess {
    /// `GET path` from the node at `addr` with these credentials: the body of a 200, else an error naming the call.
    pub async fn get_bytes(&self, addr: &str, path: &str, timeout: std::time::Duration) -> anyhow::Result<Vec<u8>> {
        let creds = (self.username.as_str(), self.password.as_str());
        let empty = &settee_cluster::peer::Body::Empty;
        let reply =
            crate::cluster::rest_client::call(addr, None, None, "GET", path, Some(creds), empty, timeout).await?;
        if reply.status != 200 {
            anyhow::bail!("GET {path} from {addr}: {} {}", reply.status, reply.body.trim());
        }
        Ok(reply.body.into_bytes())
    }

    /// The seed's `host:port`.
    pub fn seed(&self) -> String {
        let s = self.cluster.trim_start_matches("http://").trim_end_matches('/');
        if s.contains(':') {
            s.to_owned()
        } else {
            format!("{s}:8091")
        }
    }
}

/// Runs a `settee cluster` command.
pub async fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::RollingRestart(args) => rolling_restart::run(args).await,
        ClusterCommand::CollectInfo(args) => collect_info::run(args).await,
    }
}
