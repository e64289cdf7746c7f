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

/// `map` with replicas swapped between vBuckets until no swap raises the group spread of the two chains it
/// touches. Actives never move and every node keeps its copy counts. A no-op with fewer than 2 groups.
pub fn spread_over_groups(map: &VbMap, groups: &NodeGroups) -> VbMap {
    let nodes: Vec<NodeId> = map.nodes().into_iter().collect();
    if groups.count_among(&nodes) < 2 || map.replicas() >= CHAIN_MAX {
        return map.clone();
    }
    let mut s = Spreader::new(map, &nodes, groups);
    for rank in 1..=map.replicas() {
        // Every swap raises the total spread, which is bounded by copies × vBuckets: the passes end. The bound on
        // passes is a second guard, and a pass that swaps nothing ends the rank.
        for _ in 0..map.chains.len().max(1) {
            if !s.pass(rank) {
                break;
            }
        }
    }
    s.into_map(map, &nodes)
}

/// Longest chain the spreading pass handles (an active and `REPLICAS_MAX` replicas).
const CHAIN_MAX: usize = super::REPLICAS_MAX + 1;
/// An empty slot in [`Spreader`]'s chains (a missing copy).
const NONE: usize = usize::MAX;

/// The map in dense form for the spreading pass: nodes as indexes, each slot's group beside it, each chain's
/// spread and the (active, replica) pair counts kept up to date as replicas are swapped.
struct Spreader {
    chains: Vec<[usize; CHAIN_MAX]>,
    group: Vec<u32>,
    spread: Vec<usize>,
    /// `pairs[a * n + r]`: vBuckets with their active on node `a` and a replica on node `r`.
    pairs: Vec<usize>,
    n: usize,
    /// Distinct groups among the nodes: no chain can span more.
    groups: usize,
}

impl Spreader {
    fn new(map: &VbMap, nodes: &[NodeId], groups: &NodeGroups) -> Spreader {
        let n = nodes.len();
        let index = |node: &Option<NodeId>| node.and_then(|id| nodes.binary_search(&id).ok()).unwrap_or(NONE);
        let chains: Vec<[usize; CHAIN_MAX]> = map
            .chains
            .iter()
            .map(|c| {
                let mut slots = [NONE; CHAIN_MAX];
                for (slot, node) in slots.iter_mut().zip(c) {
                    *slot = index(node);
                }
                slots
            })
            .collect();
        let group: Vec<u32> = nodes.iter().map(|id| groups.group(*id)).collect();
        let mut s =
            Spreader { spread: Vec::new(), pairs: vec![0; n * n], chains, group, n, groups: groups.count_among(nodes) };
        s.spread = (0..s.chains.len()).map(|v| s.spread_with(v, 0, s.chains[v][0])).collect();
        for c in &s.chains {
            if c[0] != NONE {
                for r in c[1..].iter().filter(|r| **r != NONE) {
                    s.pairs[c[0] * n + r] += 1;
                }
            }
        }
        s
    }

    /// Distinct groups in chain `v` with `node` in slot `rank` instead of what is there.
    fn spread_with(&self, v: usize, rank: usize, node: usize) -> usize {
        let mut seen = [u32::MAX; CHAIN_MAX];
        let mut count = 0;
        for (i, slot) in self.chains[v].iter().enumerate() {
            let node = if i == rank { node } else { *slot };
            if node == NONE {
                continue;
            }
            let g = self.group[node];
            if !seen[..count].contains(&g) {
                seen[count] = g;
                count += 1;
            }
        }
        count
    }

    /// One pass over the vBuckets at `rank`: each chain whose replica there shares a group with another copy is
    /// swapped with its best partner replica (of any rank), if any. Returns whether anything was swapped.
    fn pass(&mut self, rank: usize) -> bool {
        let mut swapped = false;
        for x in 0..self.chains.len() {
            let b = self.chains[x][rank];
            let copies = self.chains[x].iter().filter(|n| **n != NONE).count();
            if b == NONE
                || self.chains[x][0] == NONE
                || self.spread[x] >= copies.min(self.groups)
                || self.spread_with(x, rank, NONE) < self.spread[x]
            {
                // No replica here, the chain already spans every group it can, or this replica is the only copy
                // in its group: no swap of it can help.
                continue;
            }
            if let Some((y, rank_y)) = self.best_partner(x, rank) {
                self.swap(x, rank, y, rank_y);
                swapped = true;
            }
        }
        swapped
    }

    fn swap(&mut self, x: usize, rank: usize, y: usize, rank_y: usize) {
        let (ax, ay, b, d, n) =
            (self.chains[x][0], self.chains[y][0], self.chains[x][rank], self.chains[y][rank_y], self.n);
        self.pairs[ax * n + b] -= 1;
        self.pairs[ay * n + d] -= 1;
        self.pairs[ax * n + d] += 1;
        self.pairs[ay * n + b] += 1;
        self.chains[x][rank] = d;
        self.chains[y][rank_y] = b;
        self.spread[x] = self.spread_with(x, 0, ax);
        self.spread[y] = self.spread_with(y, 0, ay);
    }

    /// The replica (vBucket, rank) that swapped with `x`'s at `rank` raises the two chains' spread the most, ties
    /// to the same rank (per-rank balance kept), then to the swap that adds the fewest replicas to already
    /// frequent (active, replica) pairs, then the lowest vBucket.
    fn best_partner(&self, x: usize, rank: usize) -> Option<(usize, usize)> {
        let (cx, n) = (&self.chains[x], self.n);
        let (ax, b) = (cx[0], cx[rank]);
        let gb = self.group[b];
        // (ranking key, (vBucket, rank)): the lowest key wins.
        type Candidate = ((usize, bool, usize), (usize, usize));
        let mut best: Option<Candidate> = None;
        for (y, cy) in self.chains.iter().enumerate() {
            let ay = cy[0];
            if ay == NONE || y == x || cy.contains(&b) {
                continue;
            }
            for (rank_y, &d) in cy.iter().enumerate().skip(1) {
                if d == NONE || self.group[d] == gb || cx.contains(&d) {
                    continue;
                }
                let before = self.spread[x] + self.spread[y];
                let after = self.spread_with(x, rank, d) + self.spread_with(y, rank_y, b);
                if after <= before {
                    continue;
                }
                let load = self.pairs[ax * n + d] + self.pairs[ay * n + b];
                let key = (usize::MAX - (after - before), rank_y != rank, load);
                if best.is_none_or(|(k, _)| key < k) {
                    best = Some((key, (y, rank_y)));
                }
            }
        }
        best.map(|(_, at)| at)
    }

    /// The map back in node ids, each chain as long as in `original`.
    fn into_map(self, original: &VbMap, nodes: &[NodeId]) -> VbMap {
        let chains = self
            .chains
            .iter()
            .zip(&original.chains)
            .map(|(c, old)| c.iter().take(old.len()).map(|i| nodes.get(*i).copied()).collect::<Vec<_>>())
            .collect();
        VbMap { chains }
    }
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
