//! What operations a connection issues: the pillowfight mix (`--set-pct`), YCSB's core workloads A to F (E's scans
//! go through the query service), the query workloads of `--query`, and the load phase that populates the records
//! first.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::distribution::{KeyChooser, RequestDistribution};
use crate::rng::Rng;
use crate::stats::OpKind;

/// YCSB core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// 50% read, 50% update, zipfian ("update heavy", session store).
    A,
    /// 95% read, 5% update, zipfian ("read mostly", photo tagging).
    B,
    /// 100% read, zipfian ("read only", user profile cache).
    C,
    /// 95% read, 5% insert, latest ("read latest", status updates).
    D,
    /// 95% scan, 5% insert, zipfian ("short ranges", threaded conversations): the scans are SQL++ range scans
    /// through the query service, the inserts KV inserts.
    E,
    /// 50% read, 50% read-modify-write, zipfian (user database).
    F,
}

/// A workload's operation mix in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mix {
    pub read: u32,
    pub update: u32,
    pub insert: u32,
    /// Short range scans (through the query service).
    pub scan: u32,
    pub rmw: u32,
}

impl Workload {
    pub(crate) fn mix(self) -> Mix {
        let m = |read, update, insert, scan, rmw| Mix { read, update, insert, scan, rmw };
        match self {
            Workload::A => m(50, 50, 0, 0, 0),
            Workload::B => m(95, 5, 0, 0, 0),
            Workload::C => m(100, 0, 0, 0, 0),
            Workload::D => m(95, 0, 5, 0, 0),
            Workload::E => m(0, 0, 5, 95, 0),
            Workload::F => m(50, 0, 0, 0, 50),
        }
    }
    pub(crate) fn default_distribution(self) -> RequestDistribution {
        match self {
            Workload::D => RequestDistribution::Latest,
            _ => RequestDistribution::Zipfian,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::A => "ycsb-a",
            Workload::B => "ycsb-b",
            Workload::C => "ycsb-c",
            Workload::D => "ycsb-d",
            Workload::E => "ycsb-e",
            Workload::F => "ycsb-f",
        }
    }

    /// Whether the workload sends queries (and so needs the query service and a primary index).
    pub(crate) fn uses_query(self) -> bool {
        self.mix().scan > 0
    }
}

/// The record counters connections share: how many records exist (reads choose among them) and the next record
/// number an insert takes.
#[derive(Debug)]
pub(crate) struct Records {
    /// Records known to be stored: the initial count, raised as inserts are acknowledged.
    pub acknowledged: AtomicU64,
    pub next_insert: AtomicU64,
}

impl Records {
    pub(crate) fn new(count: u64) -> Records {
        Records { acknowledged: AtomicU64::new(count), next_insert: AtomicU64::new(count) }
    }
    pub(crate) fn acknowledge(&self, record: u64) {
        self.acknowledged.fetch_max(record + 1, Ordering::Relaxed);
    }
}

/// One operation to issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub record: u64,
}

/// A connection's source of operations.
#[derive(Clone, Debug)]
pub(crate) enum OpSource {
    /// The load phase: a SET (or YCSB insert) of every record in `next..end`, in order.
    Load { next: u64, end: u64, kind: OpKind },
    /// pillowfight: `set_pct`% SETs, the rest GETs, over `records` keys; `sequential` walks `lo..hi` in order.
    Mix { set_pct: u32, chooser: KeyChooser, records: u64, sequential: Option<Cursor> },
    /// A YCSB workload.
    Ycsb { mix: Mix, chooser: KeyChooser },
    /// One kind of query (`--query`), each about a record the chooser picks (the key of a lookup, the offset of a
    /// page).
    Query { kind: OpKind, chooser: KeyChooser },
}

/// A position walking a range of records in order, wrapping around.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub next: u64,
    pub lo: u64,
    pub hi: u64,
}

impl Cursor {
    fn take(&mut self) -> u64 {
        let n = self.next;
        self.next = if n + 1 >= self.hi { self.lo } else { n + 1 };
        n
    }
}

/// The slice of `0..records` that connection `index` of `count` loads (and walks with `--sequential`).
pub(crate) fn slice_of(records: u64, index: usize, count: usize) -> (u64, u64) {
    let (i, n) = (index as u64, count.max(1) as u64);
    (records * i / n, records * (i + 1) / n)
}

impl OpSource {
    /// The next operation; None when a load slice is done.
    pub(crate) fn next(&mut self, rng: &mut Rng, records: &Records) -> Option<Op> {
        match self {
            OpSource::Load { next, end, kind } => {
                if *next >= *end {
                    return None;
                }
                *next += 1;
                Some(Op { kind: *kind, record: *next - 1 })
            }
            OpSource::Mix { set_pct, chooser, records: n, sequential } => {
                let kind = if rng.percent(*set_pct) { OpKind::Set } else { OpKind::Get };
                let record = match sequential {
                    Some(c) => c.take(),
                    None => chooser.next(rng, *n),
                };
                Some(Op { kind, record })
            }
            OpSource::Ycsb { mix, chooser } => {
                let roll = rng.below(100) as u32;
                let existing = records.acknowledged.load(Ordering::Relaxed);
                let kind = if roll < mix.read {
                    OpKind::Get
                } else if roll < mix.read + mix.update {
                    OpKind::Set
                } else if roll < mix.read + mix.update + mix.insert {
                    OpKind::Insert
                } else if roll < mix.read + mix.update + mix.insert + mix.scan {
                    OpKind::Scan
                } else {
                    OpKind::Rmw
                };
                let record = match kind {
                    OpKind::Insert => records.next_insert.fetch_add(1, Ordering::Relaxed),
                    _ => chooser.next(rng, existing),
                };
                Some(Op { kind, record })
            }
            OpSource::Query { kind, chooser } => {
                let existing = records.acknowledged.load(Ordering::Relaxed);
                Some(Op { kind: *kind, record: chooser.next(rng, existing) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slices cover the records exactly once, in order.
    #[test]
    fn slices_partition_the_records() {
        let parts: Vec<(u64, u64)> = (0..3).map(|i| slice_of(10, i, 3)).collect();
        assert_eq!(parts, [(0, 3), (3, 6), (6, 10)]);
        assert_eq!(slice_of(2, 4, 5), (1, 2));
    }

    /// A load source yields its slice once, in order, then ends.
    #[test]
    fn load_yields_its_slice() {
        let mut s = OpSource::Load { next: 3, end: 6, kind: OpKind::Insert };
        let (mut rng, recs) = (Rng::new(1), Records::new(0));
        let got: Vec<u64> = std::iter::from_fn(|| s.next(&mut rng, &recs)).map(|o| o.record).collect();
        assert_eq!(got, [3, 4, 5]);
    }

    /// The pillowfight mix follows --set-pct, and --sequential walks its slice and wraps.
    #[test]
    fn mix_follows_set_pct_and_sequential_wraps() {
        let (mut rng, recs) = (Rng::new(2), Records::new(100));
        let mut s = OpSource::Mix {
            set_pct: 20,
            chooser: KeyChooser::new(RequestDistribution::Uniform, 100),
            records: 100,
            sequential: Some(Cursor { next: 5, lo: 5, hi: 8 }),
        };
        let ops: Vec<Op> = (0..10_000).map(|_| s.next(&mut rng, &recs).unwrap()).collect();
        let sets = ops.iter().filter(|o| o.kind == OpKind::Set).count();
        assert!((1_700..2_300).contains(&sets), "{sets}");
        assert_eq!(ops[..4].iter().map(|o| o.record).collect::<Vec<_>>(), [5, 6, 7, 5]);
    }

    /// Workload D inserts new records past the loaded ones and reads among acknowledged records; F issues
    /// read-modify-writes; C only reads.
    #[test]
    fn ycsb_mixes() {
        let (mut rng, recs) = (Rng::new(3), Records::new(1000));
        let mut d =
            OpSource::Ycsb { mix: Workload::D.mix(), chooser: KeyChooser::new(RequestDistribution::Latest, 1000) };
        let ops: Vec<Op> = (0..2000).map(|_| d.next(&mut rng, &recs).unwrap()).collect();
        let inserts: Vec<u64> = ops.iter().filter(|o| o.kind == OpKind::Insert).map(|o| o.record).collect();
        assert!(!inserts.is_empty() && inserts[0] == 1000 && inserts.windows(2).all(|w| w[1] == w[0] + 1));
        assert!(ops.iter().filter(|o| o.kind == OpKind::Get).all(|o| o.record < 1000));
        recs.acknowledge(1500);
        assert_eq!(recs.acknowledged.load(Ordering::Relaxed), 1501);
        let mut f =
            OpSource::Ycsb { mix: Workload::F.mix(), chooser: KeyChooser::new(RequestDistribution::Zipfian, 0) };
        assert!((0..100).any(|_| f.next(&mut rng, &recs).unwrap().kind == OpKind::Rmw));
        let mut c =
            OpSource::Ycsb { mix: Workload::C.mix(), chooser: KeyChooser::new(RequestDistribution::Zipfian, 0) };
        assert!((0..1000).all(|_| c.next(&mut rng, &recs).unwrap().kind == OpKind::Get));
    }

    /// Workload E scans 95% of the time and inserts the rest, new records past the loaded ones; a query source
    /// issues its one kind about existing records.
    #[test]
    fn workload_e_scans_and_inserts() {
        let (mut rng, recs) = (Rng::new(4), Records::new(1000));
        let mut e =
            OpSource::Ycsb { mix: Workload::E.mix(), chooser: KeyChooser::new(RequestDistribution::Zipfian, 1000) };
        let ops: Vec<Op> = (0..10_000).map(|_| e.next(&mut rng, &recs).unwrap()).collect();
        let scans = ops.iter().filter(|o| o.kind == OpKind::Scan).count();
        assert!((9_300..9_700).contains(&scans), "{scans}");
        assert!(ops.iter().all(|o| matches!(o.kind, OpKind::Scan | OpKind::Insert)));
        assert!(ops.iter().filter(|o| o.kind == OpKind::Insert).all(|o| o.record >= 1000));
        assert!(Workload::E.uses_query() && !Workload::D.uses_query());
        let mut q =
            OpSource::Query { kind: OpKind::Lookup, chooser: KeyChooser::new(RequestDistribution::Uniform, 50) };
        let recs = Records::new(50);
        assert!((0..1000).map(|_| q.next(&mut rng, &recs).unwrap()).all(|o| o.kind == OpKind::Lookup && o.record < 50));
    }
}
