//! Per-opcode latency recording without a shared lock or a shared cache line on the KV path: each thread that
//! records (the KV worker threads) writes to its own shard, allocated once per opcode it sees; a reader sums the
//! shards. Recording is three relaxed atomic adds on lines only that thread writes (a shard is shared only when
//! more threads record than there are shards, and then the adds are still correct, just contended).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use super::histogram::{bucket_of, Snapshot, BUCKETS};

/// Opcodes are one byte.
const OPCODES: usize = 256;

/// The histogram one thread records one opcode into.
struct AtomicHistogram {
    counts: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl AtomicHistogram {
    fn new() -> AtomicHistogram {
        AtomicHistogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }

    fn record(&self, nanos: u64) {
        self.counts[bucket_of(nanos)].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(nanos, Relaxed);
        if nanos > self.max_ns.load(Relaxed) {
            self.max_ns.fetch_max(nanos, Relaxed);
        }
    }

    fn add_to(&self, s: &mut Snapshot) {
        for (total, c) in s.counts.iter_mut().zip(&self.counts) {
            *total += c.load(Relaxed);
        }
        s.sum_ns = s.sum_ns.saturating_add(self.sum_ns.load(Relaxed));
        s.max_ns = s.max_ns.max(self.max_ns.load(Relaxed));
    }
}

/// One thread's histograms, by opcode, each allocated on first use. Aligned so neighbouring shards' slots do not
/// share a cache line.
#[repr(align(128))]
struct Shard {
    ops: [OnceLock<Box<AtomicHistogram>>; OPCODES],
}

/// The latency histograms of one bucket (or of the commands run outside any bucket), by opcode.
pub struct Timings {
    shards: Box<[Shard]>,
}

impl std::fmt::Debug for Timings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timings").field("shards", &self.shards.len()).finish()
    }
}

impl Default for Timings {
    fn default() -> Timings {
        Timings::new()
    }
}

/// Hands each recording thread its shard number, once.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn thread_index() -> usize {
    THREAD_INDEX.with(|i| {
        if i.get() == usize::MAX {
            i.set(NEXT_THREAD.fetch_add(1, Relaxed));
        }
        i.get()
    })
}

impl Timings {
    /// One shard per CPU, rounded up to a power of two (at least 4, at most 64): a node runs one KV worker thread
    /// per CPU by default.
    pub fn new() -> Timings {
        let cpus = std::thread::available_parallelism().map_or(4, usize::from);
        let shards = cpus.next_power_of_two().clamp(4, 64);
        Timings { shards: (0..shards).map(|_| Shard { ops: std::array::from_fn(|_| OnceLock::new()) }).collect() }
    }

    /// Counts one `opcode` that took `elapsed`.
    pub fn record(&self, opcode: u8, elapsed: Duration) {
        let shard = &self.shards[thread_index() % self.shards.len()];
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        shard.ops[usize::from(opcode)].get_or_init(|| Box::new(AtomicHistogram::new())).record(nanos);
    }

    /// `opcode`'s histogram summed over every thread (empty when never recorded).
    pub fn snapshot(&self, opcode: u8) -> Snapshot {
        let mut s = Snapshot::default();
        for shard in self.shards.iter() {
            if let Some(h) = shard.ops[usize::from(opcode)].get() {
                h.add_to(&mut s);
            }
        }
        s
    }

    /// How many commands of the opcodes `counted` accepts were recorded, over every thread.
    pub fn count_where(&self, counted: impl Fn(u8) -> bool) -> u64 {
        let mut total = 0u64;
        for shard in self.shards.iter() {
            for (op, slot) in (0..=u8::MAX).zip(shard.ops.iter()) {
                if let Some(h) = slot.get().filter(|_| counted(op)) {
                    total = total.saturating_add(h.counts.iter().map(|c| c.load(Relaxed)).sum());
                }
            }
        }
        total
    }

    /// The opcodes some thread recorded, ascending.
    pub fn recorded_opcodes(&self) -> Vec<u8> {
        (0..=u8::MAX).filter(|&op| self.shards.iter().any(|s| s.ops[usize::from(op)].get().is_some())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_record_into_their_own_shards_and_a_snapshot_sums_them() {
        // Proves that operations recorded from several threads at once are all counted, by opcode, with the
        // largest value and the sum.
        let timings = std::sync::Arc::new(Timings::new());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let timings = timings.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        timings.record(0x00, Duration::from_nanos(1000 + i + t));
                    }
                    timings.record(0x01, Duration::from_micros(600_000 + t));
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let get = timings.snapshot(0x00);
        assert_eq!(get.count(), 8000);
        assert_eq!(get.max_ns, 1000 + 999 + 7);
        let set = timings.snapshot(0x01);
        assert_eq!(set.count(), 8);
        assert_eq!(set.max_ns, 600_007_000);
        assert_eq!(timings.recorded_opcodes(), vec![0x00, 0x01]);
        assert_eq!(timings.snapshot(0x02).count(), 0);
    }

    #[test]
    fn count_where_sums_the_accepted_opcodes_over_every_thread() {
        // Proves the count a draining node reports covers the opcodes asked for, recorded from any thread, and no
        // other.
        let timings = std::sync::Arc::new(Timings::new());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let timings = timings.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        timings.record(t, Duration::from_micros(1));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(timings.count_where(|op| op < 2), 20);
        assert_eq!(timings.count_where(|_| true), 40);
        assert_eq!(timings.count_where(|op| op > 3), 0);
    }
}
