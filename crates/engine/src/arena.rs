//! Hot path: the memory a vBucket's items live in ([`Arena`]).
//!
//! One contiguous region of anonymous memory per vBucket, filled from the front: an allocation takes the next bytes
//! (4-byte granularity, no size field, no size classes), a free only counts the bytes as dead. The owner
//! ([`crate::table::ItemTable`]) compacts the region once an eighth of it is dead: it slides the live items down in
//! address order and tells its hash table where each one went, then the pages past the end go back to the kernel.
//! Items are addressed by a 4-byte handle (the offset in 4-byte units), so growing the region may move it
//! (`mremap`) without touching the table, and a region covers at most 16 GiB.
//!
//! Why not a general-purpose allocator: glibc's malloc spends an 8-byte size field and rounds to 16 bytes, jemalloc
//! rounds to size classes 64 bytes apart at these sizes, and an 8-byte pointer per item sits in the table. Why not
//! slabs of size classes: per vBucket, a partly filled slab per class costs more than the items at a million items
//! over 1,024 vBuckets, and once items change size a class keeps slabs that hold a few live items each (memcached
//! grows by half after the bench script's churn). Compaction keeps the dead bytes under an eighth of the region
//! whatever the sizes do. docs/adr/0005-item-arena-per-vbucket.md.
//!
//! Everything runs under the vBucket's lock, which owns the table and its arena: no lock of its own.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Allocation granularity and the unit of a handle.
pub(crate) const UNIT: usize = 4;
/// The first mapping of a region (virtual: only the pages written become resident).
const FIRST_MAP_BYTES: usize = 64 << 10;
/// A region covers what 32-bit handles in 4-byte units can address.
const REGION_BYTES_MAX: usize = (u32::MAX as usize + 1) * UNIT;
/// A compaction runs once dead bytes are this share (1/n) of the region: the region holds at most 8/7 of its live
/// bytes, and a compaction moves at most 7 live bytes for each dead one it reclaims.
const DEAD_SHARE_MAX: usize = 8;
/// Dead bytes below this never trigger a compaction (a small vBucket would compact on nearly every overwrite).
const COMPACT_DEAD_BYTES_MIN: usize = 4096;

/// Bytes an allocation of `len` takes.
pub(crate) const fn rounded(len: usize) -> usize {
    (len + UNIT - 1) & !(UNIT - 1)
}

/// A growable region of anonymous memory, filled from the front (see the module documentation).
pub(crate) struct Arena {
    /// Start of the mapping; dangling while nothing is mapped.
    base: NonNull<u8>,
    /// Bytes mapped.
    mapped: usize,
    /// Bytes handed out, dead ones included: the next allocation starts here.
    used: usize,
    /// Bytes freed since the last compaction.
    dead: usize,
}

// SAFETY: the arena owns its mapping exclusively; shared references only read it.
unsafe impl Send for Arena {}
// SAFETY: as above: no interior mutability.
unsafe impl Sync for Arena {}

impl Default for Arena {
    fn default() -> Arena {
        Arena { base: NonNull::dangling(), mapped: 0, used: 0, dead: 0 }
    }
}

fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

fn out_of_memory(bytes: usize) -> ! {
    // The same end as a failed malloc: the quota keeps a vBucket far below what the machine can map.
    std::alloc::handle_alloc_error(Layout::from_size_align(bytes.max(1), UNIT).unwrap_or(Layout::new::<u32>()))
}

impl Arena {
    /// Bytes handed out, dead ones included.
    pub(crate) fn used(&self) -> usize {
        self.used
    }
    /// Bytes freed and not yet compacted away.
    #[cfg(test)]
    pub(crate) fn dead(&self) -> usize {
        self.dead
    }

    /// `len` bytes (a multiple of [`UNIT`]) at the end of the region; returns their handle. The region may move.
    pub(crate) fn alloc(&mut self, len: usize) -> u32 {
        debug_assert_eq!(len % UNIT, 0);
        let end = self.used + len;
        if end > REGION_BYTES_MAX {
            out_of_memory(end);
        }
        if end > self.mapped {
            self.grow(end);
        }
        let handle = (self.used / UNIT) as u32;
        self.used = end;
        handle
    }

    /// The `len` bytes at `handle` are no longer used: counted as dead until the next compaction.
    pub(crate) fn free(&mut self, len: usize) {
        self.dead += len;
        debug_assert!(self.dead <= self.used);
    }

    /// An eighth of the region (and at least a few KiB) is dead, or all of it.
    pub(crate) fn wants_compaction(&self) -> bool {
        (self.dead >= COMPACT_DEAD_BYTES_MIN && self.dead * DEAD_SHARE_MAX >= self.used)
            || (self.dead > 0 && self.dead == self.used)
    }

    /// Pointer to the bytes at `handle`; valid until the region next grows.
    pub(crate) fn at(&self, handle: u32) -> *mut u8 {
        let offset = handle as usize * UNIT;
        debug_assert!(offset < self.used);
        // SAFETY: handles come from alloc, so the offset lies inside the mapping.
        unsafe { self.base.as_ptr().add(offset) }
    }

    /// Moves `len` bytes from handle `from` down to handle `to` (they may overlap), during a compaction.
    pub(crate) fn move_down(&mut self, from: u32, to: u32, len: usize) {
        debug_assert!(to < from && from as usize * UNIT + len <= self.used);
        // SAFETY: both ranges lie inside the used part of the mapping; `copy` allows overlap.
        unsafe { std::ptr::copy(self.at(from), self.at(to), len) }
    }

    /// Ends a compaction: the live items now fill the first `live` bytes; the pages past them go back to the kernel.
    pub(crate) fn truncate(&mut self, live: usize) {
        debug_assert!(live <= self.used);
        self.used = live;
        self.dead = 0;
        let page = page_bytes();
        let keep = (live + page - 1) & !(page - 1);
        if keep < self.mapped {
            // SAFETY: the range is page-aligned and inside the mapping; nothing lives there (past `used`), and
            // MADV_DONTNEED leaves it mapped, reading as zeros when written again.
            unsafe {
                libc::madvise(self.base.as_ptr().add(keep).cast(), self.mapped - keep, libc::MADV_DONTNEED);
            }
        }
    }

    fn grow(&mut self, needed: usize) {
        let page = page_bytes();
        let target = needed.max(self.mapped * 2).clamp(FIRST_MAP_BYTES, REGION_BYTES_MAX);
        let bytes = (target + page - 1) & !(page - 1);
        // SAFETY: mmap of fresh anonymous memory has no preconditions; mremap gets the mapping this arena made, with
        // its size, and may move it: handles are offsets, and no pointer into the region outlives a &mut self call.
        let raw = unsafe {
            if self.mapped == 0 {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            } else {
                libc::mremap(self.base.as_ptr().cast(), self.mapped, bytes, libc::MREMAP_MAYMOVE)
            }
        };
        if raw == libc::MAP_FAILED {
            out_of_memory(bytes);
        }
        let Some(base) = NonNull::new(raw.cast::<u8>()) else { out_of_memory(bytes) };
        self.base = base;
        self.mapped = bytes;
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if self.mapped > 0 {
            // SAFETY: the mapping was made by this arena with this size and nothing refers to it any more.
            unsafe {
                libc::munmap(self.base.as_ptr().cast(), self.mapped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocations follow one another at 4-byte granularity, and what was written survives the region growing (and
    /// possibly moving) past its first mapping.
    #[test]
    fn contents_survive_growth() {
        let mut arena = Arena::default();
        let mut handles = Vec::new();
        for i in 0..40_000u32 {
            let h = arena.alloc(8);
            // SAFETY: 8 bytes were just allocated at h.
            unsafe { arena.at(h).cast::<u64>().write_unaligned(u64::from(i) << 32 | u64::from(!i)) };
            handles.push(h);
        }
        assert_eq!(arena.used(), 320_000);
        assert_eq!(handles[1] - handles[0], 2);
        for (i, h) in handles.iter().enumerate() {
            // SAFETY: each handle holds the 8 bytes written above.
            let word = unsafe { arena.at(*h).cast::<u64>().read_unaligned() };
            assert_eq!(word, (i as u64) << 32 | u64::from(!(i as u32)));
        }
    }

    /// Compaction is asked for once an eighth of the region is dead and a few KiB at least, and truncating resets
    /// the count and lets allocation resume at the new end.
    #[test]
    fn compaction_wanted_at_an_eighth_dead() {
        let mut arena = Arena::default();
        for _ in 0..100 {
            arena.alloc(400);
        }
        arena.free(4_800);
        assert!(!arena.wants_compaction(), "12 % dead");
        arena.free(400);
        assert!(arena.wants_compaction(), "13 % dead");
        arena.move_down(25 * 100, 0, 400);
        arena.truncate(34_800);
        assert_eq!((arena.used(), arena.dead()), (34_800, 0));
        assert_eq!(arena.alloc(4) as usize * UNIT, 34_800);
        let mut small = Arena::default();
        small.alloc(1000);
        small.alloc(1000);
        small.free(1000);
        assert!(!small.wants_compaction(), "under the minimum");
        small.free(1000);
        assert!(small.wants_compaction(), "all dead");
    }
}
