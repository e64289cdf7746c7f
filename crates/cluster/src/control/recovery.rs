//! The decisions a rebalance starts from: which nodes leave, which come back and how (delta or full recovery),
//! and the moves to a balanced map. Pure functions of the metadata.
//!
//! - A failed-over node marked for recovery (`POST /controller/setRecoveryType`) comes back: **delta** keeps its
//!   data, and the plan hands it back the vBuckets it still holds (reported under `kept` by its seqno report) so
//!   they only catch up; **full** drops its data and rebuilds it as for a new node.
//! - A failed-over node that is not marked leaves (ns_server ejects it), as do the nodes the operator ejects.
//! - Added and recovering nodes become active before the plan, which spreads vBuckets over every active node that
//!   stays.

use std::collections::BTreeMap;

use crate::metadata::{ClusterMetadata, Membership, Recovery};
use crate::peer::SeqnoReport;
use crate::vbmap::{self, NodeId, VbMove};

/// Per bucket, the vBuckets each delta-recovering node still holds data for.
pub type KeptCopies = BTreeMap<String, BTreeMap<NodeId, Vec<u16>>>;

/// Who leaves, who comes back, and who stays, when a rebalance starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebalanceStart {
    /// The nodes removed at the end: the ones the operator ejects, and every failed-over node not marked for
    /// recovery.
    pub ejected: Vec<NodeId>,
    /// The failed-over nodes that come back, and how.
    pub recovering: Vec<(NodeId, Recovery)>,
    /// Every node that stays (the ones the rebalance needs reachable).
    pub staying: Vec<NodeId>,
    /// The staying nodes that are not active yet (added, or recovering): activated before the plan.
    pub to_activate: Vec<NodeId>,
}

impl RebalanceStart {
    /// Decides from `meta` and the nodes the operator asks to eject.
    pub fn decide(meta: &ClusterMetadata, requested: &[NodeId]) -> RebalanceStart {
        let mut ejected = requested.to_vec();
        for n in meta.nodes.values() {
            if n.membership == Membership::InactiveFailed
                && !meta.recovery.contains_key(&n.id)
                && !ejected.contains(&n.id)
            {
                ejected.push(n.id);
            }
        }
        let recovering =
            meta.recovery.iter().filter(|(id, _)| !ejected.contains(id)).map(|(id, r)| (*id, *r)).collect();
        let staying: Vec<NodeId> = meta.nodes.keys().filter(|id| !ejected.contains(id)).copied().collect();
        let to_activate = meta
            .nodes
            .values()
            .filter(|n| n.membership != Membership::Active && !ejected.contains(&n.id))
            .map(|n| n.id)
            .collect();
        RebalanceStart { ejected, recovering, staying, to_activate }
    }

    /// The recovering nodes whose kept copies count (delta recovery): each must report them.
    pub fn delta_nodes(&self) -> Vec<NodeId> {
        self.recovering.iter().filter(|(_, r)| *r == Recovery::Delta).map(|(id, _)| *id).collect()
    }

    /// The active nodes of `meta` that stay: the nodes the target map spreads the vBuckets over.
    pub fn target_nodes(&self, meta: &ClusterMetadata) -> Vec<NodeId> {
        meta.active_nodes().into_iter().filter(|n| !self.ejected.contains(n)).collect()
    }
}

/// Adds the copies `node` reports under `kept` to `kept`.
pub fn add_kept(kept: &mut KeptCopies, node: NodeId, report: &SeqnoReport) {
    for (bucket, vbs) in report.kept.vbuckets() {
        kept.entry(bucket.to_owned()).or_default().insert(node, vbs);
    }
}

/// Per bucket, the moves from its map to a balanced one over `nodes` (minimal movement), counting the copies in
/// `kept` as already in place.
pub fn plan_moves(meta: &ClusterMetadata, kept: &KeptCopies, nodes: &[NodeId]) -> Vec<(String, Vec<VbMove>)> {
    let none = BTreeMap::new();
    let groups = meta.node_groups();
    meta.buckets
        .iter()
        .map(|(name, b)| {
            let kept = kept.get(name).unwrap_or(&none);
            let target = vbmap::rebalance_keeping(&b.map, kept, nodes, &groups, usize::from(b.spec.replicas));
            (name.clone(), vbmap::moves(&b.map, &target))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::testing::{bucket_meta, meta_with_nodes};

    /// Ejections and recoveries as ns_server decides them: a failed-over node not marked for recovery leaves with
    /// the nodes the operator ejects, marked ones come back (only delta ones report kept copies), and every staying
    /// node that is not active (added or recovering) is activated.
    #[test]
    fn failed_over_nodes_leave_unless_marked_for_recovery() {
        let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::InactiveFailed)]);
        meta.nodes.extend(meta_with_nodes(&[(3, Membership::InactiveFailed), (4, Membership::InactiveAdded)]).nodes);
        meta.nodes.extend(meta_with_nodes(&[(5, Membership::InactiveFailed), (6, Membership::Active)]).nodes);
        meta.recovery.insert(2, Recovery::Delta);
        meta.recovery.insert(5, Recovery::Full);
        let start = RebalanceStart::decide(&meta, &[6]);
        assert_eq!(start.ejected, vec![6, 3]);
        assert_eq!(start.recovering, vec![(2, Recovery::Delta), (5, Recovery::Full)]);
        assert_eq!(start.staying, vec![1, 2, 4, 5]);
        assert_eq!(start.to_activate, vec![2, 4, 5]);
        assert_eq!(start.delta_nodes(), vec![2], "full recovery ignores the node's data");

        let ejected_recovering = RebalanceStart::decide(&meta, &[2]);
        assert_eq!(ejected_recovering.recovering, vec![(5, Recovery::Full)], "an ejected node does not recover");
    }

    /// A delta-recovering node gets back the vBuckets it reports as kept (it only catches up), while the same node
    /// in full recovery is planned as new: the kept report is what makes the difference.
    #[test]
    fn kept_copies_stay_in_place_in_the_plan() {
        let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active)]);
        let before = vbmap::plan(&[1, 2, 3], 64, 1);
        let on_3: Vec<u16> = (0..64).filter(|vb| before.chains[usize::from(*vb)].contains(&Some(3))).collect();
        let groups = vbmap::NodeGroups::default();
        let failed_over = vbmap::repair_replicas(&vbmap::failover(&before, &[3], &groups), &[1, 2], &groups);
        meta.buckets.insert("b".into(), bucket_meta("b", failed_over, 1));
        let mut report = SeqnoReport::default();
        for vb in &on_3 {
            report.kept.insert("b", *vb, 10);
        }
        let mut kept = KeptCopies::new();
        add_kept(&mut kept, 3, &report);
        assert_eq!(kept["b"][&3], on_3);
        let moves_to_3 = |plan: &[(String, Vec<VbMove>)]| {
            plan[0].1.iter().filter(|m| m.new_chain.contains(&Some(3)) && !on_3.contains(&m.vb)).count()
        };
        let delta = plan_moves(&meta, &kept, &[1, 2, 3]);
        let full = plan_moves(&meta, &KeptCopies::new(), &[1, 2, 3]);
        assert!(moves_to_3(&delta) < moves_to_3(&full), "{} vs {}", moves_to_3(&delta), moves_to_3(&full));
        assert!(delta[0].1.iter().all(|m| m.vb < 64));
    }
}
