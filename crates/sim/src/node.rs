//! One simulated node: a real engine `Bucket`, the client requests it serves, the vBucket states it applies from
//! the metadata, and its side of every replication connection, driven through the real DCP state machines
//! (`ProducerConnection`, `ConsumerStream`) with real frames. The driving follows the server's drivers
//! (`server/src/dcp/{producer,consumer}.rs`, `server/src/cluster/reconcile.rs`) step for step, without sockets
//! or tasks.

mod consumer;
mod persistence;
mod producer;
mod takeback;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use settee_cluster::control::Holds;
use settee_cluster::metadata::{BucketMeta, Membership, Recovery};
use settee_cluster::peer::{HoldReply, SeqnoReport, VbSeqnos};
use settee_cluster::{ClusterMetadata, MetaCommand, NodeId};
use settee_engine::{
    Bucket, BucketConfig, BucketKind, DocKey, EngineError, EvictionPolicy, StoreMode, StoreRequest, VbState,
    WriteOptions,
};
use settee_types::{Clock, Seqno, VbId};

use crate::msg::{ClientOp, Msg, Reply};
use crate::net::{Endpoint, Envelope, Net};
use crate::rng::SimRng;
use consumer::Consumer;
use persistence::Persistence;
use producer::Producer;
use takeback::TakebackAsk;

/// The vBuckets the simulated bucket uses (of the engine's 1024): enough for several per node, few enough that
/// a step is cheap.
pub const VBUCKETS: u16 = 16;
pub const BUCKET: &str = "sim";
/// A durable write still pending after this long is aborted, and its writer told its outcome is unknown.
const DURABILITY_TIMEOUT: Duration = Duration::from_secs(3);
const HEARTBEAT_EVERY: Duration = Duration::from_millis(200);
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// How long a node waits for the answer to its proposal before it asks again.
const PROPOSE_RETRY: Duration = Duration::from_secs(2);
/// How long a held vBucket may take to finish the durable writes it had prepared (the server's).
const TAKEOVER_SETTLE: Duration = Duration::from_secs(10);

/// What a node's step needs from the world.
pub struct Ctx<'a> {
    pub now: Duration,
    pub net: &'a mut Net<Msg>,
    pub rng: &'a mut SimRng,
    pub next_conn: &'a mut u64,
    pub violations: &'a mut Vec<String>,
    pub counters: &'a mut BTreeMap<&'static str, u64>,
}

impl Ctx<'_> {
    pub fn send(&mut self, from: Endpoint, to: Endpoint, conn: Option<u64>, msg: Msg) {
        self.net.send(self.rng, self.now, Envelope { from, to, conn, msg });
    }

    pub fn count(&mut self, what: &'static str) {
        *self.counters.entry(what).or_default() += 1;
    }

    fn conn_id(&mut self) -> u64 {
        *self.next_conn += 1;
        *self.next_conn
    }
}

/// A durable write's outcome, queued by the engine's waiter for the node's next step.
type Outcomes = Arc<Mutex<Vec<(Endpoint, u64, Result<(), EngineError>)>>>;

pub struct SimNode {
    pub idx: usize,
    pub bucket: Option<Bucket>,
    meta: Option<Arc<ClusterMetadata>>,
    /// Whether the node has confirmed its metadata current with the leader since it started (the server's
    /// `catch_up`, a linearizable read): until then nothing is active here.
    current: bool,
    /// Model the build before auto-reprovision existed (a restarted node serves its empty copies).
    pub reprovision: bool,
    /// The bucket is a persistent (couchbase) one: its disk, flushers and warmup. None: memory-only.
    persistence: Option<Persistence>,
    /// A restarted member's comparison with its replicas before it takes its persistent actives back.
    takeback: Option<TakebackAsk>,
    /// Model the build before the take-back existed (a restarted persistent node serves what its disk held).
    pub takeback_enabled: bool,
    starts: u32,
    /// When this node last proposed its reprovision, while waiting for the answer.
    proposed_at: Option<Duration>,
    consumers: BTreeMap<usize, Consumer>,
    producers: BTreeMap<u64, Producer>,
    outcomes: Outcomes,
    /// Durable writes waiting, with when they time out.
    pending: Vec<(VbId, Seqno, Duration)>,
    next_heartbeat: Duration,
    /// When a replication connection to each source may be opened again.
    reconnect_at: BTreeMap<usize, Duration>,
    /// Active vBuckets held for a takeover (the real `Holds`, with its lease).
    holds: Holds,
    /// Holds to answer once their durable writes in flight finished (or at the deadline): (asker, id, vBuckets).
    hold_replies: Vec<(Endpoint, u64, Vec<u16>, Duration)>,
    /// Per vBucket: (generation, high seqno) last seen, to check that seqnos never go back within a generation.
    seen: BTreeMap<u16, (u64, Seqno)>,
}

/// A document as the final comparison sees it: key, value, CAS.
pub type Item = (Vec<u8>, Option<u64>, u64);

pub fn node_id(idx: usize) -> NodeId {
    idx as NodeId + 1
}

pub fn key_bytes(key: usize) -> Vec<u8> {
    format!("k{key}").into_bytes()
}

/// The vBucket of a simulated key.
pub fn vb_of(key: usize) -> u16 {
    let h = settee_types::vbucket_for_key(&key_bytes(key), 1024).0;
    h % VBUCKETS
}

impl SimNode {
    pub fn new(idx: usize) -> SimNode {
        SimNode {
            idx,
            bucket: None,
            meta: None,
            current: false,
            reprovision: true,
            persistence: None,
            takeback: None,
            takeback_enabled: true,
            starts: 0,
            proposed_at: None,
            consumers: BTreeMap::new(),
            producers: BTreeMap::new(),
            outcomes: Arc::default(),
            pending: Vec::new(),
            next_heartbeat: Duration::ZERO,
            reconnect_at: BTreeMap::new(),
            holds: Holds::default(),
            hold_replies: Vec::new(),
            seen: BTreeMap::new(),
        }
    }

    /// Started again after a crash: its memory-only bucket came back empty, so before anything is active here it
    /// has the cluster reprovision it (the server's `ClusterDriver::reprovision`).
    fn needs_reprovision_check(&self) -> bool {
        self.starts > 1 && self.reprovision && self.persistence.is_none()
    }

    pub fn is_up(&self) -> bool {
        self.bucket.is_some()
    }

    fn me(&self) -> Endpoint {
        Endpoint::Node(self.idx)
    }

    /// Makes the node's bucket a persistent one, with a disk that outlives its crashes.
    pub fn make_persistent(&mut self) {
        self.persistence = Some(Persistence::default());
    }

    pub fn is_persistent(&self) -> bool {
        self.persistence.is_some()
    }

    /// Starts the process: a memory-only bucket comes up empty; a persistent one warms up from its disk. Every
    /// vBucket is dead until the metadata arrives.
    pub fn start(&mut self, clock: Arc<dyn Clock>, now: Duration, rng: &mut SimRng) {
        let persistent = self.persistence.is_some();
        let config = BucketConfig {
            name: BUCKET.into(),
            uuid: "5157e5157e5157e5157e5157e5157e51".into(),
            kind: if persistent { BucketKind::Couchbase } else { BucketKind::Ephemeral },
            ram_quota_bytes: 256 << 20,
            replicas: 1,
            eviction: if persistent { EvictionPolicy::ValueOnly } else { EvictionPolicy::NoEviction },
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
            conflict_resolution: Default::default(),
        };
        let bucket = Bucket::new(config, clock);
        // The engine makes every vBucket active; the server's reconcile, which runs as the bucket is created,
        // leaves them dead until the metadata says otherwise.
        for vb in 0..VBUCKETS {
            bucket.set_vbucket_state(VbId(vb), VbState::Dead, 0);
        }
        if let Some(p) = self.persistence.as_mut() {
            p.start(&bucket, now, rng);
        }
        self.bucket = Some(bucket);
        self.seen.clear();
        self.starts += 1;
    }

    /// kill -9: memory, connections and waiting writers are gone; a disk keeps what it synced and some of what
    /// it did not. Returns how many unsynced changes the disk lost.
    pub fn crash(&mut self, rng: &mut SimRng) -> usize {
        self.bucket = None;
        self.takeback = None;
        self.meta = None;
        self.current = false;
        self.proposed_at = None;
        self.consumers.clear();
        self.producers.clear();
        self.outcomes.lock().expect("outcomes").clear();
        self.pending.clear();
        self.reconnect_at.clear();
        self.holds = Holds::default();
        self.hold_replies.clear();
        self.persistence.as_mut().map_or(0, |p| p.crash(rng))
    }

    /// Disk faults, for the nemesis.
    pub fn disk(&self) -> Option<&crate::disk::SimDisk> {
        self.persistence.as_ref().map(|p| &p.disk)
    }

    pub fn slow_disk(&mut self, until: Duration, fsync: Duration) {
        if let Some(p) = self.persistence.as_mut() {
            p.slow_down(until, fsync);
        }
    }

    /// Whether a disk fault is armed and has not struck yet, or struck and the node awaits its restart: the
    /// nemesis waits for neither before the next fault.
    pub fn disk_trouble(&self) -> bool {
        self.disk().is_some_and(|d| d.faults().armed() || d.poisoned()) || self.persistence_failed()
    }

    /// Whether the bucket stopped persisting (a failed write or fsync): it takes no writes until restarted.
    pub fn persistence_failed(&self) -> bool {
        self.bucket.as_ref().is_some_and(|b| b.store_failed())
    }

    /// The connections this node holds (replication, either side).
    pub fn conns(&self) -> Vec<u64> {
        self.consumers.values().map(|c| c.conn).chain(self.producers.keys().copied()).collect()
    }

    /// A connection broke (a partition, the peer crashed): its state goes; a consumer reconnects after a pause.
    pub fn conn_broken(&mut self, conn: u64, now: Duration) {
        if let Some(p) = self.producers.remove(&conn) {
            p.close(self.bucket.as_ref());
        }
        let gone: Vec<usize> = self.consumers.iter().filter(|(_, c)| c.conn == conn).map(|(s, _)| *s).collect();
        for source in gone {
            self.consumers.remove(&source);
            self.reconnect_at.insert(source, now + RECONNECT_PAUSE);
        }
    }

    /// Metadata from the leader; `current` when it is the leader's latest (what a linearizable read returns).
    pub fn receive_meta(&mut self, meta: Arc<ClusterMetadata>, current: bool, ctx: &mut Ctx<'_>) {
        if self.bucket.is_none() {
            return;
        }
        if current && !self.current && self.needs_reprovision_check() {
            let me = node_id(self.idx);
            if let Some(b) = meta.buckets.get(BUCKET) {
                if settee_cluster::vbmap::reprovision(&b.map, me) != b.map {
                    // One proposal at a time, asked again only when its answer is overdue (the server's catch-up
                    // loop proposes, waits for the commit, and becomes current with the metadata it returns).
                    if self.proposed_at.is_none_or(|at| ctx.now >= at + PROPOSE_RETRY) {
                        self.proposed_at = Some(ctx.now);
                        let cmd = MetaCommand::Reprovision { bucket: BUCKET.into(), node: me };
                        ctx.send(self.me(), Endpoint::Control, None, Msg::Propose(cmd));
                    }
                    return;
                }
            }
        }
        if current && !self.current && self.needs_takeback_check() {
            if let takeback::Next::Wait = self.take_back(&meta, ctx) {
                return;
            }
        }
        let became_current = current && !self.current;
        self.current |= current;
        if became_current || self.meta.as_ref().is_none_or(|m| m.rev < meta.rev) {
            self.meta = Some(meta);
            self.reconcile(ctx);
        }
    }

    pub fn receive(&mut self, from: Endpoint, msg: Msg, ctx: &mut Ctx<'_>) {
        if self.bucket.is_none() {
            return;
        }
        match msg {
            Msg::Meta(_) => {}
            Msg::Proposed(meta) => {
                // The reprovision committed: current with the metadata it left.
                if !self.current {
                    self.current = true;
                    self.proposed_at = None;
                    self.takeback = None;
                    self.meta = Some(meta);
                    self.reconcile(ctx);
                }
            }
            Msg::DcpOpen { conn } => {
                let Endpoint::Node(consumer) = from else { return };
                self.producers.insert(conn, Producer::open(conn, consumer, ctx.now));
            }
            Msg::Dcp { conn, frame } => self.dcp_frame(conn, &frame, ctx),
            Msg::Request { id, key, vb, op } => {
                let reply = self.serve(from, id, key, VbId(vb), op, ctx.now);
                if let Some(reply) = reply {
                    ctx.send(self.me(), from, None, Msg::Reply { id, reply });
                }
            }
            Msg::SeqnosAsk { id } => {
                let report = self.seqno_report();
                ctx.send(self.me(), from, None, Msg::Seqnos { id, report });
            }
            Msg::HoldAsk { id, hold, vbs, all, until_chains } => {
                let vbs = match (all, hold, self.meta.as_ref().and_then(|m| m.buckets.get(BUCKET))) {
                    (true, true, Some(b)) => b.map.actives_of(node_id(self.idx)),
                    (true, false, _) => self.holds.of(BUCKET).into_iter().collect(),
                    _ => vbs,
                };
                for vb in &vbs {
                    if hold {
                        self.holds.hold_until(BUCKET, *vb, ctx.now, until_chains.get(vb).cloned());
                    } else {
                        self.holds.release(BUCKET, *vb);
                    }
                }
                self.reconcile(ctx);
                if hold {
                    self.hold_replies.push((from, id, vbs, ctx.now + TAKEOVER_SETTLE));
                }
            }
            Msg::Seqnos { id, report } => {
                if let Endpoint::Node(replica) = from {
                    self.takeback_report(replica, id, &report);
                }
            }
            Msg::Reply { .. } | Msg::Heartbeat { .. } | Msg::Propose(_) | Msg::Held { .. } => {}
        }
    }

    fn dcp_frame(&mut self, conn: u64, frame: &[u8], ctx: &mut Ctx<'_>) {
        let Some(bucket) = self.bucket.as_ref() else { return };
        if frame.is_empty() {
            // The consumer closed the connection.
            if let Some(p) = self.producers.remove(&conn) {
                p.close(Some(bucket));
            }
            return;
        }
        if let Some(p) = self.producers.get_mut(&conn) {
            p.on_frames(bucket, frame, ctx, self.idx);
            return;
        }
        let Some(source) = self.consumers.iter().find(|(_, c)| c.conn == conn).map(|(s, _)| *s) else { return };
        let outcome = self.consumers.get_mut(&source).map(|c| c.on_frames(bucket, frame, ctx, self.idx));
        if let Some(Err(why)) = outcome {
            // As the server's feed does: the connection is dropped and opened again after a pause.
            ctx.count("replication connections dropped by the consumer");
            if std::env::var_os("SIM_DEBUG").is_some() {
                eprintln!("{:?} node {} drops its connection from node {source}: {why}", ctx.now, self.idx);
            }
            if why.contains("resent") {
                ctx.violations.push(format!("node {}: {why}", self.idx));
            }
            self.close_consumer(source, ctx);
        }
    }

    fn close_consumer(&mut self, source: usize, ctx: &mut Ctx<'_>) {
        close_consumer(self.idx, &mut self.consumers, &mut self.reconnect_at, source, ctx);
    }

    /// A client request: reads from the active copy; writes are durable at the client's level.
    fn serve(&mut self, client: Endpoint, id: u64, key: usize, vb: VbId, op: ClientOp, now: Duration) -> Option<Reply> {
        let bucket = self.bucket.as_ref()?;
        let k = key_bytes(key);
        let doc = DocKey::new(0, &k);
        match op {
            ClientOp::Get => Some(match bucket.get(vb, &doc, |i| (parse(i.body().0), i.cas)) {
                Ok((value, cas)) => Reply::Value { value, cas },
                Err(EngineError::NotFound) => Reply::Value { value: None, cas: 0 },
                Err(e) => Reply::Refused(e),
            }),
            ClientOp::Set { value, cas, level } => {
                let body = value.to_string();
                let opts = WriteOptions { cas, durability: Some(level), preserve_ttl: false };
                let req = StoreRequest { mode: StoreMode::Set, value: body.as_bytes(), flags: 0, expiry: 0, opts };
                match bucket.store(vb, &doc, req) {
                    Ok(m) if m.sync_write => {
                        let outcomes = self.outcomes.clone();
                        self.pending.push((vb, m.seqno, now + DURABILITY_TIMEOUT));
                        let waiter = Box::new(move |r| outcomes.lock().expect("outcomes").push((client, id, r)));
                        bucket.when_sync_write_completes(vb, m.seqno, waiter);
                        None
                    }
                    Ok(_) => Some(Reply::Stored),
                    Err(e) => Some(Reply::Refused(e)),
                }
            }
        }
    }

    /// One step of the node's own work: durable-write timeouts and outcomes, replication, heartbeats.
    pub fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let Some(bucket) = self.bucket.as_ref() else { return };
        let now = ctx.now;
        if let Some(p) = self.persistence.as_mut() {
            if p.tick(bucket, now, ctx.rng, ctx.counters) {
                // Warmup done: the map is applied again (the server's reconcile after warmup).
                self.reconcile(ctx);
            }
        }
        let Some(bucket) = self.bucket.as_ref() else { return };
        let (due, waiting): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(_, _, at)| *at <= now);
        self.pending = waiting;
        for (vb, seqno, _) in due {
            if bucket.abort_prepare(vb, seqno) {
                ctx.count("durable writes timed out");
            }
        }
        let done: Vec<_> = std::mem::take(&mut *self.outcomes.lock().expect("outcomes"));
        for (client, id, r) in done {
            let reply = match r {
                Ok(()) => Reply::Stored,
                Err(EngineError::SyncWriteAmbiguous) => Reply::Ambiguous,
                Err(e) => Reply::Refused(e),
            };
            ctx.send(self.me(), client, None, Msg::Reply { id, reply });
        }
        self.answer_holds(ctx);
        if !self.holds.expire(now).is_empty() {
            ctx.count("takeover holds expired");
            self.reconcile(ctx);
        }
        let Some(bucket) = self.bucket.as_ref() else { return };
        for p in self.producers.values_mut() {
            p.tick(bucket, ctx, self.idx);
        }
        let me = self.idx;
        for c in self.consumers.values_mut() {
            c.tick(bucket, ctx, me);
        }
        self.connect_sources(ctx);
        if now >= self.next_heartbeat {
            self.next_heartbeat = now + HEARTBEAT_EVERY;
            let seqnos = self.seqnos();
            ctx.send(self.me(), Endpoint::Control, None, Msg::Heartbeat { seqnos });
        }
        if now.as_millis().is_multiple_of(10) {
            self.check_seqnos(ctx);
        }
    }

    /// (vb, is active, high seqno) of every copy this node holds.
    fn seqnos(&self) -> Vec<(u16, bool, u64)> {
        let Some(bucket) = self.bucket.as_ref() else { return Vec::new() };
        (0..VBUCKETS)
            .filter_map(|vb| {
                let info = bucket.stream_info(VbId(vb)).ok()?;
                match info.state {
                    VbState::Active => Some((vb, true, info.high_seqno)),
                    VbState::Replica => Some((vb, false, info.high_seqno)),
                    _ => None,
                }
            })
            .collect()
    }

    /// DESIGN §5: within one generation of a vBucket (a reset starts a new one) the high seqno never goes back.
    fn check_seqnos(&mut self, ctx: &mut Ctx<'_>) {
        let Some(bucket) = self.bucket.as_ref() else { return };
        for vb in 0..VBUCKETS {
            let Ok(info) = bucket.stream_info(VbId(vb)) else { continue };
            if bucket.persisted_seqno(VbId(vb)).is_some_and(|p| p > info.high_seqno) {
                ctx.violations.push(format!("node {} vb {vb}: persisted seqno above the high seqno", self.idx));
            }
            let now = (info.generation, info.high_seqno);
            if let Some(before) = self.seen.insert(vb, now) {
                if before.0 == now.0 && now.1 < before.1 {
                    ctx.violations.push(format!(
                        "node {} vb {vb}: high seqno went back from {} to {} in generation {}",
                        self.idx, before.1, now.1, now.0
                    ));
                }
            }
        }
    }

    /// Applies the metadata's map to the local vBuckets (as `reconcile.rs` does) and fits the replication
    /// connections to it.
    fn reconcile(&mut self, ctx: &mut Ctx<'_>) {
        let (Some(bucket), Some(meta)) = (self.bucket.as_ref(), self.meta.clone()) else { return };
        let Some(b) = meta.buckets.get(BUCKET) else { return };
        let me = node_id(self.idx);
        let keep_data = meta.nodes.get(&me).is_some_and(|n| n.membership == Membership::InactiveFailed)
            || meta.recovery.get(&me) == Some(&Recovery::Delta);
        self.holds.end_committed(BUCKET, &b.map, me);
        let held = self.holds.of(BUCKET);
        let mut sources: BTreeMap<usize, BTreeSet<VbId>> = BTreeMap::new();
        for vb in 0..VBUCKETS {
            let owned = wanted_state(b, vb, me);
            let wanted = match owned {
                VbState::Active if !self.current => VbState::Dead,
                VbState::Active if held.contains(&vb) => VbState::Pending,
                state => state,
            };
            let v = VbId(vb);
            let Ok(info) = bucket.stream_info(v) else { continue };
            if info.state != wanted {
                bucket.set_vbucket_state(v, wanted, ctx.rng.next_u64());
            }
            // Not while warmup loads the bucket: a copy emptied now would get its items back from warmup.
            if owned == VbState::Dead && self.current && !keep_data && info.high_seqno > 0 && !bucket.is_warming_up() {
                bucket.reset_vbucket(v);
            }
            let chain = &b.map.chains[usize::from(vb)];
            if wanted == VbState::Active || wanted == VbState::Pending {
                bucket.set_replication_chain(v, &chain[1..]);
            }
            if wanted == VbState::Replica {
                if let Some(Some(active)) = chain.first() {
                    sources.entry((*active - 1) as usize).or_default().insert(v);
                }
            }
        }
        let gone: Vec<usize> = self.consumers.keys().filter(|s| !sources.contains_key(s)).copied().collect();
        for source in gone {
            close_consumer(self.idx, &mut self.consumers, &mut self.reconnect_at, source, ctx);
        }
        for (source, vbs) in sources {
            match self.consumers.get_mut(&source) {
                Some(c) => c.set_wanted(bucket, vbs, ctx, self.idx),
                None => {
                    self.reconnect_at.entry(source).or_insert(Duration::ZERO);
                }
            }
        }
    }

    /// Opens the replication connections the map needs and does not have, once their pause is over.
    fn connect_sources(&mut self, ctx: &mut Ctx<'_>) {
        let (Some(bucket), Some(meta)) = (self.bucket.as_ref(), self.meta.clone()) else { return };
        let Some(b) = meta.buckets.get(BUCKET) else { return };
        let me = node_id(self.idx);
        let due: Vec<usize> = self
            .reconnect_at
            .iter()
            .filter(|(s, at)| **at <= ctx.now && !self.consumers.contains_key(s))
            .map(|(s, _)| *s)
            .collect();
        for source in due {
            self.reconnect_at.remove(&source);
            let vbs: BTreeSet<VbId> = (0..VBUCKETS)
                .filter(|vb| {
                    let chain = &b.map.chains[usize::from(*vb)];
                    wanted_state(b, *vb, me) == VbState::Replica && chain.first() == Some(&Some(node_id(source)))
                })
                .map(VbId)
                .collect();
            if vbs.is_empty() {
                continue;
            }
            let conn = ctx.conn_id();
            ctx.count("replication connections opened");
            ctx.send(self.me(), Endpoint::Node(source), Some(conn), Msg::DcpOpen { conn });
            let mut c = Consumer::new(conn, source);
            c.set_wanted(bucket, vbs, ctx, self.idx);
            self.consumers.insert(source, c);
        }
    }

    /// Answers the holds whose vBuckets finished their durable writes in flight, or whose time is up, with the
    /// seqno each stopped at.
    fn answer_holds(&mut self, ctx: &mut Ctx<'_>) {
        let Some(bucket) = self.bucket.as_ref() else { return };
        let now = ctx.now;
        let (ready, waiting): (Vec<_>, Vec<_>) = self.hold_replies.drain(..).partition(|(_, _, vbs, until)| {
            *until <= now || vbs.iter().all(|vb| *vb >= VBUCKETS || !bucket.sync_writes_in_flight(VbId(*vb)))
        });
        self.hold_replies = waiting;
        for (to, id, vbs, _) in ready {
            let mut stopped = VbSeqnos::default();
            stopped.add_bucket(BUCKET);
            for vb in vbs {
                let high = if vb < VBUCKETS { bucket.stream_info(VbId(vb)).map_or(0, |i| i.high_seqno) } else { 0 };
                stopped.insert(BUCKET, vb, high);
            }
            ctx.send(self.me(), to, None, Msg::Held { id, reply: HoldReply { stopped } });
        }
    }

    /// What `/settee/node/seqnos` answers: the high seqno of every active or replica copy (a copy held pending for
    /// a takeover is neither: the rebalance reads its presence as a hold that was lost), and of dead copies that
    /// still hold data. The vBuckets the simulation does not use are empty copies where the map (or a copy being
    /// built) places them.
    fn seqno_report(&self) -> SeqnoReport {
        let mut report = SeqnoReport::default();
        report.buckets.add_bucket(BUCKET);
        let (Some(bucket), Some(meta)) = (self.bucket.as_ref(), self.meta.as_ref()) else { return report };
        let Some(b) = meta.buckets.get(BUCKET) else { return report };
        report.rev = meta.rev;
        let me = node_id(self.idx);
        let held = self.holds.of(BUCKET);
        for (vb, chain) in (0..u16::MAX).zip(&b.map.chains) {
            if vb < VBUCKETS {
                let Ok(info) = bucket.stream_info(VbId(vb)) else { continue };
                match info.state {
                    VbState::Active | VbState::Replica => report.buckets.insert(BUCKET, vb, info.high_seqno),
                    VbState::Pending => {}
                    _ if info.high_seqno > 0 => report.kept.insert(BUCKET, vb, info.high_seqno),
                    _ => {}
                }
            } else if (chain.contains(&Some(me)) && !held.contains(&vb))
                || b.building.get(&vb).is_some_and(|n| n.contains(&me))
            {
                report.buckets.insert(BUCKET, vb, 0);
            }
        }
        report
    }

    /// Every live item of `vb` as (key, value, cas): for the final comparison of copies.
    pub fn contents(&self, vb: u16, active: bool) -> Option<Vec<Item>> {
        let bucket = self.bucket.as_ref()?;
        let mut out = Vec::new();
        for key in 0..crate::sim::KEYS_MAX {
            if vb_of(key) != vb {
                continue;
            }
            let k = key_bytes(key);
            let doc = DocKey::new(0, &k);
            let r = if active {
                bucket.get(VbId(vb), &doc, |i| (parse(i.body().0), i.cas))
            } else {
                bucket.get_replica(VbId(vb), &doc, |i| (parse(i.body().0), i.cas))
            };
            match r {
                Ok((v, cas)) => out.push((k, v, cas)),
                Err(EngineError::NotFound) => {}
                Err(_) => return None,
            }
        }
        Some(out)
    }

    pub fn state_of(&self, vb: u16) -> Option<VbState> {
        Some(self.bucket.as_ref()?.stream_info(VbId(vb)).ok()?.state)
    }
}

/// Closes the replication connection to `source` (the peer learns by an empty frame, as by a closed socket);
/// another may be opened after a pause.
fn close_consumer(
    me: usize,
    consumers: &mut BTreeMap<usize, Consumer>,
    reconnect_at: &mut BTreeMap<usize, Duration>,
    source: usize,
    ctx: &mut Ctx<'_>,
) {
    if let Some(c) = consumers.remove(&source) {
        ctx.net.drop_where(|e| e.conn == Some(c.conn));
        ctx.send(Endpoint::Node(me), Endpoint::Node(source), None, Msg::Dcp { conn: c.conn, frame: Vec::new() });
        reconnect_at.insert(source, ctx.now + RECONNECT_PAUSE);
    }
}

/// What vBucket `vb` should be on node `me` by the map (the server's `wanted_state`, for a node whose metadata is
/// current).
fn wanted_state(b: &BucketMeta, vb: u16, me: NodeId) -> VbState {
    let Some(chain) = b.map.chains.get(usize::from(vb)) else { return VbState::Dead };
    if chain.first() == Some(&Some(me)) {
        VbState::Active
    } else if chain.iter().skip(1).any(|n| *n == Some(me))
        || b.building.get(&vb).is_some_and(|nodes| nodes.contains(&me))
    {
        VbState::Replica
    } else {
        VbState::Dead
    }
}

fn parse(body: &[u8]) -> Option<u64> {
    std::str::from_utf8(body).ok()?.parse().ok()
}
