//! An async smart client for the KV port, used by tests and by `settee bench`.
//!
//! - [`Connection`]: one socket. `connect` runs HELLO, SASL PLAIN and SELECT_BUCKET; `call`/`send` do one request
//!   at a time; `queue`, `flush`, `fill` and `next_response` pipeline requests and decode replies in place.
//! - [`Cluster`]: bootstrap from a seed (GET_CLUSTER_CONFIG after the handshake), collection ids
//!   (GET_COLLECTION_ID), and [`NodeConnections`], one connection per KV node with vBucket routing from the
//!   config's `vBucketMap`, `serverList` and `nodesExt` ([`ClusterConfig`]).
//!
//! It depends on the codec (`settee-mcbp`) and tokio only; it knows nothing of the server.

mod cluster;
mod config;
mod connection;

pub use cluster::{resolve, BootstrapOptions, Cluster, ConfigChange, NodeConnections, Route, SDK_FEATURES};
pub use config::{vbucket_of, ClusterConfig};
pub use connection::{ClientError, Connection, OwnedResponse};
