//! Failover: hard (replicas promoted at once) and graceful (the node's actives held while the replicas that will
//! be promoted catch up, so nothing acknowledged is lost). Both end with the missing replicas rebuilt on the
//! surviving nodes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::{vbmap, ClusterMetadata, MetaCommand, NodeId, ProposeError};

use super::peers::{seqno_in, Peers};
use super::Cluster;
use crate::node::Node;

/// How long the replicas of a gracefully failed-over node get to catch up.
const GRACEFUL_CATCH_UP: Duration = Duration::from_secs(60);

impl Cluster {
    /// Hard failover of `failed`, then the replicas it held rebuilt on the surviving nodes (settee does not wait for
    /// a rebalance for that, see docs/compat.md): every vBucket gets back to its configured copies when enough
    /// nodes remain, so durable writes keep working.
    pub async fn failover(&self, node: &Node, failed: NodeId) -> Result<Arc<ClusterMetadata>, ProposeError> {
        let meta = self.propose(node, MetaCommand::Failover { nodes: vec![failed] }).await?;
        let survivors = meta.active_nodes();
        let mut latest = meta.clone();
        for (name, b) in &meta.buckets {
            let repaired = vbmap::repair_replicas(&b.map, &survivors);
            if repaired == b.map {
                continue;
            }
            match self.propose(node, MetaCommand::SetMap { bucket: name.clone(), map: repaired }).await {
                Ok(m) => latest = m,
                Err(e) => tracing::warn!(bucket = %name, error = %e, "cannot rebuild replicas after the failover"),
            }
        }
        Ok(latest)
    }

    /// Graceful failover of the live node `id`: its actives are held (clients get NOT_MY_VBUCKET and retry), the
    /// first replica of each (the one failover promotes) catches up to the seqno it stopped at, then the failover
    /// commits (the node ends its holds when it applies the new map). If the replicas do not catch up, or the
    /// failover does not commit, the node serves again.
    pub async fn graceful_failover(&self, node: &Node, id: NodeId) -> anyhow::Result<()> {
        let meta = self.metadata();
        let peers = Peers::new(node, &meta);
        let frozen = peers.hold(id, None, &[], true).await.map_err(|e| e.context("the node refused to drain"))?;
        let mut wanted = BTreeMap::new();
        let mut unreported = Vec::new();
        for (bucket, b) in &meta.buckets {
            for vb in b.map.actives_of(id) {
                if let Some(Some(replica)) = b.map.chains[usize::from(vb)].get(1) {
                    // A vBucket the node did not report (its map differs, its bucket is warming up) has no seqno the
                    // replica could be known to have reached: the failover must not go ahead as if it were zero.
                    match seqno_in(&frozen, bucket, vb) {
                        Some(seqno) => wanted.insert((bucket.clone(), vb, *replica), seqno),
                        None => {
                            unreported.push(vb);
                            None
                        }
                    };
                }
            }
        }
        let outcome = if !unreported.is_empty() {
            Err(anyhow::anyhow!(
                "graceful failover abandoned, the node serves again: it did not report where vBuckets {unreported:?} stopped"
            ))
        } else {
            match peers.wait_until_reached(&wanted, GRACEFUL_CATCH_UP).await {
                Ok(()) => self.failover(node, id).await.map(drop).map_err(anyhow::Error::from),
                Err(e) => Err(e.context("graceful failover abandoned, the node serves again")),
            }
        };
        // Failed over, the node ends its holds itself once it applies the new map (a release could reach it first
        // and make its vBuckets active again for a moment); otherwise it serves again.
        if outcome.is_err() {
            if let Err(e) = peers.hold(id, None, &[], false).await {
                tracing::warn!(node = id, error = %e, "cannot release the node held for a graceful failover");
            }
        }
        outcome
    }
}
