//! Hot path: how a vBucket keeps its items in memory.
//!
//! Each item is one heap allocation — a 40-byte header, the key, the value — behind an 8-byte pointer, and the
//! vBucket's hash table ([`ItemTable`]) holds just those pointers. That is what memcached does with its item
//! header and slab chunks, and what keeps settee's cost per item near memcached's: the previous layout (a
//! `HashMap<Box<[u8]>, StoredItem>`) spent a 72-byte slot and two allocations (key, value) on every item, about
//! 200 bytes beyond the key and value at a million items. One allocation also means a lookup touches the header,
//! the key it compares and the value it returns in neighbouring cache lines.
//!
//! Items come from the system allocator (glibc's malloc), whatever the process's global allocator is: its chunks
//! grow in 16-byte steps, where jemalloc's size classes between 256 and 512 bytes are 64 bytes apart, which cost
//! 40 bytes more per item at a million 200-byte items (111 against 71 beyond key and value), and after a minute of
//! overwrites with values of 50–400 bytes it held 361 MiB where jemalloc held 609 MiB (see BENCHMARKS.md,
//! "Memory per item"). Everything else (buffers, requests) stays with the global allocator. docs/adr/0001-items-system-allocator.md.
//!
//! The header packs what [`StoredItem`] spells out: the revision has 48 bits (as kv_engine's `revSeqno`), the seqno
//! 56 bits (at a million mutations a second a vBucket needs 2,000 years to pass that), and the key length one byte
//! (keys are at most 250 bytes plus a collection prefix of at most 5).

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::hash::BuildHasher;
use std::ptr::NonNull;

use hashbrown::{DefaultHashBuilder, HashTable};
use settee_types::{Cas, Datatype, Seqno};

use crate::item::StoredItem;

const REV_BITS: u32 = 48;
const REV_MAX: u64 = (1 << REV_BITS) - 1;
const SEQNO_BITS: u32 = 56;
const SEQNO_MAX: u64 = (1 << SEQNO_BITS) - 1;

/// State bits kept above the seqno.
const DELETED: u64 = 1 << 56;
const RESIDENT: u64 = 1 << 57;
const REFERENCED: u64 = 1 << 58;

#[repr(C)]
struct Header {
    cas: Cas,
    /// The seqno (low 56 bits) and the state bits.
    seqno_bits: u64,
    /// The revision (low 48 bits), the key length (8 bits), the datatype (8 bits).
    rev_key_datatype: u64,
    flags: u32,
    expiry: u32,
    value_len: u32,
    locked_until: u32,
}

const HEADER: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER == 40);

/// One item in one allocation: header, key, value. Owns its allocation as a `Box` does.
pub(crate) struct Item {
    ptr: NonNull<Header>,
}

// SAFETY: an Item owns its allocation exclusively (no shared interior state), like a Box<[u8]>.
unsafe impl Send for Item {}
// SAFETY: shared references only read.
unsafe impl Sync for Item {}

fn layout(key_len: usize, value_len: usize) -> Layout {
    // Cannot fail: the size is bounded by the 255-byte key and the u32 value length.
    Layout::from_size_align(HEADER + key_len + value_len, std::mem::align_of::<Header>()).expect("item layout")
}

impl Item {
    /// Packs `item` under `key`. Keys are at most 255 bytes (250 plus the collection prefix) and values under
    /// 4 GiB: the engine refuses anything larger before it gets here.
    pub(crate) fn new(key: &[u8], item: &StoredItem<'_>) -> Item {
        let value = &item.value[..];
        assert!(key.len() <= u8::MAX as usize, "key of {} bytes", key.len());
        let value_len = u32::try_from(value.len()).expect("value under 4 GiB");
        debug_assert!(item.seqno <= SEQNO_MAX, "seqno beyond 56 bits");
        let mut bits = 0;
        if item.deleted {
            bits |= DELETED;
        }
        if item.resident {
            bits |= RESIDENT;
        }
        if item.referenced {
            bits |= REFERENCED;
        }
        let header = Header {
            cas: item.cas,
            seqno_bits: (item.seqno & SEQNO_MAX) | bits,
            rev_key_datatype: item.rev.min(REV_MAX) | (key.len() as u64) << 48 | u64::from(item.datatype.0) << 56,
            flags: item.flags,
            expiry: item.expiry,
            value_len,
            locked_until: item.locked_until,
        };
        let layout = layout(key.len(), value.len());
        // SAFETY: the layout has a non-zero size (the header); the writes stay inside it: the header at 0, the key
        // after it, the value after the key, from slices that cannot overlap a fresh allocation.
        unsafe {
            let raw = System.alloc(layout);
            let Some(ptr) = NonNull::new(raw.cast::<Header>()) else { std::alloc::handle_alloc_error(layout) };
            ptr.as_ptr().write(header);
            std::ptr::copy_nonoverlapping(key.as_ptr(), raw.add(HEADER), key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), raw.add(HEADER + key.len()), value.len());
            Item { ptr }
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the allocation starts with an initialised header and lives as long as self.
        unsafe { self.ptr.as_ref() }
    }
    fn header_mut(&mut self) -> &mut Header {
        // SAFETY: as in header(); &mut self makes the access exclusive.
        unsafe { self.ptr.as_mut() }
    }
    fn key_len(&self) -> usize {
        (self.header().rev_key_datatype >> 48) as u8 as usize
    }

    pub(crate) fn key(&self) -> &[u8] {
        // SAFETY: key_len bytes were written right after the header.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(HEADER), self.key_len()) }
    }
    /// The value: an optional xattr section followed by the body, never compressed; empty when not resident.
    pub(crate) fn value(&self) -> &[u8] {
        let len = self.header().value_len as usize;
        // SAFETY: value_len bytes were written right after the key.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(HEADER + self.key_len()), len) }
    }
    pub(crate) fn cas(&self) -> Cas {
        self.header().cas
    }
    pub(crate) fn seqno(&self) -> Seqno {
        self.header().seqno_bits & SEQNO_MAX
    }
    /// Revision: how many times the document was mutated.
    pub(crate) fn rev(&self) -> u64 {
        self.header().rev_key_datatype & REV_MAX
    }
    pub(crate) fn flags(&self) -> u32 {
        self.header().flags
    }
    /// Absolute Unix seconds, 0 = never. For a tombstone, the time it was deleted.
    pub(crate) fn expiry(&self) -> u32 {
        self.header().expiry
    }
    /// JSON and XATTR bits of the stored value.
    pub(crate) fn datatype(&self) -> Datatype {
        Datatype((self.header().rev_key_datatype >> 56) as u8)
    }
    pub(crate) fn deleted(&self) -> bool {
        self.header().seqno_bits & DELETED != 0
    }
    /// The value is in memory (false once the item pager ejected it; it is on disk).
    pub(crate) fn resident(&self) -> bool {
        self.header().seqno_bits & RESIDENT != 0
    }
    /// Accessed since the item pager last looked (second-chance ejection).
    pub(crate) fn referenced(&self) -> bool {
        self.header().seqno_bits & REFERENCED != 0
    }
    /// Unix seconds until which the document is locked by GET_LOCKED; 0 = unlocked.
    pub(crate) fn locked_until(&self) -> u32 {
        self.header().locked_until
    }
    pub(crate) fn is_locked(&self, now_secs: u32) -> bool {
        self.locked_until() > now_secs
    }

    pub(crate) fn set_cas(&mut self, cas: Cas) {
        self.header_mut().cas = cas;
    }
    pub(crate) fn set_locked_until(&mut self, secs: u32) {
        self.header_mut().locked_until = secs;
    }
    pub(crate) fn set_referenced(&mut self, referenced: bool) {
        let h = self.header_mut();
        h.seqno_bits = if referenced { h.seqno_bits | REFERENCED } else { h.seqno_bits & !REFERENCED };
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

    /// The same item with another value (the item pager ejecting it, or a fetch bringing it back).
    pub(crate) fn with_value(&self, value: &[u8], resident: bool) -> Item {
        let mut fields = self.to_stored().with_value(Cow::Borrowed(value));
        fields.resident = resident;
        Item::new(self.key(), &fields)
    }

    /// Bytes charged to the bucket quota for this item.
    pub(crate) fn footprint(&self) -> usize {
        footprint(self.key_len(), self.value().len())
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        let layout = layout(self.key_len(), self.header().value_len as usize);
        // SAFETY: allocated in Item::new with this same layout (key and value lengths never change).
        unsafe { System.dealloc(self.ptr.as_ptr().cast::<u8>(), layout) }
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

/// Fixed memory charged per item beyond key and value: the header, the table slot (8 bytes and a control byte at
/// a load between 7/16 and 7/8) and the allocator's rounding.
pub(crate) const ITEM_OVERHEAD_BYTES: usize = 64;

/// A vBucket's items by key.
pub(crate) struct ItemTable {
    items: HashTable<Item>,
    hasher: DefaultHashBuilder,
}

impl Default for ItemTable {
    fn default() -> ItemTable {
        ItemTable { items: HashTable::new(), hasher: DefaultHashBuilder::default() }
    }
}

impl ItemTable {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Item> {
        self.items.find(self.hash(key), |i| i.key() == key)
    }
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Item> {
        let hash = self.hash(key);
        self.items.find_mut(hash, |i| i.key() == key)
    }
    /// Puts `item` under its key; returns the item it replaced.
    pub(crate) fn insert(&mut self, item: Item) -> Option<Item> {
        let hash = self.hash(item.key());
        let hasher = &self.hasher;
        match self.items.entry(hash, |i| i.key() == item.key(), |i| hasher.hash_one(i.key())) {
            hashbrown::hash_table::Entry::Occupied(mut slot) => Some(std::mem::replace(slot.get_mut(), item)),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(item);
                None
            }
        }
    }
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Item> {
        let hash = self.hash(key);
        self.items.find_entry(hash, |i| i.key() == key).ok().map(|slot| slot.remove().0)
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Item> {
        self.items.iter()
    }
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Item> {
        self.items.iter_mut()
    }
    /// The keys of the items `keep` selects (to act on them one by one afterwards).
    pub(crate) fn keys_where(&self, keep: impl Fn(&Item) -> bool) -> Vec<Box<[u8]>> {
        self.items.iter().filter(|i| keep(i)).map(|i| i.key().into()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(value: &[u8]) -> StoredItem<'_> {
        StoredItem {
            value: Cow::Borrowed(value),
            cas: 0x1234_5678_9abc_def0,
            seqno: SEQNO_MAX,
            rev: 77,
            flags: 0xdead_beef,
            expiry: 1_900_000_000,
            datatype: Datatype(3),
            deleted: false,
            locked_until: 42,
            resident: true,
            referenced: false,
        }
    }

    /// Every field comes back as it was packed, with keys and values of the extreme sizes.
    #[test]
    fn packs_and_unpacks() {
        let long_key = vec![b'k'; 255];
        let big = vec![7u8; 70_000];
        for (key, value) in [(&b""[..], &b""[..]), (&b"\x00doc"[..], &b"{\"a\":1}"[..]), (&long_key[..], &big[..])] {
            let item = Item::new(key, &fields(value));
            assert_eq!(item.key(), key);
            assert_eq!(item.value(), value);
            let back = item.to_stored();
            assert_eq!(
                (back.cas, back.seqno, back.rev, back.flags, back.expiry, back.datatype, back.locked_until),
                (0x1234_5678_9abc_def0, SEQNO_MAX, 77, 0xdead_beef, 1_900_000_000, Datatype(3), 42)
            );
            assert_eq!((item.deleted(), item.resident(), item.referenced()), (false, true, false));
            assert_eq!(item.footprint(), ITEM_OVERHEAD_BYTES + key.len() + value.len());
        }
    }

    /// Setters change one field and leave the others (the state bits share a word with the seqno).
    #[test]
    fn setters_touch_one_field() {
        let mut f = fields(b"v");
        f.deleted = true;
        let mut item = Item::new(b"key", &f);
        item.set_referenced(true);
        item.set_cas(5);
        item.set_locked_until(0);
        assert_eq!((item.seqno(), item.cas(), item.locked_until()), (SEQNO_MAX, 5, 0));
        assert_eq!((item.deleted(), item.resident(), item.referenced()), (true, true, true));
        item.set_referenced(false);
        assert_eq!((item.seqno(), item.deleted(), item.referenced()), (SEQNO_MAX, true, false));
        assert_eq!(item.rev(), 77);
    }

    /// A revision beyond 48 bits saturates instead of spilling into the key length.
    #[test]
    fn revision_saturates() {
        let mut f = fields(b"v");
        f.rev = u64::MAX;
        let item = Item::new(b"key", &f);
        assert_eq!((item.rev(), item.key()), (REV_MAX, &b"key"[..]));
    }

    /// Ejecting a value and fetching it back keeps key and fields.
    #[test]
    fn value_replaced() {
        let item = Item::new(b"key", &fields(b"value"));
        let ejected = item.with_value(&[], false);
        assert_eq!(
            (ejected.key(), ejected.value(), ejected.resident(), ejected.cas()),
            (&b"key"[..], &b""[..], false, item.cas())
        );
        let back = ejected.with_value(b"value", true);
        assert_eq!((back.value(), back.resident(), back.flags()), (&b"value"[..], true, 0xdead_beef));
    }

    /// The table finds, replaces and removes by key, across growth.
    #[test]
    fn table_by_key() {
        let mut t = ItemTable::default();
        for i in 0..5000u32 {
            let key = format!("key-{i}");
            assert!(t.insert(Item::new(key.as_bytes(), &fields(&i.to_be_bytes()))).is_none());
        }
        assert_eq!(t.iter().count(), 5000);
        let old = t.insert(Item::new(b"key-17", &fields(b"new"))).expect("replaced");
        assert_eq!(old.value(), 17u32.to_be_bytes());
        assert_eq!(t.get(b"key-17").map(Item::value), Some(&b"new"[..]));
        t.get_mut(b"key-4999").expect("present").set_cas(1);
        assert_eq!(t.get(b"key-4999").map(Item::cas), Some(1));
        assert_eq!(t.remove(b"key-0").map(|i| i.value().to_vec()), Some(0u32.to_be_bytes().to_vec()));
        assert!(t.get(b"key-0").is_none() && t.remove(b"key-0").is_none());
        assert_eq!(t.keys_where(|i| i.value() == b"new"), vec![Box::from(&b"key-17"[..])]);
        assert_eq!(t.iter().count(), 4999);
        for i in 1..5000u32 {
            t.remove(format!("key-{i}").as_bytes());
        }
        assert_eq!(t.iter().count(), 0);
    }
}
