//! Joining: a node that asks to join right after the seed formed its cluster (the seed's election still running)
//! gets in, and a new member catches up on a log of large entries (a rebalance logs whole vBucket maps).

use std::time::Duration;

use settee_cluster::{MetaCommand, StoreOptions};

use crate::fixture::{converged, TestNode};

/// Far below the join's own 30 s deadline, so a join that waits on a leader it never hears of fails here.
const JOIN_TIMEOUT: Duration = Duration::from_secs(15);

/// `joiner` joins through `seed`, or the test fails naming `case`.
async fn join_within_timeout(joiner: &TestNode, seed: &TestNode, case: &str) {
    match tokio::time::timeout(JOIN_TIMEOUT, joiner.store.join(&seed.addr)).await {
        Ok(joined) => joined.unwrap_or_else(|e| panic!("{case}: join: {e}")),
        Err(_) => panic!("{case}: join still waiting after {JOIN_TIMEOUT:?}"),
    }
}

/// A join sent the moment the seed initialised, while the seed may not have elected itself yet (it answers "not
/// the leader, leader unknown"), keeps asking the seed and succeeds once the election is over. Repeated, since
/// the window is short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_right_after_the_seed_initialised_gets_in() {
    for round in 0..5 {
        let root = tempfile::tempdir().expect("tempdir");
        let seed = TestNode::start(1, &root.path().join("n1"), StoreOptions::default()).await;
        let joiner = TestNode::start(2, &root.path().join("n2"), StoreOptions::default()).await;
        seed.store.initialize_single().await.expect("initialize");
        join_within_timeout(&joiner, &seed, &format!("round {round}")).await;
        assert_eq!(joiner.store.members().len(), 2, "round {round}: both nodes are members");
    }
}

/// A node joining a cluster whose log holds 16 MiB of entries of 160 KiB each catches up and becomes a member:
/// replication sends the backlog in appends small enough to land within openraft's per-append deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_member_catches_up_on_a_log_of_large_entries() {
    let root = tempfile::tempdir().expect("tempdir");
    let seed = TestNode::start(1, &root.path().join("n1"), StoreOptions::default()).await;
    seed.store.initialize_single().await.expect("initialize");
    let mut last = None;
    for i in 0..100 {
        let users = serde_json::json!({ "round": i, "padding": "u".repeat(160 << 10) });
        last = Some(seed.store.propose(MetaCommand::SetUsers(users)).await.expect("propose"));
    }
    let last = last.expect("proposed");

    let joiner = TestNode::start(2, &root.path().join("n2"), StoreOptions::default()).await;
    join_within_timeout(&joiner, &seed, "backlog").await;
    let state = converged(&[&seed, &joiner], last.rev).await;
    assert_eq!(state.users["round"], 99);
}
