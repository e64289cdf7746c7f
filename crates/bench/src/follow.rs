//! How one benchmark connection keeps up with the cluster map besides the configs NOT_MY_VBUCKET replies carry: it
//! fetches the config (GET_CLUSTER_CONFIG, on one node, pipelined with the requests) when a brief push announces a
//! newer revision, when a NOT_MY_VBUCKET reply carries no config, and while a node is lost; and it decides what a
//! lost node means. A node whose connection failed (or could not be opened) is lost: if the map stops listing it
//! within [`LOST_NODE_GRACE`] (a rebalance ejected it, a failover removed it), its requests simply went elsewhere;
//! if it is still listed and still unreachable then, the connection fails as it always did.
//!
//! Sans-IO: the driver reports events and asks what to send; the follower never touches a socket.

use std::time::Duration;

use settee_client::NodeError;
use tokio::time::Instant;

use crate::link::NodeState;

/// How long a lost node may stay in the map before its connection's failure ends the benchmark connection.
pub(crate) const LOST_NODE_GRACE: Duration = Duration::from_secs(2);
/// While a node is lost: how often the config is fetched again and the node's connection reopened.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct LostNode {
    error: NodeError,
    give_up_at: Instant,
}

/// Where a config fetch should go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FetchFrom {
    /// The node that announced the new revision (the one sure to have it).
    Node(usize),
    /// Any node with a connection.
    Any,
}

#[derive(Debug, Default)]
pub(crate) struct Follower {
    /// The GET_CLUSTER_CONFIG in flight: its node and opaque. One at a time.
    fetching: Option<(usize, u32)>,
    /// A fetch to send.
    wanted: Option<FetchFrom>,
    /// Fetch again once the one in flight is answered: a push announced a revision it may predate.
    again: bool,
    /// While nodes are lost: the next fetch and reopen attempt.
    poll_at: Option<Instant>,
    lost: Vec<LostNode>,
}

impl Follower {
    /// A config is wanted, preferably from `from`.
    pub(crate) fn want(&mut self, from: FetchFrom) {
        if self.fetching.is_some() {
            self.again = true;
        } else if self.wanted.is_none() || from != FetchFrom::Any {
            self.wanted = Some(from);
        }
    }

    /// A brief push from `node` announced `rev` (epoch, revision) while the link holds `current`.
    pub(crate) fn pushed(&mut self, node: usize, rev: (i64, i64), current: (i64, i64)) {
        if rev > current {
            self.want(FetchFrom::Node(node));
        }
    }

    /// The fetch to send now, if any.
    pub(crate) fn to_fetch(&self) -> Option<FetchFrom> {
        self.wanted.filter(|_| self.fetching.is_none())
    }

    pub(crate) fn sent(&mut self, node: usize, opaque: u32) {
        self.fetching = Some((node, opaque));
        self.wanted = None;
    }

    /// The fetch in flight: node and opaque.
    pub(crate) fn fetching(&self) -> Option<(usize, u32)> {
        self.fetching
    }

    /// The fetch in flight was answered.
    pub(crate) fn answered(&mut self) {
        self.fetching = None;
        if std::mem::take(&mut self.again) {
            self.want(FetchFrom::Any);
        }
    }

    /// Node `node`'s connection failed or was closed: a fetch in flight on it will not be answered.
    fn forget_fetch_on(&mut self, node: usize) {
        if self.fetching.is_some_and(|(n, _)| n == node) {
            self.fetching = None;
            self.want(FetchFrom::Any);
        }
        if self.wanted == Some(FetchFrom::Node(node)) {
            self.wanted = Some(FetchFrom::Any);
        }
    }

    /// `error`'s node lost its connection, or none could be opened to it: fetch the config now to learn whether it
    /// left the map. A node already lost keeps its first deadline.
    pub(crate) fn lost(&mut self, error: NodeError, now: Instant, grace: Duration) {
        self.forget_fetch_on(error.node);
        self.want(FetchFrom::Any);
        self.poll_at.get_or_insert(now + POLL_INTERVAL);
        if !self.lost.iter().any(|l| l.error.addr == error.addr) {
            self.lost.push(LostNode { error, give_up_at: now + grace });
        }
    }

    /// The timer: while nodes are lost, a config fetch every [`POLL_INTERVAL`]. True when an attempt to reopen their
    /// connections is due as well.
    pub(crate) fn tick(&mut self, now: Instant) -> bool {
        if self.lost.is_empty() {
            self.poll_at = None;
            return false;
        }
        match self.poll_at {
            Some(at) if at > now => false,
            _ => {
                self.want(FetchFrom::Any);
                self.poll_at = Some(now + POLL_INTERVAL);
                true
            }
        }
    }

    /// When the follower next needs the driver: a poll, or a lost node's deadline.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        self.lost.iter().map(|l| l.give_up_at).chain(self.poll_at).min()
    }

    /// The node indexes changed (see [`settee_client::Reconciled::moved`]).
    pub(crate) fn remap(&mut self, moved: &[Option<usize>]) {
        let new_index = |n: usize| moved.get(n).copied().flatten();
        if let Some((node, opaque)) = self.fetching {
            match new_index(node) {
                Some(n) => self.fetching = Some((n, opaque)),
                None => self.forget_fetch_on(node),
            }
        }
        if let Some(FetchFrom::Node(node)) = self.wanted {
            self.wanted = Some(new_index(node).map_or(FetchFrom::Any, FetchFrom::Node));
        }
    }

    /// Forgets the lost nodes that left the map or are reachable again; returns the failure of one that is still
    /// listed and unreachable past its deadline.
    pub(crate) fn settle(&mut self, state: impl Fn(&str) -> NodeState, now: Instant) -> Result<(), NodeError> {
        self.lost.retain(|l| state(&l.error.addr) == NodeState::Down);
        match self.lost.iter().position(|l| now >= l.give_up_at) {
            Some(i) => Err(self.lost.swap_remove(i).error),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_client::ClientError;

    fn closed(node: usize, addr: &str) -> NodeError {
        NodeError { node, addr: addr.into(), source: ClientError::Closed }
    }

    /// A brief push with a newer revision asks for a fetch from the pushing node; an older or equal one does not;
    /// a push while a fetch is in flight asks for one more fetch after it.
    #[test]
    fn newer_pushes_fetch_once_at_a_time() {
        let mut f = Follower::default();
        f.pushed(1, (1, 5), (1, 5));
        assert_eq!(f.to_fetch(), None);
        f.pushed(1, (1, 6), (1, 5));
        assert_eq!(f.to_fetch(), Some(FetchFrom::Node(1)));
        f.sent(1, 77);
        assert_eq!((f.to_fetch(), f.fetching()), (None, Some((1, 77))));
        f.pushed(0, (1, 7), (1, 5));
        assert_eq!(f.to_fetch(), None, "one fetch at a time");
        f.answered();
        assert_eq!((f.to_fetch(), f.fetching()), (Some(FetchFrom::Any), None), "the push asked for another");
        f.sent(0, 78);
        f.answered();
        assert_eq!(f.to_fetch(), None);
    }

    /// A lost node that the map stops listing is forgotten without error; one still listed and down past the
    /// grace is the connection's failure; one that is reachable again is forgotten.
    #[test]
    fn a_lost_node_fails_the_connection_only_if_it_stays_listed() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        let mut f = Follower::default();
        f.lost(closed(1, "b:1"), t0, grace);
        f.lost(closed(2, "c:1"), t0, grace);
        f.lost(closed(3, "d:1"), t0, grace);
        assert_eq!(f.to_fetch(), Some(FetchFrom::Any), "learn at once whether they left");
        let state = |addr: &str| match addr {
            "b:1" => NodeState::Unlisted,
            "c:1" => NodeState::Up,
            _ => NodeState::Down,
        };
        assert!(f.settle(state, t0 + Duration::from_secs(1)).is_ok());
        assert!(!f.lost.is_empty(), "d:1 is still listed and down");
        f.lost(closed(3, "d:1"), t0 + Duration::from_secs(1), grace);
        assert_eq!(f.wake_at(), Some(t0 + POLL_INTERVAL), "polls before the first deadline");
        let e = f.settle(state, t0 + grace).unwrap_err();
        assert_eq!(e.addr, "d:1", "the first deadline holds");
        assert!(f.lost.is_empty());
    }

    /// While a node is lost the timer asks for a fetch and a reopen every poll interval, and stops once none is.
    #[test]
    fn polls_while_a_node_is_lost() {
        let t0 = Instant::now();
        let mut f = Follower::default();
        assert!(!f.tick(t0));
        f.lost(closed(0, "a:1"), t0, Duration::from_secs(2));
        f.sent(1, 5);
        assert!(!f.tick(t0 + POLL_INTERVAL / 2));
        f.answered();
        assert_eq!(f.to_fetch(), None);
        assert!(f.tick(t0 + POLL_INTERVAL));
        assert_eq!(f.to_fetch(), Some(FetchFrom::Any));
        assert!(f.settle(|_| NodeState::Unlisted, t0 + POLL_INTERVAL).is_ok());
        assert!(!f.tick(t0 + POLL_INTERVAL * 3) && f.wake_at().is_none());
    }

    /// When the node list changes, a fetch in flight follows its node to its new index, or is forgotten (and
    /// wanted again) if its node left.
    #[test]
    fn fetch_follows_node_indexes() {
        let mut f = Follower::default();
        f.sent(2, 9);
        f.remap(&[None, Some(0), Some(1)]);
        assert_eq!(f.fetching(), Some((1, 9)));
        f.remap(&[Some(0), None]);
        assert_eq!((f.fetching(), f.to_fetch()), (None, Some(FetchFrom::Any)));
        let mut g = Follower::default();
        g.pushed(1, (1, 2), (1, 1));
        g.remap(&[Some(1), Some(0)]);
        assert_eq!(g.to_fetch(), Some(FetchFrom::Node(0)));
    }
}
