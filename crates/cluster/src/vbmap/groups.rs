//! Server groups (rack awareness) as the planners see them, and the pass that spreads a balanced map's copies
//! over them.
//!
//! [`NodeGroups`] says which group each node is in; a node it does not name is in one shared "ungrouped" group, so
//! the empty value is a cluster of one group and every planner behaves as it did before groups existed.
//!
//! [`spread_over_groups`] takes a balanced map (from [`super::plan`]) and swaps replicas between vBuckets (of the
//! same rank where that is enough) while a swap raises the number of distinct groups in the two chains together. A swap moves no copy
//! on or off a node, so actives and replicas per node stay exactly as balanced as the plan made them: with uneven
//! groups, balance wins and the spread is the best the swaps reach. Among the swaps that help, the one that keeps
//! each node's actives' replicas spread over the other nodes (the pair counts) is taken, so a failover still
//! shares the promoted actives out.

use std::collections::BTreeMap;

use super::{NodeId, VbMap};

/// Which server group each node is in (any id that tells groups apart: the metadata numbers them in uuid order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeGroups {
    of: BTreeMap<NodeId, u32>,
}

/// The group of the nodes a [`NodeGroups`] does not name.
const UNGROUPED: u32 = u32::MAX;

impl NodeGroups {
    /// The groups of the nodes as (node, group) pairs; a later pair for the same node wins.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (NodeId, u32)>) -> NodeGroups {
        NodeGroups { of: pairs.into_iter().collect() }
    }

    pub fn group(&self, node: NodeId) -> u32 {
        self.of.get(&node).copied().unwrap_or(UNGROUPED)
    }

    /// Distinct groups among `nodes`: below 2, groups change nothing in a plan.
    pub fn count_among(&self, nodes: &[NodeId]) -> usize {
        let mut groups: Vec<u32> = nodes.iter().map(|n| self.group(*n)).collect();
        groups.sort_unstable();
        groups.dedup();
        groups.len()
    }

    /// Distinct groups among a chain's copies.
    pub fn spread_of(&self, chain: &[Option<NodeId>]) -> usize {
        let nodes: Vec<NodeId> = chain.iter().flatten().copied().collect();
        self.count_among(&nodes)
    }

    /// Whether `node` shares a group with any copy of `chain` other than itself.
    pub fn shares_group(&self, chain: &[Option<NodeId>], node: NodeId) -> bool {
        let g = self.group(node);
        chain.iter().flatten().any(|n| *n != node && self.group(*n) == g)
    }
}

/// `map` with replicas swapped between vBuckets until no swap raises the group spread of the two
/// chains it touches. Actives never move and every node keeps its copy counts. A no-op with fewer than 2 groups.
pub fn spread_over_groups(map: &VbMap, groups: &NodeGroups) -> VbMap {
    let mut map = map.clone();
    let nodes: Vec<NodeId> = map.nodes().into_iter().collect();
    if groups.count_among(&nodes) < 2 {
        return map;
    }
    let mut pairs: BTreeMap<(NodeId, NodeId), usize> = BTreeMap::new();
    for chain in &map.chains {
        if let Some((Some(a), rest)) = chain.split_first() {
            for r in rest.iter().flatten() {
                *pairs.entry((*a, *r)).or_default() += 1;
            }
        }
    }
    for rank in 1..=map.replicas() {
        // Every swap raises the total spread, which is bounded by copies × vBuckets: the passes end. The bound on
        // passes is a second guard, and a pass that swaps nothing ends the rank.
        for _ in 0..map.chains.len().max(1) {
            if !spread_pass(&mut map, rank, groups, &mut pairs) {
                break;
            }
        }
    }
    map
}

/// One pass over the vBuckets at `rank`: each chain whose replica there shares a group with another copy is
/// swapped with its best partner replica (of any rank), if any. Returns whether anything was swapped.
fn spread_pass(
    map: &mut VbMap,
    rank: usize,
    groups: &NodeGroups,
    pairs: &mut BTreeMap<(NodeId, NodeId), usize>,
) -> bool {
    let mut swapped = false;
    for x in 0..map.chains.len() {
        let Some(Some(b)) = map.chains[x].get(rank).copied() else { continue };
        if !groups.shares_group(&map.chains[x], b) {
            continue;
        }
        let Some((y, rank_y)) = best_partner(map, x, rank, groups, pairs) else { continue };
        let (Some(ax), Some(ay), Some(d)) = (map.chains[x][0], map.chains[y][0], map.chains[y][rank_y]) else {
            continue;
        };
        for (pair, delta) in [((ax, b), -1), ((ay, d), -1), ((ax, d), 1), ((ay, b), 1)] {
            let count = pairs.entry(pair).or_default();
            *count = count.saturating_add_signed(delta);
        }
        map.chains[x][rank] = Some(d);
        map.chains[y][rank_y] = Some(b);
        swapped = true;
    }
    swapped
}

/// The replica (vBucket, rank) that swapped with `x`'s at `rank` raises the two chains' spread the most, ties to
/// the same rank (per-rank balance kept), then to the swap that adds the fewest replicas to already frequent
/// (active, replica) pairs, then the lowest vBucket.
fn best_partner(
    map: &VbMap,
    x: usize,
    rank: usize,
    groups: &NodeGroups,
    pairs: &BTreeMap<(NodeId, NodeId), usize>,
) -> Option<(usize, usize)> {
    let cx = &map.chains[x];
    let (Some(ax), Some(b)) = (cx[0], cx[rank]) else { return None };
    let before_x = groups.spread_of(cx);
    // (ranking key, (vBucket, rank)): the lowest key wins.
    type Candidate = ((usize, bool, usize), (usize, usize));
    let mut best: Option<Candidate> = None;
    for (y, cy) in map.chains.iter().enumerate() {
        let Some(Some(ay)) = cy.first() else { continue };
        if y == x || cy.contains(&Some(b)) {
            continue;
        }
        for (rank_y, d) in cy.iter().enumerate().skip(1) {
            let Some(d) = *d else { continue };
            if cx.contains(&Some(d)) || groups.group(d) == groups.group(b) {
                continue;
            }
            let before = before_x + groups.spread_of(cy);
            let after = groups.spread_of(&with(cx, rank, d)) + groups.spread_of(&with(cy, rank_y, b));
            if after <= before {
                continue;
            }
            let load = pairs.get(&(ax, d)).copied().unwrap_or(0) + pairs.get(&(*ay, b)).copied().unwrap_or(0);
            let key = (usize::MAX - (after - before), rank_y != rank, load);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, (y, rank_y)));
            }
        }
    }
    best.map(|(_, at)| at)
}

fn with(chain: &[Option<NodeId>], rank: usize, node: NodeId) -> Vec<Option<NodeId>> {
    let mut c = chain.to_vec();
    c[rank] = Some(node);
    c
}

/// The copy a failover of `failed` makes active in `chain` when its active fails: the first surviving replica in
/// a group none of the failed nodes is in (when a whole rack is failing, its other copies may follow), else the
/// first surviving replica. None when the active survives or no copy does.
pub fn promoted(chain: &[Option<NodeId>], failed: &[NodeId], groups: &NodeGroups) -> Option<NodeId> {
    let active = chain.first().copied().flatten()?;
    if !failed.contains(&active) {
        return None;
    }
    let failed_groups: Vec<u32> = failed.iter().map(|n| groups.group(*n)).collect();
    let survivors = || chain.iter().skip(1).flatten().copied().filter(|n| !failed.contains(n));
    survivors().find(|n| !failed_groups.contains(&groups.group(*n))).or_else(|| survivors().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vbmap::plan;

    fn two_racks() -> NodeGroups {
        NodeGroups::from_pairs([(1, 0), (2, 0), (3, 1), (4, 1)])
    }

    /// A chain's spread counts distinct groups; unnamed nodes share one group.
    #[test]
    fn spread_counts_distinct_groups_when_some_nodes_are_unnamed() {
        let groups = NodeGroups::from_pairs([(1, 0), (2, 1)]);
        assert_eq!(groups.spread_of(&[Some(1), Some(2), None]), 2);
        assert_eq!(groups.spread_of(&[Some(3), Some(4)]), 1);
        assert!(groups.shares_group(&[Some(3), Some(4)], 4));
        assert!(!groups.shares_group(&[Some(1), Some(2)], 2));
    }

    /// The spreading pass never moves an active and never changes a node's replica count.
    #[test]
    fn spreading_keeps_actives_and_copy_counts_when_swapping() {
        let before = plan(&[1, 2, 3, 4], 1024, 1);
        let after = spread_over_groups(&before, &two_racks());
        for node in 1..=4 {
            assert_eq!(after.actives_of(node), before.actives_of(node));
            assert_eq!(after.replicas_of(node).len(), before.replicas_of(node).len());
        }
        assert!(after.chains.iter().all(|c| two_racks().spread_of(c) == 2));
    }

    /// Failover of an active promotes the first survivor outside the failed node's group, or the first survivor
    /// when every survivor shares it; a surviving active is not replaced.
    #[test]
    fn promotion_prefers_another_group_when_replicas_differ() {
        let g = two_racks();
        assert_eq!(promoted(&[Some(1), Some(2), Some(3)], &[1], &g), Some(3));
        assert_eq!(promoted(&[Some(1), Some(3), Some(2)], &[1], &g), Some(3));
        assert_eq!(promoted(&[Some(1), Some(2), None], &[1], &g), Some(2));
        assert_eq!(promoted(&[Some(1), Some(2), Some(3)], &[2], &g), None);
        assert_eq!(promoted(&[Some(1), Some(2), Some(3)], &[1], &NodeGroups::default()), Some(2));
    }
}
