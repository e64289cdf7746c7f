//! What a member that restarted must hand over before it serves a persistent bucket again.
//!
//! A couchbase bucket's copies come back from disk with what the flusher had written. A `majority` write is
//! acknowledged once the active holds it in memory and a majority of the copies acknowledged it, before any disk
//! has it: if the active crashes and restarts before the cluster fails it over, its copy comes back without the
//! write while the replicas still hold it. Letting the restarted copy serve as active would roll every replica
//! back to it and lose the acknowledged write (the black-box checker's finding 2). So the restarted node first
//! compares, for each vBucket it is active for, the high seqno it came back with against its replicas' and hands
//! the vBucket over to the replica furthest ahead; it stays in the chain as a replica and catches up from it.
//!
//! Seqnos alone decide: while the map keeps a node active, its replicas only ever stream its history (or an
//! older active's, which it shares), so a replica with a higher seqno holds a continuation of what the restarted
//! copy has, never a divergent branch. Pure functions of what the driver gathered.

use std::collections::BTreeMap;

use crate::vbmap::{NodeId, VbMap};

/// The decision for one bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Takeback {
    /// vBuckets to hand over, each to the replica that takes it over (the one furthest ahead; the earlier in the
    /// chain on a tie).
    pub promote: BTreeMap<u16, NodeId>,
    /// vBuckets with a replica that did not report: it may be ahead, so the comparison is incomplete for them.
    pub unknown: Vec<u16>,
}

impl Takeback {
    /// Decides for the vBuckets `me` is active for in `map`, from the high seqnos `mine` it came back with and
    /// the replicas' `reports` (per node; a node missing, or a vBucket missing from its report, did not answer).
    /// A vBucket missing from `mine` counts as empty: whatever a replica holds beyond nothing is ahead.
    pub fn decide(
        map: &VbMap,
        me: NodeId,
        mine: &BTreeMap<u16, u64>,
        reports: &BTreeMap<NodeId, BTreeMap<u16, u64>>,
    ) -> Takeback {
        let mut out = Takeback::default();
        for vb in map.actives_of(me) {
            let here = mine.get(&vb).copied().unwrap_or(0);
            let mut best: Option<(NodeId, u64)> = None;
            let mut unknown = false;
            for replica in map.chains[usize::from(vb)].iter().skip(1).flatten().filter(|n| **n != me) {
                match reports.get(replica).and_then(|r| r.get(&vb)) {
                    Some(&seqno) if seqno > here && best.is_none_or(|(_, s)| seqno > s) => {
                        best = Some((*replica, seqno))
                    }
                    Some(_) => {}
                    None => unknown = true,
                }
            }
            if let Some((replica, _)) = best {
                out.promote.insert(vb, replica);
            } else if unknown {
                out.unknown.push(vb);
            }
        }
        out
    }

    /// The replicas of `me`'s active vBuckets in `map`: the nodes whose reports [`Takeback::decide`] needs.
    pub fn replicas_to_ask(map: &VbMap, me: NodeId) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = map
            .actives_of(me)
            .into_iter()
            .flat_map(|vb| map.chains[usize::from(vb)].iter().skip(1).flatten().copied())
            .filter(|n| *n != me)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> VbMap {
        VbMap {
            chains: vec![
                vec![Some(1), Some(2), Some(3)],
                vec![Some(1), Some(2), Some(3)],
                vec![Some(1), Some(3), None],
                vec![Some(2), Some(1), None],
                vec![Some(1), None, None],
                vec![Some(1), Some(2), None],
            ],
        }
    }

    fn report(entries: &[(u16, u64)]) -> BTreeMap<u16, u64> {
        entries.iter().copied().collect()
    }

    /// Proves each vBucket the restarted node leads goes to the replica furthest ahead of it (the first in the
    /// chain on a tie), stays when no replica is ahead, and is reported unknown when a replica that could be
    /// ahead did not answer; vBuckets it does not lead and chains without replicas are not its business.
    #[test]
    fn actives_go_to_the_replica_furthest_ahead_and_silence_is_unknown() {
        let mine = report(&[(0, 10), (1, 10), (2, 10), (3, 1), (4, 10), (5, 10)]);
        let reports =
            [(2, report(&[(0, 12), (1, 15), (3, 1)])), (3, report(&[(0, 12), (1, 14), (2, 10)]))].into_iter().collect();
        let got = Takeback::decide(&map(), 1, &mine, &reports);
        assert_eq!(got.promote, [(0, 2), (1, 2)].into_iter().collect());
        assert_eq!(got.unknown, vec![5], "vBucket 5's replica (node 2) did not report it");
    }

    /// A silent replica does not stop a hand-over to another replica known to be ahead.
    #[test]
    fn a_replica_known_ahead_wins_over_a_silent_one() {
        let mine = report(&[(0, 10), (1, 10), (2, 10), (4, 0), (5, 10)]);
        let reports = [(3, report(&[(0, 11), (1, 9), (2, 10)]))].into_iter().collect();
        let got = Takeback::decide(&map(), 1, &mine, &reports);
        assert_eq!(got.promote, [(0, 3)].into_iter().collect());
        assert_eq!(got.unknown, vec![1, 5]);
    }

    /// A vBucket the restarted node came back without (no seqno of its own) goes to any replica holding data.
    #[test]
    fn a_copy_that_came_back_empty_goes_to_a_replica_with_data() {
        let reports =
            [(2, report(&[(0, 0), (1, 3), (5, 0)])), (3, report(&[(0, 0), (1, 0), (2, 0)]))].into_iter().collect();
        let got = Takeback::decide(&map(), 1, &BTreeMap::new(), &reports);
        assert_eq!(got.promote, [(1, 2)].into_iter().collect());
        assert!(got.unknown.is_empty());
    }

    /// The nodes to ask are the replicas of the node's actives, once each, never the node itself.
    #[test]
    fn replicas_to_ask_are_those_of_the_nodes_actives() {
        assert_eq!(Takeback::replicas_to_ask(&map(), 1), vec![2, 3]);
        assert_eq!(Takeback::replicas_to_ask(&map(), 2), vec![1]);
        assert!(Takeback::replicas_to_ask(&map(), 4).is_empty());
    }
}
