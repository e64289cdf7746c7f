//! One simulated run: nodes, clients, the control plane and the network stepped one simulated millisecond at a
//! time from a seed; a nemesis injects faults during the first phase, then the network heals, crashed nodes come
//! back, the cluster recovers, and the run checks that every vBucket's copies agree and that every key's history
//! is linearizable.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::metadata::Membership;
use settee_cluster::ClusterMetadata;
use settee_types::DurabilityLevel;

use crate::clock::SimClock;
use crate::control::Control;
use crate::history::{check_key, Op, OpKind, Outcome, Verdict};
use crate::msg::{ClientOp, Msg, Reply};
use crate::net::{Endpoint, Net, NetConfig};
use crate::node::{node_id, vb_of, Ctx, SimNode, VBUCKETS};
use crate::rng::SimRng;

/// Keys the clients work on: few, so that operations on each key overlap.
pub const KEYS_MAX: usize = 8;
const STEP: Duration = Duration::from_millis(1);
/// How long after a restart the nemesis waits before it judges the cluster's health (several heartbeats).
const SETTLE_AFTER_RESTART: Duration = Duration::from_secs(1);
/// A killed node that the cluster has not failed over by then is restarted anyway.
const RESTART_ANYWAY: Duration = Duration::from_secs(20);
/// A client gives up on a request after this long: its outcome is unknown.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Node processes; the first `members` form the cluster, the others are spares for rebalances.
    pub nodes: usize,
    pub members: usize,
    pub clients: usize,
    /// How long faults are injected (clients run for this long, then a few seconds more).
    pub fault_phase: Duration,
    /// How long the cluster gets to recover afterwards, at most.
    pub recovery_phase: Duration,
    pub faults: bool,
    /// Restart a killed node after its pause even if the cluster has not failed it over yet (a memory-only
    /// bucket then comes back empty while the map still names it active).
    pub restart_before_failover: bool,
    /// Whether a restarted node has the cluster reprovision its memory-only bucket (false: the behaviour before
    /// auto-reprovision, which loses acknowledged writes).
    pub reprovision: bool,
    /// A persistent (couchbase) bucket instead of a memory-only one: each node has a disk that outlives its
    /// crashes (losing what it had not synced), warms up from it, takes its actives back only where no replica is
    /// ahead, and clients write at every durability level; the nemesis adds disk faults (failed writes and
    /// fsyncs, a full disk, a slow disk) and kills whose node restarts before it is failed over.
    pub persistent: bool,
    /// Whether a restarted persistent node hands the actives its replicas are ahead on over to them before it
    /// serves (false: the behaviour before the take-back, which loses acknowledged `majority` writes).
    pub takeback: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            nodes: 4,
            members: 3,
            clients: 4,
            fault_phase: Duration::from_secs(20),
            recovery_phase: Duration::from_secs(40),
            faults: true,
            restart_before_failover: false,
            reprovision: true,
            persistent: false,
            takeback: true,
        }
    }
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub simulated: Duration,
    pub ops: BTreeMap<&'static str, u64>,
    /// Why operations were refused (not applied).
    pub refusals: BTreeMap<String, u64>,
    pub faults: BTreeMap<&'static str, u64>,
    pub counters: BTreeMap<&'static str, u64>,
    /// Invariant violations, divergent copies, non-linearizable keys, a cluster that did not recover.
    pub anomalies: Vec<String>,
    pub inconclusive_keys: usize,
    /// The history of the first key found not linearizable.
    pub failing_history: Option<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.anomalies.is_empty()
    }

    pub fn summary(&self) -> String {
        let mut s = format!("seed {}: {:?} simulated", self.seed, self.simulated);
        let _ = write!(
            s,
            "; ops {:?}; refused {:?}; faults {:?}; {:?}",
            self.ops, self.refusals, self.faults, self.counters
        );
        if self.inconclusive_keys > 0 {
            let _ = write!(s, "; {} keys inconclusive", self.inconclusive_keys);
        }
        for a in &self.anomalies {
            let _ = write!(s, "\n  ANOMALY: {a}");
        }
        if let Some(h) = &self.failing_history {
            let _ = write!(s, "\n{h}");
        }
        s
    }
}

struct Inflight {
    id: u64,
    key: usize,
    kind: OpKind,
    invoke: Duration,
    /// A read made to learn a CAS for the next operation.
    for_cas: bool,
}

#[derive(Default)]
struct Client {
    inflight: Option<Inflight>,
    next_at: Duration,
    /// (key, value read, its CAS): the next operation is a CAS on it.
    cas_next: Option<(usize, u64, u64)>,
    next_id: u64,
}

/// A fault the nemesis is waiting to undo.
enum Undo {
    Heal,
    CalmNetwork,
    /// The operator freed space on the node's full disk.
    DiskSpace(usize),
}

pub struct Sim {
    cfg: SimConfig,
    rng: SimRng,
    clock: Arc<SimClock>,
    net: Net<Msg>,
    nodes: Vec<SimNode>,
    control: Control,
    clients: Vec<Client>,
    history: Vec<Op>,
    next_value: u64,
    next_conn: u64,
    violations: Vec<String>,
    ops: BTreeMap<&'static str, u64>,
    refusals: BTreeMap<String, u64>,
    counters: BTreeMap<&'static str, u64>,
    faults: BTreeMap<&'static str, u64>,
    /// Crashed nodes, restarted once failed over (or at once when the flag says so), at the earliest at the time
    /// given.
    crashed: BTreeMap<usize, (Duration, bool)>,
    undo: Option<(Duration, Undo)>,
    next_fault: Duration,
    /// When each node last restarted.
    restarted_at: BTreeMap<usize, Duration>,
    /// The metadata revision last pushed to the nodes.
    pushed_rev: u64,
    /// A node whose metadata arrives late (a Raft follower behind), until when, and by how much.
    meta_lag: Option<(usize, Duration, Duration)>,
    /// Metadata held back for a lagging node: when it arrives, to whom, what.
    late_meta: VecDeque<(Duration, usize, Arc<ClusterMetadata>)>,
    /// When the operator stops the rebalance in progress, and whether they run it again at once.
    stop_at: Option<(Duration, bool)>,
    /// A node the operator kills then (its disk stalled), and whether it restarts before it is failed over.
    kill_at: Option<(Duration, usize, bool)>,
    /// What happened when: faults, failovers, restarts (for reports).
    fault_log: Vec<(Duration, String)>,
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        let clock = Arc::new(SimClock::new());
        let mut rng = SimRng::new(cfg.seed);
        let mut nodes: Vec<SimNode> = (0..cfg.nodes).map(SimNode::new).collect();
        for n in &mut nodes {
            n.reprovision = cfg.reprovision;
            n.takeback_enabled = cfg.takeback;
            if cfg.persistent {
                n.make_persistent();
            }
            n.start(clock.clone(), clock.now(), &mut rng);
        }
        Sim {
            rng,
            clock,
            net: Net::new(NetConfig::default()),
            nodes,
            control: Control::new(cfg.members, cfg.seed, cfg.persistent),
            clients: (0..cfg.clients).map(|_| Client::default()).collect(),
            history: Vec::new(),
            next_value: 1,
            next_conn: 0,
            violations: Vec::new(),
            ops: BTreeMap::new(),
            refusals: BTreeMap::new(),
            counters: BTreeMap::new(),
            faults: BTreeMap::new(),
            crashed: BTreeMap::new(),
            undo: None,
            next_fault: Duration::from_secs(2),
            restarted_at: BTreeMap::new(),
            stop_at: None,
            pushed_rev: 0,
            meta_lag: None,
            late_meta: VecDeque::new(),
            fault_log: Vec::new(),
            kill_at: None,
            cfg,
        }
    }

    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Runs the whole schedule and checks the outcome.
    pub fn run(mut self) -> Report {
        let clients_until = self.cfg.fault_phase + Duration::from_secs(3);
        let end = clients_until + self.cfg.recovery_phase;
        while self.now() < end {
            self.step(self.now() < clients_until);
            if self.now() >= clients_until + Duration::from_secs(5)
                && self.now().as_millis().is_multiple_of(1000)
                && self.converged()
            {
                break;
            }
        }
        self.finish()
    }

    fn step(&mut self, clients_on: bool) {
        self.clock.advance(STEP);
        let now = self.now();
        self.deliver(now);
        if let Some((_, again)) = self.stop_at.filter(|(at, _)| *at <= now) {
            self.stop_at = None;
            if self.control.stop_rebalance(again, now) {
                self.fault(if again { "rebalance stopped and run again" } else { "rebalance stopped" });
                if again && self.rng.chance(500) {
                    // At the worst moment: one node applies the metadata late, so it may answer the new
                    // rebalance's seqno polls from the state the stopped one left.
                    let node = self.rng.below(self.nodes.len() as u64) as usize;
                    let lag = Duration::from_millis(self.rng.between(50, 1000));
                    let until = now + Duration::from_millis(self.rng.between(500, 3000));
                    self.meta_lag = Some((node, until, lag));
                    self.fault_log.push((now, format!("node {node} applies metadata {lag:?} late")));
                    self.fault("metadata late on one node");
                }
            }
        }
        if self.cfg.faults && now < self.cfg.fault_phase {
            self.nemesis(now);
        } else {
            self.calm_down(now);
        }
        if let Some((_, victim, early)) = self.kill_at.filter(|(at, _, _)| *at <= now) {
            self.kill_at = None;
            let after = Duration::from_millis(self.rng.between(200, 3000));
            self.kill(now, victim, after, early);
        }
        if self.cfg.persistent {
            self.restart_failed_persistence(now);
        }
        self.restart_failed_over(now);
        for i in 0..self.nodes.len() {
            let mut ctx = Ctx {
                now,
                net: &mut self.net,
                rng: &mut self.rng,
                next_conn: &mut self.next_conn,
                violations: &mut self.violations,
                counters: &mut self.counters,
            };
            self.nodes[i].tick(&mut ctx);
        }
        self.control.tick(now);
        self.control.step_rebalance(now);
        for (node, msg) in std::mem::take(&mut self.control.outbox) {
            let env = crate::net::Envelope {
                from: Endpoint::Control,
                to: Endpoint::Node((node - 1) as usize),
                conn: None,
                msg,
            };
            self.net.send(&mut self.rng, now, env);
        }
        while self.late_meta.front().is_some_and(|(at, _, _)| *at <= now) {
            let Some((_, n, meta)) = self.late_meta.pop_front() else { break };
            if self.nodes[n].is_up() {
                let msg = Msg::Meta(meta);
                let env = crate::net::Envelope { from: Endpoint::Control, to: Endpoint::Node(n), conn: None, msg };
                self.net.send(&mut self.rng, now, env);
            }
        }
        // Every change goes out as soon as it commits, as Raft appends it to the followers (so a node may apply
        // two changes made a moment apart one at a time), and the whole state again every 100 ms.
        if now.as_millis().is_multiple_of(100) || self.control.meta.rev != self.pushed_rev {
            self.pushed_rev = self.control.meta.rev;
            self.push_meta(now);
        }
        if now.as_millis().is_multiple_of(5) {
            self.break_cut_connections();
        }
        for c in 0..self.clients.len() {
            self.client_step(c, now, clients_on);
        }
    }

    /// Whether a majority of nodes (the control plane's side) can reach node `n` both ways.
    fn with_majority(&self, n: usize) -> bool {
        self.net.reaches(n, self.nodes.len(), self.nodes.len() / 2 + 1)
    }

    fn deliver(&mut self, now: Duration) {
        for env in self.net.due(now) {
            match (env.to, env.msg) {
                (Endpoint::Control, Msg::Propose(cmd)) => {
                    let Endpoint::Node(n) = env.from else { continue };
                    if self.nodes[n].is_up() && self.with_majority(n) && self.control.propose(cmd, now) {
                        let msg = Msg::Proposed(self.control.shared());
                        let env = crate::net::Envelope { from: Endpoint::Control, to: env.from, conn: None, msg };
                        self.net.send(&mut self.rng, now, env);
                    }
                }
                (Endpoint::Control, Msg::Seqnos { id, report }) => {
                    let Endpoint::Node(n) = env.from else { continue };
                    if self.nodes[n].is_up() && self.with_majority(n) {
                        self.control.seqnos_answer(node_id(n), id, report, now);
                    }
                }
                (Endpoint::Control, Msg::Held { id, reply }) => {
                    let Endpoint::Node(n) = env.from else { continue };
                    if self.nodes[n].is_up() && self.with_majority(n) {
                        self.control.hold_answer(node_id(n), id, reply, now);
                    }
                }
                (Endpoint::Control, Msg::Heartbeat { seqnos }) => {
                    let Endpoint::Node(n) = env.from else { continue };
                    if self.nodes[n].is_up() && self.with_majority(n) {
                        self.control.heartbeat(node_id(n), seqnos, now);
                    }
                }
                (Endpoint::Node(n), msg) => {
                    let from_leader =
                        matches!(msg, Msg::Meta(_) | Msg::Proposed(_) | Msg::SeqnosAsk { .. } | Msg::HoldAsk { .. });
                    if from_leader && !self.with_majority(n) {
                        continue;
                    }
                    let current_rev = self.control.meta.rev;
                    let mut ctx = Ctx {
                        now,
                        net: &mut self.net,
                        rng: &mut self.rng,
                        next_conn: &mut self.next_conn,
                        violations: &mut self.violations,
                        counters: &mut self.counters,
                    };
                    match msg {
                        Msg::Meta(meta) => {
                            let current = meta.rev == current_rev;
                            self.nodes[n].receive_meta(meta, current, &mut ctx)
                        }
                        msg => self.nodes[n].receive(env.from, msg, &mut ctx),
                    }
                }
                (Endpoint::Client(c), Msg::Reply { id, reply }) => self.client_reply(c, id, reply, now),
                _ => {}
            }
        }
    }

    fn push_meta(&mut self, now: Duration) {
        let meta = self.control.shared();
        if self.meta_lag.is_some_and(|(_, until, _)| now >= until) {
            self.meta_lag = None;
        }
        for n in 0..self.nodes.len() {
            if let Some((_, _, lag)) = self.meta_lag.filter(|(lagging, _, _)| *lagging == n) {
                // In order, each change up to `lag` late: changes made a moment apart may arrive far apart.
                let after = self.late_meta.back().map_or(now, |(at, _, _)| (*at).max(now));
                let at = after.max(now + Duration::from_micros(self.rng.below(lag.as_micros() as u64 + 1)));
                self.late_meta.push_back((at, n, meta.clone()));
                continue;
            }
            if self.nodes[n].is_up() {
                let env = crate::net::Envelope {
                    from: Endpoint::Control,
                    to: Endpoint::Node(n),
                    conn: None,
                    msg: Msg::Meta(meta.clone()),
                };
                self.net.send(&mut self.rng, now, env);
            }
        }
    }

    /// TCP connections across a blocked direction, or to a crashed node, break: both ends lose them.
    fn break_cut_connections(&mut self) {
        let mut owners: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for node in &self.nodes {
            for conn in node.conns() {
                owners.entry(conn).or_default().push(node.idx);
            }
        }
        let now = self.now();
        for (conn, ends) in owners {
            let cut = match ends.as_slice() {
                [a, b] => {
                    !self.net.passes(Endpoint::Node(*a), Endpoint::Node(*b))
                        || !self.net.passes(Endpoint::Node(*b), Endpoint::Node(*a))
                }
                // The other end is gone (crashed, or closed its side).
                _ => true,
            };
            // A connection just opened has one end until its DCP_OPEN arrives.
            if cut && (ends.len() == 2 || !self.net.carries(conn)) {
                self.net.drop_where(|e| e.conn == Some(conn));
                for n in ends {
                    self.nodes[n].conn_broken(conn, now);
                }
            }
        }
    }

    fn nemesis(&mut self, now: Duration) {
        if let Some((at, _)) = &self.undo {
            if *at <= now {
                let (_, undo) = self.undo.take().expect("checked");
                match undo {
                    Undo::Heal => {
                        self.net.heal();
                        self.fault_log.push((now, "healed".into()));
                    }
                    Undo::CalmNetwork => self.net.set_config(NetConfig::default()),
                    Undo::DiskSpace(n) => {
                        if let Some(disk) = self.nodes[n].disk() {
                            disk.faults().set_disk_full(false);
                        }
                        self.fault_log.push((now, format!("node {n}: disk space freed")));
                    }
                }
                self.next_fault = now + Duration::from_millis(self.rng.between(500, 3000));
            }
            return;
        }
        // A node just restarted has not reported what it holds yet: the control plane's view of it is from before
        // the crash, and would call the cluster healthy.
        let settled = self.restarted_at.values().all(|at| now >= *at + SETTLE_AFTER_RESTART);
        let disk_trouble = self.kill_at.is_some() || self.nodes.iter().any(|n| n.is_up() && n.disk_trouble());
        if now < self.next_fault
            || !self.crashed.is_empty()
            || !settled
            || disk_trouble
            || !self.control.is_healthy(now)
        {
            return;
        }
        let n = self.nodes.len();
        let members: Vec<usize> = self.control.meta.nodes.keys().map(|id| (*id - 1) as usize).collect();
        let victim = members[self.rng.below(members.len() as u64) as usize];
        // A persistent bucket's runs draw disk faults too; memory-only runs keep their schedules.
        match self.rng.below(if self.cfg.persistent { 10 } else { 8 }) {
            8 | 9 => self.disk_fault(now, victim),
            6 => self.rebalance(now, &members),
            7 => {
                if self.control.start_graceful(node_id(victim), now) {
                    self.fault("graceful failover");
                }
                self.next_fault = now + Duration::from_millis(self.rng.between(500, 3000));
            }
            0 | 1 => {
                // A persistent node restarted before it is failed over warms up and takes back what no replica is
                // ahead on; half the kills of those runs restart so.
                let early = self.cfg.persistent && self.rng.chance(500);
                let after = Duration::from_millis(self.rng.between(200, 3000));
                self.kill(now, victim, after, early);
                self.fault(if early { "crash (kill -9), restarted before failover" } else { "crash (kill -9)" });
            }
            2 => {
                for other in (0..n).filter(|o| *o != victim) {
                    self.net.block(victim, other);
                    self.net.block(other, victim);
                }
                self.fault_log.push((now, format!("node {victim} isolated")));
                let lasts = Duration::from_millis(self.rng.between(1000, 9000));
                self.undo = Some((now + lasts, Undo::Heal));
                self.fault("partition: one node isolated");
            }
            3 => {
                let other = (victim + 1 + self.rng.below(n as u64 - 1) as usize) % n;
                self.net.block(victim, other);
                self.fault_log.push((now, format!("node {victim} -> node {other} blocked")));
                let lasts = Duration::from_millis(self.rng.between(500, 8000));
                self.undo = Some((now + lasts, Undo::Heal));
                self.fault("partition: one direction between two nodes");
            }
            4 => {
                let other = (victim + 1 + self.rng.below(n as u64 - 1) as usize) % n;
                self.net.block(victim, other);
                self.net.block(other, victim);
                self.fault_log.push((now, format!("node {victim} <-> node {other} cut")));
                let lasts = Duration::from_millis(self.rng.between(100, 1500));
                self.undo = Some((now + lasts, Undo::Heal));
                self.fault("partition: a short (flapping) cut between two nodes");
            }
            _ => {
                if self.rng.chance(500) {
                    let secs = self.rng.between(1, 30) as i64;
                    self.clock.jump_wall(if self.rng.chance(500) { secs } else { -secs });
                    self.fault("wall clock jump");
                    self.next_fault = now + Duration::from_millis(self.rng.between(500, 3000));
                } else {
                    self.net.set_config(NetConfig {
                        stall_per_mille: 100,
                        stall: Duration::from_millis(1500),
                        ..NetConfig::default()
                    });
                    self.undo = Some((now + Duration::from_millis(self.rng.between(1000, 4000)), Undo::CalmNetwork));
                    self.fault("message delays and reordering");
                }
            }
        }
    }

    /// kill -9 of `victim`, restarted `after` later (at once or only once failed over, by `early`).
    fn kill(&mut self, now: Duration, victim: usize, after: Duration, early: bool) {
        let lost = self.nodes[victim].crash(&mut self.rng);
        self.fault_log.push((now, format!("node {victim} killed ({lost} unsynced disk changes lost)")));
        *self.counters.entry("unsynced disk changes lost in crashes").or_default() += lost as u64;
        self.net.drop_where(|e| e.to == Endpoint::Node(victim) || e.from == Endpoint::Node(victim));
        self.crashed.insert(victim, (now + after, early));
    }

    /// A fault of `victim`'s disk: a failed write or fsync (the bucket stops persisting until the operator
    /// restarts the node), a full disk (the same, restarted once space is freed), or a slow disk (fsyncs take
    /// seconds: persist-level writes time out, nothing else stops).
    fn disk_fault(&mut self, now: Duration, victim: usize) {
        let Some(disk) = self.nodes[victim].disk() else { return };
        match self.rng.below(5) {
            0 => {
                disk.faults().fail_next_write();
                self.fault_log.push((now, format!("node {victim}: next disk write fails")));
                self.fault("disk: a write fails");
            }
            1 => {
                disk.faults().fail_next_sync();
                self.fault_log.push((now, format!("node {victim}: next fsync fails")));
                self.fault("disk: an fsync fails");
            }
            2 => {
                disk.faults().set_disk_full(true);
                self.fault_log.push((now, format!("node {victim}: disk full")));
                let lasts = Duration::from_millis(self.rng.between(500, 4000));
                self.undo = Some((now + lasts, Undo::DiskSpace(victim)));
                self.fault("disk: full");
                return;
            }
            3 => {
                let lasts = Duration::from_millis(self.rng.between(1000, 6000));
                let fsync = Duration::from_millis(self.rng.between(300, 2500));
                self.nodes[victim].slow_disk(now + lasts, fsync);
                self.fault_log.push((now, format!("node {victim}: fsyncs take {fsync:?} for {lasts:?}")));
                self.fault("disk: slow fsyncs");
            }
            _ => {
                // The disk stalls and the operator kills the hung node: what it acknowledged at `majority` since
                // the stall is in its memory and its replicas' only.
                let stall = Duration::from_millis(self.rng.between(300, 2000));
                self.nodes[victim].slow_disk(now + Duration::from_secs(10), Duration::from_secs(5));
                self.fault_log.push((now, format!("node {victim}: disk stalls, killed in {stall:?}")));
                self.kill_at = Some((now + stall, victim, self.rng.chance(500)));
                self.fault("disk: stalls, node killed");
            }
        }
        self.next_fault = now + Duration::from_millis(self.rng.between(500, 3000));
    }

    /// The operator restarts a node whose bucket stopped persisting (once its disk has space again), as the
    /// server's log asks: "bucket refuses writes until restart".
    fn restart_failed_persistence(&mut self, now: Duration) {
        for n in 0..self.nodes.len() {
            let full = self.nodes[n].disk().is_some_and(|d| d.faults().is_disk_full());
            if self.nodes[n].persistence_failed() && !full && !self.crashed.contains_key(&n) {
                let after = Duration::from_millis(self.rng.between(100, 2000));
                self.kill(now, n, after, true);
                *self.counters.entry("restarts after a persistence failure").or_default() += 1;
            }
        }
    }

    /// A rebalance an operator would run: a spare in (or swapped for a member), or a member out when there is
    /// no spare. Faults go on meanwhile.
    fn rebalance(&mut self, now: Duration, members: &[usize]) {
        if self.control.rebalancing() {
            return;
        }
        let spare = (0..self.nodes.len()).find(|i| !members.contains(i) && self.nodes[*i].is_up());
        let pick = members[self.rng.below(members.len() as u64) as usize];
        let (add, eject, what) = match spare {
            Some(s) if self.rng.chance(500) => (Some(node_id(s)), vec![node_id(pick)], "rebalance: swap"),
            Some(s) => (Some(node_id(s)), Vec::new(), "rebalance: in"),
            None => (None, vec![node_id(pick)], "rebalance: out"),
        };
        if self.control.start_rebalance(add, eject, now) {
            self.fault(what);
            if self.rng.chance(500) {
                let after = Duration::from_millis(self.rng.between(1, 40));
                self.stop_at = Some((now + after, self.rng.chance(700)));
            }
        }
        self.next_fault = now + Duration::from_millis(self.rng.between(500, 3000));
    }

    fn fault(&mut self, what: &'static str) {
        *self.faults.entry(what).or_default() += 1;
        let now = self.now();
        self.fault_log.push((now, what.to_string()));
    }

    /// After the fault phase: the network heals and behaves, disks have space.
    fn calm_down(&mut self, _now: Duration) {
        if self.undo.take().is_some() || self.net.is_partitioned() {
            self.net.heal();
            self.net.set_config(NetConfig::default());
            for node in &self.nodes {
                if let Some(disk) = node.disk() {
                    disk.faults().clear();
                }
            }
        }
    }

    /// A crashed node restarts (a memory-only bucket empty, a persistent one from its disk) once the cluster has
    /// failed it over.
    fn restart_failed_over(&mut self, now: Duration) {
        let due: Vec<usize> = self
            .crashed
            .iter()
            .filter(|(n, (at, early))| {
                // An operator restarts a node the cluster could not fail over (a second failure stopped it) after
                // a while anyway.
                let overdue = now >= *at + RESTART_ANYWAY;
                *at <= now
                    && (self.cfg.restart_before_failover
                        || *early
                        || overdue
                        || matches!(self.control.membership(node_id(**n)), Some(Membership::InactiveFailed) | None))
            })
            .map(|(n, _)| *n)
            .collect();
        for n in due {
            self.crashed.remove(&n);
            self.nodes[n].start(self.clock.clone(), now, &mut self.rng);
            self.restarted_at.insert(n, now);
            *self.counters.entry("restarts").or_default() += 1;
            self.fault_log.push((now, format!("node {n} restarted")));
        }
    }

    fn client_step(&mut self, c: usize, now: Duration, on: bool) {
        if let Some(f) = &self.clients[c].inflight {
            if now >= f.invoke + CLIENT_TIMEOUT {
                let f = self.clients[c].inflight.take().expect("checked");
                self.record(c, &f, now, Outcome::Unknown);
                self.clients[c].next_at = now;
            }
            return;
        }
        if !on || now < self.clients[c].next_at {
            return;
        }
        let (key, kind, op, for_cas) = match self.clients[c].cas_next.take() {
            Some((key, expect, cas)) => {
                let new = self.value();
                let level = self.level();
                (key, OpKind::Cas { expect, new }, ClientOp::Set { value: new, cas, level }, false)
            }
            None => {
                let key = self.rng.below(KEYS_MAX as u64) as usize;
                match self.rng.below(10) {
                    0..=3 => (key, OpKind::Read, ClientOp::Get, false),
                    4..=7 => {
                        let v = self.value();
                        let level = self.level();
                        (key, OpKind::Write(v), ClientOp::Set { value: v, cas: 0, level }, false)
                    }
                    _ => (key, OpKind::Read, ClientOp::Get, true),
                }
            }
        };
        let vb = vb_of(key);
        let Some(Some(active)) = self.control.map().chains[usize::from(vb)].first().copied() else {
            self.clients[c].next_at = now + Duration::from_millis(50);
            return;
        };
        let client = &mut self.clients[c];
        client.next_id += 1;
        let id = client.next_id;
        client.inflight = Some(Inflight { id, key, kind, invoke: now, for_cas });
        let to = Endpoint::Node((active - 1) as usize);
        let env =
            crate::net::Envelope { from: Endpoint::Client(c), to, conn: None, msg: Msg::Request { id, key, vb, op } };
        self.net.send(&mut self.rng, now, env);
    }

    /// `majority` on a memory-only bucket; every level, evenly, on a persistent one.
    fn level(&mut self) -> DurabilityLevel {
        if !self.cfg.persistent {
            return DurabilityLevel::Majority;
        }
        match self.rng.below(3) {
            0 => DurabilityLevel::Majority,
            1 => DurabilityLevel::MajorityAndPersistActive,
            _ => DurabilityLevel::PersistToMajority,
        }
    }

    fn value(&mut self) -> u64 {
        self.next_value += 1;
        self.next_value
    }

    fn client_reply(&mut self, c: usize, id: u64, reply: Reply, now: Duration) {
        if self.clients[c].inflight.as_ref().is_none_or(|f| f.id != id) {
            return;
        }
        let f = self.clients[c].inflight.take().expect("checked");
        let outcome = match (&f.kind, &reply) {
            (OpKind::Read, Reply::Value { value, cas }) => {
                if let (true, Some(v)) = (f.for_cas, value) {
                    self.clients[c].cas_next = Some((f.key, *v, *cas));
                }
                Outcome::Ok(*value)
            }
            (_, Reply::Stored) => Outcome::Ok(None),
            (_, Reply::Ambiguous) => Outcome::Unknown,
            (_, Reply::Refused(e)) => {
                *self.refusals.entry(format!("{e:?}")).or_default() += 1;
                Outcome::Failed
            }
            _ => Outcome::Failed,
        };
        self.record(c, &f, now, outcome);
        let think = Duration::from_millis(self.rng.between(0, 20));
        self.clients[c].next_at = now + think;
    }

    fn record(&mut self, client: usize, f: &Inflight, now: Duration, outcome: Outcome) {
        let name = match (f.kind, outcome) {
            (_, Outcome::Failed) => "failed",
            (_, Outcome::Unknown) => "unknown",
            (OpKind::Read, _) => "read ok",
            (OpKind::Write(_), _) => "write ok",
            (OpKind::Cas { .. }, _) => "cas ok",
        };
        *self.ops.entry(name).or_default() += 1;
        self.history.push(Op { client, key: f.key, kind: f.kind, invoke: f.invoke, complete: now, outcome });
    }

    /// Every vBucket has an active and a replica that are up and hold the same items.
    fn converged(&self) -> bool {
        self.crashed.is_empty()
            && !self.control.rebalancing()
            && self.control.is_healthy(self.now())
            && self.divergence().is_empty()
    }

    /// The vBuckets whose active and replica copies differ (or cannot be read).
    fn divergence(&self) -> Vec<String> {
        let mut out = Vec::new();
        for vb in 0..VBUCKETS {
            let chain = &self.control.map().chains[usize::from(vb)];
            let (Some(Some(a)), Some(Some(r))) = (chain.first(), chain.get(1)) else {
                out.push(format!("vb {vb}: chain {chain:?} lacks a copy"));
                continue;
            };
            let active = self.nodes[(*a - 1) as usize].contents(vb, true);
            let replica = self.nodes[(*r - 1) as usize].contents(vb, false);
            if active.is_none() || active != replica {
                out.push(format!(
                    "vb {vb}: active on node {a} holds {active:?}, replica on node {r} holds {replica:?}"
                ));
            }
        }
        out
    }

    fn finish(mut self) -> Report {
        let now = self.now();
        let mut anomalies = std::mem::take(&mut self.violations);
        if !self.converged() {
            anomalies.push(format!(
                "the cluster did not recover within {:?} after the faults (crashed: {:?}, healthy: {})",
                self.cfg.recovery_phase,
                self.crashed.keys().collect::<Vec<_>>(),
                self.control.is_healthy(now)
            ));
            anomalies.extend(self.divergence().into_iter().map(|d| format!("replica divergence: {d}")));
        }
        // Final reads from each key's active copy.
        for key in 0..KEYS_MAX {
            let vb = vb_of(key);
            let Some(Some(a)) = self.control.map().chains[usize::from(vb)].first().copied() else { continue };
            let node = &self.nodes[(a - 1) as usize];
            let Some(items) = node.contents(vb, true) else { continue };
            let k = crate::node::key_bytes(key);
            let value = items.iter().find(|(ik, _, _)| *ik == k).and_then(|(_, v, _)| *v);
            self.history.push(Op {
                client: usize::MAX,
                key,
                kind: OpKind::Read,
                invoke: now,
                complete: now,
                outcome: Outcome::Ok(value),
            });
        }
        self.fault_log.extend(self.control.log.iter().cloned());
        self.fault_log.sort();
        let mut inconclusive = 0;
        let mut failing_history = None;
        for key in 0..KEYS_MAX {
            let ops: Vec<Op> = self.history.iter().filter(|o| o.key == key).cloned().collect();
            match check_key(&ops) {
                Verdict::Linearizable => {}
                Verdict::Inconclusive => inconclusive += 1,
                Verdict::Violation => {
                    anomalies.push(format!("key k{key}: history not linearizable ({} operations)", ops.len()));
                    if failing_history.is_none() {
                        let at = crate::history::first_violation(&ops);
                        failing_history = Some(format_history(key, &ops, at, &self.fault_log));
                    }
                }
            }
        }
        if failing_history.is_none() && !anomalies.is_empty() {
            let mut t = String::from("faults:");
            for (at, f) in &self.fault_log {
                let _ = write!(t, "\n  {:>6} {f}", at.as_millis());
            }
            failing_history = Some(t);
        }
        let mut counters = std::mem::take(&mut self.counters);
        counters.extend(self.control.counters.iter().map(|(k, v)| (*k, *v)));
        Report {
            seed: self.cfg.seed,
            simulated: now,
            ops: std::mem::take(&mut self.ops),
            refusals: std::mem::take(&mut self.refusals),
            faults: std::mem::take(&mut self.faults),
            counters,
            anomalies,
            inconclusive_keys: inconclusive,
            failing_history,
        }
    }
}

/// The operations on `key` around the point where its history stops being linearizable, and the faults.
fn format_history(key: usize, ops: &[Op], at: Option<Duration>, faults: &[(Duration, String)]) -> String {
    let mut s = String::from("faults:");
    for (t, f) in faults {
        let _ = write!(s, "\n  {:>6} {f}", t.as_millis());
    }
    let at = at.unwrap_or(Duration::MAX);
    let _ = write!(
        s,
        "\nhistory of k{key} up to {} ms, where no order explains it (invoke..complete ms, client, op, outcome):",
        at.as_millis()
    );
    let from = at.saturating_sub(Duration::from_secs(2));
    for o in ops.iter().filter(|o| o.complete >= from && o.invoke <= at) {
        let client = if o.client == usize::MAX { "final".to_string() } else { o.client.to_string() };
        let _ = write!(
            s,
            "\n  {:>6}..{:<6} {client:>5} {:?} -> {:?}",
            o.invoke.as_millis(),
            o.complete.as_millis(),
            o.kind,
            o.outcome
        );
    }
    s
}
