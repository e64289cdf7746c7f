//! Auto-failover decisions, as a state machine run by the Raft leader after every probe round. A node unseen for
//! the configured timeout is failed over, one node at a time, up to `maxCount`; the failover is refused (and the
//! refusal reported once per episode) when:
//! - several nodes are down at once (Couchbase then waits for an operator);
//! - the nodes still answering are not a majority of the cluster (a two-node cluster never fails one node over:
//!   the survivor alone cannot commit anything, as in Couchbase 7);
//! - some vBucket would lose its only copy (Couchbase protects against that only in its enterprise edition;
//!   settee never loses durably written data to an automatic failover).

use std::time::Duration;

use super::health::HealthTable;
use crate::metadata::{AutoFailoverSettings, ClusterMetadata, Membership, MetaCommand};
use crate::vbmap::{self, NodeId};

/// What the leader is told.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A probe round ended: the metadata applied here and the peers' health.
    Tick { meta: &'a ClusterMetadata, me: NodeId, health: &'a HealthTable },
    /// The failover asked for committed, or not (why).
    FailedOver { node: NodeId, result: Result<(), &'a str> },
}

/// What the leader does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Fail `node` over as a hard failover would. Answer: [`Event::FailedOver`].
    FailOver { node: NodeId, unseen: Duration },
    /// Propose a metadata change (the failover's count). No answer (a failure is only logged).
    Propose(MetaCommand),
    /// Report why a down node is not failed over. No answer.
    Refuse(Refusal),
}

/// Why a down node was not failed over automatically.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("several nodes are down ({0:?}): auto-failover waits for an operator")]
    SeveralDown(Vec<NodeId>),
    #[error("auto-failover of node {node} refused: only {answering} of {nodes} nodes answer, not a majority")]
    NoMajority { node: NodeId, answering: usize, nodes: usize },
    #[error("auto-failover of node {node} refused: vBuckets would lose their only copy ({at_risk:?})")]
    WouldLoseData { node: NodeId, at_risk: Vec<(String, usize)> },
}

/// The leader's auto-failover state.
#[derive(Debug, Default)]
pub struct AutoFailover {
    /// The refusal last reported: each is reported once per episode.
    refused: Option<Refusal>,
    /// The failover asked for and not answered yet, with the settings to count it in.
    pending: Option<(NodeId, AutoFailoverSettings)>,
}

impl AutoFailover {
    pub fn handle(&mut self, event: Event<'_>, now: Duration) -> Vec<Command> {
        match event {
            Event::Tick { .. } if self.pending.is_some() => Vec::new(),
            Event::Tick { meta, me, health } => self.tick(meta, me, health, now),
            Event::FailedOver { node, result } => match self.pending.take() {
                Some((asked, settings)) if asked == node && result.is_ok() => {
                    let counted = AutoFailoverSettings { count: settings.count + 1, ..settings };
                    vec![Command::Propose(MetaCommand::SetAutoFailover(counted))]
                }
                _ => Vec::new(),
            },
        }
    }

    fn tick(&mut self, meta: &ClusterMetadata, me: NodeId, health: &HealthTable, now: Duration) -> Vec<Command> {
        let settings = &meta.auto_failover;
        if !settings.enabled || settings.count >= settings.max_count {
            self.refused = None;
            return Vec::new();
        }
        let timeout = Duration::from_secs(u64::from(settings.timeout_secs));
        let is_down = |id: NodeId| id != me && health.unseen_for(id, now) >= timeout;
        let down: Vec<NodeId> =
            meta.nodes.values().filter(|n| n.membership == Membership::Active && is_down(n.id)).map(|n| n.id).collect();
        let failed = match down[..] {
            [] => {
                self.refused = None;
                return Vec::new();
            }
            [failed] => failed,
            _ => return self.refuse(Refusal::SeveralDown(down)),
        };
        // Every member votes in the metadata's Raft group, failed-over ones included until a rebalance removes them.
        let answering = meta.nodes.keys().filter(|id| !is_down(**id)).count();
        if answering * 2 <= meta.nodes.len() {
            return self.refuse(Refusal::NoMajority { node: failed, answering, nodes: meta.nodes.len() });
        }
        let at_risk: Vec<(String, usize)> = meta
            .buckets
            .iter()
            .map(|(name, b)| (name.clone(), vbmap::data_loss_risk(&b.map, &[failed]).len()))
            .filter(|(_, n)| *n > 0)
            .collect();
        if !at_risk.is_empty() {
            return self.refuse(Refusal::WouldLoseData { node: failed, at_risk });
        }
        self.refused = None;
        self.pending = Some((failed, settings.clone()));
        vec![Command::FailOver { node: failed, unseen: health.unseen_for(failed, now) }]
    }

    fn refuse(&mut self, why: Refusal) -> Vec<Command> {
        if self.refused.as_ref() == Some(&why) {
            return Vec::new();
        }
        self.refused = Some(why.clone());
        vec![Command::Refuse(why)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::testing::{bucket_meta, meta_with_nodes};
    use crate::vbmap::VbMap;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Three active nodes, auto-failover on with a 5 s timeout; bucket "b" with one replica on every vBucket.
    fn meta() -> ClusterMetadata {
        let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active), (3, Membership::Active)]);
        meta.auto_failover = AutoFailoverSettings { enabled: true, timeout_secs: 5, max_count: 1, count: 0 };
        meta.buckets.insert("b".into(), bucket_meta("b", vbmap::plan(&[1, 2, 3], 16, 1), 1));
        meta
    }

    /// Peers 2 and 3 answered at second 0; `silent` of them never again.
    fn health(silent: &[NodeId]) -> HealthTable {
        let mut t = HealthTable::default();
        for n in [2, 3] {
            t.answered(n, secs(0));
        }
        for n in [2, 3].into_iter().filter(|n| !silent.contains(n)) {
            t.answered(n, secs(100));
        }
        t
    }

    /// A node unseen for the timeout is failed over once it reaches it and not before, and the count is proposed
    /// only after the failover committed.
    #[test]
    fn a_node_unseen_for_the_timeout_is_failed_over_and_counted() {
        let (meta, health) = (meta(), health(&[3]));
        let mut auto = AutoFailover::default();
        assert!(auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(4)).is_empty());
        let out = auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(5));
        assert_eq!(out, vec![Command::FailOver { node: 3, unseen: secs(5) }]);
        assert!(auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(6)).is_empty(), "one at a time");
        let counted = AutoFailoverSettings { count: 1, ..meta.auto_failover.clone() };
        assert_eq!(
            auto.handle(Event::FailedOver { node: 3, result: Ok(()) }, secs(6)),
            vec![Command::Propose(MetaCommand::SetAutoFailover(counted))]
        );
    }

    /// A failover that does not commit is not counted, and the next tick tries again.
    #[test]
    fn a_failover_that_did_not_commit_is_not_counted() {
        let (meta, health) = (meta(), health(&[3]));
        let mut auto = AutoFailover::default();
        auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(10));
        assert!(auto.handle(Event::FailedOver { node: 3, result: Err("no quorum") }, secs(10)).is_empty());
        let again = auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(11));
        assert_eq!(again, vec![Command::FailOver { node: 3, unseen: secs(11) }]);
    }

    /// Nothing happens when auto-failover is off or has used up maxCount, and a node that is not active (added or
    /// already failed over) is never failed over automatically.
    #[test]
    fn disabled_exhausted_or_inactive_means_no_failover() {
        let health = health(&[3]);
        let mut exhausted = meta();
        exhausted.auto_failover.count = 1;
        let mut disabled = meta();
        disabled.auto_failover.enabled = false;
        let mut added = meta();
        added.nodes.get_mut(&3).unwrap().membership = Membership::InactiveAdded;
        for meta in [exhausted, disabled, added] {
            let out = AutoFailover::default().handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(60));
            assert!(out.is_empty(), "{:?}", meta.auto_failover);
        }
    }

    /// A failover that would leave vBuckets without any copy is refused, and the refusal is reported once per
    /// episode, not at every tick.
    #[test]
    fn a_failover_that_would_lose_data_is_refused_once() {
        let mut meta = meta();
        let lonely = VbMap { chains: vec![vec![Some(3), None], vec![Some(1), Some(3)]] };
        meta.buckets.insert("lonely".into(), bucket_meta("lonely", lonely, 0));
        let health = health(&[3]);
        let mut auto = AutoFailover::default();
        let out = auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(30));
        let why = Refusal::WouldLoseData { node: 3, at_risk: vec![("lonely".into(), 1)] };
        assert_eq!(out, vec![Command::Refuse(why)]);
        assert!(auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(31)).is_empty());
    }

    /// In a two-node cluster the survivor is not a majority: its peer is never failed over automatically (the
    /// metadata could not commit the failover anyway). Likewise when a failed-over member is down too.
    #[test]
    fn a_two_node_cluster_never_fails_its_peer_over() {
        let mut meta = meta();
        meta.nodes.remove(&2);
        meta.buckets.insert("b".into(), bucket_meta("b", vbmap::plan(&[1, 3], 16, 1), 1));
        let health = health(&[3]);
        let out = AutoFailover::default().handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(30));
        assert_eq!(out, vec![Command::Refuse(Refusal::NoMajority { node: 3, answering: 1, nodes: 2 })]);

        let mut meta = self::meta();
        meta.nodes.get_mut(&2).unwrap().membership = Membership::InactiveFailed;
        let health = self::health(&[2, 3]);
        let out = AutoFailover::default().handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(30));
        assert_eq!(out, vec![Command::Refuse(Refusal::NoMajority { node: 3, answering: 1, nodes: 3 })]);
    }

    /// Several active nodes down at once wait for an operator (reported once); when they answer again the
    /// episode ends and a later one is reported again.
    #[test]
    fn several_nodes_down_wait_for_an_operator() {
        let mut meta = meta();
        meta.nodes.extend(meta_with_nodes(&[(4, Membership::Active), (5, Membership::Active)]).nodes);
        let mut health = health(&[2, 3]);
        health.answered(4, secs(100));
        health.answered(5, secs(100));
        let mut auto = AutoFailover::default();
        let out = auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(100));
        assert_eq!(out, vec![Command::Refuse(Refusal::SeveralDown(vec![2, 3]))]);
        assert!(auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(101)).is_empty());
        health.answered(2, secs(102));
        health.answered(3, secs(102));
        assert!(auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(102)).is_empty());
        health.answered(4, secs(200));
        health.answered(5, secs(200));
        let out = auto.handle(Event::Tick { meta: &meta, me: 1, health: &health }, secs(200));
        assert_eq!(out, vec![Command::Refuse(Refusal::SeveralDown(vec![2, 3]))], "a new episode");
    }
}
