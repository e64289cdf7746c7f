//! Memory quota enforcement for persistent buckets: the item pager ejects values (value eviction) or whole items
//! (full eviction) of persisted, not-recently-used items when memory passes the high watermark, until it falls
//! under the low watermark; an operation that meets an ejected item asks for a background fetch and is retried.
//!
//! Only items whose seqno is persisted may be ejected, so ejection never loses a write.

use std::sync::atomic::{AtomicU64, Ordering};

use settee_types::VbId;

use crate::bucket::{Bucket, EvictionPolicy};
use crate::error::EngineError;
use crate::item::DocKey;
use crate::persistence::ItemSnapshot;
use crate::table::Item;
use crate::vbucket::{VbInner, VbState};

/// Couchbase's defaults for the fractions of the quota at which the pager starts (high) and stops (low) ejecting.
pub const HIGH_WATERMARK_DEFAULT: f64 = 0.85;
pub const LOW_WATERMARK_DEFAULT: f64 = 0.75;

/// Parts per million: the unit the watermarks are kept in.
const PPM: u64 = 1_000_000;

/// Which watermark a setting moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watermark {
    Low,
    High,
}

/// Both watermarks of a bucket in one atomic word (low in the high half, high in the low half, each in parts per
/// million of the quota), so that a change of one is checked against the other without a lock and readers never
/// see a low above the high. They follow the quota when it changes, as Couchbase's `mem_*_wat_percent` do.
#[derive(Debug)]
pub(crate) struct Watermarks(AtomicU64);

impl Default for Watermarks {
    fn default() -> Watermarks {
        Watermarks(AtomicU64::new(pack(ppm(LOW_WATERMARK_DEFAULT), ppm(HIGH_WATERMARK_DEFAULT))))
    }
}

impl Watermarks {
    /// (low, high) in parts per million.
    fn ppm(&self) -> (u64, u64) {
        unpack(self.0.load(Ordering::Relaxed))
    }
}

fn ppm(ratio: f64) -> u64 {
    (ratio * PPM as f64).round() as u64
}
fn pack(low: u64, high: u64) -> u64 {
    low << 32 | high
}
fn unpack(word: u64) -> (u64, u64) {
    (word >> 32, word & u64::from(u32::MAX))
}

impl Bucket {
    fn full_eviction(&self) -> bool {
        self.config().eviction == EvictionPolicy::FullEviction
    }

    /// Makes sure an operation can see the item under `key`: with `needs_value`, an ejected value must be
    /// fetched first; under full eviction, a key not in memory may be on disk and must be fetched (or found
    /// absent) first. Then applies expiry on access.
    pub(crate) fn prepare_key(
        &self,
        inner: &mut VbInner,
        key: &DocKey<'_>,
        now_ns: u64,
        now: u32,
        needs_value: bool,
    ) -> Result<(), EngineError> {
        let expired = match inner.table.get_mut(key.encoded()) {
            Some(item) => access(item, needs_value, now)? == Access::Expired,
            None => return absent(inner, key),
        };
        // Only an expired item pays a second lookup (to become a tombstone); the common path does one.
        if expired {
            self.expire_lazily(inner, key, now_ns, now);
        }
        Ok(())
    }

    /// Completes a background fetch: puts the value (or, under full eviction, the whole item) read from disk back,
    /// unless the item changed meanwhile; records a key the disk does not have either.
    pub fn complete_fetch(&self, vb: VbId, key: &[u8], found: Option<ItemSnapshot>) {
        let Some(vbucket) = self.vbucket(vb) else { return };
        let mut inner = vbucket.inner.lock();
        crate::stats::BucketStats::bump(&self.stats.bg_fetched);
        let delta = match (inner.table.get(key), found) {
            (Some(item), Some(snap)) if !item.resident() && item.seqno() == snap.seqno => {
                inner.table.replace_value(key, &snap.value, true);
                snap.value.len() as isize
            }
            (None, Some(snap)) => {
                inner.ejected_items = inner.ejected_items.saturating_sub(1);
                let mut stored = crate::persistence::stored_of(snap);
                stored.referenced = true;
                inner.load(key, stored)
            }
            (None, None) => {
                // Bounded: each entry is consumed by the retried operation that asked for it.
                if inner.known_absent.len() < KNOWN_ABSENT_MAX {
                    inner.known_absent.insert(key.into());
                }
                0
            }
            _ => 0,
        };
        drop(inner);
        self.charge(delta);
    }

    /// The watermarks as fractions of the quota: (low, high).
    pub fn watermark_ratios(&self) -> (f64, f64) {
        let (low, high) = self.watermarks.ppm();
        (low as f64 / PPM as f64, high as f64 / PPM as f64)
    }

    /// The watermarks in bytes of the current quota: (low, high).
    pub fn watermark_bytes(&self) -> (u64, u64) {
        let quota = u128::from(self.quota_bytes());
        let (low, high) = self.watermarks.ppm();
        let bytes = |ppm: u64| (quota * u128::from(ppm) / u128::from(PPM)) as u64;
        (bytes(low), bytes(high))
    }

    /// Moves one watermark to `ratio` of the quota (Couchbase's `mem_low_wat_percent` / `mem_high_wat_percent`,
    /// which despite the name are fractions: 0.85). Refused unless it is within (0, 1] and the low watermark stays
    /// below the high one; the pager uses the new value from its next pass.
    pub fn set_watermark(&self, which: Watermark, ratio: f64) -> Result<(), EngineError> {
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(EngineError::Invalid("a watermark is a fraction of the quota, above 0 and at most 1"));
        }
        let moved = ppm(ratio);
        self.watermarks
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let (low, high) = match (which, unpack(w)) {
                    (Watermark::Low, (_, high)) => (moved, high),
                    (Watermark::High, (low, _)) => (low, moved),
                };
                (low < high).then_some(pack(low, high))
            })
            .map(|_| ())
            .map_err(|_| EngineError::Invalid("the low watermark must stay below the high watermark"))
    }

    /// One pass of the item pager: from past the high watermark down to the low one, and after a write was refused
    /// for memory, until that write fits (and at least down to the low watermark). Returns the number of values or
    /// items ejected.
    pub fn run_item_pager(&self) -> u64 {
        let (low, high) = self.watermark_bytes();
        let need = self.pager_need.swap(0, Ordering::AcqRel);
        let low = low.min(self.quota_bytes().saturating_sub(need));
        if !self.is_persistent() || (self.mem_used() <= high && (need == 0 || self.mem_used() <= low)) {
            return 0;
        }
        let full = self.full_eviction();
        let mut ejected = 0;
        // Two sweeps: the first clears "referenced" bits (second chance), the second ejects what stayed unused.
        for _ in 0..2 {
            for v in 0..self.num_vbuckets() {
                if self.mem_used() <= low {
                    break;
                }
                let Some(vbucket) = self.vbucket(VbId(v)) else { continue };
                let mut inner = vbucket.inner.lock();
                if inner.state != VbState::Active {
                    continue;
                }
                let (n, freed) = eject_from(&mut inner, full);
                drop(inner);
                self.charge(-(freed as isize));
                ejected += n;
            }
        }
        self.stats.ejected.fetch_add(ejected, std::sync::atomic::Ordering::Relaxed);
        ejected
    }

    /// Whether the pager should run: memory is past the high watermark, or a write was refused for memory since
    /// its last pass (the server wakes the pager).
    pub fn over_high_watermark(&self) -> bool {
        self.mem_used() > self.watermark_bytes().1 || self.pager_need.load(Ordering::Acquire) > 0
    }

    /// Share of live items whose value is in memory, in percent.
    pub fn resident_ratio(&self) -> u64 {
        let (mut live, mut resident) = (0u64, 0u64);
        for v in 0..self.num_vbuckets() {
            let (l, r) = self.resident_counts(VbId(v));
            live += l;
            resident += r;
        }
        (resident * 100).checked_div(live).unwrap_or(100)
    }

    /// (live items, items whose value is in memory) of one vBucket (none for an unknown one). Walks the
    /// vBucket's items under its lock: callers that sample often take a few vBuckets at a time.
    pub fn resident_counts(&self, vb: VbId) -> (u64, u64) {
        let Some(vb) = self.vbucket(vb) else { return (0, 0) };
        let inner = vb.inner.lock();
        let live = (inner.live_items + inner.ejected_items) as u64;
        (live, inner.table.iter().filter(|i| !i.deleted() && i.resident()).count() as u64)
    }
}

/// What an access finds in an item present in memory ([`access`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Live, or a tombstone: usable as it is.
    Usable,
    /// Live but past its expiry: the caller turns it into a tombstone ([`Bucket::expire_lazily`]).
    Expired,
}

/// [`Bucket::prepare_key`]'s rules for an item present in memory: with `needs_value`, an ejected value must be
/// fetched first (NEED_FETCH); the access marks the item referenced (the pager's second chance) and tells whether
/// it expired.
pub(crate) fn access(item: &mut Item, needs_value: bool, now: u32) -> Result<Access, EngineError> {
    if !item.resident() && needs_value {
        return Err(EngineError::NeedFetch);
    }
    // Written only when it changes: most reads then leave the item's cache line clean.
    if !item.referenced() {
        item.set_referenced(true);
    }
    Ok(if !item.deleted() && crate::expiry::is_expired(item.expiry(), now) { Access::Expired } else { Access::Usable })
}

/// [`Bucket::prepare_key`]'s rule for a key not in memory: under full eviction (items ejected) it may be on disk,
/// so it must be fetched first (NEED_FETCH) unless a fetch just found it absent there.
pub(crate) fn absent(inner: &mut VbInner, key: &DocKey<'_>) -> Result<(), EngineError> {
    if inner.ejected_items > 0 && !inner.known_absent.remove(key.encoded()) {
        return Err(EngineError::NeedFetch);
    }
    Ok(())
}

const KNOWN_ABSENT_MAX: usize = 4096;

/// Ejects clean, unreferenced, unlocked items of one vBucket; returns (count, bytes freed).
fn eject_from(inner: &mut VbInner, full: bool) -> (u64, usize) {
    let persisted = inner.persisted_seqno;
    // Clean, unlocked, and not accessed since the pager last looked (which it clears: the second chance).
    let pick = |item: &mut Item| {
        if item.seqno() > persisted || item.locked_until() != 0 || (!full && (!item.resident() || item.deleted())) {
            return false;
        }
        if item.referenced() {
            item.set_referenced(false);
            return false;
        }
        true
    };
    if !full {
        return inner.table.eject_values(pick);
    }
    let mut doomed = Vec::new();
    for item in inner.table.iter_mut() {
        if pick(item) {
            doomed.push(Box::<[u8]>::from(item.key()));
        }
    }
    let (mut count, mut freed) = (0, 0);
    for key in doomed {
        let was_live = inner.table.get(&key).is_some_and(|i| !i.deleted());
        freed += inner.purge(&key);
        if was_live {
            inner.ejected_items += 1;
        }
        count += 1;
    }
    (count, freed)
}
