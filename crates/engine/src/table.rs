//! Hot path: how a vBucket keeps its items in memory.
//!
//! Each item is one chunk of the vBucket's [`Arena`] — a header of 23 to 36 bytes, the key, the value, rounded to 4
//! bytes — and the vBucket's hash table ([`ItemTable`]) holds a 4-byte handle per item (5 bytes with hashbrown's
//! control byte). The arena pays no allocator's size field or size-class rounding, and the table half the bytes of a
//! pointer table; the previous layout (one glibc allocation per item behind an 8-byte pointer) spent 79–82 bytes
//! per item beyond key and value at a million items, memcached 78 (BENCHMARKS.md, "Memory per item";
//! docs/adr/0005-item-arena-per-vbucket.md). A lookup still touches the header, the key it compares and the value it
//! returns in neighbouring cache lines.
//!
//! [`Item`] is the chunk seen as a value: a dynamically sized type (header, then key and value bytes) borrowed from
//! the table, so `&Item` and `&mut Item` live no longer than the table's borrow, and every change that allocates or
//! frees (and so may move or compact the arena) takes `&mut ItemTable`.
//!
//! The header has a fixed part of 22 bytes (CAS; the seqno's 56 bits with the state bits; the value length; the key
//! length, one byte, as keys are at most 250 bytes plus a collection prefix of at most 5; the datatype) and a
//! variable part: the revision (48 bits at most, as kv_engine's `revSeqno`) in 1, 2, 4 or 6 bytes, then the flags and
//! the expiry, 4 bytes each and only when not 0. A new document without flags or expiry takes 23 bytes, one with
//! both and a revision past 255 takes 32. The GET_LOCKED deadline, which few items ever have, is a 4-byte trailer
//! after the value (a state bit says so), and locking or unlocking rewrites the chunk. A field whose width changes
//! (a revision passing 255, flags set on an item that had none) moves the item to a chunk of the new size like any
//! other overwrite of a new size; a same-sized one is written in place.

use std::borrow::Cow;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};
use settee_types::{Cas, Datatype, Seqno};

use crate::arena::{rounded, Arena};
use crate::item::StoredItem;

const REV_BITS: u32 = 48;
const REV_MAX: u64 = (1 << REV_BITS) - 1;
const SEQNO_BITS: u32 = 56;
const SEQNO_MAX: u64 = (1 << SEQNO_BITS) - 1;

/// State bits kept above the seqno.
const DELETED: u64 = 1 << 56;
const RESIDENT: u64 = 1 << 57;
const REFERENCED: u64 = 1 << 58;
/// The chunk was freed (the table no longer points at it); compaction skips it.
const DEAD: u64 = 1 << 59;
/// The chunk ends with a 4-byte lock deadline (Unix seconds) right after the value.
const LOCKED: u64 = 1 << 60;
/// The flags are not 0: they follow the revision, in 4 bytes or, with [`FLAGS_TOP`], 1.
const HAS_FLAGS: u64 = 1 << 61;
/// The expiry is not 0: 4 bytes of it follow the revision and any flags.
const HAS_EXPIRY: u64 = 1 << 62;
/// The flags have only their top byte set, and only that byte is stored: the SDKs' "common flags" keep the format
/// there (JSON is 0x02000000, as both SDKs send it; PROTOCOL.md).
const FLAGS_TOP: u64 = 1 << 63;
const LOCK_BYTES: usize = 4;

/// The value length has the low 30 bits of its word (values are at most 20 MiB), the revision's width code the top 2.
const VALUE_LEN_MASK: u32 = (1 << 30) - 1;
/// Bytes the revision takes, by width code: most items are in their first 255 revisions.
const REV_WIDTHS: [usize; 4] = [1, 2, 4, 6];
/// The most bytes the variable part of a header takes: a 6-byte revision, 4-byte flags and expiry.
const EXTRA_MAX: usize = 6 + 4 + 4;

/// The fixed part of a chunk's header, unaligned (a chunk starts on a 4-byte boundary; its fields are read as
/// bytes). The variable part follows: the revision in 1, 2, 4 or 6 bytes, then the flags (4 bytes, or 1 when only
/// their top byte is set) and the expiry (4 bytes), each only when not 0. A new item without flags or expiry has a
/// 23-byte header, one with the SDKs' JSON flags 24.
#[repr(C, packed)]
struct Header {
    cas: Cas,
    /// The seqno (low 56 bits) and the state bits.
    seqno_bits: u64,
    /// The value length (low 30 bits) and the revision's width code (top 2 bits).
    value_bits: u32,
    key_len: u8,
    datatype: u8,
}

const HEADER: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER == 22 && std::mem::align_of::<Header>() == 1);

/// A header ready to be written: the fixed part and the variable bytes that follow it.
struct Encoded {
    header: Header,
    extra: [u8; EXTRA_MAX],
    extra_len: usize,
}

impl Encoded {
    /// The header of `item` under `key`. Keys are at most 255 bytes (250 plus the collection prefix) and values at
    /// most 20 MiB: the engine refuses anything larger before it gets here.
    fn of(key: &[u8], item: &StoredItem<'_>) -> Encoded {
        assert!(key.len() <= u8::MAX as usize, "key of {} bytes", key.len());
        let value_len =
            u32::try_from(item.value.len()).ok().filter(|&l| l <= VALUE_LEN_MASK).expect("value under 1 GiB");
        debug_assert!(item.seqno <= SEQNO_MAX, "seqno beyond 56 bits");
        let mut bits = 0;
        for (set, bit) in [
            (item.deleted, DELETED),
            (item.resident, RESIDENT),
            (item.referenced, REFERENCED),
            (item.locked_until != 0, LOCKED),
            (item.flags != 0, HAS_FLAGS),
            (item.flags != 0 && item.flags.trailing_zeros() >= 24, FLAGS_TOP),
            (item.expiry != 0, HAS_EXPIRY),
        ] {
            if set {
                bits |= bit;
            }
        }
        let rev = item.rev.min(REV_MAX);
        let code = match rev {
            0..=0xff => 0,
            0x100..=0xffff => 1,
            0x1_0000..=0xffff_ffff => 2,
            _ => 3,
        };
        let header = Header {
            cas: item.cas,
            seqno_bits: (item.seqno & SEQNO_MAX) | bits,
            value_bits: value_len | (code as u32) << 30,
            key_len: key.len() as u8,
            datatype: item.datatype.0,
        };
        // The widths the header's bits give: the revision's low bytes, the flags' high ones (all four, or with
        // FLAGS_TOP the top one), the expiry's four; none for a field that is 0.
        let (rev, flags, expiry) = (rev.to_le_bytes(), item.flags.to_le_bytes(), item.expiry.to_le_bytes());
        let fields = [&rev[..header.rev_bytes()], &flags[4 - header.flags_bytes()..], &expiry[..header.expiry_bytes()]];
        let (mut extra, mut extra_len) = ([0u8; EXTRA_MAX], 0);
        for field in fields {
            extra[extra_len..extra_len + field.len()].copy_from_slice(field);
            extra_len += field.len();
        }
        Encoded { header, extra, extra_len }
    }
}

impl Header {
    fn key_len(&self) -> usize {
        usize::from(self.key_len)
    }
    fn value_len(&self) -> usize {
        (self.value_bits & VALUE_LEN_MASK) as usize
    }
    fn state(&self) -> u64 {
        self.seqno_bits
    }
    fn locked(&self) -> bool {
        self.state() & LOCKED != 0
    }
    fn rev_bytes(&self) -> usize {
        REV_WIDTHS[(self.value_bits >> 30) as usize]
    }
    /// Bytes the flags take in the variable part.
    fn flags_bytes(&self) -> usize {
        match (self.state() & HAS_FLAGS != 0, self.state() & FLAGS_TOP != 0) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => 4,
        }
    }
    fn expiry_bytes(&self) -> usize {
        if self.state() & HAS_EXPIRY != 0 {
            4
        } else {
            0
        }
    }
    /// Bytes of the variable part: the revision, the flags and the expiry.
    fn extra_len(&self) -> usize {
        self.rev_bytes() + self.flags_bytes() + self.expiry_bytes()
    }
    /// Bytes after the fixed part: the variable part, key, value, and when locked the deadline.
    fn tail_bytes(&self) -> usize {
        tail_bytes(self.extra_len(), self.key_len(), self.value_len(), self.locked())
    }
    /// Bytes the chunk takes in the arena.
    fn chunk_bytes(&self) -> usize {
        rounded(HEADER + self.tail_bytes())
    }
}

fn tail_bytes(extra_len: usize, key_len: usize, value_len: usize, locked: bool) -> usize {
    extra_len + key_len + value_len + if locked { LOCK_BYTES } else { 0 }
}

/// A little-endian unsigned integer of `bytes.len()` (at most 8) bytes.
fn read_le(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// One item as it lies in the arena: header, key, value. Only ever borrowed from an [`ItemTable`].
#[repr(C)]
pub(crate) struct Item {
    header: Header,
    /// The header's variable part, the key, the value, and when locked the lock deadline.
    bytes: [u8],
}

/// The item at `handle`, borrowed for as long as the caller borrows the arena.
///
/// # Safety
/// `handle` must be a live chunk of `arena` (written by [`ItemTable::write`]).
unsafe fn item_at(arena: &Arena, handle: u32) -> *mut Item {
    let raw = arena.at(handle);
    let header = &*raw.cast::<Header>();
    std::ptr::slice_from_raw_parts_mut(raw, header.tail_bytes()) as *mut Item
}

impl Item {
    fn key_len(&self) -> usize {
        self.header.key_len()
    }
    /// Where the key starts in `bytes`: after the header's variable part.
    fn key_start(&self) -> usize {
        self.header.extra_len()
    }
    pub(crate) fn key(&self) -> &[u8] {
        let start = self.key_start();
        &self.bytes[start..start + self.key_len()]
    }
    /// The value: an optional xattr section followed by the body, never compressed; empty when not resident.
    pub(crate) fn value(&self) -> &[u8] {
        let start = self.key_start() + self.key_len();
        &self.bytes[start..start + self.header.value_len()]
    }
    pub(crate) fn cas(&self) -> Cas {
        self.header.cas
    }
    fn state(&self) -> u64 {
        self.header.state()
    }
    pub(crate) fn seqno(&self) -> Seqno {
        self.state() & SEQNO_MAX
    }
    /// Revision: how many times the document was mutated.
    pub(crate) fn rev(&self) -> u64 {
        read_le(&self.bytes[..self.header.rev_bytes()])
    }
    pub(crate) fn flags(&self) -> u32 {
        let (at, len) = (self.header.rev_bytes(), self.header.flags_bytes());
        if len == 0 {
            return 0;
        }
        // The stored bytes are the flags' high ones.
        (read_le(&self.bytes[at..at + len]) as u32) << (8 * (4 - len))
    }
    /// Absolute Unix seconds, 0 = never. For a tombstone, the time it was deleted.
    pub(crate) fn expiry(&self) -> u32 {
        let at = self.header.rev_bytes() + self.header.flags_bytes();
        read_le(&self.bytes[at..at + self.header.expiry_bytes()]) as u32
    }
    /// JSON and XATTR bits of the stored value.
    pub(crate) fn datatype(&self) -> Datatype {
        Datatype(self.header.datatype)
    }
    pub(crate) fn deleted(&self) -> bool {
        self.state() & DELETED != 0
    }
    /// The value is in memory (false once the item pager ejected it; it is on disk).
    pub(crate) fn resident(&self) -> bool {
        self.state() & RESIDENT != 0
    }
    /// Accessed since the item pager last looked (second-chance ejection).
    pub(crate) fn referenced(&self) -> bool {
        self.state() & REFERENCED != 0
    }
    /// Unix seconds until which the document is locked by GET_LOCKED; 0 = unlocked.
    pub(crate) fn locked_until(&self) -> u32 {
        if !self.header.locked() {
            return 0;
        }
        let at = self.bytes.len() - LOCK_BYTES;
        read_le(&self.bytes[at..]) as u32
    }
    pub(crate) fn is_locked(&self, now_secs: u32) -> bool {
        self.locked_until() > now_secs
    }

    pub(crate) fn set_cas(&mut self, cas: Cas) {
        self.header.cas = cas;
    }
    pub(crate) fn set_referenced(&mut self, referenced: bool) {
        let bits = self.header.seqno_bits;
        self.header.seqno_bits = if referenced { bits | REFERENCED } else { bits & !REFERENCED };
    }

    /// The item's fields, its value borrowed.
    pub(crate) fn to_stored(&self) -> StoredItem<'_> {
        StoredItem {
            value: Cow::Borrowed(self.value()),
            cas: self.cas(),
            seqno: self.seqno(),
            rev: self.rev(),
            flags: self.flags(),
            expiry: self.expiry(),
            datatype: self.datatype(),
            deleted: self.deleted(),
            locked_until: self.locked_until(),
            resident: self.resident(),
            referenced: self.referenced(),
        }
    }

    /// Bytes charged to the bucket quota for this item.
    pub(crate) fn footprint(&self) -> usize {
        footprint(self.key_len(), self.value().len())
    }
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item").field("key", &self.key()).field("fields", &self.to_stored()).finish()
    }
}

/// Bytes charged to the bucket quota for an item of these sizes: key, value, and the fixed cost per item.
pub(crate) fn footprint(key_len: usize, value_len: usize) -> usize {
    ITEM_OVERHEAD_BYTES + key_len + value_len
}

/// Fixed memory charged per item beyond key and value: the header (23–36 bytes), the rounding to 4 bytes, the table
/// slot (4-byte handle and a control byte at a load between 7/16 and 7/8) and a share of the dead bytes the arena
/// keeps until it compacts.
pub(crate) const ITEM_OVERHEAD_BYTES: usize = 44;

/// What an item the table dropped or replaced was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Replaced {
    seqno: Seqno,
    deleted: bool,
    footprint: usize,
}

impl Replaced {
    fn of(item: &Item) -> Replaced {
        Replaced { seqno: item.seqno(), deleted: item.deleted(), footprint: item.footprint() }
    }
    pub(crate) fn seqno(&self) -> Seqno {
        self.seqno
    }
    pub(crate) fn deleted(&self) -> bool {
        self.deleted
    }
    pub(crate) fn footprint(&self) -> usize {
        self.footprint
    }
}

/// A vBucket's items by key: handles in a hash table, items in an arena.
#[derive(Default)]
pub(crate) struct ItemTable {
    slots: HashTable<u32>,
    arena: Arena,
    hasher: DefaultHashBuilder,
}

impl ItemTable {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }
    fn item(&self, handle: u32) -> &Item {
        // SAFETY: the table's handles are live chunks; the borrow of self keeps the arena still.
        unsafe { &*item_at(&self.arena, handle) }
    }
    fn handle(&self, key: &[u8]) -> Option<u32> {
        self.handle_hashed(self.hash(key), key)
    }
    fn handle_hashed(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let arena = &self.arena;
        // SAFETY (in the closure): candidates are the table's handles.
        self.slots.find(hash, |&h| unsafe { (*item_at(arena, h)).key() == key }).copied()
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Item> {
        self.handle(key).map(|h| self.item(h))
    }
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Item> {
        let handle = self.handle(key)?;
        // SAFETY: a live chunk; &mut self makes the access exclusive.
        Some(unsafe { &mut *item_at(&self.arena, handle) })
    }

    /// Puts `item` under `key`, replacing any item there; returns what it replaced.
    pub(crate) fn insert(&mut self, key: &[u8], item: &StoredItem<'_>) -> Option<Replaced> {
        let header = Encoded::of(key, item);
        let hash = self.hash(key);
        let Some(old) = self.handle_hashed(hash, key) else {
            let new = self.write(&header, key, item);
            let (arena, hasher) = (&self.arena, &self.hasher);
            // SAFETY (in the closure): the table's handles, and `new`, are live chunks.
            self.slots.insert_unique(hash, new, |&h| hasher.hash_one(unsafe { (*item_at(arena, h)).key() }));
            return None;
        };
        let replaced = Replaced::of(self.item(old));
        if self.item(old).header.chunk_bytes() == header.header.chunk_bytes() {
            // The same size (an overwrite of a same-sized value, a tombstone of one): in place, nothing dead.
            // SAFETY: the old chunk is no longer read (its fields are in `replaced`) and has the room needed.
            unsafe { self.write_at(old, &header, key, item) };
            return Some(replaced);
        }
        let new = self.write(&header, key, item);
        self.repoint(hash, old, new);
        self.release(old);
        self.compact_if_due();
        Some(replaced)
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Replaced> {
        let hash = self.hash(key);
        let arena = &self.arena;
        // SAFETY (in the closure): candidates are the table's handles.
        let slot = self.slots.find_entry(hash, |&h| unsafe { (*item_at(arena, h)).key() == key }).ok()?;
        let (old, _) = slot.remove();
        let replaced = self.release(old);
        self.compact_if_due();
        Some(replaced)
    }

    /// Gives the item under `key` another value (a fetch bringing an ejected value back), its other fields kept.
    /// Returns false when the key is not here.
    pub(crate) fn replace_value(&mut self, key: &[u8], value: &[u8], resident: bool) -> bool {
        let hash = self.hash(key);
        let Some(old) = self.handle_hashed(hash, key) else { return false };
        let locked_until = self.item(old).locked_until();
        self.replace(hash, old, Some((value, resident)), locked_until);
        true
    }

    /// Locks the item under `key` until `secs` (Unix seconds; 0 unlocks it). Returns false when the key is not here.
    pub(crate) fn set_locked_until(&mut self, key: &[u8], secs: u32) -> bool {
        let hash = self.hash(key);
        let Some(old) = self.handle_hashed(hash, key) else { return false };
        self.replace(hash, old, None, secs);
        true
    }

    /// Points the slot of the key hashing to `hash` at a rewritten copy of the chunk at `old` and frees `old`.
    fn replace(&mut self, hash: u64, old: u32, value: Option<(&[u8], bool)>, locked_until: u32) {
        let new = self.rewrite(old, value, locked_until);
        self.repoint(hash, old, new);
        self.release(old);
        self.compact_if_due();
    }

    /// Makes the slot holding `old`, among those of keys hashing to `hash`, hold `new`.
    fn repoint(&mut self, hash: u64, old: u32, new: u32) {
        let slot = self.slots.find_mut(hash, |&h| h == old);
        debug_assert!(slot.is_some(), "a live chunk has a slot");
        if let Some(slot) = slot {
            *slot = new;
        }
    }

    /// Drops the value of every item `eject` picks (the item pager; `eject` may also update the item, as in
    /// clearing its referenced bit); the key and the metadata stay, the item no longer resident. Returns the
    /// number of values dropped and their bytes.
    pub(crate) fn eject_values(&mut self, mut eject: impl FnMut(&mut Item) -> bool) -> (u64, usize) {
        let mut moves = Vec::new();
        for &handle in self.slots.iter() {
            // SAFETY: a live chunk, one at a time, under &mut self.
            let item = unsafe { &mut *item_at(&self.arena, handle) };
            if eject(item) {
                moves.push(handle);
            }
        }
        let mut freed = 0;
        for &old in &moves {
            let item = self.item(old);
            freed += item.value().len();
            let locked_until = item.locked_until();
            let new = self.rewrite(old, Some((&[], false)), locked_until);
            let hash = self.hash(self.item(new).key());
            self.repoint(hash, old, new);
            self.release(old);
        }
        self.compact_if_due();
        (moves.len() as u64, freed)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Item> {
        self.slots.iter().map(|&h| self.item(h))
    }
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Item> {
        let arena = &self.arena;
        // SAFETY: each handle is a distinct live chunk, so the &mut borrows do not overlap; &mut self keeps the
        // arena still while they live.
        self.slots.iter().map(move |&h| unsafe { &mut *item_at(arena, h) })
    }
    /// The keys of the items `keep` selects (to act on them one by one afterwards).
    pub(crate) fn keys_where(&self, keep: impl Fn(&Item) -> bool) -> Vec<Box<[u8]>> {
        self.iter().filter(|i| keep(i)).map(|i| i.key().into()).collect()
    }

    /// Writes a chunk for `item` under `key` at the end of the arena; returns its handle.
    fn write(&mut self, header: &Encoded, key: &[u8], item: &StoredItem<'_>) -> u32 {
        let handle = self.arena.alloc(header.header.chunk_bytes());
        // SAFETY: a fresh chunk of the header's size.
        unsafe { self.write_at(handle, header, key, item) };
        handle
    }

    /// Writes `header`, the key, the value and any lock deadline at `handle`.
    ///
    /// # Safety
    /// `handle` must start `header.chunk_bytes()` bytes of the arena that nothing else reads. The slices lie outside
    /// the arena: the public callers lend &mut self, so none of them borrows from it.
    unsafe fn write_at(&mut self, handle: u32, header: &Encoded, key: &[u8], item: &StoredItem<'_>) {
        let raw = self.arena.at(handle);
        let value = &item.value[..];
        let start = HEADER + header.extra_len;
        std::ptr::copy_nonoverlapping((&raw const header.header).cast::<u8>(), raw, HEADER);
        std::ptr::copy_nonoverlapping(header.extra.as_ptr(), raw.add(HEADER), header.extra_len);
        std::ptr::copy_nonoverlapping(key.as_ptr(), raw.add(start), key.len());
        std::ptr::copy_nonoverlapping(value.as_ptr(), raw.add(start + key.len()), value.len());
        write_lock(raw.add(start + key.len() + value.len()), item.locked_until);
    }

    /// A copy of the chunk at `old` with the lock deadline `locked_until` (0: none) and, when `value` is given,
    /// another value and resident bit; `old` stays live until released.
    fn rewrite(&mut self, old: u32, value: Option<(&[u8], bool)>, locked_until: u32) -> u32 {
        let header = &self.item(old).header;
        let (extra_len, key_len) = (header.extra_len(), header.key_len());
        let value_len = value.map_or(header.value_len(), |(v, _)| v.len());
        let new = self.arena.alloc(rounded(HEADER + tail_bytes(extra_len, key_len, value_len, locked_until != 0)));
        // SAFETY: both chunks are live and distinct (taken after the allocation, which may move the region); the new
        // one has room for the header, the key, the value and the deadline; a new value lies outside the arena (see
        // `write`).
        unsafe {
            let (from, to) = (self.arena.at(old), self.arena.at(new));
            let value_at = HEADER + extra_len + key_len;
            let kept = value_at + if value.is_none() { value_len } else { 0 };
            std::ptr::copy_nonoverlapping(from, to, kept);
            let header = &mut *to.cast::<Header>();
            let mut bits = header.seqno_bits & !LOCKED;
            if let Some((v, resident)) = value {
                std::ptr::copy_nonoverlapping(v.as_ptr(), to.add(value_at), v.len());
                header.value_bits = header.value_bits & !VALUE_LEN_MASK | value_len as u32;
                bits = if resident { bits | RESIDENT } else { bits & !RESIDENT };
            }
            header.seqno_bits = if locked_until != 0 { bits | LOCKED } else { bits };
            write_lock(to.add(value_at + value_len), locked_until);
        }
        new
    }

    /// Frees the chunk at `handle`, which the table no longer points at; returns what it was.
    fn release(&mut self, handle: u32) -> Replaced {
        // SAFETY: the chunk is live until this marks it dead; nothing else refers to it.
        let item = unsafe { &mut *item_at(&self.arena, handle) };
        let replaced = Replaced::of(item);
        let bytes = item.header.chunk_bytes();
        item.header.seqno_bits |= DEAD;
        self.arena.free(bytes);
        replaced
    }

    fn compact_if_due(&mut self) {
        if self.arena.wants_compaction() {
            self.compact();
        }
    }

    /// Slides the live chunks down over the dead ones, in address order, and points the table at their new places;
    /// the arena then returns the pages past the end. A chunk's slot is found by its key's hash and its old handle:
    /// no slot holds a handle between where the chunks are written and where they are read.
    fn compact(&mut self) {
        let used = self.arena.used();
        let (mut read, mut write) = (0, 0);
        while read < used {
            let (from, to) = ((read / crate::arena::UNIT) as u32, (write / crate::arena::UNIT) as u32);
            // SAFETY: `read` walks chunk by chunk from the start of the used part; every chunk there, live or dead,
            // has a whole header.
            let header = unsafe { &*self.arena.at(from).cast::<Header>() };
            let (bytes, dead) = (header.chunk_bytes(), header.seqno_bits & DEAD != 0);
            if !dead {
                if from != to {
                    self.arena.move_down(from, to, bytes);
                    let hash = self.hash(self.item(to).key());
                    self.repoint(hash, from, to);
                }
                write += bytes;
            }
            read += bytes;
        }
        self.arena.truncate(write);
    }
}

/// Writes the lock deadline at `at`, right after a chunk's value, when there is one (`secs` not 0).
///
/// # Safety
/// When `secs` is not 0, `at` must have [`LOCK_BYTES`] bytes of a chunk sized for a locked item.
unsafe fn write_lock(at: *mut u8, secs: u32) {
    if secs != 0 {
        std::ptr::copy_nonoverlapping(secs.to_le_bytes().as_ptr(), at, LOCK_BYTES);
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
