//! The control plane as the simulation runs it: the real `ClusterMetadata` state machine (what the Raft group
//! replicates; Raft itself is not simulated: the metadata leader is taken to run with the majority of the nodes),
//! the real `HealthTable` and `AutoFailover` decisions fed by the nodes' heartbeats, and full recovery of a
//! failed-over node that answers again: its missing replicas are built (`SetBuilding`) and the map is committed
//! once they have caught up with their actives, as a rebalance does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::control::auto_failover::{AutoFailover, Command, Event};
use settee_cluster::control::HealthTable;
use settee_cluster::metadata::{AutoFailoverSettings, BucketSpec, Membership, NodeInfo, Recovery};
use settee_cluster::{ClusterMetadata, MetaCommand, NodeId, VbMap};

use settee_cluster::control::rebalance::Rebalance;
use settee_cluster::control::HealthSnapshot;
use settee_cluster::peer::{HoldReply, SeqnoReport};

use crate::graceful::GracefulRun;
use crate::msg::Msg;
use crate::node::{node_id, BUCKET, VBUCKETS};
use crate::rebalance::{Leader, RebalanceRun};
use crate::rng::SimRng;
use settee_cluster::control::graceful_failover::GracefulFailover;

const TICK: Duration = Duration::from_millis(100);
/// How recently a node must have answered to count as back.
const ANSWERED_WITHIN: Duration = Duration::from_secs(1);
pub const AUTO_FAILOVER_SECS: u32 = 5;

pub struct Control {
    pub meta: ClusterMetadata,
    shared: Arc<ClusterMetadata>,
    health: HealthTable,
    auto: AutoFailover,
    /// Each node's last heartbeat: (vb, is active, high seqno).
    seqnos: BTreeMap<NodeId, Vec<(u16, bool, u64)>>,
    next_tick: Duration,
    /// The operator's choices (delta or full recovery).
    rng: SimRng,
    pub counters: BTreeMap<&'static str, u64>,
    /// Decisions taken, with their time.
    pub log: Vec<(Duration, String)>,
    /// A rebalance in progress.
    rebalance: Option<RebalanceRun>,
    /// The operator asked to stop the rebalance in progress; `Some(true)`: and to run it again (ejecting the same
    /// nodes) as soon as it has stopped.
    stop: Option<bool>,
    /// A graceful failover in progress.
    graceful: Option<GracefulRun>,
    /// Messages to nodes (by id), sent by the simulation.
    pub outbox: Vec<(NodeId, Msg)>,
}

/// The control plane as the rebalance driver's leader (`now` for the health snapshot).
impl Leader for Control {
    fn propose(&mut self, cmd: MetaCommand) -> Result<u64, String> {
        self.apply(cmd).map(|()| self.meta.rev)
    }
    fn meta(&self) -> Arc<ClusterMetadata> {
        self.shared.clone()
    }
    fn health(&self, now: Duration) -> HealthSnapshot {
        self.health.snapshot(0, now)
    }
    fn send(&mut self, node: NodeId, msg: Msg) {
        self.outbox.push((node, msg));
    }
    fn stop_requested(&self) -> bool {
        self.stop.is_some()
    }
}

impl Control {
    /// A cluster of `nodes` active nodes, auto-failover on, and the simulated bucket with one replica.
    pub fn new(nodes: usize, seed: u64, persistent: bool) -> Control {
        let mut meta = ClusterMetadata::default();
        let must = |meta: &mut ClusterMetadata, cmd: MetaCommand| meta.apply(&cmd).expect("initial metadata");
        for idx in 0..nodes {
            let id = node_id(idx);
            must(&mut meta, MetaCommand::AddNode(node_info(id)));
            if idx > 0 {
                must(&mut meta, MetaCommand::SetMembership { node: id, membership: Membership::Active });
            }
        }
        let settings =
            AutoFailoverSettings { enabled: true, timeout_secs: AUTO_FAILOVER_SECS, max_count: 100, count: 0 };
        must(&mut meta, MetaCommand::SetAutoFailover(settings));
        let spec = BucketSpec {
            name: BUCKET.into(),
            uuid: "5157e5157e5157e5157e5157e5157e51".into(),
            ephemeral: !persistent,
            ram_quota_bytes: 256 << 20,
            replicas: 1,
            eviction: if persistent { "valueOnly" } else { "noEviction" }.into(),
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
            conflict_resolution: Default::default(),
        };
        must(&mut meta, MetaCommand::CreateBucket(spec));
        let shared = Arc::new(meta.clone());
        Control {
            meta,
            shared,
            health: HealthTable::default(),
            auto: AutoFailover::default(),
            seqnos: BTreeMap::new(),
            next_tick: Duration::ZERO,
            rng: SimRng::new(seed ^ 0x00c0_ffee),
            counters: BTreeMap::new(),
            log: Vec::new(),
            rebalance: None,
            stop: None,
            graceful: None,
            outbox: Vec::new(),
        }
    }

    /// The metadata as pushed to nodes.
    pub fn shared(&self) -> Arc<ClusterMetadata> {
        self.shared.clone()
    }

    pub fn map(&self) -> &VbMap {
        &self.meta.buckets[BUCKET].map
    }

    pub fn heartbeat(&mut self, node: NodeId, seqnos: Vec<(u16, bool, u64)>, now: Duration) {
        self.health.answered(node, now);
        self.seqnos.insert(node, seqnos);
    }

    pub fn membership(&self, node: NodeId) -> Option<Membership> {
        self.meta.nodes.get(&node).map(|n| n.membership)
    }

    /// Every member active, nothing being built, every member heard from lately, and every copy the map names
    /// reported by its node, replicas close behind their actives (not rebuilding after a reset): only then may the
    /// nemesis strike again, so that faults stay within what `majority` promises to survive (one at a time).
    pub fn is_healthy(&self, now: Duration) -> bool {
        let reported = |n: NodeId, vb: u16, active: bool| {
            self.seqnos.get(&n).and_then(|s| s.iter().find(|(v, a, _)| *v == vb && *a == active)).map(|(_, _, h)| *h)
        };
        let copies_in_step = (0..VBUCKETS).all(|vb| match self.map().chains[usize::from(vb)].as_slice() {
            [Some(a), Some(r)] => match (reported(*a, vb, true), reported(*r, vb, false)) {
                (Some(ah), Some(rh)) => rh + 20 >= ah,
                _ => false,
            },
            _ => false,
        });
        let members_up = self
            .meta
            .nodes
            .values()
            .all(|n| n.membership == Membership::Active && self.health.unseen_for(n.id, now) < ANSWERED_WITHIN);
        // Every chain of the map complete, the vBuckets the simulation does not use included: a fault while one
        // of them lacks a copy would be a second failure.
        let map_complete = self.map().chains.iter().all(|c| c.iter().all(Option::is_some));
        members_up && copies_in_step && map_complete
    }

    fn apply(&mut self, cmd: MetaCommand) -> Result<(), String> {
        let r = self.meta.apply(&cmd).map_err(|e| e.to_string());
        if r.is_ok() {
            self.shared = Arc::new(self.meta.clone());
        }
        r
    }

    fn count(&mut self, what: &'static str) {
        *self.counters.entry(what).or_default() += 1;
    }

    /// Runs the decisions due: auto-failover, then recovery.
    pub fn tick(&mut self, now: Duration) {
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + TICK;
        self.health.heard_of(self.meta.nodes.keys().copied(), now);
        let commands = self.auto.handle(Event::Tick { meta: &self.meta, me: 0, health: &self.health }, now);
        for command in commands {
            match command {
                Command::FailOver { node, .. } => {
                    let r = self.apply(MetaCommand::Failover { nodes: vec![node] });
                    if r.is_ok() {
                        self.count("automatic failovers");
                        self.log.push((now, format!("node index {} failed over automatically", node - 1)));
                    }
                    let event = Event::FailedOver { node, result: r.as_ref().map(|_| ()).map_err(String::as_str) };
                    for follow in self.auto.handle(event, now) {
                        if let Command::Propose(cmd) = follow {
                            let _ = self.apply(cmd);
                        }
                    }
                }
                Command::Propose(cmd) => {
                    let _ = self.apply(cmd);
                }
                Command::Refuse(_) => self.count("auto-failovers refused"),
            }
        }
        self.recover(now);
    }

    /// What an operator does once every member answers again: marks each failed-over node for delta or full
    /// recovery (drawn from the seed) and rebalances, which also rebuilds the replicas a failover or a reprovision
    /// left missing.
    fn recover(&mut self, now: Duration) {
        if self.rebalancing() {
            return;
        }
        let answering = |c: &Control, id: NodeId| c.health.unseen_for(id, now) < ANSWERED_WITHIN;
        if !self.meta.nodes.values().all(|n| answering(self, n.id)) {
            return;
        }
        let failed: Vec<NodeId> =
            self.meta.nodes.values().filter(|n| n.membership == Membership::InactiveFailed).map(|n| n.id).collect();
        let gaps = self.map().chains.iter().any(|c| c.first().is_some_and(Option::is_some) && c.contains(&None));
        if failed.is_empty() && !gaps {
            return;
        }
        for node in failed {
            if self.meta.recovery.contains_key(&node) {
                continue;
            }
            let (recovery, what) = if self.rng.chance(500) {
                (Recovery::Delta, "delta recoveries")
            } else {
                (Recovery::Full, "full recoveries")
            };
            if self.apply(MetaCommand::SetRecovery { node, recovery: Some(recovery) }).is_ok() {
                self.count(what);
                self.log.push((now, format!("node index {} marked for {recovery:?} recovery", node - 1)));
            }
        }
        self.start_rebalance(None, Vec::new(), now);
    }

    /// A rebalance or a graceful failover runs.
    pub fn rebalancing(&self) -> bool {
        self.rebalance.is_some() || self.graceful.is_some()
    }

    /// Starts a graceful failover of `node`, as `/controller/startGracefulFailover` would.
    pub fn start_graceful(&mut self, node: NodeId, now: Duration) -> bool {
        if self.rebalancing() || self.membership(node) != Some(Membership::Active) {
            return false;
        }
        self.log.push((now, format!("graceful failover of node index {} started", node - 1)));
        self.graceful = Some(GracefulRun::start(node, GracefulFailover::new(node, &self.meta)));
        self.step_rebalance(now);
        true
    }

    /// Starts a rebalance that adds `add` (a node outside the cluster) and ejects `eject`, as an operator's
    /// `/controller/rebalance` would; false when the real state machine refuses to start.
    pub fn start_rebalance(&mut self, add: Option<NodeId>, eject: Vec<NodeId>, now: Duration) -> bool {
        if self.rebalancing() {
            return false;
        }
        if let Some(id) = add {
            if self.apply(MetaCommand::AddNode(node_info(id))).is_err() {
                return false;
            }
        }
        let health = self.health.snapshot(0, now);
        match Rebalance::new(&self.meta, &eject, 0, &health) {
            Ok(sm) => {
                self.log.push((now, format!("rebalance started: in {add:?}, out {eject:?} (node ids)")));
                self.rebalance = Some(RebalanceRun::start(sm));
                self.step_rebalance(now);
                true
            }
            Err(e) => {
                self.log.push((now, format!("rebalance refused: {e}")));
                if let Some(id) = add {
                    let _ = self.apply(MetaCommand::RemoveNode(id));
                }
                false
            }
        }
    }

    /// Runs the rebalance's (or graceful failover's) commands due now; records how it ended.
    pub fn step_rebalance(&mut self, now: Duration) {
        if let Some(mut run) = self.graceful.take() {
            run.step(self, now);
            match run.outcome.take() {
                None => self.graceful = Some(run),
                Some(r) => {
                    self.count(if r.is_ok() { "graceful failovers" } else { "graceful failovers abandoned" });
                    self.log.push((now, format!("graceful failover of node index {} ended: {r:?}", run.node - 1)));
                }
            }
        }
        let Some(mut run) = self.rebalance.take() else { return };
        run.step(self, now);
        match run.outcome.take() {
            None => self.rebalance = Some(run),
            Some(r) => {
                let what = match &r {
                    Ok(()) => "rebalances finished",
                    Err(_) => "rebalances ended with an error",
                };
                self.count(what);
                if std::env::var_os("SIM_DEBUG").is_some() {
                    eprintln!("{now:?} rebalance ended after {} moves: {r:?}", run.moves_done);
                }
                self.log.push((now, format!("rebalance ended after {} moves: {r:?}", run.moves_done)));
                if self.stop.take() == Some(true) {
                    // The operator runs it again at once: the copies the stopped one was building are given up
                    // while the nodes may not have applied that yet.
                    self.start_rebalance(None, run.ejected(), now);
                }
            }
        }
    }

    /// Asks the rebalance in progress to stop (`/controller/stopRebalance`), and with `again` to start it again
    /// as soon as it has stopped; false when none runs.
    pub fn stop_rebalance(&mut self, again: bool, now: Duration) -> bool {
        if self.rebalance.is_none() || self.stop.is_some() {
            return false;
        }
        self.log.push((now, format!("rebalance stop requested (again: {again})")));
        self.stop = Some(again);
        true
    }

    /// A seqno report, for the graceful failover or the rebalance that asked for it.
    pub fn seqnos_answer(&mut self, node: NodeId, id: u64, report: SeqnoReport, now: Duration) {
        let report = match self.graceful.take() {
            Some(mut run) => {
                let unused = run.reported(node, id, report, self, now);
                self.graceful = Some(run);
                unused
            }
            None => Some(report),
        };
        if let Some(report) = report {
            if let Some(mut run) = self.rebalance.take() {
                run.reported(node, id, report, self, now);
                self.rebalance = Some(run);
            }
        }
    }

    /// A hold's answer, for the graceful failover or the rebalance that asked for it.
    pub fn hold_answer(&mut self, node: NodeId, id: u64, reply: HoldReply, now: Duration) {
        let reply = match self.graceful.as_mut() {
            Some(run) => run.held(node, id, reply, now),
            None => Some(reply),
        };
        if let (Some(run), Some(reply)) = (self.rebalance.as_mut(), reply) {
            run.held(node, id, reply, now);
        }
    }

    /// A node asks for a change (auto-reprovision of its memory-only bucket, or a restarted node handing the
    /// persistent actives its replicas are ahead on over to them).
    /// Whether it was applied.
    pub fn propose(&mut self, cmd: MetaCommand, now: Duration) -> bool {
        let (node, what, counter) = match &cmd {
            MetaCommand::Reprovision { node, .. } => (*node, "reprovisioned", "auto-reprovisions"),
            MetaCommand::PromoteReplicas { node, .. } => {
                (*node, "handed vBuckets to replicas ahead of it", "replica promotions after a restart")
            }
            _ => return false,
        };
        if self.apply(cmd).is_err() {
            return false;
        }
        self.count(counter);
        self.log.push((now, format!("node index {} {what}", node - 1)));
        true
    }
}

/// A simulated node's entry in the metadata.
fn node_info(id: NodeId) -> NodeInfo {
    NodeInfo::new(id, &format!("127.0.0.{id}"), 8091)
}
