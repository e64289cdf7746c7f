//! Tests of the item table and its arena: packing, replacing, ejecting, compacting.

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
fn fields_survive_packing_at_extreme_sizes() {
    let long_key = vec![b'k'; 255];
    let big = vec![7u8; 70_000];
    let mut t = ItemTable::default();
    for (key, value) in [(&b""[..], &b""[..]), (&b"\x00doc"[..], &b"{\"a\":1}"[..]), (&long_key[..], &big[..])] {
        assert!(t.insert(key, &fields(value)).is_none());
        let item = t.get(key).expect("present");
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
    let mut t = ItemTable::default();
    t.insert(b"key", &f);
    assert!(t.set_locked_until(b"key", 0));
    let item = t.get_mut(b"key").expect("present");
    item.set_referenced(true);
    item.set_cas(5);
    assert_eq!((item.seqno(), item.cas(), item.locked_until()), (SEQNO_MAX, 5, 0));
    assert_eq!((item.deleted(), item.resident(), item.referenced()), (true, true, true));
    item.set_referenced(false);
    assert_eq!((item.seqno(), item.deleted(), item.referenced()), (SEQNO_MAX, true, false));
    assert_eq!(item.rev(), 77);
}

/// The header's variable part takes the revision in as few of 1, 2, 4 or 6 bytes as hold it, the flags in 1 byte when
/// only their top byte is set (the SDKs' common flags) and 4 otherwise, and the flags and the expiry only when they are
/// not 0; every combination reads back as written, and a new item without flags or expiry has a 23-byte header.
#[test]
fn variable_header_holds_each_width_and_omits_zero_fields() {
    let revs =
        [(0, 1), (1, 1), (255, 1), (256, 2), (0xffff, 2), (0x1_0000, 4), (0xffff_ffff, 4), (1 << 32, 6), (REV_MAX, 6)];
    let mut t = ItemTable::default();
    for (i, &(rev, rev_bytes)) in revs.iter().enumerate() {
        for (flags, expiry) in
            [(0, 0), (0x0200_0006, 0), (0x0200_0000, 0), (0xff00_0000, 7), (0, 1_900_000_000), (u32::MAX, u32::MAX)]
        {
            let mut f = fields(b"value");
            (f.rev, f.flags, f.expiry, f.locked_until) = (rev, flags, expiry, 0);
            let key = format!("key-{i}-{flags}-{expiry}");
            t.insert(key.as_bytes(), &f);
            let item = t.get(key.as_bytes()).expect("present");
            let flags_bytes = match flags {
                0 => 0,
                f if f & 0x00ff_ffff == 0 => 1,
                _ => 4,
            };
            let extra = rev_bytes + flags_bytes + if expiry != 0 { 4 } else { 0 };
            assert_eq!(item.header.chunk_bytes(), rounded(HEADER + extra + key.len() + 5), "rev {rev}");
            assert_eq!((item.rev(), item.flags(), item.expiry()), (rev, flags, expiry));
            assert_eq!(
                (item.key(), item.value(), item.seqno(), item.cas()),
                (key.as_bytes(), &b"value"[..], SEQNO_MAX, f.cas)
            );
        }
    }
    let mut f = fields(b"vv");
    (f.rev, f.flags, f.expiry, f.locked_until) = (1, 0, 0, 0);
    t.insert(b"new", &f);
    assert_eq!(t.get(b"new").map(|i| i.header.chunk_bytes()), Some(rounded(23 + 3 + 2)));
    // An overwrite that widens the revision moves to a larger chunk and keeps every field.
    f.rev = 300;
    t.insert(b"new", &f);
    assert_eq!(t.get(b"new").map(|i| (i.rev(), i.value(), i.header.chunk_bytes())), Some((300, &b"vv"[..], 32)));
}

/// A revision beyond 48 bits saturates instead of spilling into the key length.
#[test]
fn revision_saturates_when_beyond_48_bits() {
    let mut f = fields(b"v");
    f.rev = u64::MAX;
    let mut t = ItemTable::default();
    t.insert(b"key", &f);
    let item = t.get(b"key").expect("present");
    assert_eq!((item.rev(), item.key()), (REV_MAX, &b"key"[..]));
}

/// Ejecting values keeps keys and fields of the items picked, and a fetch puts the value back.
#[test]
fn ejected_value_keeps_key_and_fields() {
    let mut t = ItemTable::default();
    t.insert(b"key", &fields(b"value"));
    t.insert(b"other", &fields(b"stays"));
    let cas = t.get(b"key").map(Item::cas);
    assert_eq!(t.eject_values(|i| i.key() == b"key"), (1, 5));
    let ejected = t.get(b"key").expect("present");
    assert_eq!((ejected.value(), ejected.resident(), Some(ejected.cas())), (&b""[..], false, cas));
    assert_eq!((ejected.flags(), ejected.expiry(), ejected.locked_until()), (0xdead_beef, 1_900_000_000, 42));
    assert_eq!(t.get(b"other").map(|i| (i.value(), i.resident())), Some((&b"stays"[..], true)));
    assert!(t.replace_value(b"key", b"value", true));
    let back = t.get(b"key").expect("present");
    assert_eq!((back.value(), back.resident(), back.flags()), (&b"value"[..], true, 0xdead_beef));
    assert!(!t.replace_value(b"absent", b"v", true));
}

/// The table finds, replaces and removes by key, across growth.
#[test]
fn items_found_by_key_across_growth() {
    let mut t = ItemTable::default();
    for i in 0..5000u32 {
        let key = format!("key-{i}");
        assert!(t.insert(key.as_bytes(), &fields(&i.to_be_bytes())).is_none());
    }
    assert_eq!(t.iter().count(), 5000);
    let old = t.insert(b"key-17", &fields(b"new")).expect("replaced");
    assert_eq!((old.seqno(), old.deleted(), old.footprint()), (SEQNO_MAX, false, ITEM_OVERHEAD_BYTES + 6 + 4));
    assert_eq!(t.get(b"key-17").map(Item::value), Some(&b"new"[..]));
    t.get_mut(b"key-4999").expect("present").set_cas(1);
    assert_eq!(t.get(b"key-4999").map(Item::cas), Some(1));
    assert_eq!(t.remove(b"key-0").map(|r| r.footprint()), Some(ITEM_OVERHEAD_BYTES + 5 + 4));
    assert!(t.get(b"key-0").is_none() && t.remove(b"key-0").is_none());
    assert_eq!(t.keys_where(|i| i.value() == b"new"), vec![Box::from(&b"key-17"[..])]);
    assert_eq!(t.iter().count(), 4999);
    for i in 1..5000u32 {
        t.remove(format!("key-{i}").as_bytes());
    }
    assert_eq!(t.iter().count(), 0);
}

/// Overwrites with changing sizes compact the arena: dead bytes stay under an eighth of it (plus the minimum), and
/// every key keeps its latest value and fields as items slide to new places.
#[test]
fn overwrites_of_changing_sizes_keep_the_arena_compact() {
    let mut t = ItemTable::default();
    let value = |i: usize, round: usize| vec![(i + round) as u8; 50 + (i * 7 + round * 13) % 350];
    for round in 0..20 {
        for i in 0..2000 {
            let v = value(i, round);
            let mut f = fields(&v);
            f.seqno = (round * 2000 + i) as u64;
            t.insert(format!("key-{i}").as_bytes(), &f);
            assert!(t.arena.dead() < t.arena.used() / 8 + 4096, "round {round}, key {i}");
        }
    }
    let live: usize = t.iter().map(|i| i.header.chunk_bytes()).sum();
    assert_eq!(t.arena.used() - t.arena.dead(), live);
    for i in 0..2000 {
        let item = t.get(format!("key-{i}").as_bytes()).expect("present");
        assert_eq!(item.value(), &value(i, 19)[..]);
        assert_eq!((item.seqno(), item.flags()), ((19 * 2000 + i) as u64, 0xdead_beef));
    }
    for i in 0..2000 {
        t.remove(format!("key-{i}").as_bytes());
    }
    assert_eq!(t.arena.used(), 0, "removing every item compacts the arena to nothing");
}

/// Mutable iteration reaches every item once, and changes made through it stay.
#[test]
fn iter_mut_changes_every_item() {
    let mut t = ItemTable::default();
    for i in 0..100u32 {
        t.insert(&i.to_be_bytes(), &fields(b"v"));
    }
    for item in t.iter_mut() {
        item.set_cas(u64::from(u32::from_be_bytes(item.key().try_into().expect("4-byte key"))));
    }
    for i in 0..100u32 {
        assert_eq!(t.get(&i.to_be_bytes()).map(Item::cas), Some(u64::from(i)));
    }
}

/// A lock deadline lives in a trailer of the locked item's chunk: locking and unlocking keep the value and every
/// other field, the deadline survives a value ejection, a fetch and the arena compacting, and an unlocked item
/// takes no bytes for it.
#[test]
fn lock_deadline_survives_rewrites_and_compaction() {
    let mut t = ItemTable::default();
    for len in 0..8usize {
        let key = format!("k{len}");
        let mut f = fields(&[9u8; 8][..len]);
        f.locked_until = 0;
        t.insert(key.as_bytes(), &f);
        let unlocked = t.get(key.as_bytes()).map(|i| i.header.chunk_bytes());
        // The variable part: a 1-byte revision (77), the flags and the expiry.
        assert_eq!(unlocked, Some(rounded(HEADER + 9 + 2 + len)), "no bytes for a deadline");
        assert!(t.set_locked_until(key.as_bytes(), 1_000 + len as u32));
        let locked = t.get(key.as_bytes()).map(|i| i.header.chunk_bytes());
        assert_eq!(locked, unlocked.map(|b| b + LOCK_BYTES));
        assert_eq!(t.arena.used() - t.arena.dead(), t.iter().map(|i| i.header.chunk_bytes()).sum::<usize>());
        let item = t.get(key.as_bytes()).expect("present");
        assert_eq!(
            (item.locked_until(), item.value(), item.cas()),
            (1_000 + len as u32, &[9u8; 8][..len], 0x1234_5678_9abc_def0)
        );
        assert!(item.is_locked(999 + len as u32) && !item.is_locked(1_000 + len as u32));
    }
    assert_eq!(t.eject_values(|i| i.key() == b"k5"), (1, 5));
    assert!(t.replace_value(b"k5", b"fetched", true));
    for i in 0..2000u32 {
        t.insert(b"churn", &fields(&vec![1u8; (i % 300) as usize]));
    }
    for len in 0..8usize {
        let item = t.get(format!("k{len}").as_bytes()).expect("present");
        assert_eq!(item.locked_until(), 1_000 + len as u32);
        assert_eq!(item.to_stored().locked_until, 1_000 + len as u32);
        let expected: &[u8] = if len == 5 { b"fetched" } else { &[9u8; 8][..len] };
        assert_eq!((item.value(), item.flags(), item.rev()), (expected, 0xdead_beef, 77));
    }
    assert!(t.set_locked_until(b"k3", 0));
    let item = t.get(b"k3").expect("present");
    assert_eq!((item.locked_until(), item.value()), (0, &[9u8; 3][..]));
    assert!(!t.set_locked_until(b"absent", 5));
}

/// An overwrite whose chunk keeps its size (a same-sized value) is written in place: the arena does not grow and
/// nothing is dead, and the new fields and value replace the old ones.
#[test]
fn same_sized_overwrite_is_written_in_place() {
    let mut t = ItemTable::default();
    t.insert(b"key", &fields(b"0123456789"));
    let used = t.arena.used();
    for round in 0..100u8 {
        let mut f = fields(b"abcdefghij");
        f.cas = u64::from(round);
        let old = t.insert(b"key", &f).expect("replaced");
        assert_eq!(old.footprint(), ITEM_OVERHEAD_BYTES + 3 + 10);
        assert_eq!((t.arena.used(), t.arena.dead()), (used, 0));
        assert_eq!(t.get(b"key").map(|i| (i.value(), i.cas())), Some((&b"abcdefghij"[..], u64::from(round))));
    }
    t.insert(b"key", &fields(b"a value of another size"));
    assert_eq!(t.get(b"key").map(Item::value), Some(&b"a value of another size"[..]));
    assert!(t.arena.used() > used, "another size takes a new chunk");
}
