//! What one node knows of its peers' health: when each last answered a probe. Pure: the driver probes and passes
//! the time in; `/pools/default`, the rebalance and auto-failover read the table.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::vbmap::NodeId;

/// A peer unseen this long is reported unhealthy.
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(3);

/// Couchbase's node `status` in `/pools/default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeHealth {
    /// Answered a probe within [`UNHEALTHY_AFTER`] (a node is always healthy to itself).
    Healthy,
    /// Has not answered within [`UNHEALTHY_AFTER`] (of its last answer, or of when this node heard of it).
    Unhealthy,
    /// Has not answered any probe yet, and was heard of less than [`UNHEALTHY_AFTER`] ago.
    Warmup,
}

impl NodeHealth {
    /// The spelling of ns_server's `status` field.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeHealth::Healthy => "healthy",
            NodeHealth::Unhealthy => "unhealthy",
            NodeHealth::Warmup => "warmup",
        }
    }
}

/// One peer's health at one moment, as the control-plane state machines receive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerHealth {
    pub status: NodeHealth,
    /// How long since the peer last answered (or since this node first heard of it).
    pub unseen: Duration,
}

/// The health of several peers at one moment; a peer missing from it counts as just seen.
pub type HealthSnapshot = BTreeMap<NodeId, PeerHealth>;

/// How long `node` has gone unseen in `health` (zero when it is not listed).
pub fn unseen_in(health: &HealthSnapshot, node: NodeId) -> Duration {
    health.get(&node).map_or(Duration::ZERO, |h| h.unseen)
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    /// When the peer last answered, or when this node first heard of it.
    at: Duration,
    answered: bool,
}

/// When each peer last answered a probe. Times are the driver's monotonic clock readings.
#[derive(Clone, Debug, Default)]
pub struct HealthTable {
    seen: BTreeMap<NodeId, Seen>,
}

impl HealthTable {
    /// Starts the unseen clock of every node in `nodes` not known yet (a node that never answers is unseen from the
    /// moment this node heard of it, not from the beginning of time).
    pub fn heard_of(&mut self, nodes: impl IntoIterator<Item = NodeId>, now: Duration) {
        for n in nodes {
            self.seen.entry(n).or_insert(Seen { at: now, answered: false });
        }
    }

    /// Forgets every node not in `members` (the nodes the metadata lists now): a node removed and later added back
    /// starts afresh as warming up, instead of reading as unhealthy from its last answer before its removal until
    /// the next probe.
    pub fn keep_only(&mut self, members: &std::collections::BTreeSet<NodeId>) {
        self.seen.retain(|n, _| members.contains(n));
    }

    /// `node` answered a probe at `now`.
    pub fn answered(&mut self, node: NodeId, now: Duration) {
        self.seen.insert(node, Seen { at: now, answered: true });
    }

    /// How long `node` has not answered (zero for a node not heard of).
    pub fn unseen_for(&self, node: NodeId, now: Duration) -> Duration {
        self.seen.get(&node).map_or(Duration::ZERO, |s| now.saturating_sub(s.at))
    }

    /// `node`'s status as `me` reports it.
    pub fn status(&self, node: NodeId, me: NodeId, now: Duration) -> NodeHealth {
        match self.seen.get(&node) {
            _ if node == me => NodeHealth::Healthy,
            None => NodeHealth::Warmup,
            Some(s) if now.saturating_sub(s.at) >= UNHEALTHY_AFTER => NodeHealth::Unhealthy,
            Some(s) if s.answered => NodeHealth::Healthy,
            Some(_) => NodeHealth::Warmup,
        }
    }

    /// Every known peer's health at `now` (and `me`, healthy).
    pub fn snapshot(&self, me: NodeId, now: Duration) -> HealthSnapshot {
        let mut all: HealthSnapshot = self
            .seen
            .keys()
            .map(|n| (*n, PeerHealth { status: self.status(*n, me, now), unseen: self.unseen_for(*n, now) }))
            .collect();
        all.insert(me, PeerHealth { status: NodeHealth::Healthy, unseen: Duration::ZERO });
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A peer is warming up until its first answer, healthy while it keeps answering, unhealthy once it has been
    /// silent for UNHEALTHY_AFTER (also when it never answered); its unseen time runs from its last answer, or from
    /// when this node heard of it; this node is always healthy to itself.
    #[test]
    fn a_peer_is_unhealthy_once_silent_past_the_limit() {
        let mut t = HealthTable::default();
        t.heard_of([2, 3], secs(10));
        t.heard_of([2], secs(50));
        assert_eq!(t.status(2, 1, secs(11)), NodeHealth::Warmup);
        assert_eq!(t.unseen_for(2, secs(15)), secs(5), "from when it was first heard of");
        t.answered(2, secs(20));
        assert_eq!(t.status(2, 1, secs(22)), NodeHealth::Healthy);
        assert_eq!(t.status(2, 1, secs(23)), NodeHealth::Unhealthy);
        assert_eq!(t.unseen_for(2, secs(30)), secs(10));
        assert_eq!(t.unseen_for(9, secs(30)), Duration::ZERO, "a node not heard of is not unseen");
        assert_eq!(t.status(1, 1, secs(99)), NodeHealth::Healthy);
        let snap = t.snapshot(1, secs(30));
        assert_eq!(snap[&2], PeerHealth { status: NodeHealth::Unhealthy, unseen: secs(10) });
        assert_eq!(snap[&3].status, NodeHealth::Unhealthy, "never answered in 20 s");
        assert_eq!(t.status(3, 1, secs(12)), NodeHealth::Warmup);
        assert_eq!(t.status(7, 1, secs(12)), NodeHealth::Warmup, "not heard of yet");
        assert_eq!(snap[&1].status, NodeHealth::Healthy);
        assert_eq!(unseen_in(&snap, 3), secs(20));
        assert_eq!(unseen_in(&snap, 9), Duration::ZERO);
    }

    /// Regression (couchbase-cli test: `server-add` of a node rebalanced out, then `rebalance` at once, refused with
    /// "node ... is unreachable"): the table kept the removed node's last answer, so the node added back read as
    /// unhealthy until the next probe. Forgetting nodes that left makes it warm up afresh.
    #[test]
    fn a_node_removed_and_added_back_is_not_unhealthy_before_its_first_probe() {
        let mut t = HealthTable::default();
        t.heard_of([2, 3], secs(10));
        t.answered(3, secs(10));
        t.keep_only(&[2].into_iter().collect());
        t.heard_of([2, 3], secs(60));
        assert_eq!(t.status(3, 1, secs(60)), NodeHealth::Warmup);
        assert_eq!(t.unseen_for(3, secs(61)), secs(1));
        assert_eq!(t.status(2, 1, secs(60)), NodeHealth::Unhealthy, "a node that stayed keeps its history");
    }
}
