//! A whole rebalance, openraft style: build a state, apply one event, assert the commands; and one run against a
//! cooperative fake cluster to its end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::control::health::PeerHealth;
use crate::control::testing::{bucket_meta, meta_with_nodes};
use crate::metadata::Recovery;
use crate::peer::VbSeqnos;
use crate::vbmap::{self, VbMap};

const ME: NodeId = 1;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn healthy() -> HealthSnapshot {
    HealthSnapshot::new()
}

fn unhealthy(node: NodeId) -> HealthSnapshot {
    HealthSnapshot::from([(node, PeerHealth { status: NodeHealth::Unhealthy, unseen: secs(5) })])
}

fn activate(node: NodeId) -> Command {
    Command::Propose(MetaCommand::SetMembership { node, membership: Membership::Active })
}

/// Nodes 1 and 2 active, 3 failed over; bucket "b" (16 vBuckets, one replica) mapped over 1 and 2.
fn failed_over_3() -> ClusterMetadata {
    let mut meta =
        meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active), (3, Membership::InactiveFailed)]);
    let before = vbmap::plan(&[1, 2, 3], 16, 1);
    let groups = vbmap::NodeGroups::default();
    let after = vbmap::repair_replicas(&vbmap::failover(&before, &[3], &groups), &[1, 2], &groups);
    meta.buckets.insert("b".into(), bucket_meta("b", after, 1));
    meta
}

/// `meta` once `node` is active again.
fn activated(mut meta: ClusterMetadata, node: NodeId) -> Arc<ClusterMetadata> {
    meta.nodes.get_mut(&node).expect("node").membership = Membership::Active;
    Arc::new(meta)
}

/// A node in delta recovery is asked for the copies it kept before anything changes, then activated; the plan
/// that follows counts its kept copies as in place, so it gets those vBuckets back without copying them.
#[test]
fn delta_recovery_asks_for_kept_copies_then_activates_and_plans_around_them() {
    let mut meta = failed_over_3();
    meta.recovery.insert(3, Recovery::Delta);
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    assert_eq!(r.start(), vec![Command::Report { node: 3 }]);
    let mut report = SeqnoReport::default();
    let kept: Vec<u16> =
        (0..16).filter(|vb| vbmap::plan(&[1, 2, 3], 16, 1).chains[usize::from(*vb)].contains(&Some(3))).collect();
    for vb in &kept {
        report.kept.insert("b", *vb, 7);
    }
    assert_eq!(r.handle(Event::Reported { node: 3, report: Ok(report) }, secs(0)), vec![activate(3)]);
    assert_eq!(r.handle(Event::Proposed(Ok(0)), secs(0)), vec![Command::Observe]);
    let out = r.handle(Event::Observed { meta: activated(meta, 3), health: healthy() }, secs(0));
    let Some(Command::Progress { done: 0, total }) = out.first() else { panic!("progress first: {out:?}") };
    let Some(Command::Poll { .. }) = out.get(1) else { panic!("then the first round: {out:?}") };
    assert!(*total > 0, "{out:?}");
    assert_eq!(r.kept["b"][&3], kept);
}

/// A node in full recovery is not asked for kept copies (its data is dropped): it is activated at once.
#[test]
fn full_recovery_activates_without_asking_for_kept_copies() {
    let mut meta = failed_over_3();
    meta.recovery.insert(3, Recovery::Full);
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    assert_eq!(r.start(), vec![activate(3)]);
}

/// A delta-recovering node that does not report its kept copies ends the rebalance before anything changed.
#[test]
fn a_delta_node_that_does_not_answer_ends_the_rebalance() {
    let mut meta = failed_over_3();
    meta.recovery.insert(3, Recovery::Delta);
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    r.start();
    let out = r.handle(Event::Reported { node: 3, report: Err("timed out".into()) }, secs(0));
    let err = RebalanceError::DeltaUnanswered("timed out".into());
    assert_eq!(err.to_string(), "a node in delta recovery must answer: timed out");
    assert_eq!(out, vec![Command::Finish(Err(err))]);
}

/// A node that stays but is unhealthy refuses the rebalance at once, naming its address; an unhealthy node that
/// is ejected (here the failed-over node nobody marked for recovery) does not matter.
#[test]
fn an_unhealthy_node_that_stays_refuses_the_rebalance() {
    let meta = failed_over_3();
    let err = Rebalance::new(&meta, &[], ME, &unhealthy(2)).unwrap_err();
    assert_eq!(err, RebalanceError::Unreachable("127.0.0.1:9002".into()));
    assert!(err.to_string().contains("unreachable"));
    let mut r = Rebalance::new(&meta, &[], ME, &unhealthy(3)).unwrap();
    assert_eq!(r.decided().ejected, vec![3]);
    assert_eq!(r.start(), vec![Command::Observe], "nothing to ask, nobody to activate");
    let out = r.handle(Event::Observed { meta: Arc::new(meta.clone()), health: unhealthy(2) }, secs(0));
    assert_eq!(out, vec![Command::Finish(Err(RebalanceError::Unreachable("127.0.0.1:9002".into())))]);
}

/// Ejecting every active node leaves nothing to spread the vBuckets over: refused when planning.
#[test]
fn a_rebalance_must_keep_an_active_node() {
    let meta = failed_over_3();
    let mut r = Rebalance::new(&meta, &[1, 2], ME, &healthy()).unwrap();
    r.start();
    let out = r.handle(Event::Observed { meta: Arc::new(meta), health: healthy() }, secs(0));
    assert_eq!(out, vec![Command::Finish(Err(RebalanceError::NoNodes))]);
}

/// A rebalance without moves goes straight to its end: recovery marks cleared, then each ejected node removed from
/// the metadata and from the Raft group, one step per answer.
#[test]
fn the_end_clears_recovery_then_removes_ejected_nodes() {
    let mut meta =
        meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active), (3, Membership::InactiveFailed)]);
    meta.recovery.insert(3, Recovery::Full);
    let mut r = Rebalance::new(&meta, &[2], ME, &healthy()).unwrap();
    assert_eq!(r.start(), vec![activate(3)]);
    assert_eq!(r.handle(Event::Proposed(Ok(0)), secs(0)), vec![Command::Observe]);
    let out = r.handle(Event::Observed { meta: activated(meta, 3), health: healthy() }, secs(0));
    let clear = Command::Propose(MetaCommand::SetRecovery { node: 3, recovery: None });
    assert_eq!(out, vec![Command::Progress { done: 0, total: 0 }, clear]);
    assert_eq!(r.handle(Event::Proposed(Ok(0)), secs(0)), vec![Command::Propose(MetaCommand::RemoveNode(2))]);
    assert_eq!(r.handle(Event::Proposed(Ok(0)), secs(0)), vec![Command::RemoveMember(2)]);
    assert_eq!(r.handle(Event::MemberRemoved(Ok(())), secs(0)), vec![Command::Finish(Ok(()))]);
}

/// A proposal that fails during activation or at the end ends the rebalance with its error.
#[test]
fn a_failed_proposal_ends_the_rebalance() {
    let mut meta = failed_over_3();
    meta.recovery.insert(3, Recovery::Full);
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    r.start();
    let out = r.handle(Event::Proposed(Err("no quorum".into())), secs(0));
    assert_eq!(out, vec![Command::Finish(Err(RebalanceError::Proposal("no quorum".into())))]);
}

/// A stop during the moves ends the rebalance with the text ns_server's tools show, naming the bucket.
#[test]
fn a_stop_ends_with_the_bucket_named() {
    let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::InactiveAdded)]);
    meta.buckets.insert("moving".into(), bucket_meta("moving", VbMap { chains: vec![vec![Some(1)]; 4] }, 0));
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    r.start();
    r.handle(Event::Proposed(Ok(0)), secs(0));
    r.handle(Event::Observed { meta: activated(meta, 2), health: healthy() }, secs(0));
    let reports = Reports::from([(1, Ok(SeqnoReport::default())), (2, Ok(SeqnoReport::default()))]);
    let out =
        r.handle(Event::Polled { reports, health: healthy(), stop_requested: true, failed_over: Vec::new() }, secs(1));
    let Some(Command::Finish(Err(err))) = out.last() else { panic!("the end: {out:?}") };
    assert_eq!(err.to_string(), "moving vBuckets of moving: Rebalance stopped by user.");
    assert!(out.contains(&Command::ClearBuilding { bucket: "moving".into() }));
}

/// A cluster where every node has every vBucket of every bucket at seqno 10 and every call succeeds; a vBucket
/// held on a node is pending there, so that node does not report it until the map that moves it commits.
struct Cooperative {
    meta: Arc<ClusterMetadata>,
    held: Vec<(NodeId, String, u16)>,
}

impl Cooperative {
    fn report(&self, node: NodeId) -> VbSeqnos {
        let mut all = VbSeqnos::default();
        for (name, b) in &self.meta.buckets {
            for vb in 0..u16::try_from(b.map.chains.len()).unwrap() {
                if !self.held.contains(&(node, name.clone(), vb)) {
                    all.insert(name, vb, 10);
                }
            }
        }
        all
    }

    /// Whether `cmd` awaits an answer.
    fn awaits(cmd: &Command) -> bool {
        !matches!(
            cmd,
            Command::Release { .. } | Command::ClearBuilding { .. } | Command::Progress { .. } | Command::Finish(_)
        )
    }

    fn answer(&mut self, cmd: &Command) -> Event {
        match cmd {
            Command::Report { node } => Event::Reported { node: *node, report: Ok(SeqnoReport::default()) },
            Command::Propose(_) => Event::Proposed(Ok(0)),
            Command::SetChains { bucket, chains } => {
                self.held.retain(|(_, b, vb)| b != bucket || !chains.contains_key(vb));
                Event::Proposed(Ok(0))
            }
            Command::Observe => Event::Observed { meta: self.meta.clone(), health: healthy() },
            Command::Poll { nodes, .. } => {
                let reports =
                    nodes.iter().map(|n| (*n, Ok(SeqnoReport { buckets: self.report(*n), ..Default::default() })));
                Event::Polled {
                    reports: reports.collect(),
                    health: healthy(),
                    stop_requested: false,
                    failed_over: Vec::new(),
                }
            }
            Command::Hold { node, bucket, vbs, .. } => {
                let mut stopped = VbSeqnos::default();
                for vb in vbs {
                    stopped.insert(bucket, *vb, 10);
                    self.held.push((*node, bucket.clone(), *vb));
                }
                Event::Held { node: *node, reply: Ok(HoldReply { stopped }) }
            }
            Command::RemoveMember(_) => Event::MemberRemoved(Ok(())),
            other => panic!("{other:?} awaits no answer"),
        }
    }
}

/// Adding a node to a two-bucket cluster runs to its end against a cooperative cluster: every planned move of
/// both buckets is committed, progress counts up to the total, at most one awaited command is out at a time, and
/// no hold is left to release.
#[test]
fn a_rebalance_against_a_cooperative_cluster_commits_every_move() {
    let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active), (3, Membership::InactiveAdded)]);
    for name in ["a", "b"] {
        meta.buckets.insert(name.into(), bucket_meta(name, vbmap::plan(&[1, 2], 64, 1), 1));
    }
    let mut r = Rebalance::new(&meta, &[], ME, &healthy()).unwrap();
    let meta = activated(meta, 3);
    let mut cluster = Cooperative { meta: meta.clone(), held: Vec::new() };
    let planned: usize = plan_moves(&meta, &KeptCopies::new(), &[1, 2, 3]).iter().map(|(_, m)| m.len()).sum();
    let mut commands = r.start();
    let (mut progress, mut chains, mut steps) = (Vec::new(), BTreeMap::new(), 0);
    let outcome = loop {
        steps += 1;
        assert!(steps < 10_000, "the rebalance ends");
        let awaited: Vec<&Command> = commands.iter().filter(|c| Cooperative::awaits(c)).collect();
        assert!(awaited.len() <= 1, "one awaited command at a time: {commands:?}");
        assert!(!commands.iter().any(|c| matches!(c, Command::Release { .. })), "nothing to release");
        for c in &commands {
            match c {
                Command::Progress { done, total } => progress.push((*done, *total)),
                Command::SetChains { bucket, chains: c } => {
                    chains.entry(bucket.clone()).or_insert_with(BTreeMap::new).extend(c.clone())
                }
                _ => {}
            }
        }
        if let Some(Command::Finish(outcome)) = commands.last() {
            break outcome.clone();
        }
        let event = cluster.answer(awaited[0]);
        commands = r.handle(event, secs(steps));
    };
    assert_eq!(outcome, Ok(()));
    assert!(cluster.held.is_empty(), "every hold ended with its commit");
    assert_eq!(progress.last(), Some(&(planned, planned)));
    assert!(planned > 0 && progress.windows(2).all(|w| w[0].0 <= w[1].0));
    let committed: usize = chains.values().map(BTreeMap::len).sum();
    assert_eq!(committed, planned, "each planned move committed once");
    for (bucket, moves) in plan_moves(&meta, &KeptCopies::new(), &[1, 2, 3]) {
        for m in moves {
            assert_eq!(chains[&bucket][&m.vb], m.new_chain, "{bucket} vBucket {}", m.vb);
        }
    }
}
