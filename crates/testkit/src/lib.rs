//! Fixtures for tests: [`TestNode`] runs a node inside the test process on free ports; [`NodeProcess`] runs the
//! real `settee server` binary, for tests that must see a real process (signals, restarts).
//!
//! Dev-dependency only: nothing in the product depends on this crate.

mod process;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub use process::{free_port, settee_bin, NodeProcess};
pub use settee_client::Connection;
use settee_mcbp::Feature;
use settee_server::config::ServerConfig;
use settee_server::RunningNode;

pub const ADMIN: &str = "Administrator";
pub const PASSWORD: &str = "password";

/// The features the official SDKs negotiate that matter to tests.
pub const SDK_FEATURES: &[Feature] = &[
    Feature::MutationSeqno,
    Feature::Xattr,
    Feature::Xerror,
    Feature::SelectBucket,
    Feature::Json,
    Feature::AltRequestSupport,
    Feature::SyncReplication,
    Feature::Collections,
    Feature::PreserveTtl,
];

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "settee-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Waits (up to 30 s) until every bucket of the node has finished warmup, so tests start against a serving node.
pub async fn wait_for_warmup(running: &RunningNode) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while running.node.buckets().iter().any(|b| b.is_warming_up()) {
        assert!(std::time::Instant::now() < deadline, "warmup did not finish within 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Starts a node on free ports over an existing data directory (for restart tests), with `edit` applied to the
/// defaults, and waits for its warmup.
pub async fn start_node_in(dir: &std::path::Path, edit: impl FnOnce(&mut ServerConfig)) -> RunningNode {
    let mut config = ServerConfig::defaults();
    config.data_dir = dir.to_path_buf();
    (config.kv_port, config.mgmt_port, config.query_port) = (0, 0, 0);
    config.tls_off();
    edit(&mut config);
    let running = RunningNode::start(config).await.expect("node starts");
    wait_for_warmup(&running).await;
    running
}

/// A node running in this process on 127.0.0.1 with free ports and the default bucket.
pub struct TestNode {
    pub running: RunningNode,
    pub data_dir: PathBuf,
}

impl TestNode {
    pub async fn start() -> TestNode {
        TestNode::start_with(|_| {}).await
    }

    pub async fn start_with(edit: impl FnOnce(&mut ServerConfig)) -> TestNode {
        let data_dir = temp_dir("node");
        let mut config = ServerConfig::defaults();
        config.data_dir = data_dir.clone();
        config.kv_port = 0;
        config.mgmt_port = 0;
        config.query_port = 0;
        // Off unless a test turns them on (on free ports: many test nodes run at once).
        config.tls_off();
        edit(&mut config);
        let running = RunningNode::start(config).await.expect("node starts");
        wait_for_warmup(&running).await;
        TestNode { running, data_dir }
    }

    pub fn kv_addr(&self) -> std::net::SocketAddr {
        self.running.kv_addr
    }

    /// An authenticated connection to the default bucket with the SDKs' features.
    pub async fn connect(&self) -> Connection {
        Connection::connect(self.kv_addr(), ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.expect("connect")
    }

    pub async fn stop(self) {
        self.running.stop().await;
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
