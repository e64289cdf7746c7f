//! Restarts: a store reopened from its directory recovers its state before talking to anyone, then rejoins and
//! catches up, through log replication or, once the log it missed was purged, through a snapshot.

use settee_cluster::{MetaCommand, MetadataStore, OpenError, StoreOptions};

use crate::fixture::{bucket, converged, register, three_nodes, CONVERGE_TIMEOUT};

/// Snapshots every 20 entries, so a few dozen proposals exercise snapshot building, log purge and installation.
fn small_snapshots() -> StoreOptions {
    StoreOptions { snapshot_every_entries: 20, entries_kept_after_snapshot: 5, ..StoreOptions::default() }
}

/// A follower stopped and reopened from its directory has its applied state back at once (from its log and
/// committed index), then catches up with what it missed while down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_recovers_and_catches_up() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path(), StoreOptions::default()).await;
    let before = register(&nodes).await;
    let all: Vec<_> = nodes.iter().collect();
    converged(&all, before.rev).await;
    let down = nodes.iter().position(|n| !n.store.is_leader()).expect("a follower");
    let up = (down + 1) % 3;

    nodes[down].stop().await;
    let missed = nodes[up].store.propose(MetaCommand::CreateBucket(bucket("while-down"))).await.expect("propose");
    let node = nodes.remove(down).restart(StoreOptions::default()).await;
    assert!(node.store.current().rev >= before.rev, "state restored from disk before any peer contact");
    assert_eq!(node.store.current().nodes, before.nodes);
    nodes.insert(down, node);

    let state = nodes[down].store.wait_for_rev(missed.rev, CONVERGE_TIMEOUT).await.expect("caught up");
    assert!(state.buckets.contains_key("while-down"));
    let after = nodes[down].store.propose(MetaCommand::DeleteBucket("while-down".into())).await.expect("rejoined");
    let all: Vec<_> = nodes.iter().collect();
    converged(&all, after.rev).await;
}

/// A node down while the others snapshot and purge their logs cannot be caught up from the log: the leader sends
/// it a snapshot. Every node restarted from a directory holding a snapshot recovers the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_node_catches_up_through_a_snapshot() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path(), small_snapshots()).await;
    register(&nodes).await;
    let down = nodes.iter().position(|n| !n.store.is_leader()).expect("a follower");
    let up = (down + 1) % 3;
    nodes[down].stop().await;

    let mut last = None;
    for i in 0..60 {
        let users = serde_json::json!({ "generation": i });
        last = Some(nodes[up].store.propose(MetaCommand::SetUsers(users)).await.expect("propose"));
    }
    let last = last.expect("proposed");
    let node = nodes.remove(down).restart(small_snapshots()).await;
    nodes.insert(down, node);
    let state = nodes[down].store.wait_for_rev(last.rev, CONVERGE_TIMEOUT).await.expect("caught up");
    assert_eq!(state.users, serde_json::json!({ "generation": 59 }));
    assert!(nodes[down].dir.join("snapshot.json").exists(), "the lagging node installed a snapshot");

    // Restart everyone: each node rebuilds the same state from its snapshot and log.
    let all: Vec<_> = nodes.iter().collect();
    converged(&all, last.rev).await;
    for node in &mut nodes {
        node.stop().await;
    }
    let mut restarted = Vec::new();
    for node in nodes {
        restarted.push(node.restart(small_snapshots()).await);
    }
    for node in &restarted {
        assert!(node.store.current().rev >= last.rev, "node {} restored its state", node.id);
    }
    let proposer = restarted.iter().find(|n| n.id != 1).expect("a node");
    let after = proposer.store.propose(MetaCommand::SetUsers(serde_json::json!({"after": "restart"}))).await;
    let after = after.expect("proposals work after a full restart");
    let all: Vec<_> = restarted.iter().collect();
    converged(&all, after.rev).await;
}

/// A store directory belongs to one node id: opening it as another node is refused.
#[tokio::test]
async fn directory_of_another_node_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let transport = std::sync::Arc::new(settee_cluster::HttpTransport::new("a", "b"));
    let store = MetadataStore::open(root.path(), 1, "127.0.0.1:1".into(), transport.clone()).await.expect("open");
    store.shutdown().await;
    let other = MetadataStore::open(root.path(), 2, "127.0.0.1:1".into(), transport).await;
    assert!(matches!(other, Err(OpenError::WrongNode { found: 1, expected: 2, .. })));
}
