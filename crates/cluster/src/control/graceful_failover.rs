//! Graceful failover as a state machine: a live node's actives are held (clients get NOT_MY_VBUCKET and retry),
//! the replica failover promotes for each (see `vbmap::promoted`) catches up to the seqno it stopped at, then the node is
//! failed over as a hard failover would (it ends its holds itself when it applies the new map). Nothing
//! acknowledged is lost. If the node does not say where a vBucket stopped, the replicas do not catch up within
//! [`GRACEFUL_CATCH_UP`], or the failover does not commit, the node is released and serves again.
//!
//! The failover keeps the node in the clients' server lists, with no vBucket, while it drains: until it has
//! answered no data request for [`DRAIN_QUIET`] (at most [`DRAIN_MAX`]), then it leaves them. An SDK stops its
//! connection to a node that leaves the config and cancels what it had in flight there (the C++ core under the
//! Python SDK fails a non-idempotent request so with RequestCanceled); while the node is still listed the request
//! is answered NOT_MY_VBUCKET and retried on the new active.
//!
//! In a cluster with a member of an older settee (metadata version 1, see `metadata::compat`) the failover takes
//! the form that member reads ([`FailoverForm::Separate`]) and there is no drain.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::metadata::compat::{CommandForms, FailoverForm};
use crate::metadata::ClusterMetadata;
use crate::peer::{HoldReply, HoldRequest, HoldScope, SeqnoReport};
use crate::vbmap::NodeId;

/// How long the replicas of a gracefully failed-over node get to catch up.
pub const GRACEFUL_CATCH_UP: Duration = Duration::from_secs(60);
/// Pause between two rounds of seqno reports while the replicas catch up.
pub const POLL_PAUSE: Duration = Duration::from_millis(100);
/// How long a failed-over node must answer no data request before it leaves the clients' server lists: clients
/// learn the new map at once (pushed, or in the NOT_MY_VBUCKET a stale request gets), so traffic stops within
/// milliseconds; a second leaves room for a retry's backoff.
pub const DRAIN_QUIET: Duration = Duration::from_secs(1);
/// The longest a failed-over node stays listed, whatever its clients do.
pub const DRAIN_MAX: Duration = Duration::from_secs(10);
/// Pause between two readings of the draining node's request count.
pub const DRAIN_POLL: Duration = Duration::from_millis(200);

/// One copy of a vBucket: (bucket, vBucket, node).
pub type Copy = (String, u16, NodeId);

/// What the failover asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Send `request` to `node`. Answer: [`Event::Held`].
    Hold { node: NodeId, request: HoldRequest },
    /// After `pause`, ask each of `nodes` for its seqno report. Answer: [`Event::Polled`].
    Poll { nodes: Vec<NodeId>, pause: Duration },
    /// Fail `node` over (hard failover, then the lost replicas rebuilt) in `form`: with
    /// [`FailoverForm::Draining`] (`MetaCommand::FailoverDraining`) the node stays in the clients' server lists
    /// until [`Command::EndDrain`]; with [`FailoverForm::Separate`] (`Failover`, then the replicas rebuilt, for a
    /// cluster with an older member) it leaves them at once. Answer: [`Event::FailedOver`].
    FailOver { node: NodeId, form: FailoverForm },
    /// Take the failed-over `node` out of the clients' server lists (`MetaCommand::EndDrain`). Answer:
    /// [`Event::DrainEnded`].
    EndDrain { node: NodeId },
    /// Release everything held on `node`. No answer (a failure is only logged: the hold's lease ends it).
    Release { node: NodeId },
    /// The failover ended. Nothing follows.
    Finish(Result<(), GracefulFailoverError>),
}

/// The answers to the commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Held(Result<HoldReply, String>),
    Polled(BTreeMap<NodeId, Result<SeqnoReport, String>>),
    FailedOver(Result<(), String>),
    DrainEnded(Result<(), String>),
}

/// Why a graceful failover was abandoned (the node serves again) or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GracefulFailoverError {
    #[error("the node refused to drain: {0}")]
    Refused(String),
    #[error("graceful failover abandoned, the node serves again: it did not report where vBuckets {0:?} stopped")]
    Unreported(Vec<u16>),
    #[error("graceful failover abandoned, the node serves again: {behind} copies did not catch up within {within:?}")]
    NotCaughtUp { behind: usize, within: Duration },
    #[error("{0}")]
    FailoverFailed(String),
    #[error("graceful failover driver error: {0}")]
    Protocol(String),
}

#[derive(Debug)]
enum Phase {
    Holding,
    /// Waiting for reports until every copy in `wanted` reaches its seqno, or `deadline`.
    CatchingUp {
        wanted: BTreeMap<Copy, u64>,
        deadline: Duration,
    },
    FailingOver,
    /// Failed over; waiting until the node's data request count (`requests`, once read) has not changed since
    /// `quiet_since` for [`DRAIN_QUIET`], or `deadline`.
    Draining {
        requests: Option<u64>,
        quiet_since: Duration,
        deadline: Duration,
    },
    EndingDrain,
    Done,
}

/// One graceful failover of one node.
#[derive(Debug)]
pub struct GracefulFailover {
    node: NodeId,
    /// The node's actives that have a replica, and that replica (the copy failover promotes).
    promoted: Vec<Copy>,
    /// The metadata revision `promoted` comes from: a replica's seqno counts only from a node that has applied it
    /// (before, the node may report a copy that a change it has not applied yet empties).
    rev: u64,
    /// The form every member reads (`CommandForms`), chosen from the metadata the failover started from.
    form: FailoverForm,
    phase: Phase,
}

impl GracefulFailover {
    /// A graceful failover of `node`, whose actives and replicas `meta` gives.
    pub fn new(node: NodeId, meta: &ClusterMetadata) -> GracefulFailover {
        let mut promoted = Vec::new();
        let groups = meta.node_groups();
        for (bucket, b) in &meta.buckets {
            for vb in b.map.actives_of(node) {
                let chain = b.map.chains.get(usize::from(vb)).map_or(&[][..], Vec::as_slice);
                // The copy the hard failover at the end will promote: the one that must catch up.
                if let Some(replica) = crate::vbmap::promoted(chain, &[node], &groups) {
                    promoted.push((bucket.clone(), vb, replica));
                }
            }
        }
        let form = CommandForms::of(meta).graceful_failover;
        GracefulFailover { node, promoted, rev: meta.rev, form, phase: Phase::Holding }
    }

    /// The first command: hold every active of the node.
    pub fn start(&mut self) -> Vec<Command> {
        self.phase = Phase::Holding;
        vec![Command::Hold {
            node: self.node,
            request: HoldRequest { hold: true, scope: HoldScope::All, until_chains: Default::default() },
        }]
    }

    pub fn handle(&mut self, event: Event, now: Duration) -> Vec<Command> {
        match (std::mem::replace(&mut self.phase, Phase::Done), event) {
            (Phase::Holding, Event::Held(Err(e))) => self.abandon(GracefulFailoverError::Refused(e)),
            (Phase::Holding, Event::Held(Ok(reply))) => self.held(&reply, now),
            (Phase::CatchingUp { wanted, deadline }, Event::Polled(reports)) => {
                let behind = wanted
                    .iter()
                    .filter(|((bucket, vb, node), seqno)| {
                        let have = match reports.get(node) {
                            Some(Ok(report)) => report.copy_seqno(bucket, *vb, self.rev),
                            _ => None,
                        };
                        have.is_none_or(|have| have < **seqno)
                    })
                    .count();
                if behind == 0 {
                    return self.fail_over();
                }
                if now >= deadline {
                    return self.abandon(GracefulFailoverError::NotCaughtUp { behind, within: GRACEFUL_CATCH_UP });
                }
                let nodes = nodes_of(&wanted);
                self.phase = Phase::CatchingUp { wanted, deadline };
                vec![Command::Poll { nodes, pause: POLL_PAUSE }]
            }
            // The older form has no drain: the node left the clients' lists with the failover.
            (Phase::FailingOver, Event::FailedOver(Ok(()))) if self.form == FailoverForm::Separate => {
                vec![Command::Finish(Ok(()))]
            }
            (Phase::FailingOver, Event::FailedOver(Ok(()))) => {
                self.phase = Phase::Draining { requests: None, quiet_since: now, deadline: now + DRAIN_MAX };
                vec![Command::Poll { nodes: vec![self.node], pause: DRAIN_POLL }]
            }
            (Phase::Draining { requests, quiet_since, deadline }, Event::Polled(reports)) => {
                self.draining(requests, quiet_since, deadline, &reports, now)
            }
            // The node is failed over either way; one left listed has no vBucket and leaves the lists when it is
            // recovered or removed (the driver logs why the drain did not end).
            (Phase::EndingDrain, Event::DrainEnded(_)) => vec![Command::Finish(Ok(()))],
            // Failed over, the node ends its holds itself once it applies the new map (a release could reach it
            // first and make its vBuckets active again for a moment); otherwise it serves again.
            (Phase::FailingOver, Event::FailedOver(Err(e))) => self.abandon(GracefulFailoverError::FailoverFailed(e)),
            (Phase::Done, _) => Vec::new(),
            (phase, event) => {
                let why = format!("unexpected {event:?} while in {phase:?}");
                self.abandon(GracefulFailoverError::Protocol(why))
            }
        }
    }

    /// The node stopped its actives at the seqnos in `reply`: each promoted replica must reach its vBucket's.
    fn held(&mut self, reply: &HoldReply, now: Duration) -> Vec<Command> {
        let mut wanted = BTreeMap::new();
        let mut unreported = Vec::new();
        for (bucket, vb, replica) in &self.promoted {
            // A vBucket the node did not report (its map differs, its bucket is warming up) has no seqno the replica
            // could be known to have reached: the failover must not go ahead as if it were zero.
            match reply.stopped.get(bucket, *vb) {
                Some(seqno) => {
                    wanted.insert((bucket.clone(), *vb, *replica), seqno);
                }
                None => unreported.push(*vb),
            }
        }
        if !unreported.is_empty() {
            return self.abandon(GracefulFailoverError::Unreported(unreported));
        }
        if wanted.is_empty() {
            return self.fail_over();
        }
        let nodes = nodes_of(&wanted);
        self.phase = Phase::CatchingUp { wanted, deadline: now + GRACEFUL_CATCH_UP };
        vec![Command::Poll { nodes, pause: Duration::ZERO }]
    }

    /// One reading of the draining node: the drain ends once its count has stood still for [`DRAIN_QUIET`], at
    /// `deadline`, or when the node does not answer (no client gets an answer from it either).
    fn draining(
        &mut self,
        before: Option<u64>,
        quiet_since: Duration,
        deadline: Duration,
        reports: &BTreeMap<NodeId, Result<SeqnoReport, String>>,
        now: Duration,
    ) -> Vec<Command> {
        let Some(Ok(report)) = reports.get(&self.node) else { return self.end_drain() };
        let quiet_since = if before == Some(report.data_requests) { quiet_since } else { now };
        if now.saturating_sub(quiet_since) >= DRAIN_QUIET || now >= deadline {
            return self.end_drain();
        }
        self.phase = Phase::Draining { requests: Some(report.data_requests), quiet_since, deadline };
        vec![Command::Poll { nodes: vec![self.node], pause: DRAIN_POLL }]
    }

    fn end_drain(&mut self) -> Vec<Command> {
        self.phase = Phase::EndingDrain;
        vec![Command::EndDrain { node: self.node }]
    }

    fn fail_over(&mut self) -> Vec<Command> {
        self.phase = Phase::FailingOver;
        vec![Command::FailOver { node: self.node, form: self.form }]
    }

    /// The node serves again.
    fn abandon(&mut self, why: GracefulFailoverError) -> Vec<Command> {
        self.phase = Phase::Done;
        vec![Command::Release { node: self.node }, Command::Finish(Err(why))]
    }
}

/// The nodes holding the copies of `wanted`.
fn nodes_of(wanted: &BTreeMap<Copy, u64>) -> Vec<NodeId> {
    let mut nodes: Vec<NodeId> = wanted.keys().map(|(_, _, n)| *n).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::testing::{bucket_meta, meta_with_nodes};
    use crate::metadata::Membership;
    use crate::peer::VbSeqnos;
    use crate::vbmap::VbMap;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Node 1 holds the actives of vBuckets 0 and 2 (replicas on 2 and 3); node 2 the active of vBucket 1.
    fn meta() -> ClusterMetadata {
        let mut meta = meta_with_nodes(&[(1, Membership::Active), (2, Membership::Active), (3, Membership::Active)]);
        let map = VbMap {
            chains: vec![vec![Some(1), Some(2)], vec![Some(2), Some(1)], vec![Some(1), Some(3)], vec![Some(1), None]],
        };
        meta.buckets.insert("b".into(), bucket_meta("b", map, 1));
        meta
    }

    fn stopped(pairs: &[(u16, u64)]) -> HoldReply {
        let mut stopped = VbSeqnos::default();
        for (vb, seqno) in pairs {
            stopped.insert("b", *vb, *seqno);
        }
        HoldReply { stopped }
    }

    fn report(pairs: &[(u16, u64)]) -> Result<SeqnoReport, String> {
        Ok(SeqnoReport { buckets: stopped(pairs).stopped, ..Default::default() })
    }

    /// Holding the node, then waiting for its promoted replicas to reach the seqnos it stopped at, then failing it
    /// over: each step asks for exactly the next command, and success releases nothing (the node ends its holds as
    /// it applies the failover).
    #[test]
    fn a_graceful_failover_waits_for_the_replicas_then_fails_over() {
        let mut g = GracefulFailover::new(1, &meta());
        let hold = HoldRequest { hold: true, scope: HoldScope::All, until_chains: Default::default() };
        assert_eq!(g.start(), vec![Command::Hold { node: 1, request: hold }]);
        let polls = g.handle(Event::Held(Ok(stopped(&[(0, 10), (2, 5), (3, 9)]))), secs(0));
        assert_eq!(polls, vec![Command::Poll { nodes: vec![2, 3], pause: Duration::ZERO }]);
        let behind = BTreeMap::from([(2, report(&[(0, 9)])), (3, report(&[(2, 5)]))]);
        assert_eq!(
            g.handle(Event::Polled(behind), secs(1)),
            vec![Command::Poll { nodes: vec![2, 3], pause: POLL_PAUSE }]
        );
        let caught_up = BTreeMap::from([(2, report(&[(0, 10)])), (3, report(&[(2, 6)]))]);
        assert_eq!(
            g.handle(Event::Polled(caught_up), secs(2)),
            vec![Command::FailOver { node: 1, form: FailoverForm::Draining }]
        );
        let drain_poll = vec![Command::Poll { nodes: vec![1], pause: DRAIN_POLL }];
        assert_eq!(g.handle(Event::FailedOver(Ok(())), secs(2)), drain_poll);
        assert_eq!(g.handle(Event::Polled(requests(1, 0)), secs(3)), drain_poll, "the first reading starts the wait");
        assert_eq!(g.handle(Event::Polled(requests(1, 0)), secs(4)), vec![Command::EndDrain { node: 1 }]);
        assert_eq!(g.handle(Event::DrainEnded(Ok(())), secs(4)), vec![Command::Finish(Ok(()))]);
    }

    /// The node's request count reported as `count`.
    fn requests(node: NodeId, count: u64) -> BTreeMap<NodeId, Result<SeqnoReport, String>> {
        BTreeMap::from([(node, Ok(SeqnoReport { data_requests: count, ..Default::default() }))])
    }

    /// A failed-over node leaves the clients' server lists only once it has answered no data request for
    /// DRAIN_QUIET: each reading that finds the count grown starts the wait again; DRAIN_MAX ends it whatever the
    /// clients do, and so does a node that does not answer.
    #[test]
    fn a_failed_over_node_drains_until_its_clients_stop_sending() {
        let ms = Duration::from_millis;
        let failed_over = |at: Duration| {
            let mut g = GracefulFailover::new(3, &meta());
            g.start();
            assert_eq!(
                g.handle(Event::Held(Ok(HoldReply::default())), at),
                vec![Command::FailOver { node: 3, form: FailoverForm::Draining }]
            );
            g.handle(Event::FailedOver(Ok(())), at);
            g
        };
        let poll = vec![Command::Poll { nodes: vec![3], pause: DRAIN_POLL }];
        let end = vec![Command::EndDrain { node: 3 }];
        let mut g = failed_over(ms(0));
        assert_eq!(g.handle(Event::Polled(requests(3, 5)), ms(200)), poll);
        assert_eq!(g.handle(Event::Polled(requests(3, 9)), ms(900)), poll);
        assert_eq!(g.handle(Event::Polled(requests(3, 9)), ms(1800)), poll, "quiet for 900 ms only");
        assert_eq!(g.handle(Event::Polled(requests(3, 9)), ms(1900)), end);

        let mut g = failed_over(ms(0));
        let ended_at = (1..=100)
            .map(|i| (ms(i * 200), i))
            .find(|(at, count)| g.handle(Event::Polled(requests(3, *count)), *at) == end)
            .map(|(at, _)| at);
        assert_eq!(ended_at, Some(DRAIN_MAX), "a count that keeps growing ends the drain at DRAIN_MAX only");

        let mut g = failed_over(ms(0));
        let silent = BTreeMap::from([(3, Err("connection refused".to_owned()))]);
        assert_eq!(g.handle(Event::Polled(silent), ms(200)), end);
        assert_eq!(g.handle(Event::DrainEnded(Err("no quorum".into())), ms(300)), vec![Command::Finish(Ok(()))]);
    }

    /// A replica's seqno counts only from a node that has applied the map the failover started from: before, the
    /// copy it reports may be one a change it has not applied yet empties (a stopped rebalance's), and promoting it
    /// would lose what the held active had.
    #[test]
    fn a_replica_counts_only_from_a_node_that_applied_the_map() {
        let mut meta = meta();
        meta.rev = 7;
        let mut g = GracefulFailover::new(1, &meta);
        g.start();
        g.handle(Event::Held(Ok(stopped(&[(0, 10), (2, 5)]))), secs(0));
        let at = |rev: u64, pairs: &[(u16, u64)]| report(pairs).map(|r| SeqnoReport { rev, ..r });
        let behind_the_map = BTreeMap::from([(2, at(6, &[(0, 10)])), (3, at(7, &[(2, 5)]))]);
        assert_eq!(
            g.handle(Event::Polled(behind_the_map), secs(1)),
            vec![Command::Poll { nodes: vec![2, 3], pause: POLL_PAUSE }]
        );
        let applied = BTreeMap::from([(2, at(7, &[(0, 10)])), (3, at(8, &[(2, 5)]))]);
        assert_eq!(
            g.handle(Event::Polled(applied), secs(2)),
            vec![Command::FailOver { node: 1, form: FailoverForm::Draining }]
        );
    }

    /// Replicas that do not catch up within GRACEFUL_CATCH_UP of the hold abandon the failover: the node is released
    /// and serves again, and the error counts the copies behind. A copy whose node did not answer is behind.
    #[test]
    fn replicas_that_do_not_catch_up_in_time_abandon_the_failover() {
        let mut g = GracefulFailover::new(1, &meta());
        g.start();
        g.handle(Event::Held(Ok(stopped(&[(0, 10), (2, 5)]))), secs(100));
        let behind = BTreeMap::from([(2, report(&[(0, 9)])), (3, Err("refused".to_owned()))]);
        assert!(matches!(g.handle(Event::Polled(behind.clone()), secs(159))[..], [Command::Poll { .. }]));
        let out = g.handle(Event::Polled(behind), secs(160));
        let why = GracefulFailoverError::NotCaughtUp { behind: 2, within: GRACEFUL_CATCH_UP };
        assert_eq!(out, vec![Command::Release { node: 1 }, Command::Finish(Err(why.clone()))]);
        assert!(why.to_string().starts_with("graceful failover abandoned, the node serves again: 2 copies"), "{why}");
        assert!(g.handle(Event::FailedOver(Ok(())), secs(161)).is_empty(), "an ended failover ignores events");
    }

    /// A vBucket the held node did not report a seqno for (its bucket warming up) abandons the failover instead of
    /// treating the vBucket as empty; a refused hold and a failover that does not commit release the node too.
    #[test]
    fn an_unreported_vbucket_a_refused_hold_or_a_failed_commit_release_the_node() {
        let mut g = GracefulFailover::new(1, &meta());
        g.start();
        let out = g.handle(Event::Held(Ok(stopped(&[(0, 10)]))), secs(0));
        assert_eq!(
            out,
            vec![Command::Release { node: 1 }, Command::Finish(Err(GracefulFailoverError::Unreported(vec![2])))]
        );

        let mut g = GracefulFailover::new(1, &meta());
        g.start();
        let out = g.handle(Event::Held(Err("timed out".into())), secs(0));
        let refused = GracefulFailoverError::Refused("timed out".into());
        assert_eq!(out, vec![Command::Release { node: 1 }, Command::Finish(Err(refused))]);

        let mut g = GracefulFailover::new(1, &meta());
        g.start();
        g.handle(Event::Held(Ok(stopped(&[(0, 1), (2, 1)]))), secs(0));
        g.handle(Event::Polled(BTreeMap::from([(2, report(&[(0, 1)])), (3, report(&[(2, 1)]))])), secs(0));
        let out = g.handle(Event::FailedOver(Err("no quorum".into())), secs(1));
        let failed = GracefulFailoverError::FailoverFailed("no quorum".into());
        assert_eq!(out, vec![Command::Release { node: 1 }, Command::Finish(Err(failed))]);
    }

    /// With a member that reads only metadata version 1 (an older settee), the failover is proposed in the form it
    /// reads (`Failover`, then the replicas rebuilt) and ends there, without the drain and its `EndDrain`; once
    /// every member reads version 2, the same failover drains.
    #[test]
    fn a_cluster_with_an_older_member_fails_over_in_the_older_form_without_a_drain() {
        let mut old = meta();
        old.nodes.get_mut(&2).expect("node 2").meta_version = 1;
        let mut g = GracefulFailover::new(3, &old);
        g.start();
        let separate = vec![Command::FailOver { node: 3, form: FailoverForm::Separate }];
        assert_eq!(g.handle(Event::Held(Ok(HoldReply::default())), secs(0)), separate);
        assert_eq!(g.handle(Event::FailedOver(Ok(())), secs(1)), vec![Command::Finish(Ok(()))]);
        assert!(g.handle(Event::Polled(requests(3, 0)), secs(2)).is_empty(), "nothing follows the finish");

        let mut upgraded = old;
        upgraded.nodes.get_mut(&2).expect("node 2").meta_version = crate::metadata::META_VERSION;
        let mut g = GracefulFailover::new(3, &upgraded);
        g.start();
        let draining = vec![Command::FailOver { node: 3, form: FailoverForm::Draining }];
        assert_eq!(g.handle(Event::Held(Ok(HoldReply::default())), secs(0)), draining);
        let poll = vec![Command::Poll { nodes: vec![3], pause: DRAIN_POLL }];
        assert_eq!(g.handle(Event::FailedOver(Ok(())), secs(1)), poll);
    }

    /// A node whose actives have no replica to wait for (here: it holds none) fails over right after the hold.
    #[test]
    fn a_node_with_nothing_to_wait_for_fails_over_at_once() {
        let mut g = GracefulFailover::new(3, &meta());
        g.start();
        assert_eq!(
            g.handle(Event::Held(Ok(HoldReply::default())), secs(0)),
            vec![Command::FailOver { node: 3, form: FailoverForm::Draining }]
        );
    }
}
