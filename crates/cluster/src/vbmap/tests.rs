//! Property tests of the planners: balance bounds, chains without duplicates, failover promotion, and rebalance
//! that stays balanced while moving no more than a fresh plan.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use settee_types::limits::NUM_VBUCKETS;

/// Asserts the balance invariants of a planned map over `nodes` and returns nothing; the message names the bound.
fn assert_balanced(map: &VbMap, nodes: &BTreeSet<NodeId>, replicas: usize, vbs: usize) {
    let pairs = assert_copies_balanced(map, nodes, replicas, vbs);
    let copies = (replicas + 1).min(nodes.len());
    if copies > 1 {
        for a in nodes {
            let mut others = nodes.iter().filter(|b| *b != a).map(|b| pairs.get(&(*a, *b)).copied().unwrap_or(0));
            assert!(spread(&mut others) <= 2, "replicas of node {a}'s actives are not spread: {pairs:?}");
        }
    }
}

pub(super) fn spread(counts: &mut dyn Iterator<Item = usize>) -> usize {
    let v: Vec<usize> = counts.collect();
    v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0)
}

/// Asserts chains are well formed and actives and replicas per node are within one of each other; returns the
/// (active, replica) pair counts.
pub(super) fn assert_copies_balanced(
    map: &VbMap,
    nodes: &BTreeSet<NodeId>,
    replicas: usize,
    vbs: usize,
) -> BTreeMap<(NodeId, NodeId), usize> {
    assert_eq!(map.chains.len(), vbs);
    let copies = (replicas + 1).min(nodes.len());
    let mut actives: BTreeMap<NodeId, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    let mut replica_counts = actives.clone();
    let mut pairs: BTreeMap<(NodeId, NodeId), usize> = BTreeMap::new();
    for chain in &map.chains {
        assert_eq!(chain.len(), replicas + 1, "chain length");
        let present: Vec<NodeId> = chain.iter().flatten().copied().collect();
        assert_eq!(present.len(), copies, "copies per chain: {chain:?}");
        assert_eq!(present.iter().collect::<BTreeSet<_>>().len(), present.len(), "duplicate in {chain:?}");
        assert!(chain.iter().skip(present.len()).all(Option::is_none), "None before a copy in {chain:?}");
        assert!(present.iter().all(|n| nodes.contains(n)), "unknown node in {chain:?}");
        if let Some((active, rest)) = present.split_first() {
            *actives.get_mut(active).expect("known node") += 1;
            for r in rest {
                *replica_counts.get_mut(r).expect("known node") += 1;
                *pairs.entry((*active, *r)).or_default() += 1;
            }
        }
    }
    assert!(spread(&mut actives.values().copied()) <= 1, "actives per node {actives:?}");
    assert!(spread(&mut replica_counts.values().copied()) <= 1, "replicas per node {replica_counts:?}");
    pairs
}

fn total_cost(from: &VbMap, to: &VbMap) -> usize {
    from.chains.iter().zip(&to.chains).map(|(o, n)| copies_to_build(o, n)).sum()
}

fn node_sets() -> impl Strategy<Value = BTreeSet<NodeId>> {
    prop::collection::btree_set(1u64..40, 1..10)
}

fn vbucket_counts() -> impl Strategy<Value = u16> {
    prop_oneof![Just(1024u16), 1u16..200]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// plan is balanced for every node set, vBucket count and replica count, and ignores the node order.
    #[test]
    fn plan_is_balanced(nodes in node_sets(), vbs in vbucket_counts(), replicas in 0usize..=3) {
        let list: Vec<NodeId> = nodes.iter().rev().copied().collect();
        let map = plan(&list, vbs, replicas);
        assert_balanced(&map, &nodes, replicas, usize::from(vbs));
        prop_assert_eq!(map, plan(&nodes.iter().copied().collect::<Vec<_>>(), vbs, replicas));
    }

    /// After failover no failed node remains, survivors keep their order, and a chain with a surviving copy
    /// always has it as active (the first surviving replica was promoted).
    #[test]
    fn failover_promotes_every_surviving_copy(
        nodes in node_sets(),
        replicas in 0usize..=3,
        failed_mask in any::<u64>(),
    ) {
        let list: Vec<NodeId> = nodes.iter().copied().collect();
        let map = plan(&list, 256, replicas);
        let failed: Vec<NodeId> = list.iter().enumerate().filter(|(i, _)| failed_mask >> i & 1 == 1).map(|(_, n)| *n).collect();
        let after = failover(&map, &failed, &NodeGroups::default());
        let lost: BTreeSet<u16> = data_loss_risk(&map, &failed).into_iter().collect();
        for (vb, (old, new)) in map.chains.iter().zip(&after.chains).enumerate() {
            let survivors: Vec<NodeId> = old.iter().flatten().filter(|n| !failed.contains(n)).copied().collect();
            prop_assert_eq!(new.len(), old.len());
            prop_assert_eq!(new.iter().flatten().copied().collect::<Vec<_>>(), survivors.clone());
            prop_assert_eq!(new[0], survivors.first().copied());
            prop_assert_eq!(lost.contains(&(vb as u16)), survivors.is_empty());
        }
    }

    /// rebalance onto any new node set is as balanced as a fresh plan and builds no more copies than one.
    #[test]
    fn rebalance_is_balanced_and_moves_less(
        old in node_sets(),
        new in node_sets(),
        vbs in vbucket_counts(),
        replicas in 0usize..=3,
    ) {
        let current = plan(&old.iter().copied().collect::<Vec<_>>(), vbs, replicas);
        let new_list: Vec<NodeId> = new.iter().copied().collect();
        let target = rebalance(&current, &new_list, &NodeGroups::default(), replicas);
        assert_balanced(&target, &new, replicas, usize::from(vbs));
        let fresh = plan(&new_list, vbs, replicas);
        prop_assert!(total_cost(&current, &target) <= total_cost(&current, &fresh));
    }

    /// Growing or shrinking a cluster by one node builds strictly fewer copies than planning from scratch.
    #[test]
    fn rebalance_by_one_node_beats_a_fresh_plan(nodes in prop::collection::btree_set(1u64..40, 3..10), grow in any::<bool>()) {
        let mut old: Vec<NodeId> = nodes.iter().copied().collect();
        let mut new = old.clone();
        if grow { new.push(100) } else { old.push(100) }
        let current = plan(&old, 1024, 1);
        let target = rebalance(&current, &new, &NodeGroups::default(), 1);
        let fresh = plan(&new, 1024, 1);
        prop_assert!(total_cost(&current, &target) < total_cost(&current, &fresh));
    }
}

/// After a failover in a 4-node cluster with 2 replicas, repair fills every gap on surviving nodes, never twice in
/// a chain, keeps every active where it was, and spreads the new copies evenly.
#[test]
fn repair_replicas_fills_gaps_after_failover() {
    let before = plan(&[1, 2, 3, 4], NUM_VBUCKETS, 2);
    let failed = failover(&before, &[4], &NodeGroups::default());
    let repaired = repair_replicas(&failed, &[1, 2, 3], &NodeGroups::default());
    for (old, new) in failed.chains.iter().zip(&repaired.chains) {
        assert_eq!(old[0], new[0], "actives never move");
        assert!(new.iter().all(Option::is_some), "every gap filled: {new:?}");
        let distinct: std::collections::BTreeSet<_> = new.iter().collect();
        assert_eq!(distinct.len(), new.len(), "no node twice in a chain");
        assert!(old.iter().flatten().all(|n| new.contains(&Some(*n))), "existing copies are kept");
    }
    let copies: Vec<usize> =
        [1, 2, 3].iter().map(|n| repaired.chains.iter().flatten().filter(|c| **c == Some(*n)).count()).collect();
    assert_eq!(copies.iter().sum::<usize>(), 3 * NUM_VBUCKETS as usize);
    assert!(copies.iter().all(|c| *c == NUM_VBUCKETS as usize), "three copies on three nodes: {copies:?}");
    // With too few nodes (one replica needed, only the active's node left) the gap stays.
    let lone = repair_replicas(
        &failover(&plan(&[1, 2], NUM_VBUCKETS, 1), &[2], &NodeGroups::default()),
        &[1],
        &NodeGroups::default(),
    );
    assert!(lone.chains.iter().all(|c| c[0] == Some(1) && c[1].is_none()));
}
