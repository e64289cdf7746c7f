//! Failover: hard (replicas promoted at once) and graceful (the node's actives held while the replicas that will
//! be promoted catch up, so nothing acknowledged is lost; the decisions are the state machine in
//! `settee_cluster::control::graceful_failover`, run here). Both end with the missing replicas rebuilt on the
//! surviving nodes.

use settee_cluster::control::graceful_failover::{Command, Event, GracefulFailover, GracefulFailoverError};
use settee_cluster::metadata::compat::FailoverForm;
use settee_cluster::peer::{HoldRequest, HoldScope};
use std::sync::Arc;

use settee_cluster::{vbmap, ClusterMetadata, MetaCommand, NodeId};

use super::handle::Proposal;
use super::peers::Peers;
use super::ClusterDriver;

impl ClusterDriver {
    /// Hard failover of `failed`, then the replicas it held rebuilt on the surviving nodes (settee does not wait for
    /// a rebalance for that, see docs/compat.md): every vBucket gets back to its configured copies when enough
    /// nodes remain, so durable writes keep working.
    pub(super) async fn failover(&self, failed: NodeId) -> Proposal {
        let meta = self.propose(MetaCommand::Failover { nodes: vec![failed] }).await?;
        self.rebuild_replicas(meta).await
    }

    /// A graceful failover's failover of `node`: as [`ClusterDriver::failover`], but the replicas are rebuilt in
    /// the failover's own change (a `majority` write between two changes found vBuckets without a replica:
    /// DURABILITY_IMPOSSIBLE), and the node stays in the clients' server lists until its drain ends
    /// (`MetaCommand::EndDrain`).
    async fn failover_draining(&self, node: NodeId) -> Proposal {
        self.propose(MetaCommand::FailoverDraining { node }).await
    }

    /// Automatic failover of `failed`, proposed only while this node leads with a quorum behind it (see
    /// `MetadataStore::propose_as_leader`): the decision comes from this node's own view of its peers' health.
    pub(super) async fn auto_failover_of(&self, failed: NodeId) -> Proposal {
        let meta = self.propose_as_leader(MetaCommand::Failover { nodes: vec![failed] }).await?;
        self.rebuild_replicas(meta).await
    }

    /// After a failover, rebuilds on the survivors the replicas the failed node held.
    async fn rebuild_replicas(&self, meta: Arc<ClusterMetadata>) -> Proposal {
        let survivors = meta.active_nodes();
        let groups = meta.node_groups();
        let mut latest = meta.clone();
        for (name, b) in &meta.buckets {
            let repaired = vbmap::repair_replicas(&b.map, &survivors, &groups);
            if repaired == b.map {
                continue;
            }
            match self.propose(MetaCommand::SetMap { bucket: name.clone(), map: repaired }).await {
                Ok(m) => latest = m,
                Err(e) => tracing::warn!(bucket = %name, error = %e, "cannot rebuild replicas after the failover"),
            }
        }
        Ok(latest)
    }

    /// Graceful failover of the live node `id`: runs [`GracefulFailover`] to its end.
    pub(super) async fn graceful_failover(&self, id: NodeId) -> Result<(), GracefulFailoverError> {
        let meta = self.metadata();
        let mut machine = GracefulFailover::new(id, &meta);
        let mut commands = machine.start();
        loop {
            let mut answer = None;
            for command in commands {
                let meta = self.metadata();
                let peers = Peers::new(self.credentials(), &self.node.peer_links, &meta);
                match command {
                    Command::Hold { node, request } => {
                        let reply = peers.hold(node, &request).await.map_err(|e| e.to_string());
                        answer = Some(Event::Held(reply));
                    }
                    Command::Poll { nodes, pause } => {
                        tokio::time::sleep(pause).await;
                        answer = Some(Event::Polled(peers.poll(&nodes).await));
                    }
                    Command::FailOver { node, form } => {
                        tracing::info!(node, ?form, "graceful failover: failing the node over");
                        let outcome = match form {
                            FailoverForm::Draining => self.failover_draining(node).await,
                            FailoverForm::Separate => self.failover(node).await,
                        };
                        answer = Some(Event::FailedOver(outcome.map(drop).map_err(|e| e.to_string())));
                    }
                    Command::EndDrain { node } => {
                        let outcome = self.propose(MetaCommand::EndDrain { node }).await.map(drop);
                        if let Err(e) = &outcome {
                            tracing::warn!(node, error = %e, "a gracefully failed-over node stays in the clients' \
                                server lists (no vBucket) until it is recovered or removed");
                        }
                        answer = Some(Event::DrainEnded(outcome.map_err(|e| e.to_string())));
                    }
                    Command::Release { node } => {
                        let release =
                            HoldRequest { hold: false, scope: HoldScope::All, until_chains: Default::default() };
                        if let Err(e) = peers.hold(node, &release).await {
                            tracing::warn!(node, error = %e, "cannot release the node held for a graceful failover");
                        }
                    }
                    Command::Finish(outcome) => return outcome,
                }
            }
            let Some(event) = answer else {
                return Err(GracefulFailoverError::Protocol("the state machine asked for nothing".into()));
            };
            commands = machine.handle(event, self.now());
        }
    }
}
