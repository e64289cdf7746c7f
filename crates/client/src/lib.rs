//! An async client for the KV port, used by tests and (later) by `settee bench`: connect, HELLO, SASL PLAIN,
//! SELECT_BUCKET, then pipelined requests matched to replies by opaque.
//!
//! It depends on the codec (`settee-mcbp`) and tokio only; it knows nothing of the server.

mod connection;

pub use connection::{ClientError, Connection, OwnedResponse};
