//! A node of a test cluster: a metadata store in its own directory, served by `raft_router` on an ephemeral
//! 127.0.0.1 port, reached by its peers through `HttpTransport`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::{
    raft_router, BucketSpec, ClusterMetadata, HttpTransport, Membership, MetaCommand, MetadataStore, NodeId, NodeInfo,
    StoreOptions,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Generous: convergence on loopback takes milliseconds, an election one to two seconds.
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct TestNode {
    pub id: NodeId,
    pub addr: String,
    pub dir: PathBuf,
    pub store: Arc<MetadataStore>,
    server: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl TestNode {
    /// Opens node `id` in `dir` and serves it on a new ephemeral port.
    pub async fn start(id: NodeId, dir: &Path, options: StoreOptions) -> TestNode {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve(id, dir, listener, options).await
    }

    /// Reopens a stopped node from its directory at its old address.
    pub async fn restart(self, options: StoreOptions) -> TestNode {
        assert!(self.server.is_none(), "stop the node first");
        let listener = TcpListener::bind(&self.addr).await.expect("rebind the old address");
        Self::serve(self.id, &self.dir, listener, options).await
    }

    async fn serve(id: NodeId, dir: &Path, listener: TcpListener, options: StoreOptions) -> TestNode {
        let addr = listener.local_addr().expect("local addr").to_string();
        let transport = Arc::new(HttpTransport::new("Administrator", "password"));
        let store = MetadataStore::open_with(dir, id, addr.clone(), transport, options).await.expect("open store");
        let (stop, stopped) = oneshot::channel::<()>();
        let router = raft_router(store.clone());
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            axum::serve(listener, router).with_graceful_shutdown(shutdown).await.expect("serve");
        });
        TestNode { id, addr, dir: dir.to_path_buf(), store, server: Some((stop, server)) }
    }

    /// Stops serving (peers now fail to connect) and shuts the store down.
    pub async fn stop(&mut self) {
        if let Some((stop, server)) = self.server.take() {
            let _ = stop.send(());
            let mut server = server;
            if tokio::time::timeout(CONVERGE_TIMEOUT, &mut server).await.is_err() {
                server.abort();
            }
        }
        self.store.shutdown().await;
    }

    pub fn info(&self) -> NodeInfo {
        let port: u16 = self.addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
        NodeInfo { membership: Membership::InactiveAdded, ..NodeInfo::new(self.id, "127.0.0.1", port) }
    }
}

/// Three nodes forming one Raft group: node 1 initialised, node 2 joined through node 1, node 3 added by a
/// request sent to node 2 (a follower, so it is forwarded).
pub async fn three_nodes(root: &Path, options: StoreOptions) -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(TestNode::start(id, &root.join(format!("n{id}")), options.clone()).await);
    }
    assert!(!nodes[0].store.is_initialized().await, "a new store belongs to no cluster");
    nodes[0].store.initialize_single().await.expect("initialize");
    nodes[0].store.initialize_single().await.expect("initialising twice is a no-op");
    nodes[1].store.join(&nodes[0].addr).await.expect("join node 2");
    nodes[1].store.add_member(3, nodes[2].addr.clone()).await.expect("add node 3 through a follower");
    assert!(nodes[2].store.is_initialized().await, "an added store belongs to the cluster");
    nodes
}

/// Waits until every node has applied `rev`, then returns their states (all equal, as asserted).
pub async fn converged(nodes: &[&TestNode], rev: u64) -> Arc<ClusterMetadata> {
    let mut states = Vec::new();
    for node in nodes {
        let state = node.store.wait_for_rev(rev, CONVERGE_TIMEOUT).await;
        states.push(state.unwrap_or_else(|| panic!("node {} did not reach rev {rev}", node.id)));
    }
    for (node, state) in nodes.iter().zip(&states) {
        assert_eq!(**state, *states[0], "node {} diverged from node {}", node.id, nodes[0].id);
    }
    states.swap_remove(0)
}

pub fn bucket(name: &str) -> BucketSpec {
    BucketSpec {
        name: name.into(),
        uuid: format!("uuid-{name}"),
        ephemeral: false,
        ram_quota_bytes: 100 << 20,
        replicas: 1,
        eviction: "valueOnly".into(),
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    }
}

/// Registers the nodes in the metadata and makes them all Active.
pub async fn register(nodes: &[TestNode]) -> Arc<ClusterMetadata> {
    let mut state = None;
    for node in nodes {
        let proposer = &nodes[(node.id as usize) % nodes.len()].store;
        proposer.propose(MetaCommand::AddNode(node.info())).await.expect("add node");
        let activate = MetaCommand::SetMembership { node: node.id, membership: Membership::Active };
        state = Some(proposer.propose(activate).await.expect("activate"));
    }
    state.expect("at least one node")
}
