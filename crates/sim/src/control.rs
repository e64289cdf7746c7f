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
use settee_cluster::{vbmap, ClusterMetadata, MetaCommand, NodeId, VbMap};

use crate::node::{node_id, BUCKET, VBUCKETS};

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
    /// A full recovery in progress: the node and the map it builds towards.
    recovering: Option<(NodeId, VbMap)>,
    pub counters: BTreeMap<&'static str, u64>,
    /// Decisions taken, with their time.
    pub log: Vec<(Duration, String)>,
}

impl Control {
    /// A cluster of `nodes` active nodes, auto-failover on, and the simulated bucket with one replica.
    pub fn new(nodes: usize) -> Control {
        let mut meta = ClusterMetadata::default();
        let must = |meta: &mut ClusterMetadata, cmd: MetaCommand| meta.apply(&cmd).expect("initial metadata");
        for idx in 0..nodes {
            let id = node_id(idx);
            let info = NodeInfo {
                id,
                hostname: format!("127.0.0.{}", id),
                kv_port: 11210,
                mgmt_port: 8091,
                query_port: 8093,
                membership: Membership::Active,
                services: vec!["kv".into()],
            };
            must(&mut meta, MetaCommand::AddNode(info));
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
            ephemeral: true,
            ram_quota_bytes: 256 << 20,
            replicas: 1,
            eviction: "noEviction".into(),
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
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
            recovering: None,
            counters: BTreeMap::new(),
            log: Vec::new(),
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
        self.recovering.is_none() && members_up && copies_in_step
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
                        if self.recovering.as_ref().is_some_and(|(n, _)| *n == node) {
                            self.recovering = None;
                        }
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

    /// Full recovery of a failed-over node that answers again, once no other node is down; and, with every
    /// member answering, the building of replicas the map lacks (after a failover or a reprovision), as the
    /// rebalance an operator runs would do.
    fn recover(&mut self, now: Duration) {
        if let Some((node, target)) = self.recovering.clone() {
            return self.finish_recovery(node, target, now);
        }
        let answering = |c: &Control, id: NodeId| c.health.unseen_for(id, now) < ANSWERED_WITHIN;
        let failed: Vec<NodeId> =
            self.meta.nodes.values().filter(|n| n.membership == Membership::InactiveFailed).map(|n| n.id).collect();
        if let Some(&node) = failed.iter().find(|id| answering(self, **id)) {
            let others_up = self.meta.nodes.values().filter(|n| n.id != node).all(|n| answering(self, n.id));
            if !others_up
                || self.apply(MetaCommand::SetRecovery { node, recovery: Some(Recovery::Full) }).is_err()
                || self.apply(MetaCommand::SetMembership { node, membership: Membership::Active }).is_err()
            {
                return;
            }
            self.count("full recoveries started");
            self.log.push((now, format!("full recovery of node index {} started", node - 1)));
        }
        let nodes = self.meta.active_nodes();
        if nodes.len() != self.meta.nodes.len() || !nodes.iter().all(|n| answering(self, *n)) {
            return;
        }
        let target = vbmap::repair_replicas(self.map(), &nodes);
        if target == *self.map() {
            return;
        }
        let building: BTreeMap<u16, Vec<NodeId>> = vbmap::moves(self.map(), &target)
            .into_iter()
            .map(|m| {
                let added = m.new_chain.iter().flatten().filter(|n| !m.old_chain.contains(&Some(**n))).copied();
                (m.vb, added.collect())
            })
            .collect();
        if self.apply(MetaCommand::SetBuilding { bucket: BUCKET.into(), building }).is_ok() {
            self.log.push((now, "building missing replicas".into()));
            let node = self.meta.recovery.keys().next().copied().unwrap_or(0);
            self.recovering = Some((node, target));
        }
    }

    /// A node asks for a change (auto-reprovision of its memory-only bucket).
    pub fn propose(&mut self, cmd: MetaCommand, now: Duration) {
        if let MetaCommand::Reprovision { node, .. } = &cmd {
            let node = *node;
            if self.apply(cmd).is_ok() {
                self.count("auto-reprovisions");
                self.log.push((now, format!("node index {} reprovisioned", node - 1)));
                if self.recovering.is_some() {
                    let _ = self.apply(MetaCommand::SetBuilding { bucket: BUCKET.into(), building: BTreeMap::new() });
                    self.recovering = None;
                }
            }
        }
    }

    /// Commits the map once every copy being built holds what its active held at the last heartbeats.
    fn finish_recovery(&mut self, node: NodeId, target: VbMap, now: Duration) {
        let building = self.meta.buckets[BUCKET].building.clone();
        let high = |n: NodeId, vb: u16, active: bool| {
            self.seqnos.get(&n).and_then(|s| s.iter().find(|(v, a, _)| *v == vb && *a == active)).map(|(_, _, h)| *h)
        };
        let caught_up = building.iter().filter(|(vb, _)| **vb < VBUCKETS).all(|(vb, nodes)| {
            let Some(Some(active)) = self.map().chains[usize::from(*vb)].first().copied() else { return false };
            let Some(active_high) = high(active, *vb, true) else { return false };
            nodes.iter().all(|n| high(*n, *vb, false).is_some_and(|h| h >= active_high))
        });
        if !caught_up {
            return;
        }
        // The map moved on meanwhile (a failover): plan again from it.
        let still = vbmap::repair_replicas(self.map(), &self.meta.active_nodes());
        if still != target {
            let _ = self.apply(MetaCommand::SetBuilding { bucket: BUCKET.into(), building: BTreeMap::new() });
            self.recovering = None;
            return;
        }
        if self.apply(MetaCommand::SetMap { bucket: BUCKET.into(), map: target }).is_ok() {
            let _ = self.apply(MetaCommand::SetBuilding { bucket: BUCKET.into(), building: BTreeMap::new() });
            if node != 0 {
                let _ = self.apply(MetaCommand::SetRecovery { node, recovery: None });
            }
            self.count("missing replicas built");
            self.log.push((now, "missing replicas built, map committed".into()));
        }
        self.recovering = None;
    }
}
