//! DCP on the KV port: producer connections that stream a bucket's vBuckets to replicas and external consumers
//! (`producer`), and the wake-ups the engine sends them (`hub`).

pub mod consumer;
mod hub;
pub(crate) mod producer;

pub use hub::DcpHub;
