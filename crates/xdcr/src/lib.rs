//! The XDCR replicator core: what one replication of one source node does, as a sans-IO state machine (events in,
//! commands out, time passed in), so it is tested the openraft way and a simulator can drive it.
//!
//! - [`Replicator`]: per source vBucket the resume point (checkpoint seqno + vbuuid, checked against the vBucket's
//!   failover log: a history that diverged reads again from the rollback point), the changes read but not yet
//!   acknowledged by the target, and the *through* seqno below which every change is on the target; per target
//!   node a bounded queue of writes and a window of writes in flight, sent in batches.
//! - Target answers: success; a lost conflict (KEY_EEXISTS: the target holds the same or a newer version) is
//!   counted, never retried; TMPFAIL and other errors are retried with exponential backoff on the caller's clock;
//!   NOT_MY_VBUCKET and a node that went down park the write and ask for a fresh map, then route it again.
//! - [`Command`]s ask the driver to read a source vBucket from a seqno, send a batch to a node, save checkpoints, or
//!   refresh the target's map.
//!
//! It depends on `settee-types` only: no tokio, no sockets, no engine. The driver lives in the server (`xdcr/`).

#![deny(clippy::disallowed_methods)]

mod change;
mod error;
mod event;
mod replicator;
mod settings;
mod stats;
mod vb_progress;

#[cfg(test)]
mod replicator_tests;

pub use change::{Change, ChangeKind, Write};
pub use error::XdcrError;
pub use event::{Checkpoint, Command, Event, Outcome};
pub use replicator::Replicator;
pub use settings::Settings;
pub use stats::{ByKind, Stats};
