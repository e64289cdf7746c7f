//! DCP (Database Change Protocol) as sans-IO state machines: the producer side that streams a vBucket's changes to
//! replicas and external consumers, and the consumer side a replica runs. Events go in (requests, snapshots read
//! from the engine, acknowledgements, the current time), frames and decisions come out; a thin driver in the server
//! owns the sockets, the engine reads and the clock.
//!
//! Key types:
//! - [`ProducerConnection`]: one DCP_OPEN'd producer connection. Applies DCP_CONTROL settings ([`ProducerSettings`]),
//!   decides stream requests (rollback through the failover log), holds a [`ProducerStream`] per vBucket, sends
//!   their frames round-robin under connection-wide [`FlowControl`], sends NOOPs and detects a dead peer.
//! - [`ProducerStream`]: turns [`Snapshot`]s of [`DcpItem`]s into snapshot markers, items and STREAM_END, and
//!   asserts the stream invariants (seqnos strictly increase, every item inside its marker, nothing past the end).
//! - [`ConsumerStream`]: builds a replica's stream request, reads the reply ([`ConsumerEvent`]), validates each
//!   message into a [`ConsumerAction`], and computes the seqno acknowledgements of durable writes;
//!   [`ConsumerFlowControl`] says when to send BUFFER_ACKNOWLEDGEMENT.
//!
//! Time is passed in as a `Duration` since any fixed epoch: this crate never reads a clock. It depends only on
//! `settee-types`, `settee-mcbp`, `bytes` and `thiserror`: no tokio, no sockets, no engine.

// Time from a `Clock`, randomness from a seeded `Rng` (see clippy.toml): a violation fails `cargo clippy`.
#![deny(clippy::disallowed_methods)]

mod consumer_stream;
mod error;
mod flow_control;
mod high_prepared;
mod item;
mod producer_connection;
mod producer_stream;
mod settings;

pub use consumer_stream::{ConsumerAction, ConsumerEvent, ConsumerStream};
pub use error::{ConsumerError, OpenError, StreamError, StreamRequestError};
pub use flow_control::{ConsumerFlowControl, FlowControl};
pub use item::{DcpItem, Snapshot, SnapshotKind};
pub use producer_connection::{ProducerConnection, CONNECTION_NAME_BYTES_MAX, IDLE_TIMEOUT_DEFAULT};
pub use producer_stream::{ProducerStream, StreamOptions, STREAM_QUEUE_BYTES_SOFT_MAX};
pub use settings::{Priority, ProducerSettings, NOOP_INTERVAL_DEFAULT, NOOP_INTERVAL_MIN};
