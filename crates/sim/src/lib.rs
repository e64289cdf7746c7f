//! Deterministic simulation of a settee cluster in one process (issue 21, item 2).
//!
//! Each node runs the real engine (`settee_engine::Bucket`: vBuckets, sync writes, the durability monitor,
//! promotion and rollback rules) and its replication through the real DCP state machines (`settee_dcp`'s
//! `ProducerConnection` and `ConsumerStream`, exchanging real encoded frames); the control plane runs the real
//! `ClusterMetadata` state machine, `HealthTable` and `AutoFailover` decisions, and rebalances through the real
//! `Rebalance` state machine ([`rebalance`]: seqno reports and takeover holds over the network, the nodes holding
//! with the real `Holds`) and graceful failovers through the real `GracefulFailover` ([`graceful`]). Around them, a thin driver per
//! node follows the server's async drivers step for step over a simulated network ([`net`]: seeded delays,
//! reordering across connections, partitions that cut TCP connections) and a simulated clock ([`clock`]: one
//! millisecond per step, wall-clock jumps). Clients do reads, `majority` durable writes and CAS on a few keys,
//! and every operation goes into a history ([`history`]) checked for linearizability per key.
//!
//! A run is a function of its seed: `Sim::new(SimConfig::new(seed)).run()` repeats exactly. See
//! docs/reliability.md ("Deterministic simulation") for what is simulated, what is not, and the figures.

pub mod asking;
pub mod clock;
pub mod control;
pub mod disk;
pub mod graceful;
pub mod history;
pub mod msg;
pub mod net;
pub mod node;
pub mod rebalance;
pub mod rng;
pub mod sim;

pub use sim::{Report, Sim, SimConfig};
