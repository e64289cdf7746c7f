//! Rebalance: moves vBuckets to a balanced map over the nodes that stay, while clients keep working.
//!
//! The node that received `POST /controller/rebalance` orchestrates, in the background: it activates added
//! nodes, plans the target map (`vbmap::rebalance`, minimal movement), then moves vBuckets a step at a time:
//! 1. **build**: the step's new copies are proposed as `building`; their nodes stream them from the active over
//!    DCP (backfill, then the change log) until each has reached the seqno the active had when the wait began;
//! 2. **takeover** (only for vBuckets whose active moves): the old active holds just those vBuckets dead (clients
//!    get NOT_MY_VBUCKET and retry), answering the seqnos they stopped at; the new active's copy catches up to them;
//! 3. **commit**: one `SetMap` names the new chains (promotion gives the new actives a failover-log branch, the
//!    map change is pushed to clients), then the old actives release the held vBuckets; copies the map no longer
//!    places on a node are dropped there.
//!
//! Ejected nodes are removed at the end. A stop or a failure leaves the map as the last committed step made it
//! (consistent; finished steps are kept) and the rebalance can be started again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use settee_cluster::{vbmap, Membership, MetaCommand, NodeId, VbMove};

use super::peers::{seqno_in, Peers};
use super::Cluster;
use crate::node::Node;

/// vBuckets moved per step.
const MOVES_PER_STEP: usize = 64;
/// How long one step's copies may take to catch up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);

/// What `/pools/default/tasks` and `/pools/default/rebalanceProgress` report.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub running: bool,
    /// vBucket moves done and planned in the current (or last) rebalance.
    pub done: usize,
    pub total: usize,
    pub stop_requested: bool,
    pub last_error: Option<String>,
}

/// Starts a rebalance in the background; refuses while one runs.
pub fn start_rebalance(cluster: &Arc<Cluster>, node: &Arc<Node>, ejected: Vec<NodeId>) -> anyhow::Result<()> {
    {
        let mut status = cluster.rebalance.lock();
        anyhow::ensure!(!status.running, "Rebalance running.");
        *status = Status { running: true, ..Status::default() };
    }
    let (cluster, node) = (cluster.clone(), node.clone());
    tokio::spawn(async move {
        let outcome = run(&cluster, &node, &ejected).await;
        let mut status = cluster.rebalance.lock();
        status.running = false;
        match outcome {
            Ok(()) => tracing::info!(moves = status.done, "rebalance done"),
            Err(e) => {
                tracing::warn!(error = %e, done = status.done, total = status.total, "rebalance ended early");
                status.last_error = Some(e.to_string());
            }
        }
    });
    Ok(())
}

async fn run(cluster: &Cluster, node: &Node, ejected: &[NodeId]) -> anyhow::Result<()> {
    let meta = cluster.metadata();
    for n in meta.nodes.values().filter(|n| n.membership == Membership::InactiveAdded && !ejected.contains(&n.id)) {
        cluster.propose(node, MetaCommand::SetMembership { node: n.id, membership: Membership::Active }).await?;
    }
    let meta = cluster.metadata();
    let nodes: Vec<NodeId> = meta.active_nodes().into_iter().filter(|n| !ejected.contains(n)).collect();
    anyhow::ensure!(!nodes.is_empty(), "a rebalance must keep at least one active node");
    let plans: Vec<(String, Vec<VbMove>)> = meta
        .buckets
        .iter()
        .map(|(name, b)| {
            let target = vbmap::rebalance(&b.map, &nodes, usize::from(b.spec.replicas));
            (name.clone(), vbmap::moves(&b.map, &target))
        })
        .collect();
    cluster.rebalance.lock().total = plans.iter().map(|(_, m)| m.len()).sum();
    for (bucket, moves) in &plans {
        for step in moves.chunks(MOVES_PER_STEP) {
            anyhow::ensure!(!cluster.rebalance.lock().stop_requested, "Rebalance stopped by user.");
            move_step(cluster, node, bucket, step).await.with_context(|| format!("moving vBuckets of {bucket}"))?;
            cluster.rebalance.lock().done += step.len();
        }
    }
    for id in ejected {
        cluster.propose(node, MetaCommand::RemoveNode(*id)).await?;
        cluster.store().remove_member(*id).await?;
    }
    Ok(())
}

async fn move_step(cluster: &Cluster, node: &Node, bucket: &str, step: &[VbMove]) -> anyhow::Result<()> {
    let meta = cluster.metadata();
    let peers = Peers::new(node, &meta);
    let building: BTreeMap<u16, Vec<NodeId>> = step
        .iter()
        .map(|m| (m.vb, m.new_chain.iter().flatten().filter(|n| !m.old_chain.contains(&Some(**n))).copied().collect()))
        .filter(|(_, nodes): &(u16, Vec<NodeId>)| !nodes.is_empty())
        .collect();
    if !building.is_empty() {
        cluster.propose(node, MetaCommand::SetBuilding { bucket: bucket.into(), building: building.clone() }).await?;
        // Each new copy must reach what its active held when the wait began.
        let mut reports: BTreeMap<NodeId, Value> = BTreeMap::new();
        let mut wanted = BTreeMap::new();
        for (vb, nodes) in &building {
            let Some(active) = meta.buckets[bucket].map.active(*vb) else { continue };
            let report = match reports.get(&active) {
                Some(r) => r,
                None => {
                    let r = peers.seqnos(active).await?;
                    reports.entry(active).or_insert(r)
                }
            };
            let seqno = seqno_in(report, bucket, *vb).unwrap_or(0);
            for n in nodes {
                wanted.insert((bucket.to_owned(), *vb, *n), seqno);
            }
        }
        peers.wait_until_reached(&wanted, CATCH_UP_TIMEOUT).await?;
    }
    // Takeover of the vBuckets whose active moves, grouped by their current active.
    let mut takeovers: BTreeMap<NodeId, Vec<(u16, NodeId)>> = BTreeMap::new();
    for m in step {
        if let (Some(Some(old)), Some(Some(new))) = (m.old_chain.first(), m.new_chain.first()) {
            if old != new {
                takeovers.entry(*old).or_default().push((m.vb, *new));
            }
        }
    }
    let mut frozen = BTreeMap::new();
    for (old, moves) in &takeovers {
        let vbs: Vec<u16> = moves.iter().map(|(vb, _)| *vb).collect();
        let stopped_at = peers.hold(*old, Some(bucket), &vbs, true).await?;
        for (vb, new) in moves {
            frozen.insert((bucket.to_owned(), *vb, *new), seqno_in(&stopped_at, bucket, *vb).unwrap_or(0));
        }
    }
    let committed = async {
        peers.wait_until_reached(&frozen, CATCH_UP_TIMEOUT).await?;
        let mut map = cluster.metadata().buckets[bucket].map.clone();
        for m in step {
            map.chains[usize::from(m.vb)] = m.new_chain.clone();
        }
        cluster.propose(node, MetaCommand::SetMap { bucket: bucket.into(), map }).await?;
        anyhow::Ok(())
    }
    .await;
    for (old, moves) in &takeovers {
        let vbs: Vec<u16> = moves.iter().map(|(vb, _)| *vb).collect();
        if let Err(e) = peers.hold(*old, Some(bucket), &vbs, false).await {
            tracing::warn!(node = old, error = %e, "cannot release vBuckets held for a takeover");
        }
    }
    committed
}
