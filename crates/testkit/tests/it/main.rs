//! Integration tests against a node running in the test process on real sockets.

mod helpers;
mod hostile_peers;
mod index_persistence;
mod kv_ops;
mod metadata;
mod metrics;
mod persistence;
mod process;
mod query;
mod replication;
mod security;
mod session;
mod timings;
mod tls;
mod wire;
mod with_meta;
