//! Rebalance's driver: runs the `settee_cluster::control::rebalance` state machine in the background on the node
//! that received `POST /controller/rebalance`, carrying out its commands (seqno reports, proposals applied locally,
//! takeover holds and releases, map changes, Raft membership) and feeding the answers back. The decisions (the
//! move queue, admission by `rebalanceMovesPerNode`, each move's phases, the stop and failure rules, delta and
//! full recovery) are the state machine's; see its module for the flow.

use std::sync::Arc;

use anyhow::Context;
use settee_cluster::control::rebalance::{Command, Event, Rebalance, RebalanceError};
use settee_cluster::peer::{HoldRequest, HoldScope};
use settee_cluster::MetaCommand;

use super::handle::RebalanceStatus;
use super::peers::Peers;
use super::ClusterDriver;
use settee_cluster::NodeId;

impl ClusterDriver {
    /// Starts a rebalance in the background; refuses while one runs, or when a node that stays is unreachable.
    pub(super) fn start_rebalance(self: Arc<Self>, ejected: Vec<NodeId>) -> anyhow::Result<()> {
        let meta = self.metadata();
        let health = self.handle.health.table().snapshot(self.me(), self.now());
        let mut machine = Rebalance::new(&meta, &ejected, self.me(), &health)?;
        {
            let mut status = self.handle.rebalance.lock();
            anyhow::ensure!(!status.running, "Rebalance running.");
            *status = RebalanceStatus { running: true, ..RebalanceStatus::default() };
        }
        tokio::spawn(async move {
            let outcome = self.run_rebalance(&mut machine).await;
            let mut status = self.handle.rebalance.lock();
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

    /// Runs `machine` to its end: the commands of each step in order, the last one's answer fed back.
    async fn run_rebalance(&self, machine: &mut Rebalance) -> Result<(), RebalanceError> {
        let mut commands = machine.start();
        loop {
            let mut answer = None;
            for command in commands {
                if let Command::Finish(outcome) = command {
                    return outcome;
                }
                answer = self.carry_out(command).await.or(answer);
            }
            let Some(event) = answer else {
                return Err(RebalanceError::Protocol("the state machine asked for nothing".into()));
            };
            commands = machine.handle(event, self.now());
        }
    }

    /// Does one command; returns its answer, if it has one.
    async fn carry_out(&self, command: Command) -> Option<Event> {
        let meta = self.metadata();
        let peers = Peers::new(self.credentials(), &self.node.peer_links, &meta);
        let event = match command {
            Command::Report { node } => {
                Event::Reported { node, report: peers.seqnos(node).await.map_err(|e| e.to_string()) }
            }
            Command::Propose(cmd) => Event::Proposed(self.propose(cmd).await.map(|m| m.rev).map_err(|e| e.to_string())),
            Command::Observe => {
                let health = self.handle.health.table().snapshot(self.me(), self.now());
                Event::Observed { meta, health }
            }
            Command::Poll { nodes, pause } => {
                tokio::time::sleep(pause).await;
                let reports = peers.poll(&nodes).await;
                let health = self.handle.health.table().snapshot(self.me(), self.now());
                let stop_requested = self.handle.rebalance.lock().stop_requested;
                let failed_over = self.metadata().failed_over_nodes();
                Event::Polled { reports, health, stop_requested, failed_over }
            }
            Command::Hold { node, bucket, vbs, until_chains } => {
                let request = HoldRequest { hold: true, scope: HoldScope::Some { bucket, vbs }, until_chains };
                Event::Held { node, reply: peers.hold(node, &request).await.map_err(|e| e.to_string()) }
            }
            Command::Release { node, bucket, vbs } => {
                let scope = HoldScope::Some { bucket, vbs };
                let request = HoldRequest { hold: false, scope, until_chains: Default::default() };
                if let Err(e) = peers.hold(node, &request).await {
                    tracing::warn!(node, error = %e, "cannot release vBuckets held for a takeover");
                }
                return None;
            }
            Command::SetChains { bucket, chains } => Event::Proposed(self.set_chains(&bucket, chains).await),
            Command::ClearBuilding { bucket } => {
                let cmd = MetaCommand::SetBuilding { bucket: bucket.clone(), building: Default::default() };
                if let Err(e) = self.propose(cmd).await {
                    tracing::warn!(%bucket, error = %e, "cannot end the copies a failed rebalance was building");
                }
                return None;
            }
            Command::RemoveMember(node) => {
                Event::MemberRemoved(self.handle.store().remove_member(node).await.map_err(|e| e.to_string()))
            }
            Command::Progress { done, total } => {
                let mut status = self.handle.rebalance.lock();
                (status.done, status.total) = (done, total);
                return None;
            }
            Command::Finish(_) => return None,
        };
        Some(event)
    }

    /// Puts `chains` into `bucket`'s current map and proposes it.
    async fn set_chains(
        &self,
        bucket: &str,
        chains: std::collections::BTreeMap<u16, Vec<Option<NodeId>>>,
    ) -> Result<u64, String> {
        let meta = self.metadata();
        let mut map =
            meta.buckets.get(bucket).context("the bucket was deleted").map_err(|e| e.to_string())?.map.clone();
        for (vb, chain) in chains {
            if let Some(slot) = map.chains.get_mut(usize::from(vb)) {
                *slot = chain;
            }
        }
        self.propose(MetaCommand::SetMap { bucket: bucket.into(), map }).await.map(|m| m.rev).map_err(|e| e.to_string())
    }
}
