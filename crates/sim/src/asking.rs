//! What the simulated leader waits for from the nodes, as the server's peer calls do: one answer (a seqno report
//! or a hold) by a deadline, or a round of seqno reports asked after a pause and over when every node answered or
//! its time is up. Shared by the rebalance and graceful-failover drivers.

use std::collections::BTreeMap;
use std::time::Duration;

use settee_cluster::peer::SeqnoReport;
use settee_cluster::NodeId;

use crate::msg::Msg;

/// How long a node has to answer a seqno report (the server's peer-call timeout).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a node has to answer a hold (it finishes its durable writes in flight first).
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(20);

/// Seqno reports by node, or why a node gave none.
pub type Reports = BTreeMap<NodeId, Result<SeqnoReport, String>>;

/// The request ids of one driver: counting up, tagged so that two drivers' answers never mix.
pub struct Ids {
    next: u64,
    tag: u64,
}

impl Ids {
    pub fn new(tag: u64) -> Ids {
        Ids { next: 0, tag }
    }

    pub fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next | self.tag
    }
}

/// One answer awaited from `node`.
pub struct Awaited {
    pub node: NodeId,
    id: u64,
    until: Duration,
}

impl Awaited {
    pub fn new(node: NodeId, id: u64, now: Duration, timeout: Duration) -> Awaited {
        Awaited { node, id, until: now + timeout }
    }

    pub fn answered_by(&self, node: NodeId, id: u64) -> bool {
        self.node == node && self.id == id
    }

    pub fn overdue(&self, now: Duration) -> bool {
        self.until <= now
    }
}

/// A round of seqno reports from `nodes`, asked once `at` is reached.
pub struct PollRound {
    at: Duration,
    nodes: Vec<NodeId>,
    asked: BTreeMap<u64, NodeId>,
    reports: Reports,
    /// Set when the round is asked: when it gives up on the nodes that did not answer.
    until: Option<Duration>,
}

impl PollRound {
    pub fn new(nodes: Vec<NodeId>, now: Duration, pause: Duration) -> PollRound {
        PollRound { at: now + pause, nodes, asked: BTreeMap::new(), reports: Reports::new(), until: None }
    }

    /// Asks every node, once the pause is over.
    pub fn ask_if_due(&mut self, now: Duration, ids: &mut Ids, mut send: impl FnMut(NodeId, Msg)) {
        if self.until.is_some() || now < self.at {
            return;
        }
        self.until = Some(now + ANSWER_TIMEOUT);
        for node in self.nodes.iter().copied() {
            let id = ids.fresh();
            self.asked.insert(id, node);
            send(node, Msg::SeqnosAsk { id });
        }
    }

    /// Takes `report` if it answers this round; gives it back otherwise.
    pub fn answer(&mut self, node: NodeId, id: u64, report: SeqnoReport) -> Option<SeqnoReport> {
        if self.asked.get(&id) != Some(&node) {
            return Some(report);
        }
        self.reports.insert(node, Ok(report));
        None
    }

    /// The round's reports once every node answered, or once its time is up (the missing ones as errors).
    pub fn finished(&mut self, now: Duration) -> Option<Reports> {
        let until = self.until?;
        let complete = self.asked.values().all(|n| self.reports.contains_key(n));
        if !complete && now < until {
            return None;
        }
        for node in self.asked.values() {
            self.reports.entry(*node).or_insert_with(|| Err(format!("node {node} did not answer")));
        }
        Some(std::mem::take(&mut self.reports))
    }
}
