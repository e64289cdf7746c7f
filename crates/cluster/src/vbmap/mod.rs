//! vBucket maps: which node holds the active copy of every vBucket and which hold its replicas, and the pure
//! planners that compute them (initial placement, rebalance to a new node set, failover). No I/O, no clock, no
//! randomness: the same inputs always give the same map, so every node of the cluster computes the same answer and
//! the simulator can replay it.

mod groups;
#[cfg(test)]
mod groups_tests;
mod plan;
mod rebalance;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use groups::{promoted, spread_over_groups, NodeGroups};
pub use plan::{plan, plan_in_groups, REPLICAS_MAX};
pub use rebalance::{rebalance, rebalance_keeping};

/// A node's id in the cluster; also its Raft id.
pub type NodeId = u64;

/// One chain per vBucket: `chain[0]` is the active copy, `chain[1..]` the replicas in promotion order. `None` is
/// a missing copy (Couchbase's `-1`): too few nodes for the replica count, or a copy lost to a failover.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VbMap {
    pub chains: Vec<Vec<Option<NodeId>>>,
}

/// One vBucket whose chain differs between two maps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VbMove {
    pub vb: u16,
    pub old_chain: Vec<Option<NodeId>>,
    pub new_chain: Vec<Option<NodeId>>,
}

impl VbMap {
    pub fn num_vbuckets(&self) -> usize {
        self.chains.len()
    }

    /// Replicas per vBucket as the map is laid out (chain length minus the active).
    pub fn replicas(&self) -> usize {
        self.chains.first().map_or(0, |c| c.len().saturating_sub(1))
    }

    pub fn active(&self, vb: u16) -> Option<NodeId> {
        self.chains.get(usize::from(vb)).and_then(|c| c.first().copied().flatten())
    }

    /// Every node that holds at least one copy.
    pub fn nodes(&self) -> BTreeSet<NodeId> {
        self.chains.iter().flatten().flatten().copied().collect()
    }

    pub fn contains_node(&self, node: NodeId) -> bool {
        self.chains.iter().flatten().any(|n| *n == Some(node))
    }

    /// The vBuckets whose active copy is on `node`.
    pub fn actives_of(&self, node: NodeId) -> Vec<u16> {
        self.vbs_where(|chain| chain.first() == Some(&Some(node)))
    }

    /// The vBuckets that have a replica copy on `node`.
    pub fn replicas_of(&self, node: NodeId) -> Vec<u16> {
        self.vbs_where(|chain| chain.iter().skip(1).any(|n| *n == Some(node)))
    }

    fn vbs_where(&self, pred: impl Fn(&[Option<NodeId>]) -> bool) -> Vec<u16> {
        // A map never has more than u16::MAX + 1 chains (vBucket ids are u16), so the conversion cannot fail for
        // maps this crate builds; a foreign oversized map simply stops at the limit.
        (0..=u16::MAX).zip(&self.chains).filter(|(_, c)| pred(c)).map(|(vb, _)| vb).collect()
    }
}

/// The vBuckets whose chains differ between `from` and `to`, in vBucket order. A vBucket present only in `to` moves
/// from an empty chain.
pub fn moves(from: &VbMap, to: &VbMap) -> Vec<VbMove> {
    (0..=u16::MAX)
        .zip(&to.chains)
        .filter_map(|(vb, new_chain)| {
            let old_chain = from.chains.get(usize::from(vb)).cloned().unwrap_or_default();
            (old_chain != *new_chain).then(|| VbMove { vb, old_chain, new_chain: new_chain.clone() })
        })
        .collect()
}

/// The map after hard failover of `failed`: every chain loses the failed nodes and its survivors move up in order,
/// so an active on a failed node is replaced by a surviving replica (promotion): the first one outside the failed
/// nodes' groups where `groups` gives a choice (see [`promoted`]), else the first one. A chain with no survivor
/// keeps `None` as its active: that vBucket's data is unavailable until the node comes back, as in Couchbase.
/// Chains keep their length (missing copies become `None` at the end).
pub fn failover(current: &VbMap, failed: &[NodeId], groups: &NodeGroups) -> VbMap {
    let failed_set: BTreeSet<NodeId> = failed.iter().copied().collect();
    let chains = current
        .chains
        .iter()
        .map(|chain| {
            let mut survivors: Vec<Option<NodeId>> =
                chain.iter().filter(|n| n.is_some_and(|n| !failed_set.contains(&n))).copied().collect();
            if let Some(new_active) = promoted(chain, failed, groups) {
                if let Some(at) = survivors.iter().position(|n| *n == Some(new_active)) {
                    let node = survivors.remove(at);
                    survivors.insert(0, node);
                }
            }
            survivors.resize(chain.len(), None);
            survivors
        })
        .collect();
    VbMap { chains }
}

/// The map after auto-reprovision of `node` (a memory-only bucket's node that restarted empty): the node leaves
/// every chain that keeps another copy, whose first survivor becomes active, as in a failover of that node for
/// this bucket alone; a chain where it is the only copy keeps it (nothing better exists). Couchbase's
/// `promote_replicas` for ephemeral buckets.
pub fn reprovision(current: &VbMap, node: NodeId) -> VbMap {
    let chains = current
        .chains
        .iter()
        .map(|chain| {
            let mut others: Vec<Option<NodeId>> =
                chain.iter().filter(|n| n.is_some_and(|n| n != node)).copied().collect();
            if others.is_empty() {
                return chain.clone();
            }
            others.resize(chain.len(), None);
            others
        })
        .collect();
    VbMap { chains }
}

/// The map after a restarted `node` hands its active copies of the vBuckets of `promote` over to the replica named
/// for each (a replica that holds writes the restarted copy came back without): the two swap places in the chain,
/// so the restarted copy stays as a replica and catches up from the new active. A vBucket whose active is no longer
/// `node`, or whose chain lacks the named replica, is left alone (the map changed since the decision).
pub fn promote(current: &VbMap, node: NodeId, promote: &std::collections::BTreeMap<u16, NodeId>) -> VbMap {
    let mut map = current.clone();
    for (vb, to) in promote {
        let Some(chain) = map.chains.get_mut(usize::from(*vb)) else { continue };
        if chain.first() != Some(&Some(node)) {
            continue;
        }
        if let Some(at) = chain.iter().skip(1).position(|n| *n == Some(*to)) {
            chain.swap(0, at + 1);
        }
    }
    map
}

/// The map with every missing replica (`None` after the active) placed on an Active node of `nodes` that holds no
/// copy of that vBucket, choosing the node with the fewest copies so far, then one in a group the chain lacks,
/// then the lowest id: balance first, as the planners do; the next rebalance restores the full group spread.
/// Actives never move, so no takeover is needed: a new replica is built by streaming from its active. A vBucket
/// with no active, or with no eligible node left, keeps its gaps.
pub fn repair_replicas(current: &VbMap, nodes: &[NodeId], groups: &NodeGroups) -> VbMap {
    let nodes = node_set(nodes);
    let mut load: std::collections::BTreeMap<NodeId, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for n in current.chains.iter().flatten().flatten() {
        if let Some(l) = load.get_mut(n) {
            *l += 1;
        }
    }
    let mut map = current.clone();
    for chain in &mut map.chains {
        if chain.first().is_none_or(|a| a.is_none()) {
            continue;
        }
        for slot in 1..chain.len() {
            if chain[slot].is_some() {
                continue;
            }
            let pick = load
                .iter()
                .filter(|(n, _)| !chain.contains(&Some(**n)))
                .min_by_key(|(n, l)| (**l, groups.shares_group(chain, **n), **n));
            let Some((&node, _)) = pick else { break };
            chain[slot] = Some(node);
            *load.entry(node).or_default() += 1;
        }
    }
    map
}

/// The vBuckets that have a copy today and would have none after failing over `failed`: failing these nodes over
/// loses the vBuckets' data (Couchbase's "unsafe" failover).
pub fn data_loss_risk(current: &VbMap, failed: &[NodeId]) -> Vec<u16> {
    let failed: BTreeSet<NodeId> = failed.iter().copied().collect();
    current.vbs_where(|chain| {
        let mut copies = chain.iter().flatten().peekable();
        copies.peek().is_some() && copies.all(|n| failed.contains(n))
    })
}

/// Copies a move from `old` to `new` has to build: nodes in the new chain that hold no copy in the old one.
pub fn copies_to_build(old: &[Option<NodeId>], new: &[Option<NodeId>]) -> usize {
    new.iter().flatten().filter(|n| !old.contains(&Some(**n))).count()
}

/// Sorted, deduplicated node list: planners depend on the node set, never on the order the caller listed it in.
fn node_set(nodes: &[NodeId]) -> Vec<NodeId> {
    let set: BTreeSet<NodeId> = nodes.iter().copied().collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    /// Failover promotes the first surviving replica and pads the chain with None at the end.
    #[test]
    fn failover_promotes_first_surviving_replica() {
        let map = VbMap { chains: vec![vec![Some(1), Some(2), Some(3)], vec![Some(2), Some(1), None]] };
        let after = failover(&map, &[1], &NodeGroups::default());
        assert_eq!(after.chains[0], vec![Some(2), Some(3), None]);
        assert_eq!(after.chains[1], vec![Some(2), None, None]);
    }

    #[test]
    fn reprovision_promotes_replicas_and_keeps_sole_copies() {
        // Proves a reprovisioned node leaves the chains that keep another copy (its actives' replicas promoted,
        // its replica slots emptied) and stays where it is the only copy.
        let map = VbMap {
            chains: vec![vec![Some(1), Some(2)], vec![Some(2), Some(1)], vec![Some(1), None], vec![Some(3), Some(2)]],
        };
        let got = reprovision(&map, 1);
        assert_eq!(
            got.chains,
            vec![vec![Some(2), None], vec![Some(2), None], vec![Some(1), None], vec![Some(3), Some(2)]]
        );
    }

    /// Promotion swaps a restarted node's active copy with the named replica, and leaves a vBucket alone when the
    /// node no longer leads it or the named node holds no copy (a decision the map outran).
    #[test]
    fn promote_swaps_the_restarted_active_with_the_named_replica_only() {
        let map = VbMap {
            chains: vec![
                vec![Some(1), Some(2), Some(3)],
                vec![Some(1), Some(2), Some(3)],
                vec![Some(2), Some(1), None],
                vec![Some(1), Some(2), None],
                vec![Some(1), Some(2), None],
            ],
        };
        let handover = [(0, 3), (1, 2), (2, 1), (3, 4), (9, 2)].into_iter().collect();
        let got = promote(&map, 1, &handover);
        assert_eq!(
            got.chains,
            vec![
                vec![Some(3), Some(2), Some(1)],
                vec![Some(2), Some(1), Some(3)],
                vec![Some(2), Some(1), None],
                vec![Some(1), Some(2), None],
                vec![Some(1), Some(2), None],
            ]
        );
    }

    /// A chain whose every copy is on failed nodes keeps None as active and is reported as data loss.
    #[test]
    fn failover_without_survivor_leaves_no_active() {
        let map = VbMap { chains: vec![vec![Some(1), Some(2)], vec![Some(3), Some(1)], vec![None, None]] };
        let after = failover(&map, &[1, 2], &NodeGroups::default());
        assert_eq!(after.chains[0], vec![None, None]);
        assert_eq!(after.chains[1], vec![Some(3), None]);
        assert_eq!(data_loss_risk(&map, &[1, 2]), vec![0]);
    }

    /// moves lists only the vBuckets whose chain changed.
    #[test]
    fn moves_lists_changed_chains_only() {
        let a = VbMap { chains: vec![vec![Some(1), Some(2)], vec![Some(2), Some(1)]] };
        let b = VbMap { chains: vec![vec![Some(1), Some(2)], vec![Some(1), Some(2)]] };
        let m = moves(&a, &b);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].vb, 1);
        assert_eq!(copies_to_build(&m[0].old_chain, &m[0].new_chain), 0);
    }
}
