//! A bucket: its settings, its vBuckets, its collections manifest and its memory account.

use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use settee_types::{limits, Clock, CollectionId, DurabilityLevel, VbId};

use crate::conflict::ConflictMode;
use crate::error::EngineError;
use crate::expiry::is_expired;
use crate::manifest::{Manifest, ManifestError, ResolveError};
use crate::stats::BucketStats;
use crate::vbucket::{complete, ObservedSeqnos, VBucket, VbInner, VbState};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketKind {
    /// Couchbase bucket (persistent). Until persistence lands it behaves as ephemeral.
    Couchbase,
    /// Memory only.
    Ephemeral,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    ValueOnly,
    FullEviction,
    NoEviction,
    NruEviction,
}

impl EvictionPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ValueOnly => "valueOnly",
            Self::FullEviction => "fullEviction",
            Self::NoEviction => "noEviction",
            Self::NruEviction => "nruEviction",
        }
    }
    /// Couchbase's default for a bucket type: value eviction on disk, none in memory.
    pub fn default_for(kind: BucketKind) -> EvictionPolicy {
        match kind {
            BucketKind::Couchbase => Self::ValueOnly,
            BucketKind::Ephemeral => Self::NoEviction,
        }
    }
    pub fn parse(s: &str) -> Option<EvictionPolicy> {
        Some(match s {
            "valueOnly" => Self::ValueOnly,
            "fullEviction" => Self::FullEviction,
            "noEviction" => Self::NoEviction,
            "nruEviction" => Self::NruEviction,
            _ => return None,
        })
    }
}

/// The settings of a bucket, as created or edited through REST or the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketConfig {
    pub name: String,
    /// 32 hex digits, fixed at creation.
    pub uuid: String,
    pub kind: BucketKind,
    pub ram_quota_bytes: u64,
    pub replicas: u8,
    pub eviction: EvictionPolicy,
    /// Bucket-wide maximum TTL in seconds; 0 = none.
    pub max_ttl: u32,
    pub flush_enabled: bool,
    pub durability_min_level: Option<DurabilityLevel>,
    /// How SET/DEL_WITH_META resolve conflicts (`conflictResolutionType`), fixed at creation.
    pub conflict_resolution: ConflictMode,
}

pub struct Bucket {
    config: RwLock<BucketConfig>,
    vbuckets: Box<[VBucket]>,
    manifest: RwLock<Arc<Manifest>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) stats: BucketStats,
    mem_used: AtomicIsize,
    /// `config.ram_quota_bytes`, readable without the config lock on every write.
    quota_bytes: AtomicU64,
    /// `config.replicas`, readable under a vBucket lock (the config lock comes before vBucket locks).
    replicas: AtomicU8,
    /// `config.kind`, which never changes: read on every write's quota check, under a vBucket lock.
    kind: BucketKind,
    /// `config.conflict_resolution`, which never changes either.
    conflict_resolution: ConflictMode,
    /// Set when a write to disk or an fsync failed: writes get TMPFAIL until the node restarts, because no write
    /// may be acknowledged as durable again.
    pub(crate) store_failed: AtomicBool,
    /// True while warmup loads the bucket from disk; KV requests get TMPFAIL meanwhile.
    warming_up: AtomicBool,
    /// Called when a vBucket's checkpoint goes from empty to non-empty, so the flusher wakes without polling.
    pub(crate) dirty_notifier: std::sync::OnceLock<Arc<dyn Fn(VbId) + Send + Sync>>,
    /// Wakes DCP streams when a vBucket they read has new mutations.
    pub(crate) change_notifier: std::sync::OnceLock<crate::vbucket::ChangeNotifier>,
    pub(crate) next_cursor: AtomicU64,
    /// The item pager's low and high watermarks as fractions of the quota (see `eviction.rs`).
    pub(crate) watermarks: crate::eviction::Watermarks,
    /// The largest growth a write of a persistent bucket was refused for (0: none since the pager last ran): the
    /// pager must make that much room even below its high watermark, or a value larger than the room between that
    /// watermark and the quota would be refused forever.
    pub(crate) pager_need: AtomicU64,
    /// Counts vBucket resets (see [`Bucket::resets`]).
    pub(crate) resets: AtomicU64,
}

impl Bucket {
    pub fn new(config: BucketConfig, clock: Arc<dyn Clock>) -> Bucket {
        let seed = clock.now_nanos() ^ fnv(config.uuid.as_bytes());
        let persistent = config.kind == BucketKind::Couchbase;
        let vbuckets = (0..limits::NUM_VBUCKETS)
            .map(|v| VBucket::new(VbId(v), splitmix64(seed.wrapping_add(v.into())), persistent))
            .collect();
        Bucket {
            quota_bytes: AtomicU64::new(config.ram_quota_bytes),
            replicas: AtomicU8::new(config.replicas),
            kind: config.kind,
            conflict_resolution: config.conflict_resolution,
            config: RwLock::new(config),
            vbuckets,
            manifest: RwLock::new(Arc::new(Manifest::default())),
            clock,
            stats: BucketStats::default(),
            mem_used: AtomicIsize::new(0),
            store_failed: AtomicBool::new(false),
            warming_up: AtomicBool::new(false),
            watermarks: crate::eviction::Watermarks::default(),
            pager_need: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            dirty_notifier: std::sync::OnceLock::new(),
            change_notifier: std::sync::OnceLock::new(),
            next_cursor: AtomicU64::new(1),
        }
    }

    /// Registers the flusher's wake-up call (once per bucket); it is told which vBucket became dirty, so the
    /// flusher that owns it wakes.
    pub fn set_dirty_notifier(&self, notify: Arc<dyn Fn(VbId) + Send + Sync>) {
        let _ = self.dirty_notifier.set(notify);
    }

    /// The time, read once per operation: nanoseconds (for the CAS clock) and whole seconds (expiry, locks).
    pub(crate) fn now(&self) -> (u64, u32) {
        let ns = self.clock.now_nanos();
        (ns, (ns / 1_000_000_000) as u32)
    }

    /// The bucket's clock, in Unix seconds.
    pub fn now_secs(&self) -> u32 {
        self.clock.now_secs()
    }

    /// The bucket's clock's monotonic time (what the drivers of its DCP connections measure timeouts with).
    pub fn monotonic(&self) -> std::time::Duration {
        self.clock.monotonic()
    }

    /// Couchbase buckets persist; ephemeral buckets live in memory only.
    /// How writes carrying their own metadata resolve conflicts here.
    pub fn conflict_resolution(&self) -> ConflictMode {
        self.conflict_resolution
    }

    pub fn is_persistent(&self) -> bool {
        self.kind == BucketKind::Couchbase
    }
    pub fn is_warming_up(&self) -> bool {
        self.warming_up.load(Ordering::Acquire)
    }
    pub fn set_warming_up(&self, on: bool) {
        self.warming_up.store(on, Ordering::Release);
    }
    /// TMPFAIL while warmup loads the bucket: what a vBucket holds is not known until then.
    pub(crate) fn refuse_while_warming_up(&self) -> Result<(), EngineError> {
        if self.is_warming_up() {
            Err(EngineError::TempFail)
        } else {
            Ok(())
        }
    }
    pub fn store_failed(&self) -> bool {
        self.store_failed.load(Ordering::Acquire)
    }

    pub fn config(&self) -> BucketConfig {
        self.config.read().clone()
    }
    /// The RAM quota, without taking the config lock.
    pub(crate) fn quota_bytes(&self) -> u64 {
        self.quota_bytes.load(Ordering::Relaxed)
    }
    pub fn name(&self) -> String {
        self.config.read().name.clone()
    }
    /// Applies an edit; the name, uuid, kind and conflict resolution of a bucket never change.
    pub fn update_config(&self, f: impl FnOnce(&mut BucketConfig)) {
        let mut c = self.config.write();
        let (name, uuid, kind, conflict) = (c.name.clone(), c.uuid.clone(), c.kind, c.conflict_resolution);
        f(&mut c);
        c.name = name;
        c.uuid = uuid;
        c.kind = kind;
        c.conflict_resolution = conflict;
        self.quota_bytes.store(c.ram_quota_bytes, Ordering::Relaxed);
        self.replicas.store(c.replicas, Ordering::Relaxed);
    }
    pub fn stats(&self) -> &BucketStats {
        &self.stats
    }
    pub fn num_vbuckets(&self) -> u16 {
        self.vbuckets.len() as u16
    }
    pub fn vbucket(&self, vb: VbId) -> Option<&VBucket> {
        self.vbuckets.get(usize::from(vb.0))
    }
    pub fn mem_used(&self) -> u64 {
        self.mem_used.load(Ordering::Relaxed).max(0) as u64
    }
    /// Items by the state of their vBucket, as Couchbase reports them: `curr_items` is the active vBuckets' alone
    /// (`vb_active_curr_items`), replicas and pending copies counted apart, `total` every copy (`curr_items_tot`).
    pub fn item_counts(&self) -> ItemCounts {
        self.summary().items
    }

    /// Items, vBuckets and the disk write queue by vBucket state, in one pass taking each vBucket's lock once
    /// (what statistics report every second).
    pub fn summary(&self) -> BucketSummary {
        let mut s = BucketSummary::default();
        for v in &self.vbuckets {
            let inner = v.inner.lock();
            s.dirty += inner.dirty.len();
            let items = (inner.live_items + inner.ejected_items) as u64;
            let (count, vbuckets) = match inner.state {
                VbState::Active => (&mut s.items.active, &mut s.vbuckets.active),
                VbState::Replica => (&mut s.items.replica, &mut s.vbuckets.replica),
                VbState::Pending => (&mut s.items.pending, &mut s.vbuckets.pending),
                VbState::Dead | VbState::Failed => {
                    s.vbuckets.dead += 1;
                    continue;
                }
            };
            *count += items;
            *vbuckets += 1;
            s.items.total += items;
        }
        s
    }

    /// Items in every vBucket here, whatever its state, dead ones included (what tests of one bucket count; the
    /// figures reported to users come from [`Bucket::item_counts`]).
    pub fn curr_items(&self) -> u64 {
        self.vbuckets
            .iter()
            .map(|v| {
                let inner = v.inner.lock();
                (inner.live_items + inner.ejected_items) as u64
            })
            .sum()
    }

    /// The copies of each vBucket the bucket is configured for (replicas + 1).
    pub(crate) fn configured_copies(&self) -> u64 {
        u64::from(self.replicas.load(Ordering::Relaxed)) + 1
    }

    // ---- collections ----

    pub fn manifest(&self) -> Arc<Manifest> {
        self.manifest.read().clone()
    }
    pub fn resolve_collection(&self, path: &str) -> Result<(u64, CollectionId), EngineError> {
        let m = self.manifest();
        m.resolve(path).map(|(_, cid)| (m.uid, cid)).map_err(|e| match e {
            ResolveError::Invalid => EngineError::Invalid("collection path"),
            ResolveError::UnknownScope => EngineError::UnknownScope { manifest_uid: m.uid },
            ResolveError::UnknownCollection => EngineError::UnknownCollection { manifest_uid: m.uid },
        })
    }
    /// Applies a manifest change; items of collections the change dropped are removed from memory.
    pub fn edit_manifest<R>(
        &self,
        f: impl FnOnce(&mut Manifest) -> Result<R, ManifestError>,
    ) -> Result<(R, u64), ManifestError> {
        let (result, before, after) = {
            let mut guard = self.manifest.write();
            let mut m = (**guard).clone();
            let r = f(&mut m)?;
            let before = guard.clone();
            *guard = Arc::new(m);
            (r, before, guard.clone())
        };
        let dropped: Vec<CollectionId> = before
            .scopes
            .iter()
            .flat_map(|s| &s.collections)
            .filter(|c| after.collection(c.uid).is_none())
            .map(|c| c.uid)
            .collect();
        if !dropped.is_empty() {
            self.purge_collections(&dropped);
        }
        Ok((result, after.uid))
    }

    /// Replaces the manifest wholesale, as when a restarted node restores its metadata.
    pub fn restore_manifest(&self, manifest: Manifest) {
        *self.manifest.write() = Arc::new(manifest);
    }

    /// The maxTTL in force for a collection, or UNKNOWN_COLLECTION.
    pub(crate) fn collection_ttl(&self, cid: CollectionId) -> Result<Option<u32>, EngineError> {
        let m = self.manifest.read();
        let c = m.collection(cid).ok_or(EngineError::UnknownCollection { manifest_uid: m.uid })?;
        let bucket_ttl = self.config.read().max_ttl;
        Ok(c.max_ttl.filter(|t| *t > 0).or((bucket_ttl > 0).then_some(bucket_ttl)))
    }

    fn purge_collections(&self, cids: &[CollectionId]) {
        let in_dropped = |key: &[u8]| settee_mcbp::decode_leb128(key).is_some_and(|(cid, _)| cids.contains(&cid));
        let mut ambiguous = Vec::new();
        for vb in self.vbuckets.iter() {
            let mut inner = vb.inner.lock();
            ambiguous.extend(self.discard_prepares(&mut inner, |p| in_dropped(&p.key)));
            let doomed = inner.table.keys_where(|i| in_dropped(i.key()));
            let freed: usize = doomed.iter().map(|k| inner.purge(k)).sum();
            self.charge(-(freed as isize));
        }
        complete(ambiguous, Err(EngineError::SyncWriteAmbiguous));
    }

    // ---- plumbing for the operations ----

    /// Runs `f` on an active vBucket's state under its lock.
    pub(crate) fn with_active<R>(
        &self,
        vb: VbId,
        f: impl FnOnce(&mut VbInner) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        if self.warming_up.load(Ordering::Acquire) {
            return Err(EngineError::TempFail);
        }
        self.with_vbucket(vb, &[VbState::Active], f)
    }

    /// Runs `f` under the vBucket's lock if it is in one of `states`.
    pub(crate) fn with_vbucket<R>(
        &self,
        vb: VbId,
        states: &[VbState],
        f: impl FnOnce(&mut VbInner) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let vbucket = self.vbucket(vb).ok_or(EngineError::NotMyVbucket)?;
        let mut inner = vbucket.inner.lock();
        if inner.state == VbState::Failed {
            return Err(EngineError::VbucketFailed);
        }
        if !states.contains(&inner.state) {
            return Err(EngineError::NotMyVbucket);
        }
        f(&mut inner)
    }

    pub(crate) fn charge(&self, delta: isize) {
        self.mem_used.fetch_add(delta, Ordering::Relaxed);
    }

    /// Refuses a write that would grow the bucket past its quota (ephemeral buckets cannot evict).
    pub(crate) fn check_quota(&self, growth: usize) -> Result<(), EngineError> {
        if self.store_failed.load(Ordering::Acquire) {
            return Err(EngineError::TempFail);
        }
        if self.mem_used() + growth as u64 > self.quota_bytes() {
            let kind = self.kind;
            BucketStats::bump(&self.stats.tmp_oom_errors);
            if kind != BucketKind::Ephemeral {
                self.pager_need.fetch_max(growth as u64, Ordering::AcqRel);
            }
            // Ephemeral buckets cannot evict (ENOMEM, as Couchbase's); persistent ones ask the client to retry
            // while the item pager frees memory.
            return Err(if kind == BucketKind::Ephemeral { EngineError::OutOfMemory } else { EngineError::TempFail });
        }
        Ok(())
    }

    /// Couchbase's durability rules for this bucket: persist levels need a persistent bucket, and three replicas
    /// make durability impossible (as in Couchbase). Whether a majority of the configured copies exists is the
    /// vBucket's question, asked under its lock ([`Bucket::with_active_write`]).
    /// Returns the level in force (the request's, raised to the bucket's minimum), if any.
    pub(crate) fn check_durability(
        &self,
        level: Option<DurabilityLevel>,
    ) -> Result<Option<DurabilityLevel>, EngineError> {
        let (kind, replicas, min) = {
            let c = self.config.read();
            (c.kind, c.replicas, c.durability_min_level)
        };
        let Some(level) = level.max(min) else { return Ok(None) };
        if level.needs_persistence() && kind == BucketKind::Ephemeral {
            return Err(EngineError::DurabilityInvalidLevel);
        }
        if replicas >= 3 {
            return Err(EngineError::DurabilityImpossible);
        }
        Ok(Some(level))
    }

    /// [`Bucket::with_active`] for a mutation: a durable one first needs a majority of the configured copies to
    /// exist (the active and the replicas present in the vBucket's chain), else DURABILITY_IMPOSSIBLE.
    pub(crate) fn with_active_write<R>(
        &self,
        vb: VbId,
        level: Option<DurabilityLevel>,
        f: impl FnOnce(&mut VbInner) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        self.with_active(vb, |inner| {
            if level.is_some() {
                let copies = self.configured_copies();
                if inner.monitor.copies_present(copies) < copies / 2 + 1 {
                    return Err(EngineError::DurabilityImpossible);
                }
            }
            f(inner)
        })
    }

    pub fn observe_seqno(&self, vb: VbId) -> Result<ObservedSeqnos, EngineError> {
        self.with_active(vb, |inner| {
            // An ephemeral bucket has no disk: what is in memory is all there is to "persist".
            Ok(ObservedSeqnos {
                vbuuid: inner.uuid(),
                persisted_seqno: inner.durable_seqno(),
                current_seqno: inner.high_seqno,
            })
        })
    }

    /// Removes every item, as a bucket flush does. Seqnos keep growing so mutation tokens stay meaningful. A
    /// persistent bucket deletes every document of its active vBuckets (tombstones the flusher writes, and DCP
    /// carries to the replicas, whose own seqnos only their active may advance), so nothing comes back at warmup;
    /// a cluster flushes every node's actives. Sync writes in flight are aborted (their writers get
    /// SYNC_WRITE_AMBIGUOUS).
    pub fn flush(&self) {
        let (now_ns, now) = self.now();
        let mut ambiguous = Vec::new();
        for vb in self.vbuckets.iter() {
            let mut inner = vb.inner.lock();
            if inner.persistent && inner.state != VbState::Active {
                continue;
            }
            ambiguous.extend(self.discard_prepares(&mut inner, |_| true));
            if inner.persistent {
                for k in inner.table.keys_where(|i| !i.deleted()) {
                    let Some(item) = inner.table.get(&k) else { continue };
                    let mut tomb = crate::ops::tombstone_of(item, now);
                    tomb.value = Default::default();
                    tomb.datatype = settee_types::Datatype::RAW;
                    tomb.cas = inner.next_cas(now_ns);
                    let delta = inner.install(&k, tomb);
                    self.charge(delta);
                }
                continue;
            }
            let freed = inner.purge_all();
            self.charge(-(freed as isize));
        }
        complete(ambiguous, Err(EngineError::SyncWriteAmbiguous));
    }

    /// The expiry pager: turns expired items into tombstones and purges tombstones older than `purge_age_secs`.
    /// Bounded work per vBucket lock: a batch at a time so writers are not stalled.
    pub fn run_expiry_pager(&self, purge_age_secs: u32) -> u64 {
        let now = self.clock.now_secs();
        let mut expired = 0;
        for vb in self.vbuckets.iter() {
            let mut inner = vb.inner.lock();
            if inner.state != VbState::Active {
                continue;
            }
            let mut to_expire = Vec::new();
            let mut to_purge = Vec::new();
            for item in inner.table.iter() {
                let key = || Box::<[u8]>::from(item.key());
                if item.deleted() {
                    if item.expiry() != 0 && item.expiry().saturating_add(purge_age_secs) <= now {
                        to_purge.push(key());
                    }
                } else if is_expired(item.expiry(), now) {
                    to_expire.push(key());
                }
            }
            for k in &to_expire {
                let delta = crate::ops::expire_in_place(&mut inner, k, self.clock.now_nanos(), now);
                self.charge(delta);
                expired += 1;
            }
            let freed: usize = to_purge.iter().map(|k| inner.purge(k)).sum();
            self.charge(-(freed as isize));
            // Aborts are purged with the tombstones (see `abort_log.rs`).
            let dropped = inner.aborts.purge_older_than(now.saturating_sub(purge_age_secs));
            self.charge(dropped.charge);
            if let Some(seqno) = dropped.purged_to {
                inner.purge_seqno = inner.purge_seqno.max(seqno);
            }
        }
        self.stats.expired.fetch_add(expired, Ordering::Relaxed);
        expired
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// A good 64-bit mix, for vbuuids that differ between vBuckets and between buckets.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

/// Items by vBucket state ([`Bucket::item_counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemCounts {
    pub active: u64,
    pub replica: u64,
    pub pending: u64,
    /// Active, replica and pending copies (not dead ones a failed-over node keeps).
    pub total: u64,
}

/// vBuckets by state ([`Bucket::summary`]); failed ones count as dead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VbCounts {
    pub active: u64,
    pub replica: u64,
    pub pending: u64,
    pub dead: u64,
}

/// One pass over a bucket's vBuckets ([`Bucket::summary`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketSummary {
    pub items: ItemCounts,
    pub vbuckets: VbCounts,
    /// Items waiting to be written to disk (the disk write queue).
    pub dirty: usize,
}
