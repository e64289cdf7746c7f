//! The simulated network: every message gets a delivery time from the seeded generator (a base delay plus jitter,
//! and sometimes a long stall), so messages on different connections overtake each other; messages on one
//! connection keep their order, as TCP keeps it. Partitions block directions between nodes: a message sent or due
//! on a blocked direction is dropped, and the simulation breaks the connections that cross it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::rng::SimRng;

/// Who sends and receives: a node (by index), a client, or the control plane (the metadata leader, which runs with
/// the majority of the nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Node(usize),
    Client(usize),
    Control,
}

/// A message in flight.
#[derive(Debug)]
pub struct Envelope<M> {
    pub from: Endpoint,
    pub to: Endpoint,
    /// The connection it travels on, if it keeps order with others (DCP connections).
    pub conn: Option<u64>,
    pub msg: M,
}

/// How slow and uneven the network is.
#[derive(Clone, Copy, Debug)]
pub struct NetConfig {
    pub base: Duration,
    pub jitter: Duration,
    /// Chance per mille that a message stalls for up to `stall`.
    pub stall_per_mille: u64,
    pub stall: Duration,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            base: Duration::from_micros(200),
            jitter: Duration::from_millis(2),
            stall_per_mille: 5,
            stall: Duration::from_millis(300),
        }
    }
}

pub struct Net<M> {
    config: NetConfig,
    queue: BTreeMap<(Duration, u64), Envelope<M>>,
    seq: u64,
    /// Blocked directions between nodes: (from, to).
    blocked: BTreeSet<(usize, usize)>,
    /// The last delivery time per connection and direction, so that later messages never overtake.
    last: HashMap<(u64, Endpoint), Duration>,
    pub sent: u64,
    pub dropped: u64,
}

impl<M> Net<M> {
    pub fn new(config: NetConfig) -> Net<M> {
        Net {
            config,
            queue: BTreeMap::new(),
            seq: 0,
            blocked: BTreeSet::new(),
            last: HashMap::new(),
            sent: 0,
            dropped: 0,
        }
    }

    pub fn set_config(&mut self, config: NetConfig) {
        self.config = config;
    }

    /// Whether messages from `from` can reach `to` now.
    pub fn passes(&self, from: Endpoint, to: Endpoint) -> bool {
        match (from, to) {
            (Endpoint::Node(a), Endpoint::Node(b)) => !self.blocked.contains(&(a, b)),
            _ => true,
        }
    }

    pub fn block(&mut self, from: usize, to: usize) {
        self.blocked.insert((from, to));
    }

    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    pub fn is_partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// Whether node `n` can talk both ways with at least `need` nodes (itself included).
    pub fn reaches(&self, n: usize, nodes: usize, need: usize) -> bool {
        let both = |m: usize| m == n || (!self.blocked.contains(&(n, m)) && !self.blocked.contains(&(m, n)));
        (0..nodes).filter(|m| both(*m)).count() >= need
    }

    pub fn send(&mut self, rng: &mut SimRng, now: Duration, env: Envelope<M>) {
        self.sent += 1;
        if !self.passes(env.from, env.to) {
            self.dropped += 1;
            return;
        }
        let jitter = rng.below(self.config.jitter.as_micros() as u64 + 1);
        let mut at = now + self.config.base + Duration::from_micros(jitter);
        if rng.chance(self.config.stall_per_mille) {
            at += Duration::from_micros(rng.below(self.config.stall.as_micros() as u64 + 1));
        }
        if let Some(conn) = env.conn {
            let last = self.last.entry((conn, env.from)).or_default();
            at = at.max(*last);
            *last = at;
        }
        self.seq += 1;
        self.queue.insert((at, self.seq), env);
    }

    /// The messages due by `now`, in delivery order; those on a direction blocked meanwhile are dropped.
    pub fn due(&mut self, now: Duration) -> Vec<Envelope<M>> {
        let later = self.queue.split_off(&(now + Duration::from_nanos(1), 0));
        let due = std::mem::replace(&mut self.queue, later);
        let mut out = Vec::with_capacity(due.len());
        for (_, env) in due {
            if self.passes(env.from, env.to) {
                out.push(env);
            } else {
                self.dropped += 1;
            }
        }
        out
    }

    /// Drops every message to or from `node` (it crashed), and those of the connections in `conns`.
    pub fn drop_where(&mut self, f: impl Fn(&Envelope<M>) -> bool) {
        let before = self.queue.len();
        self.queue.retain(|_, e| !f(e));
        self.dropped += (before - self.queue.len()) as u64;
    }

    /// Whether a message of connection `conn` is in flight.
    pub fn carries(&self, conn: u64) -> bool {
        self.queue.values().any(|e| e.conn == Some(conn))
    }

    /// When the next message is due, if any.
    pub fn next_due(&self) -> Option<Duration> {
        self.queue.keys().next().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(conn: Option<u64>, msg: u32) -> Envelope<u32> {
        Envelope { from: Endpoint::Node(0), to: Endpoint::Node(1), conn, msg }
    }

    /// Messages on one connection arrive in the order they were sent whatever their delays; a blocked direction
    /// drops what is sent on it and what was in flight, and healing lets messages through again.
    #[test]
    fn connections_keep_order_and_partitions_drop() {
        let mut rng = SimRng::new(3);
        let mut net = Net::new(NetConfig { stall_per_mille: 300, ..NetConfig::default() });
        for i in 0..200 {
            net.send(&mut rng, Duration::ZERO, env(Some(1), i));
        }
        let got: Vec<u32> = net.due(Duration::from_secs(10)).into_iter().map(|e| e.msg).collect();
        assert_eq!(got, (0..200).collect::<Vec<_>>());
        net.send(&mut rng, Duration::ZERO, env(None, 1));
        net.block(0, 1);
        net.send(&mut rng, Duration::ZERO, env(None, 2));
        assert!(net.due(Duration::from_secs(10)).is_empty());
        assert_eq!(net.dropped, 2);
        assert!(!net.reaches(0, 3, 3) && net.reaches(0, 3, 2));
        net.heal();
        net.send(&mut rng, Duration::ZERO, env(None, 3));
        assert_eq!(net.due(Duration::from_secs(10)).len(), 1);
    }
}
