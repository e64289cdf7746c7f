//! Persisted write throughput of `FjallStore`, the way the flusher writes: 200-byte values, one `write_batch` per
//! vBucket of a round (16 vBuckets), then one fsync for the round. Prints records/s and MB/s of key+value
//! payload, and the bytes the process actually wrote (from /proc/self/io) to show write amplification.
//!
//! Compare with the sequential bandwidth of the same file system, e.g.
//!   dd if=/dev/zero of=<dir>/dd.bin bs=1M count=1024 oflag=direct
//!   dd if=/dev/zero of=<dir>/dd.bin bs=1M count=1024 conv=fdatasync
//!
//! Usage: cargo run --release -p settee-store --example store_throughput -- [dir] [payload_mib] [records_per_sync]
//!        [blob_threshold_bytes]
//! The store is created in a fresh subdirectory of `dir` (default: the system temp dir) and removed at the end.

use std::time::Instant;

use settee_store::{FjallConfig, FjallStore, Record, RecordMeta, VbStore};
use settee_types::VbId;

const VALUE_BYTES: usize = 200;
const VBUCKETS: u16 = 16;

/// Bytes this process has caused to be written to storage (Linux `write_bytes`), if known.
fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines().find_map(|l| l.strip_prefix("write_bytes: ")).and_then(|v| v.trim().parse().ok())
}

/// 64 KiB of pseudo-random bytes; each record's value is a 200-byte window of it, so values differ per record
/// (nothing in the store compresses, but keep it honest) without costing more than a copy to build.
fn value_pool() -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..65_536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base = args.next().map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let payload_mib: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1024);
    let records_per_sync: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8192);
    let mut config = FjallConfig::default();
    if let Some(threshold) = args.next() {
        config.blob_threshold_bytes = threshold.parse()?;
    }
    let dir = base.join(format!("settee-store-throughput-{}", std::process::id()));
    let key_bytes = format!("doc-{:012}", 0).len() as u64;
    let records = payload_mib * 1024 * 1024 / (key_bytes + VALUE_BYTES as u64);
    let per_vb = (records_per_sync / u64::from(VBUCKETS)).max(1);

    let pool = value_pool();
    let value_for = |i: u64| pool[(i as usize * 7919) % (pool.len() - VALUE_BYTES)..][..VALUE_BYTES].to_vec();
    let store = FjallStore::open_with(&dir, config)?;
    let written_before = process_write_bytes();
    let started = Instant::now();
    let mut seqnos = [0u64; VBUCKETS as usize];
    let mut next = 0u64;
    let mut syncs = 0u64;
    while next < records {
        for vb in 0..VBUCKETS {
            let batch: Vec<Record> = (0..per_vb)
                .map(|j| next + j * u64::from(VBUCKETS) + u64::from(vb))
                .filter(|&i| i < records)
                .map(|i| {
                    seqnos[usize::from(vb)] += 1;
                    let seqno = seqnos[usize::from(vb)];
                    let meta =
                        RecordMeta { cas: seqno, seqno, rev: 1, flags: 0, expiry: 0, datatype: 0, deleted: false };
                    Record::new(format!("doc-{i:012}").into_bytes(), value_for(i), meta)
                })
                .collect();
            store.write_batch(VbId(vb), &batch)?;
        }
        store.sync()?;
        syncs += 1;
        next += per_vb * u64::from(VBUCKETS);
    }
    let seconds = started.elapsed().as_secs_f64();
    let written = process_write_bytes().zip(written_before).map(|(after, before)| after - before);
    let payload = records * (key_bytes + VALUE_BYTES as u64);
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{records} records x {VALUE_BYTES} B values ({:.0} MB payload) in {seconds:.1} s, {syncs} fsyncs of \
         {records_per_sync} records: {:.0} records/s, {:.1} MB/s payload",
        mb(payload),
        records as f64 / seconds,
        mb(payload) / seconds
    );
    if let Some(w) = written {
        println!(
            "process wrote {:.0} MB to storage during the run ({:.1} MB/s, {:.2}x payload)",
            mb(w),
            mb(w) / seconds,
            w as f64 / payload as f64
        );
    }
    println!("store size on disk right after: {:.0} MB", mb(store.disk_bytes()));
    drop(store);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
