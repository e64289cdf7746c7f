//! `MemIndex`: an index held in memory as an ordered set of entries, with the seqno it has applied per vBucket.
//!
//! The feeder (the server, reading the data service's change stream) calls `apply` with each document's new
//! entries, in seqno order per vBucket; scans read ordered chunks and resume after the last entry they saw, so no
//! lock is held between chunks and writers wait at most one chunk. `wait_applied` lets a `request_plus` or
//! `at_plus` scan wait until the index has caught up with the seqnos it needs.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound as StdBound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::{Bound, IndexEntry, ScanRange};
use crate::value::{collate, Value};

/// A document's new state, as far as one index is concerned.
#[derive(Clone, Debug)]
pub enum Change {
    /// The document now has these index keys (none when it does not qualify: a partial index's WHERE is false,
    /// or the leading key is MISSING); any entries it had before are replaced.
    Set { doc_id: Arc<str>, keys: Vec<Vec<Value>> },
    /// The document is gone.
    Delete { doc_id: Arc<str> },
}

struct Inner {
    entries: BTreeSet<IndexEntry>,
    /// The keys each document has in the index, so a change can remove the old ones. A primary index keeps none:
    /// its only entry for a document is the document id itself.
    by_doc: HashMap<Arc<str>, Vec<Vec<Value>>>,
    /// Highest seqno applied, per vBucket.
    applied: Vec<u64>,
    /// Estimated heap bytes of `entries` and `by_doc` (see [`entry_bytes`]).
    bytes: usize,
    /// Entries per vBucket (a document's entries are all in its vBucket), so a node can count the part of an
    /// index that lies in the vBuckets it answers for.
    counts: Vec<u64>,
}

impl Inner {
    /// Adds an entry of a document in vBucket `vb`.
    fn insert(&mut self, primary: bool, vb: u16, e: IndexEntry) {
        let bytes = entry_bytes(primary, &e);
        if self.entries.insert(e) {
            self.bytes += bytes;
            if let Some(c) = self.counts.get_mut(usize::from(vb)) {
                *c += 1;
            }
        }
    }

    /// Removes an entry of a document in vBucket `vb`.
    fn remove(&mut self, primary: bool, vb: u16, e: &IndexEntry) {
        if self.entries.remove(e) {
            self.bytes = self.bytes.saturating_sub(entry_bytes(primary, e));
            if let Some(c) = self.counts.get_mut(usize::from(vb)) {
                *c = c.saturating_sub(1);
            }
        }
    }
}

/// The memory an entry costs, estimated: its share of the ordered set's nodes, the document id, the key values
/// (their slots and the strings, arrays and objects they hold) and, for a secondary index, the copy of the key kept
/// per document so a change can find the entries it replaces.
fn entry_bytes(primary: bool, e: &IndexEntry) -> usize {
    const SET_SLOT: usize = 64;
    const BY_DOC_SLOT: usize = 56;
    let slots = std::mem::size_of::<Value>() * e.key.len();
    let heap: usize = e.key.iter().map(value_heap_bytes).sum();
    if primary {
        // The key is the document id itself, sharing its allocation.
        SET_SLOT + slots + 16 + e.doc_id.len()
    } else {
        SET_SLOT + BY_DOC_SLOT + 2 * slots + heap + 16 + e.doc_id.len()
    }
}

fn value_heap_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => 16 + s.len(),
        Value::Binary(b) => 16 + b.len(),
        Value::Array(a) => 16 + a.iter().map(|x| std::mem::size_of::<Value>() + value_heap_bytes(x)).sum::<usize>(),
        Value::Object(o) => {
            16 + o.iter().map(|(k, x)| 48 + k.len() + std::mem::size_of::<Value>() + value_heap_bytes(x)).sum::<usize>()
        }
        _ => 0,
    }
}

/// An in-memory index.
pub struct MemIndex {
    primary: bool,
    inner: Mutex<Inner>,
    caught_up: Condvar,
}

impl MemIndex {
    pub fn new(primary: bool, num_vbuckets: usize) -> MemIndex {
        MemIndex {
            primary,
            inner: Mutex::new(Inner {
                entries: BTreeSet::new(),
                by_doc: HashMap::new(),
                applied: vec![0; num_vbuckets],
                bytes: 0,
                counts: vec![0; num_vbuckets],
            }),
            caught_up: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the set consistent (each step is one BTreeSet call): keep going.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies the changes of vBucket `vb` up to `seqno` (which must not go backwards) and wakes waiting scans.
    pub fn apply(&self, vb: u16, seqno: u64, changes: impl IntoIterator<Item = Change>) {
        let mut inner = self.lock();
        for change in changes {
            match change {
                Change::Set { doc_id, keys } if self.primary => {
                    if !keys.is_empty() {
                        inner.insert(true, vb, IndexEntry { key: vec![Value::String(doc_id.clone())], doc_id });
                    } else {
                        remove_primary(&mut inner, vb, doc_id);
                    }
                }
                Change::Delete { doc_id } if self.primary => remove_primary(&mut inner, vb, doc_id),
                Change::Set { doc_id, keys } => {
                    remove_secondary(&mut inner, vb, &doc_id);
                    for key in &keys {
                        inner.insert(false, vb, IndexEntry { key: key.clone(), doc_id: doc_id.clone() });
                    }
                    if !keys.is_empty() {
                        inner.by_doc.insert(doc_id, keys);
                    }
                }
                Change::Delete { doc_id } => remove_secondary(&mut inner, vb, &doc_id),
            }
        }
        if let Some(applied) = inner.applied.get_mut(vb as usize) {
            *applied = (*applied).max(seqno);
        }
        drop(inner);
        self.caught_up.notify_all();
    }

    /// Forgets everything of vBucket `vb` that `belongs` says is in it, and its applied seqno (the vBucket left
    /// this node, or its history was rolled back and will be fed again).
    pub fn reset_vbucket(&self, vb: u16, belongs: impl Fn(&str) -> bool) {
        self.reset_vbuckets(&[vb], belongs)
    }

    /// [`MemIndex::reset_vbucket`] for several vBuckets in one pass over the entries (a rebalance moves hundreds
    /// at once); `belongs` says whether a document is in one of them.
    pub fn reset_vbuckets(&self, vbs: &[u16], belongs: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        let gone: Vec<IndexEntry> = inner.entries.iter().filter(|e| belongs(&e.doc_id)).cloned().collect();
        for e in &gone {
            // Counted per vBucket below: every entry `belongs` picks is in one of `vbs`.
            inner.remove(self.primary, u16::MAX, e);
            inner.by_doc.remove(&e.doc_id);
        }
        for &vb in vbs {
            if let Some(applied) = inner.applied.get_mut(vb as usize) {
                *applied = 0;
            }
            if let Some(c) = inner.counts.get_mut(usize::from(vb)) {
                *c = 0;
            }
        }
    }

    /// The seqno applied for `vb`.
    pub fn applied(&self, vb: u16) -> u64 {
        self.lock().applied.get(vb as usize).copied().unwrap_or(0)
    }

    /// Waits until every `(vb, seqno)` of `targets` is applied, for at most `timeout`. Returns whether it is.
    pub fn wait_applied(&self, targets: &[(u16, u64)], timeout: Duration) -> bool {
        let done =
            |inner: &Inner| targets.iter().all(|&(vb, s)| inner.applied.get(vb as usize).is_some_and(|&a| a >= s));
        let inner = self.lock();
        if done(&inner) {
            return true;
        }
        let (inner, _) =
            self.caught_up.wait_timeout_while(inner, timeout, |inner| !done(inner)).unwrap_or_else(|p| p.into_inner());
        done(&inner)
    }

    /// Every vBucket's applied seqno, in vBucket order.
    pub fn applied_all(&self) -> Vec<u64> {
        self.lock().applied.clone()
    }

    /// Adds an entry (of a document in vBucket `vb`) read back from a snapshot to an index that is still being
    /// loaded (not yet fed or scanned).
    pub fn load(&self, vb: u16, entry: IndexEntry) {
        let mut inner = self.lock();
        if !self.primary {
            inner.by_doc.entry(entry.doc_id.clone()).or_default().push(entry.key.clone());
        }
        inner.insert(self.primary, vb, entry);
    }

    /// Sets the applied seqno of each vBucket of an index that is still being loaded.
    pub fn set_applied(&self, applied: &[u64]) {
        let mut inner = self.lock();
        for (slot, &s) in inner.applied.iter_mut().zip(applied) {
            *slot = s;
        }
    }

    /// Takes over everything `loaded` holds (its entries and applied seqnos), dropping what this index held.
    pub fn replace_with(&self, loaded: MemIndex) {
        let other = loaded.inner.into_inner().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut *self.lock(), other);
        drop(old);
        self.caught_up.notify_all();
    }

    /// The estimated memory the index holds, in bytes.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The number of entries of documents in the vBuckets `vbs`.
    pub fn len_in(&self, vbs: &[u16]) -> u64 {
        let inner = self.lock();
        vbs.iter().map(|&vb| inner.counts.get(usize::from(vb)).copied().unwrap_or(0)).sum()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `limit` entries within `range`, in order (highest first when the range is reversed), after `after`
    /// (the last entry of the previous chunk) when given. Spans are read in order and must not overlap (the
    /// planner merges them).
    pub fn scan(&self, range: &ScanRange, after: Option<&IndexEntry>, limit: usize) -> Vec<IndexEntry> {
        let inner = self.lock();
        if range.reverse {
            return scan_down(&inner.entries, range, after, limit);
        }
        let mut out = Vec::with_capacity(limit.min(1024));
        for span in &range.spans {
            let start = match (&span.low, after) {
                (_, Some(a)) if above_low(&a.key, &span.low) => StdBound::Excluded(a.clone()),
                (Bound::Unbounded, _) => StdBound::Unbounded,
                // Past the entries with the prefix `k` when that point can be named, else from the first of them.
                (Bound::Excluded(k), _) => StdBound::Included(after_prefix(k).unwrap_or_else(|| first_with_prefix(k))),
                (Bound::Included(k), _) => StdBound::Included(first_with_prefix(k)),
            };
            if let Some(a) = after {
                // A span entirely before the resume point was finished by an earlier chunk.
                if !below_high(&a.key, &span.high) && !matches!(span.high, Bound::Unbounded) {
                    continue;
                }
            }
            for e in inner.entries.range((start, StdBound::Unbounded)) {
                if !below_high(&e.key, &span.high) {
                    break;
                }
                if !above_low(&e.key, &span.low) && !matches!(span.low, Bound::Unbounded) {
                    continue;
                }
                out.push(e.clone());
                if out.len() >= limit {
                    return out;
                }
            }
        }
        out
    }
}

/// [`MemIndex::scan`] of a reversed range: the spans last to first, each from its high end down.
fn scan_down(
    entries: &BTreeSet<IndexEntry>,
    range: &ScanRange,
    after: Option<&IndexEntry>,
    limit: usize,
) -> Vec<IndexEntry> {
    let mut out = Vec::with_capacity(limit.min(1024));
    for span in range.spans.iter().rev() {
        if let Some(a) = after {
            // A span entirely above the resume point was finished by an earlier chunk.
            if !above_low(&a.key, &span.low) && !matches!(span.low, Bound::Unbounded) {
                continue;
            }
        }
        let end = match (&span.high, after) {
            (_, Some(a)) if below_high(&a.key, &span.high) => StdBound::Excluded(a.clone()),
            (Bound::Unbounded, _) => StdBound::Unbounded,
            (Bound::Excluded(k), _) => StdBound::Excluded(first_with_prefix(k)),
            (Bound::Included(k), _) => match after_prefix(k) {
                Some(p) => StdBound::Excluded(p),
                // No value just above the bound can be named (an object key): find the first entry above it.
                None => entries
                    .range((StdBound::Included(first_with_prefix(k)), StdBound::Unbounded))
                    .find(|e| !below_high(&e.key, &span.high))
                    .map_or(StdBound::Unbounded, |e| StdBound::Excluded(e.clone())),
            },
        };
        for e in entries.range((StdBound::Unbounded, end)).rev() {
            if !above_low(&e.key, &span.low) && !matches!(span.low, Bound::Unbounded) {
                break;
            }
            out.push(e.clone());
            if out.len() >= limit {
                return out;
            }
        }
    }
    out
}

/// The smallest entry whose key starts with `k` (doc id "" sorts first among equal keys).
fn first_with_prefix(k: &[Value]) -> IndexEntry {
    IndexEntry { key: k.to_vec(), doc_id: Arc::from("") }
}

/// The smallest possible entry above every entry whose key starts with `k`: `k` with its last value replaced by
/// the value just above it. `None` when that value cannot be named (objects, numbers past 2^53 where floats skip
/// integers) or `k` is empty.
fn after_prefix(k: &[Value]) -> Option<IndexEntry> {
    let (last, head) = k.split_last()?;
    let mut key = head.to_vec();
    key.push(successor(last)?);
    Some(IndexEntry { key, doc_id: Arc::from("") })
}

/// The smallest value that collates above `v`, when there is one that can be named.
fn successor(v: &Value) -> Option<Value> {
    use crate::value::Number;
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: below it every integer is a float and floats are denser
    Some(match v {
        Value::Missing => Value::Null,
        Value::Null => Value::Bool(false),
        Value::Bool(false) => Value::Bool(true),
        // NaN is the lowest number.
        Value::Bool(true) => Value::Number(Number::Float(f64::NAN)),
        Value::Number(n) => {
            let x = n.to_f64();
            if x.is_nan() {
                Value::Number(Number::Float(f64::NEG_INFINITY))
            } else if x == f64::INFINITY {
                Value::string("")
            } else if x.abs() < EXACT {
                Value::Number(Number::Float(x.next_up()))
            } else {
                return None;
            }
        }
        Value::String(s) => Value::String(Arc::from(format!("{s}\0"))),
        // Arrays compare element by element, then by length: the shortest extension is next.
        Value::Array(a) => {
            let mut longer = a.as_ref().clone();
            longer.push(Value::Missing);
            Value::Array(Arc::new(longer))
        }
        Value::Binary(b) => {
            let mut longer = b.to_vec();
            longer.push(0);
            Value::Binary(Arc::from(longer))
        }
        Value::Object(_) => return None,
    })
}

fn remove_primary(inner: &mut Inner, vb: u16, doc_id: Arc<str>) {
    let probe = IndexEntry { key: vec![Value::String(doc_id.clone())], doc_id };
    inner.remove(true, vb, &probe);
}

fn remove_secondary(inner: &mut Inner, vb: u16, doc_id: &Arc<str>) {
    if let Some(old) = inner.by_doc.remove(doc_id) {
        for key in old {
            inner.remove(false, vb, &IndexEntry { key, doc_id: doc_id.clone() });
        }
    }
}

/// Compares the first `bound.len()` values of `key` with `bound`.
fn prefix_cmp(key: &[Value], bound: &[Value]) -> Ordering {
    for (k, b) in key.iter().zip(bound) {
        let o = collate(k, b);
        if o != Ordering::Equal {
            return o;
        }
    }
    if key.len() < bound.len() {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// Whether `key` lies at or after the low bound.
fn above_low(key: &[Value], low: &Bound) -> bool {
    match low {
        Bound::Unbounded => true,
        Bound::Included(b) => prefix_cmp(key, b) != Ordering::Less,
        Bound::Excluded(b) => prefix_cmp(key, b) == Ordering::Greater,
    }
}

/// Whether `key` lies at or before the high bound.
fn below_high(key: &[Value], high: &Bound) -> bool {
    match high {
        Bound::Unbounded => true,
        Bound::Included(b) => prefix_cmp(key, b) != Ordering::Greater,
        Bound::Excluded(b) => prefix_cmp(key, b) == Ordering::Less,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Span;

    fn id(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    fn ids(entries: &[IndexEntry]) -> Vec<&str> {
        entries.iter().map(|e| &*e.doc_id).collect()
    }

    #[test]
    fn primary_scan_returns_ids_in_order_and_resumes_after_a_chunk() {
        // Proves a primary index is an ordered id scan and chunked reads neither skip nor repeat entries.
        let ix = MemIndex::new(true, 4);
        let changes = ["k3", "k1", "k2", "k5", "k4"].map(|k| Change::Set { doc_id: id(k), keys: vec![vec![]] });
        ix.apply(0, 5, changes);
        let first = ix.scan(&ScanRange::all(), None, 2);
        assert_eq!(ids(&first), ["k1", "k2"]);
        let rest = ix.scan(&ScanRange::all(), first.last(), 10);
        assert_eq!(ids(&rest), ["k3", "k4", "k5"]);
        ix.apply(1, 1, [Change::Delete { doc_id: id("k3") }]);
        assert_eq!(ix.len(), 4);
        assert_eq!((ix.applied(0), ix.applied(1)), (5, 1));
    }

    #[test]
    fn secondary_changes_replace_a_documents_old_keys() {
        // Proves a document's entries move when its keys change and disappear when it stops qualifying.
        let ix = MemIndex::new(false, 1);
        let set = |d: &str, k: i64| Change::Set { doc_id: id(d), keys: vec![vec![Value::int(k)]] };
        ix.apply(0, 1, [set("a", 5), set("b", 3)]);
        ix.apply(0, 2, [set("a", 1)]);
        let all = ix.scan(&ScanRange::all(), None, 10);
        assert_eq!(ids(&all), ["a", "b"]);
        ix.apply(0, 3, [Change::Set { doc_id: id("b"), keys: vec![] }]);
        assert_eq!(ids(&ix.scan(&ScanRange::all(), None, 10)), ["a"]);
    }

    #[test]
    fn spans_select_by_key_prefix_with_inclusive_and_exclusive_bounds() {
        // Proves bounds on a leading key select by prefix of composite keys.
        let ix = MemIndex::new(false, 1);
        let set = |d: &str, a: i64, b: &str| Change::Set { doc_id: id(d), keys: vec![vec![Value::int(a), b.into()]] };
        ix.apply(0, 1, [set("d1", 1, "x"), set("d2", 2, "y"), set("d3", 2, "z"), set("d4", 3, "w")]);
        let range = |low, high| ScanRange::new(vec![Span { low, high }]);
        let two = range(Bound::Included(vec![Value::int(2)]), Bound::Included(vec![Value::int(2)]));
        assert_eq!(ids(&ix.scan(&two, None, 10)), ["d2", "d3"]);
        let above_one = range(Bound::Excluded(vec![Value::int(1)]), Bound::Unbounded);
        assert_eq!(ids(&ix.scan(&above_one, None, 10)), ["d2", "d3", "d4"]);
        let first = ix.scan(&above_one, None, 1);
        assert_eq!(ids(&ix.scan(&above_one, first.last(), 10)), ["d3", "d4"]);
    }

    #[test]
    fn entries_are_counted_per_vbucket() {
        // Proves a node can count just the vBuckets it answers for: counts follow sets, moves and deletes, and a
        // vBucket reset empties only its own count.
        let ix = MemIndex::new(true, 3);
        let set = |d: &str| Change::Set { doc_id: id(d), keys: vec![vec![]] };
        ix.apply(0, 2, [set("a"), set("b")]);
        ix.apply(1, 1, [set("c")]);
        ix.apply(0, 3, [set("a"), Change::Delete { doc_id: id("b") }]);
        assert_eq!((ix.len_in(&[0]), ix.len_in(&[1]), ix.len_in(&[0, 1, 2])), (1, 1, 2));
        ix.reset_vbuckets(&[1], |d| d == "c");
        assert_eq!((ix.len_in(&[0]), ix.len_in(&[1])), (1, 0));
    }

    #[test]
    fn memory_estimate_follows_entries_in_and_out() {
        // Proves the estimate grows with entries, does not count a re-applied entry twice, and returns to zero when
        // the documents go, through changes, a vBucket reset and a snapshot load alike.
        let ix = MemIndex::new(false, 2);
        let set = |d: &str, k: &str| Change::Set { doc_id: id(d), keys: vec![vec![Value::string(k)]] };
        ix.apply(0, 1, [set("a", "long key value"), set("b", "x")]);
        let two = ix.bytes();
        assert!(two > 0);
        ix.apply(0, 2, [set("a", "long key value")]);
        assert_eq!(ix.bytes(), two, "replacing an entry by itself costs nothing more");
        ix.apply(0, 3, [Change::Delete { doc_id: id("b") }]);
        assert!(ix.bytes() < two);
        ix.reset_vbucket(0, |_| true);
        assert_eq!(ix.bytes(), 0);
        let loaded = MemIndex::new(false, 2);
        loaded.load(1, IndexEntry { key: vec![Value::string("long key value")], doc_id: id("a") });
        ix.replace_with(loaded);
        assert!(ix.bytes() > 0);
        ix.apply(1, 1, [Change::Delete { doc_id: id("a") }]);
        assert_eq!(ix.bytes(), 0, "a loaded entry is removed like any other");
    }

    #[test]
    fn reversed_scans_read_each_span_from_its_top_and_resume_below_a_chunk() {
        // Proves a reversed scan returns exactly the ascending scan's entries in the opposite order, for every kind
        // of bound (included, excluded, unbounded, prefixes of composite keys, a key with no nameable successor),
        // across several spans and when read one entry per chunk.
        let ix = MemIndex::new(false, 1);
        let mut changes = Vec::new();
        let keys = [
            Value::Null,
            Value::Bool(true),
            Value::int(1),
            Value::float(1.5),
            Value::int(2),
            Value::string("a"),
            Value::string("a\0"),
            Value::string("b"),
            Value::array(vec![Value::int(1)]),
            Value::object([("k".to_string(), Value::int(1))].into_iter().collect()),
        ];
        for (i, k) in keys.iter().enumerate() {
            for j in 0..3 {
                changes
                    .push(Change::Set { doc_id: id(&format!("d{i}-{j}")), keys: vec![vec![k.clone(), Value::int(j)]] });
            }
        }
        ix.apply(0, 1, changes);
        let b = |k: &Value| vec![k.clone()];
        let mut cases = vec![ScanRange::all()];
        for (i, lo) in keys.iter().enumerate() {
            for hi in &keys[i..] {
                cases.push(ScanRange::new(vec![Span { low: Bound::Included(b(lo)), high: Bound::Included(b(hi)) }]));
                cases.push(ScanRange::new(vec![Span { low: Bound::Excluded(b(lo)), high: Bound::Excluded(b(hi)) }]));
            }
            cases.push(ScanRange::new(vec![Span { low: Bound::Unbounded, high: Bound::Included(b(lo)) }]));
            cases.push(ScanRange::new(vec![Span { low: Bound::Excluded(b(lo)), high: Bound::Unbounded }]));
            cases.push(ScanRange::new(vec![Span::exact(vec![lo.clone(), Value::int(1)])]));
        }
        cases.push(ScanRange::new(vec![Span::exact(b(&keys[1])), Span::exact(b(&keys[5])), Span::exact(b(&keys[9]))]));
        for range in cases {
            let up = ix.scan(&range, None, 1000);
            let mut down = ix.scan(&ScanRange { reverse: true, ..range.clone() }, None, 1000);
            down.reverse();
            assert_eq!(ids(&down), ids(&up), "{range:?}");
            // One entry at a time, resuming after the last one read.
            let reversed = ScanRange { reverse: true, ..range.clone() };
            let mut chunked = Vec::new();
            while let Some(e) = ix.scan(&reversed, chunked.last(), 1).pop() {
                chunked.push(e);
            }
            chunked.reverse();
            assert_eq!(ids(&chunked), ids(&up), "chunked {range:?}");
        }
    }

    #[test]
    fn successors_are_the_next_value_in_collation() {
        // Proves each named successor sorts after its value and before the next value above it.
        let pairs = [
            (Value::Missing, Value::Bool(false)),
            (Value::Null, Value::Bool(true)),
            (Value::Bool(true), Value::float(f64::NEG_INFINITY)),
            (Value::int(3), Value::float(3.000001)),
            (Value::float(-0.5), Value::int(0)),
            (Value::string("ab"), Value::string("ab\u{1}")),
            (Value::array(vec![Value::int(1)]), Value::array(vec![Value::int(1), Value::Null])),
        ];
        for (v, above) in pairs {
            let s = successor(&v).unwrap();
            assert_eq!(collate(&v, &s), Ordering::Less, "{v:?} < {s:?}");
            assert_eq!(collate(&s, &above), Ordering::Less, "{s:?} < {above:?}");
        }
        assert!(successor(&Value::int(1 << 60)).is_none(), "floats skip integers there");
    }

    #[test]
    fn waiting_for_a_seqno_returns_once_it_is_applied() {
        // Proves wait_applied sees a later apply from another thread and times out when nothing comes.
        let ix = Arc::new(MemIndex::new(true, 2));
        assert!(!ix.wait_applied(&[(1, 3)], Duration::from_millis(10)));
        let writer = {
            let ix = ix.clone();
            std::thread::spawn(move || ix.apply(1, 3, [Change::Delete { doc_id: id("x") }]))
        };
        assert!(ix.wait_applied(&[(1, 3)], Duration::from_secs(30)));
        writer.join().unwrap();
    }
}
