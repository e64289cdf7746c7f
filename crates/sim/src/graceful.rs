//! The leader's side of a graceful failover in the simulation: the real
//! `settee_cluster::control::graceful_failover::GracefulFailover` state machine, its hold and seqno reports asked
//! of the nodes over the simulated network with the server's timeouts, its failover applied to the metadata.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use settee_cluster::control::graceful_failover::{Command, Event, GracefulFailover};
use settee_cluster::peer::{HoldReply, SeqnoReport};
use settee_cluster::{MetaCommand, NodeId};

use crate::msg::Msg;
use crate::rebalance::Leader;

const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
const HOLD_TIMEOUT: Duration = Duration::from_secs(20);

enum Waiting {
    Hold {
        id: u64,
        until: Duration,
    },
    Poll {
        at: Duration,
        nodes: Vec<NodeId>,
        asked: BTreeMap<u64, NodeId>,
        reports: BTreeMap<NodeId, Result<SeqnoReport, String>>,
        until: Duration,
    },
}

pub struct GracefulRun {
    pub node: NodeId,
    sm: GracefulFailover,
    queue: VecDeque<Command>,
    waiting: Option<Waiting>,
    next_id: u64,
    pub outcome: Option<Result<(), String>>,
}

impl GracefulRun {
    pub fn start(node: NodeId, mut sm: GracefulFailover) -> GracefulRun {
        let queue = sm.start().into();
        GracefulRun { node, sm, queue, waiting: None, next_id: 0, outcome: None }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        // Apart from the rebalance's ids, which count up from 1.
        self.next_id | (1 << 62)
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
                    let id = self.id();
                    leader.send(node, Msg::HoldAsk { id, hold: request.hold, vbs: Vec::new(), all: true });
                    self.waiting = Some(Waiting::Hold { id, until: now + HOLD_TIMEOUT });
                }
                Command::Poll { nodes, pause } => {
                    let waiting = Waiting::Poll {
                        at: now + pause,
                        nodes,
                        asked: BTreeMap::new(),
                        reports: BTreeMap::new(),
                        until: Duration::MAX,
                    };
                    self.waiting = Some(waiting);
                }
                Command::FailOver { node } => {
                    let r = leader.propose(MetaCommand::Failover { nodes: vec![node] });
                    self.feed(Event::FailedOver(r), now);
                }
                Command::Release { node } => {
                    let id = self.id();
                    leader.send(node, Msg::HoldAsk { id, hold: false, vbs: Vec::new(), all: true });
                }
                Command::Finish(r) => self.outcome = Some(r.map_err(|e| e.to_string())),
            }
        }
    }

    fn expire(&mut self, leader: &mut impl Leader, now: Duration) {
        let (hold_over, ask, poll_over) = match &self.waiting {
            Some(Waiting::Hold { until, .. }) => (*until <= now, None, false),
            Some(Waiting::Poll { at, nodes, until, .. }) if *until == Duration::MAX && *at <= now => {
                (false, Some(nodes.clone()), false)
            }
            Some(Waiting::Poll { until, .. }) => (false, None, *until <= now),
            None => return,
        };
        if hold_over {
            self.feed(Event::Held(Err("the node did not answer the hold".into())), now);
        } else if let Some(nodes) = ask {
            let sends: Vec<(NodeId, u64)> = nodes.into_iter().map(|n| (n, self.id())).collect();
            if let Some(Waiting::Poll { asked, until, .. }) = &mut self.waiting {
                asked.extend(sends.iter().map(|(n, id)| (*id, *n)));
                *until = now + ANSWER_TIMEOUT;
            }
            for (node, id) in sends {
                leader.send(node, Msg::SeqnosAsk { id });
            }
        } else if poll_over {
            if let Some(Waiting::Poll { asked, reports, .. }) = &mut self.waiting {
                for node in asked.values() {
                    reports.entry(*node).or_insert_with(|| Err(format!("node {node} did not answer")));
                }
            }
            self.finish_poll(now);
        }
    }

    fn finish_poll(&mut self, now: Duration) {
        let Some(Waiting::Poll { reports, .. }) = self.waiting.take() else { return };
        self.feed(Event::Polled(reports), now);
    }

    /// A seqno report, if it answers this failover's poll.
    pub fn reported(&mut self, node: NodeId, id: u64, report: SeqnoReport, now: Duration) -> bool {
        let Some(Waiting::Poll { asked, reports, until, .. }) = &mut self.waiting else { return false };
        if asked.get(&id) != Some(&node) {
            return false;
        }
        reports.insert(node, Ok(report));
        if *until != Duration::MAX && asked.values().all(|n| reports.contains_key(n)) {
            self.finish_poll(now);
        }
        true
    }

    /// The node's answer to the hold.
    pub fn held(&mut self, id: u64, reply: HoldReply, now: Duration) -> bool {
        if matches!(&self.waiting, Some(Waiting::Hold { id: asked, .. }) if *asked == id) {
            self.feed(Event::Held(Ok(reply)), now);
            return true;
        }
        false
    }
}
