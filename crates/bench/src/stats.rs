//! What a run records: per operation type an HdrHistogram of latencies (nanoseconds, 3 significant digits) and
//! counts of successes, misses, errors and (for queries) result rows; the requests sent again (retries, not errors); per reporting interval a
//! histogram over all operations for the live progress line and the timeline.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// The highest latency a histogram tracks exactly; slower operations are recorded as this value.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// The operation types a run reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// A document read (GET; YCSB "read").
    Get = 0,
    /// An upsert of an existing record (SET; YCSB "update").
    Set = 1,
    /// An upsert of a new record (YCSB load and "insert").
    Insert = 2,
    /// YCSB "read-modify-write": a GET, then a SET of the same key once the GET answered; one operation.
    Rmw = 3,
    /// A range scan through the query service (YCSB "scan": from a key, in key order, a few records).
    Scan = 4,
    /// A point lookup through the query service (`USE KEYS` or `WHERE META().id =`).
    Lookup = 5,
    /// A page of a full primary-index scan through the query service (`LIMIT` / `OFFSET`).
    Page = 6,
    /// `SELECT COUNT(*)` through the query service.
    Count = 7,
}

/// How many operation types there are (the length of [`OP_KINDS`]).
pub(crate) const OP_KIND_COUNT: usize = 8;

pub(crate) const OP_KINDS: [OpKind; OP_KIND_COUNT] =
    [OpKind::Get, OpKind::Set, OpKind::Insert, OpKind::Rmw, OpKind::Scan, OpKind::Lookup, OpKind::Page, OpKind::Count];

impl OpKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Set => "set",
            OpKind::Insert => "insert",
            OpKind::Rmw => "rmw",
            OpKind::Scan => "scan",
            OpKind::Lookup => "lookup",
            OpKind::Page => "page",
            OpKind::Count => "count",
        }
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    /// KEY_ENOENT on a read: reported apart from errors (reads of records not yet loaded are expected with
    /// `--no-population`).
    NotFound,
    /// Any other status.
    Status(u16),
    /// A query answered with errors: the code of its first error (`errors[0].code`).
    Query(u32),
    /// A query answered with an HTTP status and no error code in its body (an empty 503, a proxy's error page).
    Http(u16),
    /// A query answer that is not one (not JSON, no rows array, a status other than success without errors).
    BadAnswer,
    /// No reply within the operation timeout.
    Timeout,
    /// The connection failed with the operation in flight.
    ConnectionLost,
}

impl Outcome {
    pub(crate) fn of_status(status: u16, read: bool) -> Outcome {
        match status {
            0 => Outcome::Ok,
            1 if read => Outcome::NotFound,
            s => Outcome::Status(s),
        }
    }

    fn error_name(self) -> Option<String> {
        match self {
            Outcome::Ok | Outcome::NotFound => None,
            Outcome::Status(s) => Some(format!("{} (0x{s:02x})", status_name(s))),
            Outcome::Query(code) => Some(match query_error_name(code) {
                Some(name) => format!("query {code} ({name})"),
                None => format!("query {code}"),
            }),
            Outcome::Http(status) => Some(format!("HTTP {status}")),
            Outcome::BadAnswer => Some("unreadable query answer".into()),
            Outcome::Timeout => Some("timeout".into()),
            Outcome::ConnectionLost => Some("connection lost".into()),
        }
    }
}

/// Names of the statuses a load generator is likely to see.
fn status_name(s: u16) -> &'static str {
    match s {
        0x01 => "KEY_ENOENT",
        0x02 => "KEY_EEXISTS",
        0x03 => "E2BIG",
        0x04 => "EINVAL",
        0x05 => "NOT_STORED",
        0x07 => "NOT_MY_VBUCKET",
        0x20 => "AUTH_ERROR",
        0x24 => "EACCESS",
        0x81 => "UNKNOWN_COMMAND",
        0x82 => "ENOMEM",
        0x86 => "TMPFAIL",
        0x88 => "UNKNOWN_COLLECTION",
        0xa0 => "DURABILITY_INVALID_LEVEL",
        0xa1 => "DURABILITY_IMPOSSIBLE",
        0xa2 => "SYNC_WRITE_IN_PROGRESS",
        0xa3 => "SYNC_WRITE_AMBIGUOUS",
        _ => "status",
    }
}

/// Names of the query error codes a load generator is likely to see (Couchbase's codes, QUERY.md §1.4).
fn query_error_name(code: u32) -> Option<&'static str> {
    Some(match code {
        1000 => "read-only",
        1050 => "no statement",
        1065 => "unrecognized parameter",
        1080 => "timeout",
        1191..=1194 => "rate limited",
        3000 => "syntax error",
        4000 | 4120 => "no index",
        4040 | 4050 | 4070 => "no such prepared",
        5000 => "internal",
        5500 => "memory quota",
        12003 => "keyspace not found",
        12004 | 12016 => "index not found",
        12009 => "DML error",
        12015 => "index scan timed out",
        13014 => "credentials",
        _ => return None,
    })
}

/// One finished operation, as the driver hands it to the recorder.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    pub kind: OpKind,
    pub latency_ns: u64,
    pub outcome: Outcome,
    /// Result rows (queries); 0 for KV operations.
    pub rows: u64,
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("static histogram bounds are valid")
}

/// Totals of one operation type.
#[derive(Clone, Debug)]
pub(crate) struct OpTotals {
    pub latency: Histogram<u64>,
    pub ok: u64,
    pub not_found: u64,
    pub errors: u64,
    /// Result rows of the queries of this type.
    pub rows: u64,
}

impl OpTotals {
    fn new() -> OpTotals {
        OpTotals { latency: new_histogram(), ok: 0, not_found: 0, errors: 0, rows: 0 }
    }
    pub(crate) fn ops(&self) -> u64 {
        self.ok + self.not_found + self.errors
    }
}

/// The recorder of one worker thread (behind a mutex the reporter also takes once a second), and the merged
/// totals of a phase.
#[derive(Clone, Debug)]
pub(crate) struct PhaseStats {
    pub ops: [Option<OpTotals>; OP_KIND_COUNT],
    pub errors_by: BTreeMap<String, u64>,
    /// Requests sent again (after NOT_MY_VBUCKET, or because their node had no connection or left the map).
    pub retries: u64,
    pub interval: Histogram<u64>,
    pub interval_ops: u64,
    pub interval_errors: u64,
    pub interval_retries: u64,
}

impl PhaseStats {
    pub(crate) fn new() -> PhaseStats {
        PhaseStats {
            ops: Default::default(),
            errors_by: BTreeMap::new(),
            retries: 0,
            interval: new_histogram(),
            interval_ops: 0,
            interval_errors: 0,
            interval_retries: 0,
        }
    }

    pub(crate) fn record_retries(&mut self, n: u64) {
        self.retries += n;
        self.interval_retries += n;
    }

    pub(crate) fn record(&mut self, c: &Completion) {
        let t = self.ops[c.kind as usize].get_or_insert_with(OpTotals::new);
        t.latency.saturating_record(c.latency_ns.max(1));
        self.interval.saturating_record(c.latency_ns.max(1));
        self.interval_ops += 1;
        t.rows += c.rows;
        match c.outcome {
            Outcome::Ok => t.ok += 1,
            Outcome::NotFound => t.not_found += 1,
            other => {
                t.errors += 1;
                self.interval_errors += 1;
                if let Some(name) = other.error_name() {
                    *self.errors_by.entry(name).or_default() += 1;
                }
            }
        }
    }

    /// Adds `other`'s totals (not its interval) into these.
    pub(crate) fn merge_totals(&mut self, other: &PhaseStats) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(OpTotals::new);
                // Both histograms share bounds, so adding cannot fail.
                let _ = mine.latency.add(&theirs.latency);
                mine.ok += theirs.ok;
                mine.not_found += theirs.not_found;
                mine.errors += theirs.errors;
                mine.rows += theirs.rows;
            }
        }
        for (k, v) in &other.errors_by {
            *self.errors_by.entry(k.clone()).or_default() += v;
        }
        self.retries += other.retries;
    }

    /// Moves the interval's histogram and counts into `into`, leaving them empty here.
    pub(crate) fn drain_interval(&mut self, into: &mut IntervalStats) {
        let _ = into.latency.add(&self.interval);
        into.ops += self.interval_ops;
        into.errors += self.interval_errors;
        into.retries += self.interval_retries;
        self.interval.reset();
        self.interval_ops = 0;
        self.interval_errors = 0;
        self.interval_retries = 0;
    }
}

/// One reporting interval over all threads.
#[derive(Clone, Debug)]
pub(crate) struct IntervalStats {
    pub latency: Histogram<u64>,
    pub ops: u64,
    pub errors: u64,
    pub retries: u64,
}

impl IntervalStats {
    pub(crate) fn new() -> IntervalStats {
        IntervalStats { latency: new_histogram(), ops: 0, errors: 0, retries: 0 }
    }
    pub(crate) fn reset(&mut self) {
        self.latency.reset();
        self.ops = 0;
        self.errors = 0;
        self.retries = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(kind: OpKind, latency_ns: u64, outcome: Outcome) -> Completion {
        Completion { kind, latency_ns, outcome, rows: 0 }
    }

    /// Outcomes land in the right counters, errors are named by status, and merging adds everything up.
    #[test]
    fn records_and_merges_counts() {
        let mut a = PhaseStats::new();
        a.record(&c(OpKind::Get, 1_000, Outcome::Ok));
        a.record(&c(OpKind::Get, 2_000, Outcome::NotFound));
        a.record(&c(OpKind::Set, 3_000, Outcome::Status(0x86)));
        let mut b = PhaseStats::new();
        b.record(&c(OpKind::Set, 4_000, Outcome::Timeout));
        a.record_retries(3);
        b.record_retries(1);
        b.merge_totals(&a);
        let get = b.ops[0].as_ref().unwrap();
        assert_eq!((get.ok, get.not_found, get.errors, get.ops()), (1, 1, 0, 2));
        let set = b.ops[1].as_ref().unwrap();
        assert_eq!((set.errors, set.latency.len()), (2, 2));
        assert_eq!(b.errors_by.get("TMPFAIL (0x86)"), Some(&1));
        assert_eq!(b.errors_by.get("timeout"), Some(&1));
        assert_eq!(b.retries, 4, "retries add up apart from errors");
        assert_eq!(Outcome::of_status(1, false), Outcome::Status(1));
    }

    /// Query errors are counted by their code (named when it is a known one) and HTTP failures by status; result
    /// rows add up per operation type.
    #[test]
    fn query_outcomes_are_named_by_code_and_rows_add_up() {
        let mut a = PhaseStats::new();
        a.record(&Completion { kind: OpKind::Scan, latency_ns: 9_000, outcome: Outcome::Ok, rows: 40 });
        a.record(&Completion { kind: OpKind::Scan, latency_ns: 9_000, outcome: Outcome::Ok, rows: 2 });
        a.record(&c(OpKind::Scan, 1_000, Outcome::Query(4120)));
        a.record(&c(OpKind::Lookup, 1_000, Outcome::Query(4999)));
        a.record(&c(OpKind::Lookup, 1_000, Outcome::Http(503)));
        let mut total = PhaseStats::new();
        total.merge_totals(&a);
        let scan = total.ops[OpKind::Scan as usize].as_ref().unwrap();
        assert_eq!((scan.ok, scan.errors, scan.rows), (2, 1, 42));
        assert_eq!(total.errors_by.get("query 4120 (no index)"), Some(&1));
        assert_eq!(total.errors_by.get("query 4999"), Some(&1));
        assert_eq!(total.errors_by.get("HTTP 503"), Some(&1));
        assert!(OP_KINDS.iter().enumerate().all(|(i, k)| *k as usize == i), "OP_KINDS is indexed by kind");
    }

    /// Draining the interval moves its counts out and leaves it empty; totals are untouched.
    #[test]
    fn interval_drains() {
        let mut a = PhaseStats::new();
        a.record(&c(OpKind::Get, 5_000, Outcome::Ok));
        a.record(&c(OpKind::Get, 5_000, Outcome::Status(4)));
        a.record_retries(2);
        let mut i = IntervalStats::new();
        a.drain_interval(&mut i);
        assert_eq!((i.ops, i.errors, i.retries, i.latency.len()), (2, 1, 2, 2));
        assert_eq!((a.interval_ops, a.interval_retries, a.interval.len()), (0, 0, 0));
        assert_eq!(a.retries, 2);
        assert_eq!(a.ops[0].as_ref().unwrap().ops(), 2);
    }
}
