//! Space reclamation: after writing N items, deleting most of them, purging the tombstones and compacting, the
//! store's files shrink back to about the size of the live data, plus fjall's active journal.
//!
//! fjall only rotates its journal once it passes 64 MB (a constant in fjall), and deletes a rotated journal once
//! its memtables are flushed; the active journal keeps already-flushed entries until then. So the bound is split:
//! tables and blob files against the live bytes, the journal against fjall's 64 MB rotation threshold.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use settee_store::{conformance::record, FjallStore, VbStore};
use settee_types::VbId;

const VBUCKETS: u16 = 16;
const MIB: u64 = 1024 * 1024;
/// fjall rotates the journal at the first flush after it passes 64,000,000 bytes; one batch may overshoot it.
const JOURNAL_BYTES_MAX: u64 = 64 * MIB;

struct Space {
    live: u64,
    written: u64,
    deleted: u64,
    compacted: u64,
    journal: u64,
}

/// Allocated bytes of the journal files at the top of the store directory.
fn journal_bytes(dir: &Path) -> u64 {
    let files = std::fs::read_dir(dir).unwrap().flatten();
    let journals = files.filter(|e| e.path().extension().is_some_and(|x| x == "jnl"));
    journals.map(|e| e.metadata().unwrap().blocks() * 512).sum()
}

/// Writes `items` documents of `value_bytes` across 16 vBuckets in synced batches, deletes all but every tenth,
/// purges the tombstones and compacts, then checks every survivor still reads back.
fn write_delete_purge_compact(items: u64, value_bytes: usize) -> Space {
    let dir = tempfile::tempdir().unwrap();
    let s = FjallStore::open(dir.path()).unwrap();
    let key = |i: u64| format!("doc-{i:08}").into_bytes();
    let vb_of = |i: u64| VbId((i % u64::from(VBUCKETS)) as u16);
    let value = vec![0xa5u8; value_bytes];
    let mut seqnos = vec![0u64; usize::from(VBUCKETS)];
    let mut write = |items: &[u64], deleted: bool| {
        for vb in (0..VBUCKETS).map(VbId) {
            let batch: Vec<_> = items
                .iter()
                .filter(|&&i| vb_of(i) == vb)
                .map(|&i| {
                    seqnos[usize::from(vb.0)] += 1;
                    let v: &[u8] = if deleted { b"" } else { &value };
                    record(&key(i), v, seqnos[usize::from(vb.0)], deleted)
                })
                .collect();
            s.write_batch(vb, &batch).unwrap();
        }
        s.sync().unwrap();
    };
    let all: Vec<u64> = (0..items).collect();
    all.chunks(1000).for_each(|c| write(c, false));
    let written = s.disk_bytes();
    let doomed: Vec<u64> = (0..items).filter(|i| i % 10 != 0).collect();
    doomed.chunks(1000).for_each(|c| write(c, true));
    let deleted = s.disk_bytes();
    let purged: u64 = (0..VBUCKETS).map(|vb| s.purge_tombstones(VbId(vb), u32::MAX).unwrap()).sum();
    assert_eq!(purged, doomed.len() as u64);
    s.compact().unwrap();
    let space = Space {
        live: (items - doomed.len() as u64) * (key(0).len() + value_bytes) as u64,
        written,
        deleted,
        compacted: s.disk_bytes(),
        journal: journal_bytes(dir.path()),
    };
    for i in (0..items).step_by(10) {
        assert_eq!(s.get(vb_of(i), &key(i)).unwrap().unwrap().value, value);
    }
    let mib = |b: u64| b as f64 / MIB as f64;
    eprintln!(
        "{items} items x {value_bytes} B, 90% deleted: live {:.1} MiB; disk after writes {:.1} MiB, after deletes \
         {:.1} MiB, after purge+compaction {:.1} MiB = {:.1} MiB tables and blobs ({:.2}x live) + {:.1} MiB journal",
        mib(space.live),
        mib(space.written),
        mib(space.deleted),
        mib(space.compacted),
        mib(space.compacted - space.journal),
        (space.compacted - space.journal) as f64 / space.live as f64,
        mib(space.journal),
    );
    space
}

fn assert_reclaimed(s: &Space) {
    let data = s.compacted - s.journal;
    assert!(data < 2 * s.live + MIB, "{data} bytes of tables and blobs for {} live bytes", s.live);
    assert!(s.journal <= JOURNAL_BYTES_MAX, "{} bytes of journal", s.journal);
    assert!(s.compacted < s.deleted / 2, "compaction freed less than half: {} -> {}", s.deleted, s.compacted);
}

/// Small values (inline in the LSM tree): tables end under twice the live bytes plus 1 MiB, and the journal under
/// fjall's 64 MiB rotation threshold.
#[test]
fn compaction_reclaims_space_of_deleted_small_values() {
    assert_reclaimed(&write_delete_purge_compact(100_000, 600));
}

/// Large values (key-value separated into blob files): compaction drops the dead values' blob files and rewrites
/// the mostly dead ones, ending under twice the live bytes plus 1 MiB, plus the journal.
#[test]
fn compaction_reclaims_space_of_deleted_blob_values() {
    assert_reclaimed(&write_delete_purge_compact(8_000, 10_000));
}
