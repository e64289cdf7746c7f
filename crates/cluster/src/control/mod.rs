//! The control plane as sans-IO state machines (DESIGN §6): events in, commands out, time passed in. No I/O, no
//! tokio, no clock of their own: the server's drivers run the commands (proposals, node-to-node calls) and feed the
//! answers back, so every decision can be tested by building a state, applying one event and asserting the
//! commands, and replayed by a simulator.
//!
//! - [`rebalance`]: a whole rebalance (kept copies of delta-recovering nodes, activation, the plan, every bucket's
//!   moves, the end), with [`moves`] driving one bucket's move queue and [`recovery`] the delta/full decisions.
//! - [`graceful_failover`]: hold a live node's actives, wait for the promoted replicas, fail it over.
//! - [`auto_failover`]: the leader's decision to fail a silent node over, or to refuse.
//! - [`health`]: when each peer last answered, and [`NodeHealth`].
//! - [`holds`]: the vBuckets a node holds for a takeover, and their lease.
//! - [`rolling_restart`]: restart (or upgrade) every node in turn without clients seeing an error.
//! - [`restart`]: which active copies a restarted member hands over to replicas that are ahead of it.
//!
//! Times are `Duration`s since an arbitrary origin, read by the driver from its monotonic clock.

pub mod auto_failover;
pub mod graceful_failover;
pub mod health;
pub mod holds;
mod moves;
pub mod rebalance;
pub mod recovery;
pub mod restart;
pub mod rolling_restart;
#[cfg(test)]
mod testing;

pub use health::{HealthSnapshot, HealthTable, NodeHealth, PeerHealth};
pub use holds::{Holds, HOLD_LEASE};
