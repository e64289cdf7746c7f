//! An async smart client for the KV port, used by tests and by `settee bench`.
//!
//! - [`Connection`]: one socket. `connect` runs HELLO, SASL PLAIN and SELECT_BUCKET; `call`/`send` do one request
//!   at a time; `queue`, `flush`, `fill` and `next_response` pipeline requests and decode replies in place.
//! - [`Cluster`]: bootstrap from a seed (GET_CLUSTER_CONFIG after the handshake), collection ids
//!   (GET_COLLECTION_ID), newer configs from the server ([`ConfigChange`]), and [`NodeConnections`], one connection
//!   per KV node with vBucket routing from the config's `vBucketMap`, `serverList` and `nodesExt`
//!   ([`ClusterConfig`]), reconciled with a new node list by [`Cluster::reconcile`].
//! - [`Auth`]: PLAIN, SCRAM-SHA512 ([`ScramClient`], sans-IO) or a TLS client certificate.
//! - [`dial`]: a TCP connection, optionally from a chosen local address (`Connection::connect_from`).
//! - [`TlsClient`]: the CAs a TLS connection trusts (`Connection::connect_with`); the connection then runs over a
//!   [`KvStream`], plain or TLS, which `into_parts` hands to callers that speak DCP themselves.
//!
//! It depends on the codec (`settee-mcbp`), tokio and rustls only; it knows nothing of the server.

mod cluster;
mod config;
mod connection;
mod dial;
mod node_connections;
mod scram;
mod stream;
mod tls;

pub use cluster::{host_of, resolve, BootstrapOptions, Cluster, ConfigChange, SDK_FEATURES};
pub use config::{service_endpoints, vbucket_of, ClusterConfig};
pub use connection::{Auth, ClientError, Connection, OwnedResponse, WithMetaWrite};
pub use dial::dial;
pub use node_connections::{NodeConnections, NodeError, Reconciled, Route};
pub use scram::{ScramClient, ScramError};
pub use stream::KvStream;
pub use tls::{TlsClient, TlsSetupError};
