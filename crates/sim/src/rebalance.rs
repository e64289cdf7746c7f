//! The leader's side of a rebalance in the simulation: the real `settee_cluster::control::rebalance::Rebalance`
//! state machine, its commands carried out as the server's `cluster/rebalance.rs` does (seqno reports and takeover
//! holds asked of the nodes over the simulated network, with timeouts; proposals applied to the metadata; Raft
//! membership changes taken as done), and its events fed back.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::control::rebalance::{Command, Event, Rebalance, Reports};
use settee_cluster::control::HealthSnapshot;
use settee_cluster::peer::{HoldReply, SeqnoReport};
use settee_cluster::{ClusterMetadata, MetaCommand, NodeId, VbMap};

use crate::msg::Msg;

/// How long a node has to answer a seqno report or a hold (the server's peer-call timeouts).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
const HOLD_TIMEOUT: Duration = Duration::from_secs(20);

/// The answer being waited for, if any.
enum Waiting {
    Report {
        node: NodeId,
        id: u64,
        until: Duration,
    },
    /// A round of reports: asked at `at` (after the pause); answers gathered until every node answered or timed out.
    Poll {
        at: Duration,
        nodes: Vec<NodeId>,
        asked: BTreeMap<u64, NodeId>,
        reports: Reports,
        until: Duration,
    },
    Hold {
        node: NodeId,
        id: u64,
        until: Duration,
    },
}

/// What the driver needs from the control plane to carry out a command.
pub trait Leader {
    fn propose(&mut self, cmd: MetaCommand) -> Result<(), String>;
    fn meta(&self) -> Arc<ClusterMetadata>;
    fn health(&self, now: Duration) -> HealthSnapshot;
    fn send(&mut self, node: NodeId, msg: Msg);
}

pub struct RebalanceRun {
    sm: Rebalance,
    queue: VecDeque<Command>,
    waiting: Option<Waiting>,
    next_id: u64,
    /// How it ended, once it has.
    pub outcome: Option<Result<(), String>>,
    pub moves_done: usize,
}

impl RebalanceRun {
    pub fn start(mut sm: Rebalance) -> RebalanceRun {
        let queue = sm.start().into();
        RebalanceRun { sm, queue, waiting: None, next_id: 0, outcome: None, moves_done: 0 }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
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
                let id = self.id();
                leader.send(node, Msg::SeqnosAsk { id });
                self.waiting = Some(Waiting::Report { node, id, until: now + ANSWER_TIMEOUT });
            }
            Command::Propose(cmd) => {
                let r = leader.propose(cmd);
                self.feed(Event::Proposed(r), now);
            }
            Command::Observe => {
                let (meta, health) = (leader.meta(), leader.health(now));
                self.feed(Event::Observed { meta, health }, now);
            }
            Command::Poll { nodes, pause } => {
                let waiting = Waiting::Poll {
                    at: now + pause,
                    nodes,
                    asked: BTreeMap::new(),
                    reports: Reports::new(),
                    until: Duration::MAX,
                };
                self.waiting = Some(waiting);
            }
            Command::Hold { node, bucket: _, vbs } => {
                let id = self.id();
                leader.send(node, Msg::HoldAsk { id, hold: true, vbs, all: false });
                self.waiting = Some(Waiting::Hold { node, id, until: now + HOLD_TIMEOUT });
            }
            Command::Release { node, bucket: _, vbs } => {
                let id = self.id();
                leader.send(node, Msg::HoldAsk { id, hold: false, vbs, all: false });
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
        enum Due {
            Report(NodeId),
            Hold(NodeId),
            Ask(Vec<NodeId>),
            PollOver,
        }
        let due = match &self.waiting {
            Some(Waiting::Report { node, until, .. }) if *until <= now => Due::Report(*node),
            Some(Waiting::Hold { node, until, .. }) if *until <= now => Due::Hold(*node),
            Some(Waiting::Poll { at, nodes, until, .. }) if *until == Duration::MAX && *at <= now => {
                Due::Ask(nodes.clone())
            }
            Some(Waiting::Poll { until, .. }) if *until <= now => Due::PollOver,
            _ => return,
        };
        match due {
            Due::Report(node) => {
                self.feed(Event::Reported { node, report: Err(format!("node {node} did not answer")) }, now);
            }
            Due::Hold(node) => {
                self.feed(Event::Held { node, reply: Err(format!("node {node} did not answer the hold")) }, now);
            }
            Due::Ask(nodes) => {
                let ids: Vec<(NodeId, u64)> = nodes.into_iter().map(|n| (n, self.id())).collect();
                if let Some(Waiting::Poll { asked, until, .. }) = &mut self.waiting {
                    asked.extend(ids.iter().map(|(n, id)| (*id, *n)));
                    *until = now + ANSWER_TIMEOUT;
                }
                for (node, id) in ids {
                    leader.send(node, Msg::SeqnosAsk { id });
                }
                self.finish_poll_if_complete(leader, now);
            }
            Due::PollOver => {
                if let Some(Waiting::Poll { asked, reports, .. }) = &mut self.waiting {
                    for node in asked.values() {
                        reports.entry(*node).or_insert_with(|| Err(format!("node {node} did not answer")));
                    }
                }
                self.finish_poll(leader, now);
            }
        }
    }

    fn finish_poll_if_complete(&mut self, leader: &mut impl Leader, now: Duration) {
        if let Some(Waiting::Poll { asked, reports, until, .. }) = &self.waiting {
            if *until != Duration::MAX && asked.values().all(|n| reports.contains_key(n)) {
                self.finish_poll(leader, now);
            }
        }
    }

    fn finish_poll(&mut self, leader: &mut impl Leader, now: Duration) {
        let Some(Waiting::Poll { reports, .. }) = self.waiting.take() else { return };
        let health = leader.health(now);
        self.feed(Event::Polled { reports, health, stop_requested: false }, now);
    }

    /// A node's seqno report.
    pub fn reported(&mut self, node: NodeId, id: u64, report: SeqnoReport, leader: &mut impl Leader, now: Duration) {
        match &mut self.waiting {
            Some(Waiting::Report { node: n, id: asked, .. }) if *asked == id && *n == node => {
                self.feed(Event::Reported { node, report: Ok(report) }, now);
            }
            Some(Waiting::Poll { asked, reports, .. }) if asked.get(&id) == Some(&node) => {
                reports.insert(node, Ok(report));
                self.finish_poll_if_complete(leader, now);
            }
            _ => {}
        }
    }

    /// A node's answer to a hold.
    pub fn held(&mut self, node: NodeId, id: u64, reply: HoldReply, now: Duration) {
        if matches!(&self.waiting, Some(Waiting::Hold { node: n, id: asked, .. }) if *asked == id && *n == node) {
            self.feed(Event::Held { node, reply: Ok(reply) }, now);
        }
    }
}
