//! The leader's side of a graceful failover in the simulation: the real
//! `settee_cluster::control::graceful_failover::GracefulFailover` state machine, its hold and seqno reports asked
//! of the nodes over the simulated network with the server's timeouts, its failover applied to the metadata.

use std::collections::VecDeque;
use std::time::Duration;

use settee_cluster::control::graceful_failover::{Command, Event, GracefulFailover};
use settee_cluster::metadata::compat::FailoverForm;
use settee_cluster::peer::{HoldReply, SeqnoReport};
use settee_cluster::{MetaCommand, NodeId};

use crate::asking::{Awaited, Ids, PollRound, HOLD_TIMEOUT};
use crate::msg::Msg;
use crate::rebalance::Leader;

enum Waiting {
    Hold(Awaited),
    Poll(PollRound),
}

pub struct GracefulRun {
    pub node: NodeId,
    sm: GracefulFailover,
    queue: VecDeque<Command>,
    waiting: Option<Waiting>,
    ids: Ids,
    pub outcome: Option<Result<(), String>>,
}

impl GracefulRun {
    pub fn start(node: NodeId, mut sm: GracefulFailover) -> GracefulRun {
        let queue = sm.start().into();
        // Tagged apart from the rebalance's ids, which count up from 1.
        GracefulRun { node, sm, queue, waiting: None, ids: Ids::new(1 << 62), outcome: None }
    }

    fn feed(&mut self, event: Event, now: Duration) {
        self.waiting = None;
        let more = self.sm.handle(event, now);
        self.queue.extend(more);
    }

    pub fn step(&mut self, leader: &mut impl Leader, now: Duration) {
        self.expire(leader, now);
        while self.waiting.is_none() && self.outcome.is_none() {
            let Some(command) = self.queue.pop_front() else { return };
            match command {
                Command::Hold { node, request } => {
                    let id = self.ids.fresh();
                    leader.send(
                        node,
                        Msg::HoldAsk {
                            id,
                            hold: request.hold,
                            vbs: Vec::new(),
                            all: true,
                            until_chains: Default::default(),
                        },
                    );
                    self.waiting = Some(Waiting::Hold(Awaited::new(node, id, now, HOLD_TIMEOUT)));
                }
                Command::Poll { nodes, pause } => self.waiting = Some(Waiting::Poll(PollRound::new(nodes, now, pause))),
                Command::FailOver { node, form: FailoverForm::Draining } => {
                    let r = leader.propose(MetaCommand::FailoverDraining { node }).map(drop);
                    self.feed(Event::FailedOver(r), now);
                }
                Command::FailOver { node, form: FailoverForm::Separate } => {
                    let r = fail_over_separately(leader, node);
                    self.feed(Event::FailedOver(r), now);
                }
                Command::EndDrain { node } => {
                    let r = leader.propose(MetaCommand::EndDrain { node }).map(drop);
                    self.feed(Event::DrainEnded(r), now);
                }
                Command::Release { node } => {
                    let id = self.ids.fresh();
                    leader.send(
                        node,
                        Msg::HoldAsk { id, hold: false, vbs: Vec::new(), all: true, until_chains: Default::default() },
                    );
                }
                Command::Finish(r) => self.outcome = Some(r.map_err(|e| e.to_string())),
            }
        }
    }

    fn expire(&mut self, leader: &mut impl Leader, now: Duration) {
        let event = match &mut self.waiting {
            Some(Waiting::Hold(a)) if a.overdue(now) => Event::Held(Err("the node did not answer the hold".into())),
            Some(Waiting::Poll(round)) => {
                round.ask_if_due(now, &mut self.ids, |node, msg| leader.send(node, msg));
                let Some(reports) = round.finished(now) else { return };
                Event::Polled(reports)
            }
            _ => return,
        };
        self.feed(event, now);
    }

    /// A seqno report; given back when it answers nothing this failover asked.
    pub fn reported(
        &mut self,
        node: NodeId,
        id: u64,
        report: SeqnoReport,
        leader: &mut impl Leader,
        now: Duration,
    ) -> Option<SeqnoReport> {
        let Some(Waiting::Poll(round)) = &mut self.waiting else { return Some(report) };
        let unused = round.answer(node, id, report);
        self.expire(leader, now);
        unused
    }

    /// The node's answer to the hold; given back when it answers nothing this failover asked.
    pub fn held(&mut self, node: NodeId, id: u64, reply: HoldReply, now: Duration) -> Option<HoldReply> {
        if !matches!(&self.waiting, Some(Waiting::Hold(a)) if a.answered_by(node, id)) {
            return Some(reply);
        }
        self.feed(Event::Held(Ok(reply)), now);
        None
    }
}

/// The older form of a graceful failover's last step, as the server runs it: `Failover`, then each bucket's
/// missing replicas rebuilt in a `SetMap` of its own.
fn fail_over_separately(leader: &mut impl Leader, node: NodeId) -> Result<(), String> {
    leader.propose(MetaCommand::Failover { nodes: vec![node] })?;
    let meta = leader.meta();
    let (survivors, groups) = (meta.active_nodes(), meta.node_groups());
    for (name, b) in &meta.buckets {
        let repaired = settee_cluster::vbmap::repair_replicas(&b.map, &survivors, &groups);
        if repaired != b.map {
            leader.propose(MetaCommand::SetMap { bucket: name.clone(), map: repaired })?;
        }
    }
    Ok(())
}
