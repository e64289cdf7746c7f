//! Rebalance target: the balanced map for a new node set that moves as few copies as possible.
//!
//! Balance (and the spread over server groups) is a property of the multiset of chains, not of which vBucket gets
//! which chain. So the target is the fresh [`plan_in_groups`] for the new node set with its chains dealt out to the vBuckets that already hold most of each
//! chain's copies: a greedy assignment by descending score (two points per copy already in place, one more for an
//! active that stays). Replicas that stay replicas keep their rank. The result is exactly as balanced as the plan,
//! and never moves more copies than the plan itself would; when the greedy deal is worse, the plan is returned.

use std::collections::BTreeMap;

use super::{copies_to_build, plan_in_groups, NodeGroups, NodeId, VbMap};

type Chain = Vec<Option<NodeId>>;

/// The balanced map for `nodes` with `replicas` replicas, its replicas in groups other than their active's where
/// `groups` allows, that keeps as many of `current`'s copies in place as it can, preferring to keep actives where
/// they are.
///
/// # Panics
/// If `current` has more than `u16::MAX` vBuckets or `replicas` is over the limit: both are validated before a map
/// is stored.
pub fn rebalance(current: &VbMap, nodes: &[NodeId], groups: &NodeGroups, replicas: usize) -> VbMap {
    let vbs = u16::try_from(current.chains.len()).expect("a vBucket map has at most u16::MAX vBuckets");
    let target = plan_in_groups(nodes, groups, vbs, replicas);
    let Some(dealt) = deal(current, &target) else {
        return target;
    };
    if cost(current, &dealt) <= cost(current, &target) {
        dealt
    } else {
        target
    }
}

/// As [`rebalance`], counting as already in place the copies `kept` lists: vBuckets a node holds data for
/// although no chain names it (a failed-over node in delta recovery). The plan then hands those vBuckets back to
/// that node where balance allows, so they only catch up instead of being copied whole.
pub fn rebalance_keeping(
    current: &VbMap,
    kept: &BTreeMap<NodeId, Vec<u16>>,
    nodes: &[NodeId],
    groups: &NodeGroups,
    replicas: usize,
) -> VbMap {
    let mut hinted = current.clone();
    for (node, vbs) in kept {
        for vb in vbs {
            if let Some(chain) = hinted.chains.get_mut(usize::from(*vb)) {
                if !chain.contains(&Some(*node)) {
                    chain.push(Some(*node));
                }
            }
        }
    }
    rebalance(&hinted, nodes, groups, replicas)
}

/// (copies to build, actives that change node): lower is better.
fn cost(from: &VbMap, to: &VbMap) -> (usize, usize) {
    let empty = Vec::new();
    to.chains.iter().enumerate().fold((0, 0), |(copies, actives), (vb, new)| {
        let old = from.chains.get(vb).unwrap_or(&empty);
        let moved = usize::from(old.first().copied().flatten() != new.first().copied().flatten());
        (copies + copies_to_build(old, new), actives + moved)
    })
}

/// Deals the target's chains to the current vBuckets, best score first. None if some vBucket went without a chain,
/// which the level-by-level deal makes impossible (at level 0 every remaining chain scores).
fn deal(current: &VbMap, target: &VbMap) -> Option<VbMap> {
    let mut index: BTreeMap<&Chain, usize> = BTreeMap::new();
    let mut groups: Vec<(&Chain, usize)> = Vec::new();
    for chain in &target.chains {
        let g = *index.entry(chain).or_insert_with(|| {
            groups.push((chain, 0));
            groups.len() - 1
        });
        groups[g].1 += 1;
    }
    let scores: Vec<Vec<usize>> =
        current.chains.iter().map(|old| groups.iter().map(|(new, _)| score(old, new)).collect()).collect();
    let max_score = target.chains.first().map_or(0, |c| 2 * c.len() + 1);
    let mut dealt: Vec<Option<usize>> = vec![None; current.chains.len()];
    for level in (0..=max_score).rev() {
        for (vb, slot) in dealt.iter_mut().enumerate() {
            if slot.is_some() {
                continue;
            }
            if let Some(g) = (0..groups.len()).find(|g| groups[*g].1 > 0 && scores[vb][*g] == level) {
                groups[g].1 -= 1;
                *slot = Some(g);
            }
        }
    }
    let chains = dealt
        .into_iter()
        .zip(&current.chains)
        .map(|(g, old)| g.map(|g| align(old, groups[g].0)))
        .collect::<Option<Vec<Chain>>>()?;
    Some(VbMap { chains })
}

fn score(old: &[Option<NodeId>], new: &[Option<NodeId>]) -> usize {
    let kept = new.iter().flatten().filter(|n| old.contains(&Some(**n))).count();
    let active_stays = old.first().copied().flatten().is_some() && old.first() == new.first();
    2 * kept + usize::from(active_stays)
}

/// `new` with its replicas reordered so that a node that was a replica at rank r stays at rank r; the other
/// replicas fill the free ranks in `new`'s order and missing copies stay at the end.
fn align(old: &[Option<NodeId>], new: &[Option<NodeId>]) -> Chain {
    let Some((active, replicas)) = new.split_first() else {
        return Vec::new();
    };
    let mut rest: Vec<NodeId> = replicas.iter().flatten().copied().collect();
    let mut out: Chain = vec![None; new.len()];
    out[0] = *active;
    for (rank, slot) in out.iter_mut().enumerate().skip(1) {
        if let Some(Some(node)) = old.get(rank) {
            if let Some(pos) = rest.iter().position(|n| n == node) {
                *slot = Some(rest.remove(pos));
            }
        }
    }
    let mut fill = rest.into_iter();
    for slot in out.iter_mut().skip(1).filter(|s| s.is_none()) {
        *slot = fill.next();
    }
    out[1..].sort_by_key(Option::is_none);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vbmap::{moves, plan};

    /// Adding a fourth node moves about a quarter of the actives and builds far fewer copies than a fresh plan.
    #[test]
    fn adding_a_node_moves_a_fraction_of_the_copies() {
        let before = plan(&[1, 2, 3], 1024, 1);
        let after = rebalance(&before, &[1, 2, 3, 4], &NodeGroups::default(), 1);
        let fresh = plan(&[1, 2, 3, 4], 1024, 1);
        assert_eq!(after.actives_of(4).len(), 256);
        let (copies, actives) = cost(&before, &after);
        assert!(copies < cost(&before, &fresh).0, "{copies} copies");
        assert!(actives <= 256 + 16, "{actives} actives moved");
        assert!(moves(&before, &after).len() < 1024);
    }

    /// Rebalancing onto the same node set changes nothing.
    #[test]
    fn rebalance_onto_same_nodes_is_identity() {
        let before = plan(&[1, 2, 3, 4, 5], 1024, 2);
        assert_eq!(rebalance(&before, &[5, 4, 3, 2, 1], &NodeGroups::default(), 2), before);
    }

    /// A failed-over node in delta recovery gets back (nearly) the vBuckets it kept: far fewer copies to build
    /// than when its data is ignored (full recovery).
    #[test]
    fn delta_recovery_hands_back_the_kept_vbuckets() {
        let before = plan(&[1, 2, 3], 1024, 1);
        let kept: Vec<u16> = (0..1024).filter(|vb| before.chains[usize::from(*vb)].contains(&Some(3))).collect();
        let failed_over = crate::vbmap::repair_replicas(
            &crate::vbmap::failover(&before, &[3], &NodeGroups::default()),
            &[1, 2],
            &NodeGroups::default(),
        );
        let kept = BTreeMap::from([(3, kept)]);
        let delta = rebalance_keeping(&failed_over, &kept, &[1, 2, 3], &NodeGroups::default(), 1);
        let full = rebalance(&failed_over, &[1, 2, 3], &NodeGroups::default(), 1);
        let built_on_3 = |to: &VbMap| {
            (0..1024usize).filter(|vb| to.chains[*vb].contains(&Some(3)) && !kept[&3].contains(&(*vb as u16))).count()
        };
        let copies_on_3 = delta.replicas_of(3).len() + delta.actives_of(3).len();
        assert!((682..=683).contains(&copies_on_3), "balanced: {copies_on_3} copies on node 3");
        assert!(built_on_3(&delta) < 40, "{} vBuckets built from scratch", built_on_3(&delta));
        assert!(built_on_3(&full) > 150, "without the kept data most copies are new: {}", built_on_3(&full));
    }

    /// A replica that stays a replica keeps its rank; missing copies stay at the end.
    #[test]
    fn align_keeps_replica_ranks() {
        let old = vec![Some(1), Some(2), Some(3)];
        assert_eq!(align(&old, &[Some(4), Some(3), Some(2)]), vec![Some(4), Some(2), Some(3)]);
        assert_eq!(align(&[Some(1), None, Some(2)], &[Some(1), Some(2), None]), vec![Some(1), Some(2), None]);
    }
}
