//! The health monitor: every node probes every other node's management port once a second (a peer unseen for
//! 3 s shows as `unhealthy` in `/pools/default`); on the Raft leader it then runs the auto-failover state machine
//! (`settee_cluster::control::auto_failover`); and it ends takeover holds whose lease ran out.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::control::auto_failover::{AutoFailover, Command, Event};
use settee_cluster::peer::ProbeRequest;
use tokio::sync::watch;

use super::{peers, ClusterDriver};

const PROBE_INTERVAL: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_millis(900);

impl ClusterDriver {
    /// Probes the peers and, on the leader, runs auto-failover, until `stopped`.
    pub async fn monitor(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(PROBE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut auto = AutoFailover::default();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopped.changed() => return,
            }
            self.probe().await;
            if self.handle.store().is_leader() && self.handle.is_current() {
                self.auto_failover(&mut auto).await;
            }
            self.expire_holds().await;
        }
    }

    /// Probes every peer at once and records who answered.
    async fn probe(&self) {
        let meta = self.metadata();
        let peers: Vec<_> = meta.nodes.values().filter(|n| n.id != self.me()).map(|n| (n.id, n.mgmt_addr())).collect();
        {
            let mut table = self.handle.health.table();
            table.keep_only(&meta.nodes.keys().copied().collect());
            table.heard_of(peers.iter().map(|(id, _)| *id), self.now());
        }
        let mut probes = tokio::task::JoinSet::new();
        let links = self.node.peer_links.clone();
        for (id, addr) in peers {
            probes.spawn({
                let links = links.clone();
                async move { (id, peers::call(&addr, &links, None, &ProbeRequest, PROBE_TIMEOUT).await.is_ok()) }
            });
        }
        while let Some(Ok((id, answered))) = probes.join_next().await {
            if answered {
                self.handle.health.table().answered(id, self.now());
            }
        }
    }

    /// One auto-failover decision, and the failover (and its count) it asks for.
    async fn auto_failover(&self, auto: &mut AutoFailover) {
        let meta = self.metadata();
        let commands = {
            let health = self.handle.health.table();
            auto.handle(Event::Tick { meta: &meta, me: self.me(), health: &health }, self.now())
        };
        for command in commands {
            match command {
                Command::Refuse(why) => tracing::warn!("{why}"),
                Command::FailOver { node, unseen } => {
                    tracing::warn!(node, unseen_secs = unseen.as_secs(), "auto-failover");
                    let outcome = self.auto_failover_of(node).await;
                    if let Err(e) = &outcome {
                        tracing::error!(node, error = %e, "auto-failover did not commit");
                    }
                    let result = outcome.as_ref().map(drop).map_err(|_| "the failover did not commit");
                    for count in auto.handle(Event::FailedOver { node, result }, self.now()) {
                        let Command::Propose(cmd) = count else { continue };
                        if let Err(e) = self.handle.store().propose(cmd).await {
                            tracing::warn!(error = %e, "cannot record the auto-failover count");
                        }
                    }
                }
                Command::Propose(cmd) => {
                    if let Err(e) = self.handle.store().propose(cmd).await {
                        tracing::warn!(error = %e, "cannot record the auto-failover count");
                    }
                }
            }
        }
    }
}
