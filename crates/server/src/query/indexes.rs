//! The node's query indexes: one `MemIndex` per index definition of the cluster metadata, over the vBuckets this
//! node holds as active, fed from the engine's change stream.
//!
//! Each bucket with indexes has one feeder task. It keeps a DCP cursor on every active vBucket (the same cursors
//! the DCP producer reads, so a backfill covers a vBucket the feeder has not seen) and, when the bucket's
//! `DcpHub` says a vBucket changed, reads what is new and applies it to every index of the document's collection.
//! Each index records the seqno it has applied per vBucket: `request_plus` waits on those. A new index makes the
//! feeder reopen its cursors from zero; indexes that already applied a change skip it. A vBucket that stops being
//! active here has its entries removed.
//!
//! The indexes of a couchbase bucket are also written to disk as snapshots (`index_snapshots`): periodically, when
//! an index comes online, and at shutdown. After a restart the feeder waits for the bucket's warmup, loads each
//! index's snapshot and resumes from the seqnos it saved.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use settee_cluster::{ClusterMetadata, IndexSpec};
use settee_engine::{ChangeKind, CursorId, DcpChange, DcpRead, DocKey, EngineError, VbState};
use settee_query::datastore::DocMeta;
use settee_query::datastore::KeyspaceName;
use settee_query::index::{Change, IndexDef, IndexKeyDef, IndexState, MemIndex};
use settee_query::value::Value;
use settee_types::limits::NUM_VBUCKETS;
use settee_types::{vbucket_for_key, Clock, VbId};

use super::index_snapshots;
use crate::dcp::StreamWaker;
use crate::node::{BucketHandle, Node};

/// How often the feeder looks at every vBucket even without a wake-up (vBuckets that became active, lost wakes).
const FEED_TICK: Duration = Duration::from_millis(100);
/// Keys and values copied out of a vBucket per read.
const FEED_READ_BYTES: usize = 1 << 20;
/// At most this much is read from one vBucket per pass, so one large backfill does not hold up the others.
const FEED_ROUND_BYTES_MAX: usize = 32 << 20;

const DEFERRED: u8 = 0;
const BUILDING: u8 = 1;
const ONLINE: u8 = 2;

/// One index on this node.
pub struct IndexInstance {
    pub def: IndexDef,
    pub cid: u32,
    /// A secondary index's compiled keys and condition; `None` for a primary index (its one key is the id).
    keys: Option<settee_query::index::KeyPlan>,
    state: AtomicU8,
    pub mem: MemIndex,
    /// While building: the high seqno of each active vBucket when the build started; online once applied.
    build_targets: Mutex<Vec<(u16, u64)>>,
    /// Per vBucket: the index holds that vBucket's entries (the feeder read it since it became active here).
    ready: Vec<AtomicBool>,
    /// The snapshot (if any) was loaded: until then the index is neither fed nor written to disk.
    loaded: AtomicBool,
    /// Changes (document updates and deletions) applied since the node started.
    pub docs_indexed: AtomicU64,
    /// Size of the last snapshot written or loaded, in bytes.
    pub snapshot_bytes: AtomicU64,
    /// What the last snapshot reflected (a digest of the applied seqnos and ready flags): unchanged, none is written.
    snapshot_digest: AtomicU64,
    /// When (clock nanoseconds) the index last reflected every change its vBuckets had: the bound on its staleness.
    pub caught_up_nanos: AtomicU64,
}

impl IndexInstance {
    /// Whether the index has the entries of vBucket `vb` (it is active here and the feeder has read it).
    pub fn is_ready(&self, vb: u16) -> bool {
        self.ready.get(usize::from(vb)).is_some_and(|r| r.load(Ordering::Acquire))
    }

    fn set_ready(&self, vb: u16, on: bool) {
        if let Some(r) = self.ready.get(usize::from(vb)) {
            r.store(on, Ordering::Release);
        }
    }

    pub fn state(&self) -> IndexState {
        match self.state.load(Ordering::Acquire) {
            DEFERRED => IndexState::Deferred,
            BUILDING => IndexState::Building,
            _ => IndexState::Online,
        }
    }

    /// The index's statistics now (`now_nanos` on the node's clock).
    pub fn stats(&self, bucket: &BucketHandle, now_nanos: u64) -> IndexStats {
        let applied = self.mem.applied_all();
        let mut pending = 0u64;
        for (vb, &a) in applied.iter().enumerate() {
            if let Ok(info) = bucket.stream_info(VbId(vb as u16)) {
                if info.state == VbState::Active {
                    pending += info.high_seqno.saturating_sub(a);
                }
            }
        }
        let state = self.state();
        let build_progress = match state {
            IndexState::Online => 100,
            IndexState::Deferred => 0,
            IndexState::Building => {
                let targets = self.build_targets.lock();
                let total: u64 = targets.iter().map(|&(_, t)| t).sum();
                let done: u64 =
                    targets.iter().map(|&(vb, t)| applied.get(usize::from(vb)).map_or(0, |&a| a.min(t))).sum();
                (done * 100).checked_div(total).map_or(0, |p| p.min(99) as u8)
            }
        };
        let caught_up = self.caught_up_nanos.load(Ordering::Acquire);
        IndexStats {
            state,
            items: self.mem.len() as u64,
            docs_indexed: self.docs_indexed.load(Ordering::Relaxed),
            docs_pending: pending,
            build_progress,
            memory_bytes: self.mem.bytes() as u64,
            disk_bytes: self.snapshot_bytes.load(Ordering::Acquire),
            lag_ms: (state == IndexState::Online && caught_up > 0)
                .then(|| now_nanos.saturating_sub(caught_up) / 1_000_000),
        }
    }

    /// A digest of what a snapshot would reflect now.
    fn digest(&self) -> u64 {
        let applied = self.mem.applied_all();
        applied.iter().enumerate().fold(0xcbf2_9ce4_8422_2325u64, |h, (vb, &a)| {
            let ready = u64::from(self.is_ready(vb as u16));
            (h ^ a.wrapping_mul(2).wrapping_add(ready)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// What `/api/v1/stats` reports of one index.
#[derive(Clone, Debug)]
pub struct IndexStats {
    pub state: IndexState,
    pub items: u64,
    /// Changes applied since the node started.
    pub docs_indexed: u64,
    /// Mutations the index has not applied yet, summed over the active vBuckets (its lag in seqnos).
    pub docs_pending: u64,
    /// Percent of the build done (100 once online).
    pub build_progress: u8,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
    /// How long ago the index last reflected every change its vBuckets had (its lag in time); `None` until online.
    pub lag_ms: Option<u64>,
}

/// The indexes of one bucket and its feeder.
pub struct BucketIndexes {
    pub bucket: Arc<BucketHandle>,
    pub instances: RwLock<Vec<Arc<IndexInstance>>>,
    /// Bumped when the set of fed indexes changes: the feeder then reopens its cursors from the lowest applied seqno.
    generation: std::sync::atomic::AtomicU64,
    stop: AtomicBool,
    wake: tokio::sync::Notify,
    /// Where the bucket's index snapshots live (couchbase buckets only).
    pub(super) snapshot_dir: Option<PathBuf>,
    snapshot_interval: Duration,
    snapshot_wake: tokio::sync::Notify,
    /// Held while snapshots are written, so the periodic writer and the shutdown never write one file at once.
    snapshot_lock: Mutex<()>,
    clock: Arc<dyn Clock>,
}

impl BucketIndexes {
    fn new(bucket: Arc<BucketHandle>, node: &Node) -> Arc<BucketIndexes> {
        Arc::new(BucketIndexes {
            snapshot_dir: index_snapshots::dir_of(&bucket),
            bucket,
            instances: RwLock::new(Vec::new()),
            generation: Default::default(),
            stop: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            snapshot_interval: Duration::from_secs(node.config.index_snapshot_secs),
            snapshot_wake: tokio::sync::Notify::new(),
            snapshot_lock: Mutex::new(()),
            clock: node.clock.clone(),
        })
    }

    /// Stops the feeder and the snapshot writer.
    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_one();
        self.snapshot_wake.notify_one();
    }

    /// Writes a snapshot of every loaded index whose state changed since its last one (blocking). Nothing is
    /// written while the bucket warms up: its indexes are not loaded yet.
    pub(super) fn write_snapshots(&self) {
        let Some(dir) = &self.snapshot_dir else { return };
        let _writing = self.snapshot_lock.lock();
        let instances = self.instances.read().clone();
        let ids: Vec<String> = instances.iter().map(|i| i.def.id.clone()).collect();
        index_snapshots::remove_orphans(dir, &ids);
        for inst in instances {
            if !inst.loaded.load(Ordering::Acquire) || inst.state.load(Ordering::Acquire) == DEFERRED {
                continue;
            }
            let digest = inst.digest();
            if digest == inst.snapshot_digest.load(Ordering::Acquire) {
                continue;
            }
            let started = std::time::Instant::now();
            match index_snapshots::write(self, &inst) {
                Ok(bytes) => {
                    inst.snapshot_digest.store(digest, Ordering::Release);
                    tracing::debug!(index = %inst.def.name, bytes, seconds = started.elapsed().as_secs_f64(), "index snapshot written");
                }
                Err(e) => {
                    tracing::warn!(bucket = %self.bucket.name(), index = %inst.def.name, error = %e, "cannot write the index snapshot")
                }
            }
        }
    }

    /// The instance of index `name` on collection `cid`.
    pub fn find(&self, cid: u32, name: &str) -> Option<Arc<IndexInstance>> {
        self.instances.read().iter().find(|i| i.cid == cid && i.def.name == name).cloned()
    }

    /// The instances on collection `cid`.
    pub fn of_collection(&self, cid: u32) -> Vec<Arc<IndexInstance>> {
        self.instances.read().iter().filter(|i| i.cid == cid).cloned().collect()
    }
}

/// Every bucket's indexes on this node.
#[derive(Default)]
pub struct IndexRegistry {
    buckets: RwLock<HashMap<String, Arc<BucketIndexes>>>,
    /// The node's index memory quota in bytes (0: not set, no limit).
    memory_quota: AtomicU64,
}

impl IndexRegistry {
    pub fn set_memory_quota(&self, bytes: u64) {
        self.memory_quota.store(bytes, Ordering::Release);
    }

    pub fn memory_quota(&self) -> u64 {
        self.memory_quota.load(Ordering::Acquire)
    }

    /// The estimated memory every index on this node holds, in bytes.
    pub fn memory_used(&self) -> u64 {
        self.buckets.read().values().flat_map(|b| b.instances.read().clone()).map(|i| i.mem.bytes() as u64).sum()
    }

    /// Fails once the indexes hold the whole memory quota: a new index (or a deferred one's build) would only add.
    pub fn check_memory(&self, op: &str) -> Result<(), settee_query::QueryError> {
        let (used, quota) = (self.memory_used(), self.memory_quota());
        if quota > 0 && used >= quota {
            tracing::warn!(used, quota, "index memory quota exhausted: {op} refused");
            return Err(settee_query::QueryError::IndexMemoryQuota {
                op: op.to_string(),
                used_mb: used >> 20,
                quota_mb: quota >> 20,
            });
        }
        Ok(())
    }

    /// Every bucket's indexes.
    pub fn buckets(&self) -> Vec<Arc<BucketIndexes>> {
        self.buckets.read().values().cloned().collect()
    }

    /// Whether every index is loaded (false while a bucket warms up and its snapshots wait).
    pub fn all_loaded(&self) -> bool {
        self.buckets().iter().all(|b| b.instances.read().iter().all(|i| i.loaded.load(Ordering::Acquire)))
    }

    pub fn bucket(&self, name: &str) -> Option<Arc<BucketIndexes>> {
        self.buckets.read().get(name).cloned()
    }

    /// Every index with its keyspace and state (for `system:indexes`).
    pub fn all(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)> {
        let buckets = self.buckets.read();
        let mut out = Vec::new();
        for b in buckets.values() {
            for i in b.instances.read().iter() {
                out.push((i.def.keyspace.clone(), i.def.clone(), i.state()));
            }
        }
        out
    }

    /// Makes the local indexes match the metadata: new definitions get an instance (and are built unless
    /// deferred), dropped ones go, deferred ones start building once BUILD INDEX cleared the flag.
    pub fn reconcile(&self, node: &Node, meta: &ClusterMetadata) {
        let mut buckets = self.buckets.write();
        buckets.retain(|name, b| {
            let keep = meta.buckets.get(name).is_some_and(|m| !m.indexes.is_empty())
                && node.bucket(name).is_some_and(|h| Arc::ptr_eq(&h, &b.bucket));
            if !keep {
                b.stop();
                if let Some(dir) = &b.snapshot_dir {
                    // The bucket's last index went: so do the snapshots (a deleted bucket's directory is gone).
                    index_snapshots::remove_orphans(dir, &[]);
                }
            }
            keep
        });
        for (name, m) in &meta.buckets {
            if m.indexes.is_empty() {
                continue;
            }
            let Some(handle) = node.bucket(name) else { continue };
            let b = buckets.entry(name.clone()).or_insert_with(|| {
                let b = BucketIndexes::new(handle.clone(), node);
                tokio::spawn(feed(b.clone()));
                if b.snapshot_dir.is_some() {
                    tokio::spawn(write_snapshots_periodically(b.clone()));
                }
                b
            });
            sync_instances(b, name, &m.indexes, &m.manifest);
        }
    }

    /// At shutdown: stops every feeder and writes the indexes' snapshots (blocking).
    pub fn shutdown(&self) {
        let buckets: Vec<Arc<BucketIndexes>> = self.buckets.read().values().cloned().collect();
        for b in buckets {
            b.stop();
            b.write_snapshots();
        }
    }
}

/// Writes a bucket's snapshots every `snapshot_interval`, and when the feeder asks (an index came online).
async fn write_snapshots_periodically(b: Arc<BucketIndexes>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(b.snapshot_interval) => {}
            _ = b.snapshot_wake.notified() => {}
        }
        if b.stop.load(Ordering::Acquire) {
            break;
        }
        let b2 = b.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || b2.write_snapshots()).await {
            tracing::error!(bucket = %b.bucket.name(), error = %e, "index snapshot writer failed");
        }
    }
}

fn sync_instances(
    b: &BucketIndexes,
    bucket: &str,
    specs: &std::collections::BTreeMap<String, IndexSpec>,
    manifest: &settee_engine::Manifest,
) {
    let mut changed = false;
    let mut instances = b.instances.write();
    instances.retain(|i| {
        let keep = specs.contains_key(&i.def.id);
        if !keep {
            if let Some(dir) = &b.snapshot_dir {
                index_snapshots::remove(dir, &i.def.id);
            }
        }
        changed |= !keep;
        keep
    });
    for (id, spec) in specs {
        let cid = manifest
            .scope(&spec.scope)
            .and_then(|s| s.collections.iter().find(|c| c.name == spec.collection))
            .map(|c| c.uid);
        let Some(cid) = cid else { continue };
        if let Some(existing) = instances.iter().find(|i| &i.def.id == id) {
            if !spec.deferred && existing.state.load(Ordering::Acquire) == DEFERRED {
                start_build(existing, &b.bucket);
                changed = true;
            }
            continue;
        }
        let def = IndexDef {
            id: id.clone(),
            name: spec.name.clone(),
            keyspace: KeyspaceName::new(bucket, &spec.scope, &spec.collection),
            is_primary: spec.is_primary,
            keys: spec
                .keys
                .iter()
                .map(|k| IndexKeyDef {
                    expr: k.expr.clone(),
                    array: match k.array.as_deref() {
                        Some("distinct") => Some(settee_query::ast::ArrayIndexKind::Distinct),
                        Some("all") => Some(settee_query::ast::ArrayIndexKind::All),
                        _ => None,
                    },
                    desc: k.desc,
                    include_missing: k.include_missing,
                })
                .collect(),
            condition: spec.condition.clone(),
            partition: spec.partition.clone(),
            num_replica: spec.num_replica,
        };
        let keys = if spec.is_primary {
            None
        } else {
            match settee_query::index::KeyPlan::compile(&def) {
                Ok(k) => Some(k),
                Err(e) => {
                    tracing::error!(index = %def.name, error = %e, "cannot compile the index keys: the index stays empty");
                    continue;
                }
            }
        };
        let inst = Arc::new(IndexInstance {
            def,
            cid,
            keys,
            state: AtomicU8::new(DEFERRED),
            mem: MemIndex::new(spec.is_primary, usize::from(NUM_VBUCKETS)),
            build_targets: Mutex::new(Vec::new()),
            ready: (0..NUM_VBUCKETS).map(|_| AtomicBool::new(false)).collect(),
            loaded: AtomicBool::new(false),
            docs_indexed: AtomicU64::new(0),
            snapshot_bytes: AtomicU64::new(0),
            snapshot_digest: AtomicU64::new(0),
            caught_up_nanos: AtomicU64::new(0),
        });
        if !spec.deferred {
            start_build(&inst, &b.bucket);
            changed = true;
        }
        instances.push(inst);
    }
    drop(instances);
    if changed {
        b.generation.fetch_add(1, Ordering::AcqRel);
        b.wake.notify_one();
    }
}

/// Marks an index building, with the seqnos it must reach to be online.
fn start_build(inst: &IndexInstance, bucket: &BucketHandle) {
    *inst.build_targets.lock() = active_high_seqnos(bucket);
    inst.state.store(BUILDING, Ordering::Release);
}

/// The high seqno of every vBucket active on this node.
pub fn active_high_seqnos(bucket: &BucketHandle) -> Vec<(u16, u64)> {
    (0..NUM_VBUCKETS)
        .filter_map(|vb| {
            let info = bucket.stream_info(VbId(vb)).ok()?;
            (info.state == VbState::Active).then_some((vb, info.high_seqno))
        })
        .collect()
}

/// The feeder of one bucket: runs until the bucket's indexes go.
async fn feed(b: Arc<BucketIndexes>) {
    let waker = b.bucket.dcp_hub.subscribe();
    for vb in 0..NUM_VBUCKETS {
        waker.interested.insert(VbId(vb));
    }
    let mut state =
        FeedState { cursors: vec![None; usize::from(NUM_VBUCKETS)], generation: u64::MAX, lost: Vec::new() };
    let mut tick = tokio::time::interval(FEED_TICK);
    loop {
        let all = tokio::select! {
            _ = waker.notify.notified() => false,
            _ = b.wake.notified() => true,
            _ = tick.tick() => true,
        };
        if b.stop.load(Ordering::Acquire) {
            break;
        }
        let (b2, w2) = (b.clone(), waker.clone());
        let moved = std::mem::take(&mut state);
        match tokio::task::spawn_blocking(move || round(&b2, &w2, moved, all)).await {
            Ok(s) => state = s,
            Err(e) => {
                tracing::error!(bucket = %b.bucket.name(), error = %e, "index feeder round failed");
                state = FeedState {
                    cursors: vec![None; usize::from(NUM_VBUCKETS)],
                    generation: u64::MAX,
                    lost: Vec::new(),
                };
            }
        }
    }
    close_all(&b, &mut state);
}

#[derive(Default)]
struct FeedState {
    /// Per vBucket: the cursor and the seqno read up to.
    cursors: Vec<Option<(CursorId, u64)>>,
    generation: u64,
    /// vBuckets found no longer active in this round, whose entries the round removes at its end.
    lost: Vec<u16>,
}

fn close_all(b: &BucketIndexes, state: &mut FeedState) {
    for (vb, c) in state.cursors.iter_mut().enumerate() {
        if let Some((id, _)) = c.take() {
            b.bucket.close_cursor(VbId(vb as u16), id);
        }
    }
}

/// One pass: (re)open cursors, read changed vBuckets (every vBucket when `all`), apply, and promote indexes that
/// caught up. Blocking: runs on the blocking pool.
fn round(b: &BucketIndexes, waker: &StreamWaker, mut state: FeedState, all: bool) -> FeedState {
    if !load_new_instances(b) {
        return state;
    }
    let started = b.clock.now_nanos();
    let generation = b.generation.load(Ordering::Acquire);
    let fed: Vec<Arc<IndexInstance>> = b
        .instances
        .read()
        .iter()
        .filter(|i| i.state.load(Ordering::Acquire) != DEFERRED && i.loaded.load(Ordering::Acquire))
        .cloned()
        .collect();
    if generation != state.generation {
        close_all(b, &mut state);
        state.generation = generation;
    }
    let woken = waker.pending.take();
    let vbs: Vec<u16> = if all || state.cursors.iter().all(Option::is_none) {
        (0..NUM_VBUCKETS).collect()
    } else {
        woken.into_iter().map(|v| v.0).collect()
    };
    let mut caught_up = true;
    if !fed.is_empty() {
        for vb in vbs {
            caught_up &= read_vbucket(b, &fed, &mut state, vb);
        }
    }
    forget_lost_vbuckets(&fed, &mut state.lost);
    for inst in &fed {
        if inst.state.load(Ordering::Acquire) == BUILDING {
            let targets = inst.build_targets.lock();
            if targets.iter().all(|&(vb, s)| inst.mem.applied(vb) >= s) {
                inst.state.store(ONLINE, Ordering::Release);
                tracing::info!(bucket = %b.bucket.name(), index = %inst.def.name, "index online");
                b.snapshot_wake.notify_one();
            }
        }
        if caught_up && inst.state.load(Ordering::Acquire) == ONLINE {
            // Everything the vBuckets held when this round began is applied.
            inst.caught_up_nanos.store(started, Ordering::Release);
        }
    }
    state
}

/// Removes the entries of the vBuckets that stopped being active here this round, one pass over each index for
/// all of them.
fn forget_lost_vbuckets(fed: &[Arc<IndexInstance>], lost: &mut Vec<u16>) {
    if lost.is_empty() {
        return;
    }
    let mut gone = vec![false; usize::from(NUM_VBUCKETS)];
    for &vb in lost.iter() {
        gone[usize::from(vb)] = true;
    }
    for inst in fed {
        inst.mem.reset_vbuckets(lost, |key| gone[usize::from(vbucket_for_key(key.as_bytes(), NUM_VBUCKETS).0)]);
    }
    lost.clear();
}

/// Loads the snapshots of indexes not loaded yet, once the bucket's warmup is over (before it, the vBuckets'
/// seqnos a snapshot is checked against are not known). Returns false while the bucket still warms up.
fn load_new_instances(b: &BucketIndexes) -> bool {
    let unloaded: Vec<Arc<IndexInstance>> =
        b.instances.read().iter().filter(|i| !i.loaded.load(Ordering::Acquire)).cloned().collect();
    if unloaded.is_empty() {
        return true;
    }
    if b.bucket.is_warming_up() {
        return false;
    }
    for inst in unloaded {
        if inst.state.load(Ordering::Acquire) != DEFERRED {
            let loaded = index_snapshots::load(b, &inst);
            if loaded.vbuckets > 0 {
                inst.snapshot_digest.store(inst.digest(), Ordering::Release);
            }
            // The seqnos to reach are the ones after warmup (before it, the vBuckets were not restored yet).
            start_build(&inst, &b.bucket);
        }
        inst.loaded.store(true, Ordering::Release);
    }
    // The cursors reopen from the seqnos the snapshots restored.
    b.generation.fetch_add(1, Ordering::AcqRel);
    true
}

/// Reads what is new in vBucket `vb` and applies it; returns whether the reads reached the vBucket's high seqno
/// (false when a read failed or the round's byte budget stopped them early).
fn read_vbucket(b: &BucketIndexes, fed: &[Arc<IndexInstance>], state: &mut FeedState, vb: u16) -> bool {
    let id = VbId(vb);
    let slot = &mut state.cursors[usize::from(vb)];
    if slot.is_none() {
        let from = fed.iter().map(|i| i.mem.applied(vb)).min().unwrap_or(0);
        match b.bucket.open_cursor(id, from) {
            Ok(cursor) => *slot = Some((cursor, from)),
            Err(_) => return true,
        }
    }
    let Some((cursor, mut position)) = *slot else { return true };
    // The vBucket's entries are all in once the reads reach the high seqno it had when this pass began.
    let target = b.bucket.stream_info(id).map(|i| i.high_seqno).unwrap_or(0);
    let mut read_bytes = 0usize;
    let ready = |fed: &[Arc<IndexInstance>]| fed.iter().for_each(|i| i.set_ready(vb, true));
    loop {
        match b.bucket.read_cursor(id, cursor, position, FEED_READ_BYTES) {
            Ok(DcpRead::UpToDate) => {
                for inst in fed {
                    if inst.mem.applied(vb) < position {
                        inst.mem.apply(vb, position, []);
                    }
                }
                ready(fed);
                break;
            }
            Ok(DcpRead::Snapshot(snap)) => {
                read_bytes += snap.items.iter().map(|c| c.item.key.len() + c.item.value.len()).sum::<usize>();
                apply_changes(b, fed, vb, snap.end, snap.items);
                position = snap.end;
            }
            Ok(DcpRead::FromDisk { up_to, prepares }) => {
                let mut changes: Vec<DcpChange> = prepares;
                if let Some(p) = &b.bucket.persistence {
                    let values = fed.iter().any(|i| i.keys.is_some());
                    let r = p.store.scan_seqnos(id, position + 1, up_to, &mut |r| {
                        changes.push(crate::persistence::snapshot_of(r, values).into())
                    });
                    if let Err(e) = r {
                        tracing::error!(vb, error = %e, "index feeder: reading from disk failed");
                        break;
                    }
                }
                changes.sort_by_key(|c| c.item.seqno);
                read_bytes += changes.iter().map(|c| c.item.key.len()).sum::<usize>();
                apply_changes(b, fed, vb, up_to, changes);
                position = up_to;
            }
            Err(EngineError::NotMyVbucket) => {
                // No longer active here: forget the cursor; the round forgets the vBucket's entries.
                b.bucket.close_cursor(id, cursor);
                *slot = None;
                for inst in fed {
                    inst.set_ready(vb, false);
                }
                state.lost.push(vb);
                return true;
            }
            Err(e) => {
                tracing::debug!(vb, error = %e, "index feeder: vBucket not readable");
                break;
            }
        }
        if position >= target {
            ready(fed);
        }
        if read_bytes >= FEED_ROUND_BYTES_MAX {
            break;
        }
    }
    *slot = Some((cursor, position));
    position >= target
}

/// Applies one vBucket's changes (up to `end`) to every fed index of their collections: a primary index gets the
/// document id, a secondary index the entries its keys give for the document's body.
fn apply_changes(b: &BucketIndexes, fed: &[Arc<IndexInstance>], vb: u16, end: u64, items: Vec<DcpChange>) {
    let mut per_index: Vec<Vec<Change>> = vec![Vec::new(); fed.len()];
    let applied: Vec<u64> = fed.iter().map(|i| i.mem.applied(vb)).collect();
    for change in items {
        if matches!(change.kind, ChangeKind::Prepare(_) | ChangeKind::Abort { .. }) {
            continue;
        }
        let mut item = change.item;
        let Some(key) = DocKey::from_encoded(&item.key) else { continue };
        if item.value_missing && !item.deleted && fed.iter().any(|i| i.cid == key.cid() && i.keys.is_some()) {
            // The pager ejected the value: a secondary index needs it, so read it back from the store.
            if let Some(found) =
                b.bucket.persistence.as_ref().and_then(|p| p.store.get(VbId(vb), &item.key).ok().flatten())
            {
                if found.meta.seqno == item.seqno {
                    item = crate::persistence::snapshot_of(found, true);
                }
            }
        }
        let Some(key) = DocKey::from_encoded(&item.key) else { continue };
        let Ok(id) = std::str::from_utf8(key.key()) else { continue };
        let doc_id: Arc<str> = Arc::from(id);
        // The document's body, parsed once for all the secondary indexes that need it.
        let mut body: Option<(Value, DocMeta)> = None;
        for (i, inst) in fed.iter().enumerate() {
            if inst.cid != key.cid() || applied[i] >= item.seqno {
                continue;
            }
            if item.deleted {
                per_index[i].push(Change::Delete { doc_id: doc_id.clone() });
                continue;
            }
            let Some(plan) = &inst.keys else {
                per_index[i].push(Change::Set { doc_id: doc_id.clone(), keys: vec![vec![]] });
                continue;
            };
            let (value, meta) = body.get_or_insert_with(|| document_of(&item));
            match plan.entries(&doc_id, value, meta) {
                Ok(keys) => per_index[i].push(Change::Set { doc_id: doc_id.clone(), keys }),
                Err(e) => {
                    tracing::debug!(index = %inst.def.name, doc = %doc_id, error = %e, "document not indexed");
                    per_index[i].push(Change::Set { doc_id: doc_id.clone(), keys: vec![] });
                }
            }
        }
    }
    for (inst, changes) in fed.iter().zip(per_index) {
        inst.docs_indexed.fetch_add(changes.len() as u64, Ordering::Relaxed);
        inst.mem.apply(vb, end, changes);
    }
}

/// The body and metadata of a changed document, as index expressions see it (xattrs left out; a body that is not
/// JSON is binary).
fn document_of(item: &settee_engine::ItemSnapshot) -> (Value, DocMeta) {
    let datatype = settee_types::Datatype(item.datatype);
    let body = match settee_doc::split_value(&item.value, datatype.has_xattr()) {
        Ok((_, body)) => body,
        Err(_) => &item.value[..],
    };
    let is_json = datatype.is_json();
    let value = if is_json {
        Value::from_json(body).unwrap_or_else(|_| Value::Binary(Arc::from(body)))
    } else {
        Value::Binary(Arc::from(body))
    };
    (value, DocMeta { cas: item.cas, expiration: item.expiry, flags: item.flags, is_json })
}
