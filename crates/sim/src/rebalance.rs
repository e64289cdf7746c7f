//! The leader's side of a rebalance in the simulation: the real `settee_cluster::control::rebalance::Rebalance`
//! state machine, its commands carried out as the server's `cluster/rebalance.rs` does (seqno reports and takeover
//! holds asked of the nodes over the simulated network, with timeouts; proposals applied to the metadata; Raft
//! membership changes taken as done), and its events fed back.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::control::rebalance::{Command, Event, Rebalance};
use settee_cluster::control::HealthSnapshot;
use settee_cluster::peer::{HoldReply, SeqnoReport};
use settee_cluster::{ClusterMetadata, MetaCommand, NodeId, VbMap};

use crate::asking::{Awaited, Ids, PollRound, ANSWER_TIMEOUT, HOLD_TIMEOUT};
use crate::msg::Msg;

/// The answer being waited for, if any.
enum Waiting {
    Report(Awaited),
    Poll(PollRound),
    Hold(Awaited),
}

/// What the driver needs from the control plane to carry out a command.
pub trait Leader {
    /// Applies `cmd`; the metadata revision that holds it.
    fn propose(&mut self, cmd: MetaCommand) -> Result<u64, String>;
    fn meta(&self) -> Arc<ClusterMetadata>;
    fn health(&self, now: Duration) -> HealthSnapshot;
    fn send(&mut self, node: NodeId, msg: Msg);
    /// Whether the operator asked to stop the rebalance (`/controller/stopRebalance`).
    fn stop_requested(&self) -> bool;
}

pub struct RebalanceRun {
    sm: Rebalance,
    queue: VecDeque<Command>,
    waiting: Option<Waiting>,
    ids: Ids,
    /// How it ended, once it has.
    pub outcome: Option<Result<(), String>>,
    pub moves_done: usize,
}

impl RebalanceRun {
    pub fn start(mut sm: Rebalance) -> RebalanceRun {
        let queue = sm.start().into();
        RebalanceRun { sm, queue, waiting: None, ids: Ids::new(0), outcome: None, moves_done: 0 }
    }

    /// The nodes this rebalance ejects (the operator's and the failed-over ones not marked for recovery).
    pub fn ejected(&self) -> Vec<NodeId> {
        self.sm.decided().ejected.clone()
    }

    fn feed(&mut self, event: Event, now: Duration) {
        self.waiting = None;
        let more = self.sm.handle(event, now);
        self.queue.extend(more);
    }

    /// Runs the queued commands until one awaits an answer; answers timeouts and due polls.
    pub fn step(&mut self, leader: &mut impl Leader, now: Duration) {
        self.expire(leader, now);
        while self.waiting.is_none() && self.outcome.is_none() {
            let Some(command) = self.queue.pop_front() else { return };
            self.run(command, leader, now);
        }
    }

    fn run(&mut self, command: Command, leader: &mut impl Leader, now: Duration) {
        if std::env::var_os("SIM_DEBUG").is_some() {
            let text = format!("{command:?}");
            eprintln!("{now:?} rebalance: {}", &text[..text.len().min(300)]);
        }
        match command {
            Command::Report { node } => {
                let id = self.ids.fresh();
                leader.send(node, Msg::SeqnosAsk { id });
                self.waiting = Some(Waiting::Report(Awaited::new(node, id, now, ANSWER_TIMEOUT)));
            }
            Command::Propose(cmd) => {
                let r = leader.propose(cmd);
                self.feed(Event::Proposed(r), now);
            }
            Command::Observe => {
                let (meta, health) = (leader.meta(), leader.health(now));
                self.feed(Event::Observed { meta, health }, now);
            }
            Command::Poll { nodes, pause } => self.waiting = Some(Waiting::Poll(PollRound::new(nodes, now, pause))),
            Command::Hold { node, bucket: _, vbs, until_chains } => {
                let id = self.ids.fresh();
                leader.send(node, Msg::HoldAsk { id, hold: true, vbs, all: false, until_chains });
                self.waiting = Some(Waiting::Hold(Awaited::new(node, id, now, HOLD_TIMEOUT)));
            }
            Command::Release { node, bucket: _, vbs } => {
                let id = self.ids.fresh();
                leader.send(node, Msg::HoldAsk { id, hold: false, vbs, all: false, until_chains: Default::default() });
            }
            Command::SetChains { bucket, chains } => {
                let meta = leader.meta();
                let r = match meta.buckets.get(&bucket) {
                    Some(b) => {
                        let mut map: VbMap = b.map.clone();
                        for (vb, chain) in chains {
                            map.chains[usize::from(vb)] = chain;
                        }
                        leader.propose(MetaCommand::SetMap { bucket, map })
                    }
                    None => Err(format!("unknown bucket {bucket}")),
                };
                self.feed(Event::Proposed(r), now);
            }
            Command::ClearBuilding { bucket } => {
                let _ = leader.propose(MetaCommand::SetBuilding { bucket, building: BTreeMap::new() });
            }
            // Raft membership is not simulated.
            Command::RemoveMember(_) => self.feed(Event::MemberRemoved(Ok(())), now),
            Command::Progress { done, .. } => self.moves_done = done,
            Command::Finish(r) => self.outcome = Some(r.map_err(|e| e.to_string())),
        }
    }

    /// Asks a due poll round, and gives up on answers past their time.
    fn expire(&mut self, leader: &mut impl Leader, now: Duration) {
        let event = match &mut self.waiting {
            Some(Waiting::Report(a)) if a.overdue(now) => {
                let node = a.node;
                Event::Reported { node, report: Err(format!("node {node} did not answer")) }
            }
            Some(Waiting::Hold(a)) if a.overdue(now) => {
                let node = a.node;
                Event::Held { node, reply: Err(format!("node {node} did not answer the hold")) }
            }
            Some(Waiting::Poll(round)) => {
                round.ask_if_due(now, &mut self.ids, |node, msg| leader.send(node, msg));
                let Some(reports) = round.finished(now) else { return };
                let (health, stop_requested) = (leader.health(now), leader.stop_requested());
                Event::Polled { reports, health, stop_requested, failed_over: leader.meta().failed_over_nodes() }
            }
            _ => return,
        };
        self.feed(event, now);
    }

    /// A node's seqno report; given back when it answers nothing this rebalance asked.
    pub fn reported(
        &mut self,
        node: NodeId,
        id: u64,
        report: SeqnoReport,
        leader: &mut impl Leader,
        now: Duration,
    ) -> Option<SeqnoReport> {
        match &mut self.waiting {
            Some(Waiting::Report(a)) if a.answered_by(node, id) => {
                self.feed(Event::Reported { node, report: Ok(report) }, now);
                None
            }
            Some(Waiting::Poll(round)) => {
                let unused = round.answer(node, id, report);
                self.expire(leader, now);
                unused
            }
            _ => Some(report),
        }
    }

    /// A node's answer to a hold.
    pub fn held(&mut self, node: NodeId, id: u64, reply: HoldReply, now: Duration) {
        if matches!(&self.waiting, Some(Waiting::Hold(a)) if a.answered_by(node, id)) {
            self.feed(Event::Held { node, reply: Ok(reply) }, now);
        }
    }
}
