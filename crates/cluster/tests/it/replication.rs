//! Replication across three stores over HTTP: proposals from any node converge everywhere, the cluster survives
//! the loss of its leader, and refused commands are typed errors that change nothing.

use settee_cluster::{MetaCommand, MetaError, ProposeError, StoreOptions};

use crate::fixture::{bucket, converged, register, three_nodes, TestNode, CONVERGE_TIMEOUT};

/// Proposals made on the leader and on followers (forwarded) are applied by every node in the same order: all
/// three reach the same revision with identical content, and all know the same three Raft members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_from_any_node_converge_everywhere() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = three_nodes(root.path(), StoreOptions::default()).await;
    register(&nodes).await;
    let leader = nodes.iter().position(|n| n.store.is_leader()).expect("a leader");
    let follower = (leader + 1) % 3;

    nodes[leader].store.propose(MetaCommand::CreateBucket(bucket("on-leader"))).await.expect("on leader");
    let state = nodes[follower].store.propose(MetaCommand::CreateBucket(bucket("on-follower"))).await.expect("fwd");
    assert!(state.buckets.contains_key("on-follower"), "the proposer sees the state after its command");
    assert_eq!(nodes[follower].store.current().rev, state.rev, "a follower's proposal is applied there on return");

    let all: Vec<_> = nodes.iter().collect();
    let final_state = converged(&all, state.rev).await;
    assert_eq!(final_state.buckets.len(), 2);
    assert_eq!(final_state.nodes.len(), 3);
    assert!(final_state.buckets["on-leader"].map.nodes().len() == 3, "map planned over the three active nodes");
    for node in &nodes {
        assert_eq!(node.store.members().len(), 3, "node {} sees three members", node.id);
        assert_eq!(node.store.leader(), nodes[leader].store.leader());
    }
}

/// With the leader stopped, the two remaining nodes elect a new leader and keep accepting proposals (a majority
/// of two out of three); a proposal made on either survivor succeeds and both apply it.
///
/// A survivor that still takes the stopped node for the leader forwards its first proposal there, and that
/// forward may fail with an unknown outcome (the connection closed under it): the store's documented contract.
/// The caller retries, as a REST client would, and a retry refused because the first attempt was applied after
/// all counts as that attempt's success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_the_loss_of_its_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path(), StoreOptions::default()).await;
    register(&nodes).await;
    let old_leader = nodes.iter().position(|n| n.store.is_leader()).expect("a leader");
    let old_leader_id = nodes[old_leader].id;
    nodes[old_leader].stop().await;
    let survivors: Vec<_> = nodes.iter().filter(|n| n.id != old_leader_id).collect();

    let created = MetaCommand::CreateBucket(bucket("after-failure"));
    let exists = MetaError::BucketExists("after-failure".into());
    let rev = propose_retrying_unknown_outcomes(survivors[0], created, exists).await;
    let deleted = MetaCommand::DeleteBucket("after-failure".into());
    let unknown = MetaError::UnknownBucket("after-failure".into());
    let rev_after = propose_retrying_unknown_outcomes(survivors[1], deleted, unknown).await;
    assert_eq!(rev_after, rev + 1, "the second proposal is the next revision");
    let state = converged(&survivors, rev_after).await;
    assert!(!state.buckets.contains_key("after-failure"));
    let new_leader = survivors[0].store.leader().expect("a new leader");
    assert_ne!(new_leader, old_leader_id);
    assert_eq!(survivors[1].store.leader(), Some(new_leader));
}

/// Proposes `cmd` on `node` until it is applied, retrying an unknown outcome; `applied_before` is the refusal a
/// retry gets when an earlier attempt was applied. Returns the revision the command produced.
async fn propose_retrying_unknown_outcomes(node: &TestNode, cmd: MetaCommand, applied_before: MetaError) -> u64 {
    let deadline = tokio::time::Instant::now() + CONVERGE_TIMEOUT;
    let mut retried = false;
    loop {
        match node.store.propose(cmd.clone()).await {
            Ok(state) => return state.rev,
            Err(ProposeError::Rejected(e)) if retried && e == applied_before => {
                return node.store.read_linearizable().await.expect("read").rev;
            }
            Err(ProposeError::Consensus(e)) if tokio::time::Instant::now() < deadline => {
                eprintln!("node {}: outcome unknown ({e}); retrying", node.id);
                retried = true;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("node {}: {e}", node.id),
        }
    }
}

/// A command the state machine refuses comes back as the typed MetaError, from the leader and through a
/// follower alike, and changes the revision nowhere: the next valid command is exactly one revision later on
/// every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_command_is_typed_and_changes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = three_nodes(root.path(), StoreOptions::default()).await;
    register(&nodes).await;
    let leader = nodes.iter().position(|n| n.store.is_leader()).expect("a leader");
    let follower = (leader + 1) % 3;
    let created = nodes[leader].store.propose(MetaCommand::CreateBucket(bucket("b"))).await.expect("create");

    for node in [leader, follower] {
        let again = nodes[node].store.propose(MetaCommand::CreateBucket(bucket("b"))).await;
        assert_eq!(again.expect_err("duplicate"), ProposeError::Rejected(MetaError::BucketExists("b".into())));
        let unknown = nodes[node].store.propose(MetaCommand::DeleteBucket("nope".into())).await;
        assert_eq!(unknown.expect_err("unknown"), ProposeError::Rejected(MetaError::UnknownBucket("nope".into())));
        assert_eq!(nodes[node].store.current().rev, created.rev);
    }
    let next = nodes[follower].store.propose(MetaCommand::DeleteBucket("b".into())).await.expect("delete");
    assert_eq!(next.rev, created.rev + 1);
    let all: Vec<_> = nodes.iter().collect();
    converged(&all, next.rev).await;
}

/// A linearizable read on a follower returns a state at least as new as the last acknowledged proposal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linearizable_read_on_a_follower_sees_acknowledged_writes() {
    let root = tempfile::tempdir().expect("tempdir");
    let nodes = three_nodes(root.path(), StoreOptions::default()).await;
    let leader = nodes.iter().position(|n| n.store.is_leader()).expect("a leader");
    let follower = (leader + 2) % 3;
    let written = nodes[leader].store.propose(MetaCommand::SetUsers(serde_json::json!({"u": 1}))).await.expect("w");
    let read = nodes[follower].store.read_linearizable().await.expect("read");
    assert!(read.rev >= written.rev);
    assert_eq!(read.users, serde_json::json!({"u": 1}));
}

/// A proposal "as leader" never travels: a follower is refused at once, and a leader whose followers are gone
/// cannot confirm its leadership and gets an error rather than a proposal that commits later. This is what keeps a
/// node cut off by a partition from failing a healthy peer over once the partition heals (tests/jepsen, seed 104:
/// an isolated stale leader's auto-failover was forwarded and committed after the heal, a second failover past
/// maxCount 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_as_leader_needs_a_quorum_behind_this_node() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_nodes(root.path(), StoreOptions::default()).await;
    register(&nodes).await;
    let leader = nodes.iter().position(|n| n.store.is_leader()).expect("a leader");
    let follower = (leader + 1) % 3;
    let refused = nodes[follower].store.propose_as_leader(MetaCommand::CreateBucket(bucket("from-follower"))).await;
    assert!(
        matches!(refused, Err(ProposeError::Consensus(settee_cluster::ConsensusError::NotLeader { .. }))),
        "{refused:?}"
    );
    let made = nodes[leader].store.propose_as_leader(MetaCommand::CreateBucket(bucket("with-quorum"))).await;
    assert!(made.expect("a leader with its followers proposes").buckets.contains_key("with-quorum"));

    for i in [(leader + 1) % 3, (leader + 2) % 3] {
        nodes[i].stop().await;
    }
    let alone = nodes[leader].store.propose_as_leader(MetaCommand::CreateBucket(bucket("alone"))).await;
    assert!(alone.is_err(), "a leader without a quorum proposed: {alone:?}");
    assert!(!nodes[leader].store.current().buckets.contains_key("alone"));
}
