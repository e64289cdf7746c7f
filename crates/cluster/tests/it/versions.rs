//! Metadata versions across nodes: a node that meets a committed command it cannot read stops applying the log
//! there and says why (the others carry on), it never proposes such a command itself, and a node older than the
//! cluster cannot join.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::metadata::META_VERSION;
use settee_cluster::{
    ConsensusError, HttpTransport, MetaCommand, MetaError, MetadataStore, NodeInfo, OpenError, ProposeError,
    StoreOptions,
};

use crate::fixture::{bucket, converged, register, three_nodes, TestNode, CONVERGE_TIMEOUT};

fn reading(version: u32) -> StoreOptions {
    StoreOptions { meta_version: version, ..StoreOptions::default() }
}

/// Waits until `store` says it stopped applying the log, and returns why.
async fn halted(store: &MetadataStore) -> String {
    let mut halted = store.halted();
    let why = tokio::time::timeout(CONVERGE_TIMEOUT, halted.wait_for(Option::is_some))
        .await
        .expect("the node stops within the timeout")
        .expect("the store is alive");
    why.clone().unwrap_or_default()
}

/// A node that reads only metadata version 1 (as an older settee) refuses to propose a version 2 command, and
/// when one is committed by the others it stops at it, naming the command and the versions, without applying
/// anything past it; the two other nodes keep committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stops_at_a_command_newer_than_it_reads_and_the_others_carry_on() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path(), StoreOptions::default()).await;
    nodes[2].stop().await;
    let old = nodes.pop().expect("node 3").restart(reading(1)).await;
    nodes.push(old);
    let before = register(&nodes).await;
    let all: Vec<_> = nodes.iter().collect();
    converged(&all, before.rev).await;

    let refused = nodes[2].store.propose(MetaCommand::EndDrain { node: 1 }).await.expect_err("too new to propose");
    assert_eq!(
        refused,
        ProposeError::Rejected(MetaError::CommandTooNew { command: "EndDrain".into(), needs: 2, reads: 1 })
    );
    assert!(nodes[2].store.halted().borrow().is_none(), "refusing a proposal stops nothing");

    let applied = nodes[0].store.propose(MetaCommand::EndDrain { node: 1 }).await.expect("the others commit it");
    let why = halted(&nodes[2].store).await;
    assert!(why.contains("EndDrain") && why.contains("needs metadata version 2"), "{why}");
    assert!(why.contains("reads up to 1"), "{why}");
    let after = nodes[0].store.propose(MetaCommand::CreateBucket(bucket("later"))).await.expect("still a quorum");
    converged(&[&nodes[0], &nodes[1]], after.rev).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(nodes[2].store.current().rev < applied.rev, "nothing at or past the unreadable command applied");
    for node in &mut nodes {
        node.stop().await;
    }
}

/// A command this build does not know at all (a newer settee's), committed in a node's log, stops the node when
/// it replays the log at restart: opening the store fails with the command's name, the version this node reads
/// and what to do, instead of a parse error of the whole log or a node that serves a state short of the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_command_in_the_log_stops_the_node_at_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("n1");
    let mut node = TestNode::start(1, &dir, StoreOptions::default()).await;
    node.store.initialize_single().await.expect("initialize");
    let state = node.store.propose(MetaCommand::AddNode(node.info())).await.expect("add");
    node.stop().await;
    append_committed_unknown_command(&dir.join("raft-log"), &dir.join("committed.json"));

    let transport = Arc::new(HttpTransport::new("Administrator", "password"));
    let opened = MetadataStore::open(&dir, 1, node.addr.clone(), transport).await;
    let Err(OpenError::Halted(why)) = opened else { panic!("opened past an unknown command") };
    assert!(why.contains("DrainHarder") && why.contains("unknown to this settee"), "{why}");
    assert!(why.contains(&format!("metadata version {META_VERSION}: unknown variant `DrainHarder`)")), "{why}");
    assert!(why.contains("restart it on a settee at least as new as"), "{why}");
    assert!(state.rev > 0);
}

/// Appends to a stopped node's Raft log an entry holding a command no settee has, right after its last entry and
/// in the same term, and marks it committed: what a newer leader's log would hold.
fn append_committed_unknown_command(log: &std::path::Path, committed: &std::path::Path) {
    let bytes = std::fs::read(log).expect("read the raft log");
    let mut at = 0;
    let mut last = None;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let record: serde_json::Value = serde_json::from_slice(&bytes[at + 8..at + 8 + len]).expect("a record");
        if let Some(entry) = record.get("Entry") {
            last = Some(entry["log_id"].clone());
        }
        at += 8 + len;
    }
    let mut log_id = last.expect("an entry in the log");
    log_id["index"] = serde_json::json!(log_id["index"].as_u64().expect("index") + 1);
    let record = serde_json::json!({
        "Entry": {"log_id": log_id, "payload": {"Normal": {"DrainHarder": {"node": 1, "secs": 9}}}}
    });
    let payload = serde_json::to_vec(&record).expect("json");
    let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    let mut all = bytes;
    all.extend_from_slice(&frame);
    std::fs::write(log, all).expect("write the raft log");
    std::fs::write(committed, serde_json::to_vec(&log_id).expect("json")).expect("write committed");
}

/// A node that reads an older metadata version than every member of the cluster is refused when it asks to join
/// (the log may hold commands it cannot read), with both versions in the error; while a member is at its version
/// (a mixed cluster), it may join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_older_than_the_cluster_cannot_join() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut first = TestNode::start(1, &root.path().join("n1"), StoreOptions::default()).await;
    first.store.initialize_single().await.expect("initialize");
    first.store.propose(MetaCommand::AddNode(first.info())).await.expect("add");
    let mut old = TestNode::start(2, &root.path().join("n2"), reading(1)).await;
    let refused = old.store.join(&first.addr).await.expect_err("an older node is refused");
    assert_eq!(refused, ConsensusError::IncompatibleVersion { node: 1, cluster: 2 });
    assert!(refused.to_string().contains("version 1, older than the cluster's 2"), "{refused}");

    let as_old = NodeInfo { meta_version: 1, ..first.info() };
    first.store.propose(MetaCommand::UpdateNode(as_old)).await.expect("node 1 now says version 1");
    old.store.join(&first.addr).await.expect("a mixed cluster takes a version 1 node");
    old.stop().await;
    first.stop().await;
}
