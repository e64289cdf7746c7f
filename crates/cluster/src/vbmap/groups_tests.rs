//! The planners with server groups: replicas in groups other than their active's wherever the groups allow it,
//! balance kept exactly as without groups, rebalance moving toward such a map, failover promoting across groups.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::tests::{assert_copies_balanced, spread};
use super::*;

fn groups(of: &[(NodeId, u32)]) -> NodeGroups {
    NodeGroups::from_pairs(of.iter().copied())
}

fn set(nodes: &[NodeId]) -> BTreeSet<NodeId> {
    nodes.iter().copied().collect()
}

/// Chains whose copies span fewer groups than `want`.
fn narrow_chains(map: &VbMap, g: &NodeGroups, want: usize) -> usize {
    map.chains.iter().filter(|c| g.spread_of(c) < want).count()
}

/// Two groups of two nodes, one replica: no vBucket has its active and its replica in the same group, the map is
/// as balanced as without groups, and each node's actives have their replicas shared evenly by the two nodes of
/// the other group (a failover spreads the promoted actives).
#[test]
fn two_groups_of_two_never_pair_an_active_with_a_replica_in_its_group() {
    let g = groups(&[(1, 0), (2, 0), (3, 1), (4, 1)]);
    let map = plan_in_groups(&[1, 2, 3, 4], &g, 1024, 1);
    assert_eq!(narrow_chains(&map, &g, 2), 0);
    let pairs = assert_copies_balanced(&map, &set(&[1, 2, 3, 4]), 1, 1024);
    for (a, others) in [(1, [3, 4]), (2, [3, 4]), (3, [1, 2]), (4, [1, 2])] {
        let mut counts = others.iter().map(|b| pairs.get(&(a, *b)).copied().unwrap_or(0));
        assert!(spread(&mut counts) <= 2, "node {a}'s replicas are not shared evenly: {pairs:?}");
    }
    assert_eq!(plan_in_groups(&[1, 2, 3, 4], &g, 1024, 1), map, "deterministic");
}

/// Uneven groups (three nodes and two): balance wins, and the spread is the best balance allows: every vBucket
/// whose active is in the small group has its replica in the big one, and the small group's replica slots all
/// serve actives of the big one.
#[test]
fn uneven_groups_stay_balanced_with_the_best_spread() {
    let g = groups(&[(1, 0), (2, 0), (3, 0), (4, 1), (5, 1)]);
    let map = plan_in_groups(&[1, 2, 3, 4, 5], &g, 1024, 1);
    assert_balanced_counts(&map, &[1, 2, 3, 4, 5], 1);
    let small_actives = map.actives_of(4).len() + map.actives_of(5).len();
    let small_replicas = map.replicas_of(4).len() + map.replicas_of(5).len();
    let crossing = map.chains.iter().filter(|c| g.spread_of(c) == 2).count();
    assert_eq!(crossing, small_actives + small_replicas, "the most chains balance allows cross groups");
    // One group against three nodes: nothing better than the plain plan exists, and it stays balanced.
    let lone = groups(&[(1, 0), (2, 0), (3, 0), (4, 1)]);
    assert_balanced_counts(&plan_in_groups(&[1, 2, 3, 4], &lone, 1024, 1), &[1, 2, 3, 4], 1);
}

fn assert_balanced_counts(map: &VbMap, nodes: &[NodeId], replicas: usize) {
    assert_copies_balanced(map, &set(nodes), replicas, map.chains.len());
}

/// Three groups of two nodes, two replicas: every vBucket has one copy in each group.
#[test]
fn three_groups_two_replicas_put_one_copy_in_each_group() {
    let g = groups(&[(1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (6, 2)]);
    let map = plan_in_groups(&[1, 2, 3, 4, 5, 6], &g, 1024, 2);
    assert_balanced_counts(&map, &[1, 2, 3, 4, 5, 6], 2);
    assert_eq!(narrow_chains(&map, &g, 3), 0);
}

/// Nodes all in one group (or none named) plan exactly as without groups.
#[test]
fn one_group_plans_as_without_groups() {
    let g = groups(&[(1, 7), (2, 7), (3, 7)]);
    assert_eq!(plan_in_groups(&[1, 2, 3], &g, 1024, 2), plan(&[1, 2, 3], 1024, 2));
    assert_eq!(plan_in_groups(&[1, 2, 3], &NodeGroups::default(), 64, 1), plan(&[1, 2, 3], 64, 1));
}

/// A cluster planned without groups, then split into two racks: rebalance onto the same nodes moves toward the
/// grouped map (every replica in the other rack, still balanced, no active moved more than needed), and a second
/// rebalance changes nothing.
#[test]
fn rebalance_after_splitting_into_groups_moves_replicas_across() {
    let nodes = [1, 2, 3, 4];
    let g = groups(&[(1, 0), (2, 0), (3, 1), (4, 1)]);
    let before = plan(&nodes, 1024, 1);
    assert!(narrow_chains(&before, &g, 2) > 0, "the plain plan pairs nodes of one rack");
    let after = rebalance(&before, &nodes, &g, 1);
    assert_eq!(narrow_chains(&after, &g, 2), 0);
    assert_balanced_counts(&after, &nodes, 1);
    let moved_actives = (0..1024).filter(|vb| before.chains[*vb][0] != after.chains[*vb][0]).count();
    assert!(moved_actives < 300, "{moved_actives} actives moved");
    assert_eq!(rebalance(&after, &nodes, &g, 1), after, "a grouped map is already balanced");
}

/// Adding a node into the smaller group: the rebalanced map stays balanced and keeps every replica across.
#[test]
fn rebalance_adding_a_node_to_a_group_keeps_replicas_across() {
    let g = groups(&[(1, 0), (2, 0), (3, 1), (4, 1)]);
    let before = plan_in_groups(&[1, 2, 3], &g, 1024, 1);
    let after = rebalance(&before, &[1, 2, 3, 4], &g, 1);
    assert_eq!(narrow_chains(&after, &g, 2), 0);
    assert_balanced_counts(&after, &[1, 2, 3, 4], 1);
}

/// Hard failover with two replicas promotes the surviving replica outside the failed node's group, and the
/// replica repair fills the gap balanced first.
#[test]
fn failover_promotes_across_groups_when_it_can() {
    let g = groups(&[(1, 0), (2, 0), (3, 1), (4, 1)]);
    let map = VbMap { chains: vec![vec![Some(1), Some(2), Some(3)], vec![Some(3), Some(4), Some(1)]] };
    let after = failover(&map, &[1], &g);
    assert_eq!(after.chains, vec![vec![Some(3), Some(2), None], vec![Some(3), Some(4), None]]);
    let repaired = repair_replicas(&after, &[2, 3, 4], &g);
    assert_eq!(repaired.chains, vec![vec![Some(3), Some(2), Some(4)], vec![Some(3), Some(4), Some(2)]]);
}

fn grouped_nodes() -> impl Strategy<Value = Vec<(NodeId, u32)>> {
    prop::collection::btree_map(1u64..40, 0u32..4, 2..10).prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// For any nodes in any groups, the grouped plan is as balanced as the plain one and no chain spans fewer
    /// groups in total than in the plain plan.
    #[test]
    fn grouped_plan_is_balanced_and_never_narrower(of in grouped_nodes(), replicas in 0usize..=3) {
        let g = groups(&of);
        let nodes: Vec<NodeId> = of.iter().map(|(n, _)| *n).collect();
        let map = plan_in_groups(&nodes, &g, 256, replicas);
        assert_balanced_counts(&map, &nodes, replicas);
        let plain = plan(&nodes, 256, replicas);
        let total = |m: &VbMap| m.chains.iter().map(|c| g.spread_of(c)).sum::<usize>();
        prop_assert!(total(&map) >= total(&plain));
        if g.count_among(&nodes) < 2 {
            prop_assert_eq!(map, plain);
        }
    }

    /// Rebalance onto grouped nodes keeps the balance of a fresh plan whatever the map it starts from.
    #[test]
    fn grouped_rebalance_is_balanced(old in grouped_nodes(), new in grouped_nodes()) {
        let g = groups(&new);
        let current = plan(&old.iter().map(|(n, _)| *n).collect::<Vec<_>>(), 256, 1);
        let nodes: Vec<NodeId> = new.iter().map(|(n, _)| *n).collect();
        let target = rebalance(&current, &nodes, &g, 1);
        assert_balanced_counts(&target, &nodes, 1);
        let fresh = plan_in_groups(&nodes, &g, 256, 1);
        let total = |m: &VbMap| m.chains.iter().map(|c| g.spread_of(c)).sum::<usize>();
        prop_assert_eq!(total(&target), total(&fresh), "the target spreads as a fresh grouped plan does");
    }
}
