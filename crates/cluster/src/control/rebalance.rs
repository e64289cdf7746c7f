//! Rebalance as a state machine: moves vBuckets to a balanced map over the nodes that stay, while clients keep
//! working. The driver (the server's `cluster/rebalance.rs`) runs the commands and feeds their answers back.
//!
//! The steps, in order:
//! 1. **kept copies**: each node in delta recovery reports the vBuckets it still holds data for ([`Command::Report`]);
//! 2. **activation**: added nodes and failed-over nodes marked for recovery become active (one proposal each);
//! 3. **plan** (after a fresh look at the cluster, [`Command::Observe`]): the target map over the active nodes that
//!    stay (`vbmap::rebalance_keeping`: minimal movement, a delta-recovering node gets back what it kept); a node
//!    that stays but is unhealthy refuses the rebalance;
//! 4. **moves**, one bucket after another ([`super::moves`]): each move's new copies are proposed as `building` and
//!    streamed until they reach the seqno the active had when the move started; when the active changes node, the
//!    old one holds the vBucket pending and the new one catches up to the seqno it stopped at; a `SetMap` commits;
//! 5. **finish**: recovery marks cleared, ejected nodes removed from the metadata and from the Raft group.
//!
//! A stop or a failure leaves the map as the last commit made it (consistent; finished moves are kept); held
//! vBuckets are released and copies being built given up. At most one command awaiting an answer is out at a time:
//! the driver runs the commands of one `handle` in order, and the last of them (if any) awaits its answer.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::health::{HealthSnapshot, NodeHealth};
use super::moves::Moves;
use super::recovery::{add_kept, plan_moves, KeptCopies, RebalanceStart};
use crate::metadata::{ClusterMetadata, Membership, MetaCommand};
use crate::peer::{HoldReply, SeqnoReport};
use crate::vbmap::{NodeId, VbMove};

/// A round's seqno reports: by node, the report or why the node did not give one.
pub type Reports = BTreeMap<NodeId, Result<SeqnoReport, String>>;

/// What the rebalance asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Ask `node` for its seqno report. Answer: [`Event::Reported`].
    Report { node: NodeId },
    /// Propose a metadata change (applied locally before the answer). Answer: [`Event::Proposed`].
    Propose(MetaCommand),
    /// Look at the cluster again: the applied metadata and the peers' health. Answer: [`Event::Observed`].
    Observe,
    /// After `pause`, ask each of `nodes` for its seqno report. Answer: [`Event::Polled`].
    Poll { nodes: Vec<NodeId>, pause: Duration },
    /// Hold `vbs` of `bucket` on their active `node` for a takeover, or for a move of their replicas (those with a
    /// chain in `until_chains`, the chain the move commits, which stay active on `node`). Answer: [`Event::Held`].
    Hold { node: NodeId, bucket: String, vbs: Vec<u16>, until_chains: BTreeMap<u16, Vec<Option<NodeId>>> },
    /// Release `vbs` of `bucket` held on `node`. No answer (a failure is only logged: the hold's lease ends it).
    Release { node: NodeId, bucket: String, vbs: Vec<u16> },
    /// Put `chains` into `bucket`'s current map and propose it. Answer: [`Event::Proposed`].
    SetChains { bucket: String, chains: BTreeMap<u16, Vec<Option<NodeId>>> },
    /// Propose that `bucket` builds no copies. No answer (a failure is only logged).
    ClearBuilding { bucket: String },
    /// Remove `node` from the Raft group. Answer: [`Event::MemberRemoved`].
    RemoveMember(NodeId),
    /// Moves done and planned, for `/pools/default/tasks`. No answer.
    Progress { done: usize, total: usize },
    /// The rebalance ended. Nothing follows.
    Finish(Result<(), RebalanceError>),
}

/// What the driver tells the rebalance: the answers to its commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Reported {
        node: NodeId,
        report: Result<SeqnoReport, String>,
    },
    /// The proposal's outcome: the metadata revision that holds the change, or why it failed.
    Proposed(Result<u64, String>),
    Observed {
        meta: Arc<ClusterMetadata>,
        health: HealthSnapshot,
    },
    /// One round's reports, the peers' health, whether the operator asked to stop, and the nodes the metadata
    /// now has failed over (a failover during the rebalance).
    Polled {
        reports: Reports,
        health: HealthSnapshot,
        stop_requested: bool,
        failed_over: Vec<NodeId>,
    },
    Held {
        node: NodeId,
        reply: Result<HoldReply, String>,
    },
    MemberRemoved(Result<(), String>),
}

/// Why a bucket's moves ended early.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveFailure {
    #[error("Rebalance stopped by user.")]
    Stopped,
    #[error("node {0} stopped answering during the rebalance; finished moves are kept")]
    NodeDown(NodeId),
    #[error("node {0} was failed over during the rebalance; finished moves are kept")]
    FailedOver(NodeId),
    /// A move waited too long (the reason names the vBucket and what it waited for).
    #[error("{0}; finished moves are kept")]
    Overdue(String),
    /// A source of a queued move did not report its seqnos.
    #[error("{0}")]
    Unreported(String),
    #[error("{0}")]
    Hold(String),
    #[error("node {node} held vBucket {vb} but did not report the seqno it stopped at")]
    HoldUnreported { node: NodeId, vb: u16 },
    #[error("{0}")]
    Proposal(String),
    /// An answer to a command that was not asked: a driver bug.
    #[error("rebalance driver error: {0}")]
    Protocol(String),
}

/// Why a rebalance did not start or ended early.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RebalanceError {
    /// A node that stays is unhealthy (named by its address).
    #[error("node {0} is unreachable; fail it over or bring it back, then rebalance again")]
    Unreachable(String),
    #[error("a rebalance must keep at least one active node")]
    NoNodes,
    #[error("a node in delta recovery must answer: {0}")]
    DeltaUnanswered(String),
    #[error("{0}")]
    Proposal(String),
    #[error("moving vBuckets of {bucket}: {failure}")]
    Moving { bucket: String, failure: MoveFailure },
    #[error("rebalance driver error: {0}")]
    Protocol(String),
}

/// A step of the end of a rebalance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FinishStep {
    ClearRecovery(NodeId),
    RemoveNode(NodeId),
    RemoveMember(NodeId),
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the kept-copies report of `asking`; then those of `left`.
    Kept {
        asking: NodeId,
        left: VecDeque<NodeId>,
    },
    /// Waiting for the activation of one node; then those of `left`.
    Activating {
        left: VecDeque<NodeId>,
    },
    Observing,
    /// Moving one bucket's vBuckets; then those of `rest`.
    Moving {
        moves: Box<Moves>,
        rest: VecDeque<(String, Vec<VbMove>)>,
    },
    /// Waiting for one step of the end; then `left`.
    Finishing {
        step: FinishStep,
        left: VecDeque<FinishStep>,
    },
    Done,
}

/// One rebalance, from the request to its end.
#[derive(Debug)]
pub struct Rebalance {
    me: NodeId,
    start: RebalanceStart,
    kept: KeptCopies,
    phase: Phase,
    done: usize,
    total: usize,
}

impl Rebalance {
    /// A rebalance of `meta`'s cluster, orchestrated by `me`, ejecting `ejected`. Refused at once when a node that
    /// stays is unhealthy, instead of waiting out its moves' timeouts.
    pub fn new(
        meta: &ClusterMetadata,
        ejected: &[NodeId],
        me: NodeId,
        health: &HealthSnapshot,
    ) -> Result<Rebalance, RebalanceError> {
        let start = RebalanceStart::decide(meta, ejected);
        ensure_reachable(meta, &start.staying, health)?;
        Ok(Rebalance { me, start, kept: KeptCopies::new(), phase: Phase::Done, done: 0, total: 0 })
    }

    /// The decisions the rebalance started from.
    pub fn decided(&self) -> &RebalanceStart {
        &self.start
    }

    /// The first commands.
    pub fn start(&mut self) -> Vec<Command> {
        self.ask_kept(self.start.delta_nodes().into())
    }

    pub fn handle(&mut self, event: Event, now: Duration) -> Vec<Command> {
        match (std::mem::replace(&mut self.phase, Phase::Done), event) {
            (Phase::Kept { asking, left }, Event::Reported { node, report }) if node == asking => match report {
                Ok(report) => {
                    add_kept(&mut self.kept, node, &report);
                    self.ask_kept(left)
                }
                Err(e) => self.finish(Err(RebalanceError::DeltaUnanswered(e))),
            },
            (Phase::Activating { left }, Event::Proposed(Ok(_))) => self.activate(left),
            (Phase::Observing, Event::Observed { meta, health }) => self.plan(&meta, &health),
            (Phase::Moving { mut moves, rest }, event) => {
                let mut out = moves.handle(event, now);
                self.after_moves(moves, rest, &mut out);
                out
            }
            (
                Phase::Finishing { step: FinishStep::ClearRecovery(_) | FinishStep::RemoveNode(_), left },
                Event::Proposed(Ok(_)),
            ) => self.finish_next(left),
            (Phase::Finishing { step: FinishStep::RemoveMember(_), left }, Event::MemberRemoved(Ok(()))) => {
                self.finish_next(left)
            }
            (
                Phase::Activating { .. } | Phase::Finishing { .. },
                Event::Proposed(Err(e)) | Event::MemberRemoved(Err(e)),
            ) => self.finish(Err(RebalanceError::Proposal(e))),
            (Phase::Done, _) => Vec::new(),
            (phase, event) => {
                let why = format!("unexpected {event:?} while in {phase:?}");
                self.finish(Err(RebalanceError::Protocol(why)))
            }
        }
    }

    fn ask_kept(&mut self, mut left: VecDeque<NodeId>) -> Vec<Command> {
        match left.pop_front() {
            Some(node) => {
                self.phase = Phase::Kept { asking: node, left };
                vec![Command::Report { node }]
            }
            None => self.activate(self.start.to_activate.clone().into()),
        }
    }

    fn activate(&mut self, mut left: VecDeque<NodeId>) -> Vec<Command> {
        match left.pop_front() {
            Some(node) => {
                self.phase = Phase::Activating { left };
                vec![Command::Propose(MetaCommand::SetMembership { node, membership: Membership::Active })]
            }
            None => {
                self.phase = Phase::Observing;
                vec![Command::Observe]
            }
        }
    }

    /// Plans every bucket's moves over the active nodes that stay, and starts the first bucket's.
    fn plan(&mut self, meta: &ClusterMetadata, health: &HealthSnapshot) -> Vec<Command> {
        let nodes = self.start.target_nodes(meta);
        if nodes.is_empty() {
            return self.finish(Err(RebalanceError::NoNodes));
        }
        if let Err(e) = ensure_reachable(meta, &nodes, health) {
            return self.finish(Err(e));
        }
        let plans = plan_moves(meta, &self.kept, &nodes);
        self.total = plans.iter().map(|(_, m)| m.len()).sum();
        let limit = usize::try_from(meta.rebalance.moves_per_node).unwrap_or(usize::MAX);
        let mut out = vec![Command::Progress { done: 0, total: self.total }];
        let mut rest: VecDeque<(String, Vec<VbMove>)> = plans.into();
        match rest.pop_front() {
            Some((bucket, moves)) => {
                let mut moves = Box::new(Moves::new(&bucket, moves, limit, self.me, meta.rev));
                out.extend(moves.start());
                self.after_moves(moves, rest, &mut out);
            }
            None => out.extend(self.finish_steps()),
        }
        out
    }

    /// After `moves` handled an event: reports progress, and when its bucket is done goes on to the next bucket,
    /// the end steps, or (on a failure) the end.
    fn after_moves(
        &mut self,
        mut moves: Box<Moves>,
        mut rest: VecDeque<(String, Vec<VbMove>)>,
        out: &mut Vec<Command>,
    ) {
        let committed = moves.take_committed();
        if committed > 0 {
            self.done += committed;
            out.insert(0, Command::Progress { done: self.done, total: self.total });
        }
        loop {
            match moves.take_outcome() {
                None => {
                    self.phase = Phase::Moving { moves, rest };
                    return;
                }
                Some(Err(failure)) => {
                    let bucket = moves.bucket().to_owned();
                    out.extend(self.finish(Err(RebalanceError::Moving { bucket, failure })));
                    return;
                }
                Some(Ok(())) => match rest.pop_front() {
                    Some((bucket, next)) => {
                        let limit = moves.limit();
                        moves = Box::new(Moves::new(&bucket, next, limit, self.me, moves.rev()));
                        out.extend(moves.start());
                    }
                    None => {
                        out.extend(self.finish_steps());
                        return;
                    }
                },
            }
        }
    }

    /// The end: recovery marks cleared, then each ejected node removed from the metadata and the Raft group.
    fn finish_steps(&mut self) -> Vec<Command> {
        let mut steps: VecDeque<FinishStep> =
            self.start.recovering.iter().map(|(id, _)| FinishStep::ClearRecovery(*id)).collect();
        for id in &self.start.ejected {
            steps.extend([FinishStep::RemoveNode(*id), FinishStep::RemoveMember(*id)]);
        }
        self.finish_next(steps)
    }

    fn finish_next(&mut self, mut left: VecDeque<FinishStep>) -> Vec<Command> {
        let Some(step) = left.pop_front() else { return self.finish(Ok(())) };
        self.phase = Phase::Finishing { step, left };
        vec![match step {
            FinishStep::ClearRecovery(node) => Command::Propose(MetaCommand::SetRecovery { node, recovery: None }),
            FinishStep::RemoveNode(node) => Command::Propose(MetaCommand::RemoveNode(node)),
            FinishStep::RemoveMember(node) => Command::RemoveMember(node),
        }]
    }

    fn finish(&mut self, outcome: Result<(), RebalanceError>) -> Vec<Command> {
        self.phase = Phase::Done;
        vec![Command::Finish(outcome)]
    }
}

/// Fails when one of `nodes` is unhealthy in `health`.
fn ensure_reachable(meta: &ClusterMetadata, nodes: &[NodeId], health: &HealthSnapshot) -> Result<(), RebalanceError> {
    match nodes.iter().find(|n| health.get(n).is_some_and(|h| h.status == NodeHealth::Unhealthy)) {
        Some(n) => {
            let name = meta.nodes.get(n).map_or_else(|| n.to_string(), |i| i.mgmt_addr());
            Err(RebalanceError::Unreachable(name))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "rebalance_tests.rs"]
mod tests;
