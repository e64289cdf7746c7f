//! [`FjallStore`]: the on-disk [`crate::VbStore`], one fjall database per store directory holding all vBuckets.
//!
//! Three keyspaces (layout in `layout.rs` and `docs/on-disk-format.md`):
//! - `by_key`: vb ‖ key → CRC-guarded metadata (no value), the small index every write reads before it writes;
//! - `by_seqno`: vb ‖ seqno → the whole record, key-value separated above a threshold (values stay uncompressed);
//! - `vb_meta`: per-vBucket high seqno and vBucket state, plus the store's format marker.
//!
//! Each write batch updates all three in one fjall batch, so they agree after any crash. Guard-rails from
//! DESIGN.md §4: every value is checked against its CRC32C on every read; no compression anywhere (the `lz4`
//! feature is off and every policy says `None`); `Keyspace::clear` is never called (banned in `clippy.toml`).

mod layout;
mod vb_store;

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fjall::config::CompressionPolicy;
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};
use parking_lot::Mutex;
use settee_types::{limits::NUM_VBUCKETS, VbId};

use crate::record::check_vb;
use crate::{FaultInjector, StoreError};
use layout::{BY_KEY, BY_SEQNO, COMPACTED_KEY, FORMAT_KEY, FORMAT_VERSION, HIGH_SEQNO_PREFIX, VB_META};

/// Rounds of major compaction one [`crate::VbStore::compact`] runs on the record keyspace at most: a round drops
/// dead value handles, and only the next one can see which blob files they made stale and rewrite those.
const BLOB_GC_ROUNDS_MAX: usize = 4;
/// Memtable size of each keyspace: fjall's default, and the most [`FjallConfig::for_quota`] gives. With three
/// keyspaces, each with an active and at times sealed memtables, that is up to ~190 MiB of a persistent bucket's
/// resident memory whatever its data size. 16 MiB was measured (BENCHMARKS.md, issue 3): ~70 B less RSS per item
/// after a 1 M-item warmup, but bulk loads 15-21 % and warmup 10-15 % slower (more, smaller flushes and L0
/// compactions on two cores), so only buckets under 1 GiB get smaller ones.
const MEMTABLE_BYTES: u64 = 64 << 20;
/// The least a memtable or the block cache is given by [`FjallConfig::for_quota`].
const FJALL_MEMORY_MIN: u64 = 8 << 20;
/// How long a compaction waits for fjall to flush one memtable, and how often it looks.
const FLUSH_WAIT_MAX: Duration = Duration::from_secs(300);
const FLUSH_POLL: Duration = Duration::from_millis(5);

/// How a [`FjallStore`] is opened. The keyspace options (blob threshold) only apply when the store is created.
#[derive(Clone, Debug)]
pub struct FjallConfig {
    /// fjall's block cache, in bytes.
    pub cache_bytes: u64,
    /// fjall's background flush and compaction threads.
    pub worker_threads: usize,
    /// Records (with their 41-byte header and key) larger than this go to blob files instead of the LSM tree.
    pub blob_threshold_bytes: u32,
    /// The size at which a keyspace's memtable is sealed and flushed (fixed when the store is created).
    pub memtable_bytes: u64,
    /// The file-system seam; `None` never injects a fault.
    pub faults: Option<Arc<FaultInjector>>,
}

impl FjallConfig {
    /// The defaults with fjall's memory sized for a bucket of `quota_bytes`: each memtable a sixteenth of the
    /// quota and the block cache an eighth, between 8 MiB and fjall's 64 MiB defaults. Those defaults hold ~190 MiB
    /// whatever the bucket's size, which is most of a small bucket's resident memory (3/4 of the 256 MiB default
    /// bucket's quota again); buckets of 1 GiB and more keep them, and with them the bulk-load speed that smaller
    /// memtables cost (BENCHMARKS.md, issue 3). The memtable size is fixed when the store is created.
    pub fn for_quota(quota_bytes: u64) -> FjallConfig {
        let share = |divisor: u64| (quota_bytes / divisor).clamp(FJALL_MEMORY_MIN, MEMTABLE_BYTES);
        FjallConfig { memtable_bytes: share(16), cache_bytes: share(8), ..FjallConfig::default() }
    }
}

impl Default for FjallConfig {
    fn default() -> Self {
        FjallConfig {
            cache_bytes: 64 << 20,
            worker_threads: 2,
            blob_threshold_bytes: 4096,
            memtable_bytes: MEMTABLE_BYTES,
            faults: None,
        }
    }
}

/// The fjall-backed [`crate::VbStore`].
pub struct FjallStore {
    path: PathBuf,
    db: Database,
    by_key: Keyspace,
    by_seqno: Keyspace,
    vb_meta: Keyspace,
    /// The persisted high seqno of each vBucket, cached; updated after each committed batch under its write lock.
    high_seqnos: Box<[AtomicU64]>,
    /// One per vBucket: serialises a vBucket's read-before-write (old seqno lookup) with its commit.
    write_locks: Box<[Mutex<()>]>,
    /// vBuckets found damaged when the store was opened: every call on them returns `Corrupt`.
    damaged: Box<[AtomicBool]>,
    poisoned: AtomicBool,
    /// Commits made so far; every write path counts its commit once it returned.
    commits: AtomicU64,
    /// The commit count the last successful fsync covered. Held across the fsync, which serialises syncs: a caller
    /// that waited here finds its commits covered by the fsync it waited for and returns without one of its own.
    synced: Mutex<u64>,
    faults: Option<Arc<FaultInjector>>,
}

impl FjallStore {
    /// Opens (or creates) the store in `path` with the default configuration.
    pub fn open(path: &Path) -> Result<FjallStore, StoreError> {
        FjallStore::open_with(path, FjallConfig::default())
    }

    pub fn open_with(path: &Path, config: FjallConfig) -> Result<FjallStore, StoreError> {
        let io = |what: &str, e: fjall::Error| StoreError::Io(format!("opening {}: {what}: {e}", path.display()));
        std::fs::create_dir_all(path).map_err(|e| StoreError::Io(format!("creating {}: {e}", path.display())))?;
        let db = Database::builder(path)
            .cache_size(config.cache_bytes)
            .journal_compression(CompressionType::None)
            .worker_threads(config.worker_threads.max(1))
            .open()
            .map_err(|e| io("database", e))?;
        let by_key = db.keyspace(BY_KEY, || index_options(config.memtable_bytes)).map_err(|e| io(BY_KEY, e))?;
        let by_seqno = db
            .keyspace(BY_SEQNO, || record_options(config.blob_threshold_bytes, config.memtable_bytes))
            .map_err(|e| io(BY_SEQNO, e))?;
        let vb_meta = db.keyspace(VB_META, || index_options(config.memtable_bytes)).map_err(|e| io(VB_META, e))?;
        match vb_meta.get(FORMAT_KEY).map_err(|e| io("format marker", e))? {
            Some(v) if *v == [FORMAT_VERSION] => {}
            Some(v) => return Err(StoreError::Io(format!("unsupported store format {:?}", &*v))),
            None => vb_meta.insert(FORMAT_KEY, [FORMAT_VERSION]).map_err(|e| io("format marker", e))?,
        }
        let store = FjallStore {
            path: path.to_path_buf(),
            db,
            by_key,
            by_seqno,
            vb_meta,
            high_seqnos: (0..NUM_VBUCKETS).map(|_| AtomicU64::new(0)).collect(),
            write_locks: (0..NUM_VBUCKETS).map(|_| Mutex::new(())).collect(),
            damaged: (0..NUM_VBUCKETS).map(|_| AtomicBool::new(false)).collect(),
            poisoned: AtomicBool::new(false),
            commits: AtomicU64::new(0),
            synced: Mutex::new(0),
            faults: config.faults,
        };
        store.load_high_seqnos()?;
        Ok(store)
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True once a write or sync has failed; only reopening clears it.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Reads every vBucket's high-seqno marker and checks the invariant that no record lies above it (the marker is
    /// written in the same batch as the records, so a record above it means damage). A vBucket that fails either
    /// check is taken out of service, logged once here; the other vBuckets stay usable.
    fn load_high_seqnos(&self) -> Result<(), StoreError> {
        for guard in self.vb_meta.prefix(HIGH_SEQNO_PREFIX) {
            let (k, v) = guard.into_inner().map_err(|e| self.read_failed(VbId(0), e))?;
            let Some(vb) = layout::vb_of_meta_key(&k).filter(|vb| vb.0 < NUM_VBUCKETS) else {
                return Err(StoreError::Corrupt { vb: VbId(0), seqno: 0 });
            };
            match layout::decode_high_seqno(&k, &v) {
                Some(high) => self.high_seqnos[usize::from(vb.0)].store(high, Ordering::Release),
                None => self.take_out_of_service(vb, 0, "its high seqno entry fails its checksum"),
            }
        }
        for vb in (0..NUM_VBUCKETS).map(VbId) {
            let Some(guard) = self.by_seqno.prefix(layout::vb_prefix(vb)).next_back() else { continue };
            let k = guard.key().map_err(|e| self.read_failed(vb, e))?;
            let seqno = layout::seqno_of_index_key(&k);
            if seqno > self.high_seqnos[usize::from(vb.0)].load(Ordering::Acquire) {
                self.take_out_of_service(vb, seqno, "a record lies above its persisted high seqno");
            }
        }
        Ok(())
    }

    fn take_out_of_service(&self, vb: VbId, seqno: u64, why: &str) {
        tracing::error!(store = %self.path.display(), vb = vb.0, seqno, "vBucket is damaged and out of service: {why}");
        self.damaged[usize::from(vb.0)].store(true, Ordering::Release);
    }

    /// The checks every vBucket operation starts with: the store is not poisoned, the vBucket exists and is not
    /// damaged.
    fn usable(&self, vb: VbId) -> Result<(), StoreError> {
        self.check_open()?;
        check_vb(vb)?;
        if self.damaged[usize::from(vb.0)].load(Ordering::Acquire) {
            return Err(StoreError::Corrupt { vb, seqno: 0 });
        }
        Ok(())
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.is_poisoned() {
            Err(StoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Poisons the store after a failed write or sync, logging once (the first failure is the one that matters),
    /// and returns the error for the failing call. Later calls get [`StoreError::Poisoned`].
    fn poison(&self, op: &'static str, err: impl Display) -> StoreError {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(
                store = %self.path.display(), op, error = %err,
                "store write failed; the store is poisoned and refuses every call until it is reopened"
            );
        }
        StoreError::Io(format!("{op}: {err}"))
    }

    /// Every write of a batch goes through here: the fault seam, the commit (a failure poisons), and the count
    /// [`crate::VbStore::sync`] reads to tell whether an fsync already covered it.
    fn commit(&self, batch: fjall::OwnedWriteBatch, op: &'static str) -> Result<(), StoreError> {
        self.before_io(op, false)?;
        batch.commit().map_err(|e| self.poison(op, e))?;
        self.commits.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Writes the compaction marker (see `compact_all`), counted as a commit like any write.
    fn mark_compacted(&self) -> Result<(), StoreError> {
        self.vb_meta.insert(COMPACTED_KEY, [FORMAT_VERSION]).map_err(|e| self.poison("compact", e))?;
        self.commits.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Consults the fault injector before a write (`sync == false`) or a sync; an injected fault poisons.
    fn before_io(&self, op: &'static str, sync: bool) -> Result<(), StoreError> {
        self.check_open()?;
        let Some(faults) = &self.faults else { return Ok(()) };
        let result = if sync { faults.before_sync() } else { faults.before_write() };
        result.map_err(|e| self.poison(op, e))
    }

    /// Consults the fault injector before a document read; an injected fault is an I/O error (nothing poisoned).
    fn before_read(&self) -> Result<(), StoreError> {
        let Some(faults) = &self.faults else { return Ok(()) };
        faults.before_read().map_err(|e| StoreError::Io(e.to_string()))
    }

    /// Maps a fjall error on a read path: a checksum or format failure inside fjall is corruption; fjall's own
    /// poison is ours too; anything else is an I/O error that does not poison (nothing was written).
    fn read_failed(&self, vb: VbId, e: fjall::Error) -> StoreError {
        use fjall::LsmError as L;
        match e {
            fjall::Error::Poisoned => {
                self.poisoned.store(true, Ordering::Release);
                StoreError::Poisoned
            }
            fjall::Error::Storage(
                L::ChecksumMismatch { .. } | L::InvalidHeader(_) | L::InvalidTag(_) | L::InvalidTrailer,
            ) => StoreError::Corrupt { vb, seqno: 0 },
            e => StoreError::Io(e.to_string()),
        }
    }

    /// Flushes every memtable, major-compacts every keyspace (dropping superseded versions and fjall tombstones,
    /// then rewriting stale blob files), and rotates once more so fjall unlinks the retired tables and journals.
    fn compact_all(&self) -> Result<(), StoreError> {
        let failed = |e: fjall::Error| self.poison("compact", e);
        // The marker makes the rotation below happen even when no data was written since the last flush: rotation
        // is what advances fjall's garbage-collection watermark, without which compaction keeps every version.
        self.mark_compacted()?;
        for ks in [&self.by_key, &self.by_seqno, &self.vb_meta] {
            self.flush_memtable(ks)?;
        }
        self.by_key.major_compact().map_err(failed)?;
        self.vb_meta.major_compact().map_err(failed)?;
        let mut stale_before = u64::MAX;
        for _ in 0..BLOB_GC_ROUNDS_MAX {
            self.by_seqno.major_compact().map_err(failed)?;
            let stale = self.by_seqno.fragmented_blob_bytes();
            if stale == 0 || stale >= stale_before {
                break;
            }
            stale_before = stale;
        }
        self.mark_compacted()?;
        self.flush_memtable(&self.vb_meta)
    }

    /// Seals `ks`'s memtable and waits until fjall has flushed it to a table. fjall's own `rotate_memtable_and_wait`
    /// would spin forever after a failed flush (its workers stop once they poison the database), so this wait
    /// also watches for that poison, and gives up after `FLUSH_WAIT_MAX` without poisoning (nothing failed yet).
    fn flush_memtable(&self, ks: &Keyspace) -> Result<(), StoreError> {
        ks.rotate_memtable().map_err(|e| self.poison("compact", e))?;
        let deadline = Instant::now() + FLUSH_WAIT_MAX;
        while ks.sealed_memtable_count() > 0 {
            // Fails with fjall's `Poisoned` once a background flush or compaction has failed.
            self.db.persist(PersistMode::Buffer).map_err(|e| self.poison("compact", e))?;
            if Instant::now() > deadline {
                return Err(StoreError::Io(format!("memtable flush unfinished after {FLUSH_WAIT_MAX:?}")));
            }
            std::thread::sleep(FLUSH_POLL);
        }
        Ok(())
    }

    /// Bytes allocated to every file under `dir` (files removed while walking count as 0). Allocated, not apparent:
    /// fjall pre-sizes each journal to 64 MiB with a sparse `set_len`, which uses no disk until written.
    pub(crate) fn walk_bytes(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => FjallStore::walk_bytes(&e.path()),
                Ok(_) => e.metadata().map(|m| allocated_bytes(&m)).unwrap_or(0),
                Err(_) => 0,
            })
            .sum()
    }

    /// Test seam: overwrites the stored record of `key` with bytes whose checksum no longer matches (one value
    /// byte flipped, or a byte appended to an empty value), as a bad disk would. Bypasses every check on purpose.
    #[doc(hidden)]
    pub fn corrupt_for_test(&self, vb: VbId, key: &[u8]) {
        let kk = layout::key_index_key(vb, key);
        let Ok(Some(ke)) = self.by_key.get(&kk) else { return };
        let Some((meta, _)) = layout::decode_key_entry(&kk, &ke) else { return };
        let sk = layout::seqno_index_key(vb, meta.seqno);
        let Ok(Some(se)) = self.by_seqno.get(sk) else { return };
        let mut bad = se.to_vec();
        match bad.last_mut() {
            Some(last) if se.len() > layout::SEQNO_ENTRY_HEADER_BYTES + key.len() => *last ^= 0x01,
            _ => bad.push(0xff),
        }
        self.by_seqno.insert(sk, bad).expect("test seam write");
    }
}

#[cfg(unix)]
fn allocated_bytes(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    // st_blocks counts 512-byte units whatever the file system's block size.
    m.blocks() * 512
}

#[cfg(not(unix))]
fn allocated_bytes(m: &std::fs::Metadata) -> u64 {
    m.len()
}

/// Keys and metadata: small values, no compression, point reads that often miss (new keys), so filters stay.
fn index_options(memtable_bytes: u64) -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .max_memtable_size(memtable_bytes)
        .data_block_compression_policy(CompressionPolicy::disabled())
        .index_block_compression_policy(CompressionPolicy::disabled())
}

/// Whole records: key-value separated above `blob_threshold_bytes`, never compressed. Blob files are rewritten
/// once a quarter of them is dead, by any compaction that touches them (`age_cutoff` 1.0: all stale files, not
/// only the oldest fifth), which bounds blob space at about 4/3 of the live values.
fn record_options(blob_threshold_bytes: u32, memtable_bytes: u64) -> KeyspaceCreateOptions {
    let blobs = KvSeparationOptions::default()
        .compression(CompressionType::None)
        .separation_threshold(blob_threshold_bytes)
        .staleness_threshold(0.25)
        .age_cutoff(1.0);
    index_options(memtable_bytes).with_kv_separation(Some(blobs)).expect_point_read_hits(true)
}

#[cfg(test)]
mod tests;
