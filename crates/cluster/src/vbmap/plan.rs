//! Initial placement of a bucket's vBuckets over a node set.
//!
//! vBuckets are dealt in rounds of `n` (one active per node per round, so actives per node differ by at most one).
//! In round `k` the replica of rank `r` of the vBucket whose active is node `a` goes to node `a + offset`, with the
//! offsets of consecutive rounds walking a window of `copies` values around `1..n` (round 0 uses offsets `1..=copies`,
//! round 1 the next `copies`, and so on). A full round is therefore a permutation per rank: every node receives
//! exactly `copies` replicas, and over the rounds each node's actives have their replicas spread evenly over the
//! other nodes (the offsets used form one contiguous cyclic run, so their counts differ by at most one).
//!
//! The last, partial round has `p < n` vBuckets whose actives are nodes `0..p`. Its `p * copies` replica slots are
//! cut from one contiguous run of the node cycle, in windows of `copies` consecutive nodes, which balances the
//! replica counts to within one; the windows are then matched to vBuckets (Kuhn's augmenting paths) so that no
//! window holds its own vBucket's active.

use super::{node_set, spread_over_groups, NodeGroups, NodeId, VbMap};

/// Most replicas a bucket may have (Couchbase's limit).
pub const REPLICAS_MAX: usize = 3;

/// A balanced map of `num_vbuckets` vBuckets over `nodes` with `replicas` replicas each: actives per node differ by
/// at most one, replicas per node by at most one, no node appears twice in a chain, and each node's actives have
/// their replicas spread evenly over the other nodes. With fewer than `replicas + 1` nodes the missing copies are
/// `None`. The result depends only on the node set, not on the order of `nodes`.
///
/// # Panics
/// If `replicas > REPLICAS_MAX`: callers validate bucket settings before planning.
pub fn plan(nodes: &[NodeId], num_vbuckets: u16, replicas: usize) -> VbMap {
    assert!(replicas <= REPLICAS_MAX, "replicas {replicas} over the limit {REPLICAS_MAX}");
    let nodes = node_set(nodes);
    let chain_len = replicas + 1;
    let vbs = usize::from(num_vbuckets);
    let n = nodes.len();
    if n == 0 {
        return VbMap { chains: vec![vec![None; chain_len]; vbs] };
    }
    let copies = replicas.min(n - 1);
    let mut chains = Vec::with_capacity(vbs);
    for round in 0..vbs / n {
        for a in 0..n {
            let replicas = (0..copies).map(|r| (a + 1 + (round * copies + r) % (n - 1)) % n);
            chains.push(chain(&nodes, a, replicas, chain_len));
        }
    }
    for (a, replicas) in last_round(n, vbs % n, copies).into_iter().enumerate() {
        chains.push(chain(&nodes, a, replicas.into_iter(), chain_len));
    }
    debug_assert_eq!(chains.len(), vbs);
    VbMap { chains }
}

/// [`plan`], then each vBucket's replicas moved into groups other than its active's wherever swapping replicas
/// between vBuckets allows it (see [`spread_over_groups`]): exactly as balanced as [`plan`], and the same map when
/// the nodes are in fewer than two groups.
pub fn plan_in_groups(nodes: &[NodeId], groups: &NodeGroups, num_vbuckets: u16, replicas: usize) -> VbMap {
    spread_over_groups(&plan(nodes, num_vbuckets, replicas), groups)
}

fn chain(
    nodes: &[NodeId],
    active: usize,
    replicas: impl Iterator<Item = usize>,
    chain_len: usize,
) -> Vec<Option<NodeId>> {
    let mut chain: Vec<Option<NodeId>> =
        std::iter::once(active).chain(replicas).map(|i| nodes.get(i).copied()).collect();
    chain.resize(chain_len, None);
    chain
}

/// Replica node indexes for the `rows` vBuckets of the partial round (row `a` has its active on node `a`).
fn last_round(n: usize, rows: usize, copies: usize) -> Vec<Vec<usize>> {
    if copies == 0 || rows == 0 {
        return vec![Vec::new(); rows];
    }
    // Starting the run right after the last active (node `rows`) matches at once in nearly every case; the other
    // starts are tried for the few (n, rows, copies) where it does not.
    for start in (0..n).map(|i| (rows + i) % n) {
        let windows = Windows { n, copies, start };
        if let Some(owner) = windows.assign(rows) {
            let mut out = vec![Vec::new(); rows];
            for (w, row) in owner.into_iter().enumerate() {
                out[row] = windows.nodes(w).collect();
            }
            return out;
        }
    }
    greedy_last_round(n, rows, copies)
}

/// Windows of `copies` consecutive nodes cut from the node cycle starting at `start`.
struct Windows {
    n: usize,
    copies: usize,
    start: usize,
}

impl Windows {
    fn nodes(&self, w: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.copies).map(move |j| (self.start + w * self.copies + j) % self.n)
    }

    fn contains(&self, w: usize, node: usize) -> bool {
        let first = (self.start + w * self.copies) % self.n;
        (node + self.n - first) % self.n < self.copies
    }

    /// A window per row such that no row gets a window holding its own active, as `owner[window] = row`.
    fn assign(&self, rows: usize) -> Option<Vec<usize>> {
        let mut owner: Vec<Option<usize>> = vec![None; rows];
        for row in 0..rows {
            let mut seen = vec![false; rows];
            if !self.augment(row, &mut seen, &mut owner) {
                return None;
            }
        }
        owner.into_iter().collect()
    }

    /// Kuhn's augmenting path: give `row` a free window, or take one from a row that can move to another. The
    /// recursion depth is bounded by the number of rows (each window is visited once per search).
    fn augment(&self, row: usize, seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for w in 0..owner.len() {
            if seen[w] || self.contains(w, row) {
                continue;
            }
            seen[w] = true;
            let free = match owner[w] {
                None => true,
                Some(other) => self.augment(other, seen, owner),
            };
            if free {
                owner[w] = Some(row);
                return true;
            }
        }
        false
    }
}

/// Fallback that always answers: each row takes the least loaded nodes other than its active. Not known to be
/// reachable (the window matching succeeded for every cluster of up to 80 nodes in the planner's tests).
fn greedy_last_round(n: usize, rows: usize, copies: usize) -> Vec<Vec<usize>> {
    let mut load = vec![0usize; n];
    (0..rows)
        .map(|a| {
            let mut picked = Vec::with_capacity(copies);
            for _ in 0..copies {
                let best =
                    (0..n).filter(|c| *c != a && !picked.contains(c)).min_by_key(|c| (load[*c], (c + n - a) % n));
                if let Some(c) = best {
                    load[c] += 1;
                    picked.push(c);
                }
            }
            picked
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The partial round is balanced without the greedy fallback for every small cluster shape.
    #[test]
    fn last_round_matches_windows_for_small_clusters() {
        for n in 2..=40 {
            for copies in 1..=REPLICAS_MAX.min(n - 1) {
                for rows in 1..n {
                    let found = (0..n).any(|i| Windows { n, copies, start: (rows + i) % n }.assign(rows).is_some());
                    assert!(found, "n={n} copies={copies} rows={rows}");
                }
            }
        }
    }

    /// Three nodes, one replica: the first round places each active's replica on the next node.
    #[test]
    fn plan_three_nodes_one_replica() {
        let map = plan(&[30, 10, 20], 6, 1);
        assert_eq!(map.chains[0], vec![Some(10), Some(20)]);
        assert_eq!(map.chains[1], vec![Some(20), Some(30)]);
        assert_eq!(map.chains[2], vec![Some(30), Some(10)]);
        assert_eq!(map.chains[3], vec![Some(10), Some(30)]);
    }

    /// With fewer nodes than copies, the missing replicas are None.
    #[test]
    fn plan_single_node_has_no_replicas() {
        let map = plan(&[7], 4, 2);
        assert!(map.chains.iter().all(|c| *c == vec![Some(7), None, None]));
        let empty = plan(&[], 2, 1);
        assert_eq!(empty.chains, vec![vec![None, None]; 2]);
    }
}
