//! Peer health and auto-failover. Every node probes every other node's management port once a second; a node
//! unseen for `UNHEALTHY_AFTER` shows as `unhealthy` in `/pools/default`. The Raft leader fails over a node unseen
//! for the auto-failover timeout, one node at a time, up to `maxCount`, and refuses (with a log line) when the
//! failover would leave some vBucket without any copy: unlike Couchbase's community edition, settee never loses
//! durably written data to an automatic failover.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use settee_cluster::{vbmap, AutoFailoverSettings, ClusterMetadata, Membership, MetaCommand, NodeId};
use tokio::sync::watch;

use super::{rest_client, Cluster};
use crate::node::Node;

const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_millis(900);
/// A peer unseen this long is reported unhealthy.
const UNHEALTHY_AFTER: Duration = Duration::from_secs(3);

#[derive(Default)]
pub struct Health {
    /// When each peer last answered a probe (or when this node first heard of it).
    seen: Mutex<HashMap<NodeId, Instant>>,
    /// The peer last refused for auto-failover, so the refusal is logged once per episode.
    refused: Mutex<Option<NodeId>>,
}

impl Health {
    /// Couchbase's node `status`: healthy or unhealthy (this node is always healthy to itself).
    pub fn status(&self, id: NodeId, me: NodeId) -> &'static str {
        if id == me {
            return "healthy";
        }
        match self.seen.lock().get(&id) {
            Some(t) if t.elapsed() < UNHEALTHY_AFTER => "healthy",
            Some(_) => "unhealthy",
            None => "warmup",
        }
    }

    /// How long `id` has not answered a probe (zero for a node first heard of now).
    pub(crate) fn unseen_for(&self, id: NodeId) -> Duration {
        self.seen.lock().entry(id).or_insert_with(Instant::now).elapsed()
    }

    fn mark_seen(&self, id: NodeId) {
        self.seen.lock().insert(id, Instant::now());
    }
}

/// Probes the peers and, on the leader, runs auto-failover, until `stopped`.
pub async fn monitor(cluster: Arc<Cluster>, node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PROBE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let meta = cluster.metadata();
        let mut probes = tokio::task::JoinSet::new();
        for n in meta.nodes.values().filter(|n| n.id != cluster.me) {
            let (id, addr) = (n.id, n.mgmt_addr());
            probes.spawn(async move { (id, rest_client::call(&addr, "GET", "/pools", None, "", PROBE_TIMEOUT).await) });
        }
        while let Some(Ok((id, reply))) = probes.join_next().await {
            if reply.is_ok_and(|r| r.status == 200) {
                cluster.health.mark_seen(id);
            }
        }
        if cluster.store().is_leader() && cluster.is_current() {
            auto_failover(&cluster, &node, &meta).await;
        }
        cluster.expire_holds(&node).await;
    }
}

async fn auto_failover(cluster: &Cluster, node: &Node, meta: &ClusterMetadata) {
    let settings = &meta.auto_failover;
    if !settings.enabled || settings.count >= settings.max_count {
        return;
    }
    let timeout = Duration::from_secs(u64::from(settings.timeout_secs));
    let down: Vec<NodeId> = meta
        .nodes
        .values()
        .filter(|n| n.id != cluster.me && n.membership == Membership::Active)
        .filter(|n| cluster.health.unseen_for(n.id) >= timeout)
        .map(|n| n.id)
        .collect();
    // Couchbase fails over one node at a time; with several down at once it waits for an operator.
    let [failed] = down[..] else {
        if down.len() > 1 {
            tracing::warn!(?down, "several nodes are down: auto-failover waits for an operator");
        }
        return;
    };
    let at_risk: Vec<(&String, usize)> = meta
        .buckets
        .iter()
        .map(|(name, b)| (name, vbmap::data_loss_risk(&b.map, &[failed]).len()))
        .filter(|(_, n)| *n > 0)
        .collect();
    if !at_risk.is_empty() {
        if cluster.health.refused.lock().replace(failed) != Some(failed) {
            tracing::warn!(node = failed, ?at_risk, "auto-failover refused: vBuckets would lose their only copy");
        }
        return;
    }
    tracing::warn!(node = failed, unseen_secs = timeout.as_secs(), "auto-failover");
    match cluster.failover(node, failed).await {
        Ok(_) => {
            let counted = AutoFailoverSettings { count: settings.count + 1, ..settings.clone() };
            if let Err(e) = cluster.store().propose(MetaCommand::SetAutoFailover(counted)).await {
                tracing::warn!(error = %e, "cannot record the auto-failover count");
            }
        }
        Err(e) => tracing::error!(node = failed, error = %e, "auto-failover did not commit"),
    }
}
