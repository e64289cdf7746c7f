//! DCP on the KV port: producer connections that stream a bucket's vBuckets to replicas and external consumers
//! (`producer`), and the wake-ups the engine sends them (`hub`).

pub mod consumer;
mod hub;
pub(crate) mod producer;
mod replication_producers;

pub use hub::DcpHub;
pub(crate) use hub::StreamWaker;
pub(crate) use hub::{hold_wakes, release_wakes};
pub use replication_producers::{ReplicationGuard, ReplicationProducers};

/// The DCP connection name a node's replication feed uses: the producer learns from it which node acknowledges.
pub fn replication_connection_name(node: u64, bucket: &str) -> String {
    format!("replication:{node}:{bucket}")
}

/// The node id in a replication connection's name; None for other DCP clients.
pub fn replica_node_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("replication:")?;
    rest.split(':').next()?.parse().ok()
}
