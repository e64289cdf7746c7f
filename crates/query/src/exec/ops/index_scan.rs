//! Documents through a secondary index: the spans are computed once per execution from the plan's expressions,
//! the index is read in growing chunks, and each document id is fetched (once, for an array index that holds a
//! document under several keys), or, for a covering scan, each entry becomes a row by itself. Pushed-down OFFSET
//! and LIMIT skip and stop in the entries; a count scan counts them.

use std::collections::HashSet;
use std::sync::Arc;

use super::scan::{fetch_rows, wait_consistent, Page, SCAN_CHUNK_MAX, SCAN_CHUNK_MIN};
use super::{Op, Ready};
use crate::exec::eval::eval;
use crate::exec::{Cx, Row};
use crate::index::{Bound, IndexEntry, ScanRange, Span};
use crate::plan::{IndexScanPlan, KeyBound, Slot, SpanPlan};
use crate::value::Value;
use crate::QueryError;

/// The entries of one index scan, chunk by chunk.
pub(super) struct Entries<'p> {
    plan: &'p IndexScanPlan,
    /// `None` before the first read; then the range and the last entry read (`None` at the start).
    range: Option<(ScanRange, Option<IndexEntry>)>,
    done: bool,
    /// Document ids read so far, for an array index.
    seen: HashSet<Arc<str>>,
    chunk: usize,
    /// The pushed OFFSET and LIMIT, in entries.
    page: Page,
}

impl<'p> Entries<'p> {
    pub(super) fn new(plan: &'p IndexScanPlan) -> Entries<'p> {
        Entries { plan, range: None, done: false, seen: HashSet::new(), chunk: SCAN_CHUNK_MIN, page: Page::default() }
    }

    /// The next entries (at least one), or `None` when the scan is over. The first call waits for the request's
    /// scan consistency and computes the spans, the offset and the limit.
    pub(super) fn next_chunk(&mut self, base: &Row, cx: &Cx<'_>) -> Result<Option<Vec<IndexEntry>>, QueryError> {
        loop {
            if self.done || self.page.is_full() {
                return Ok(None);
            }
            cx.check()?;
            if self.range.is_none() {
                self.start(base, cx)?;
                continue;
            }
            let Some((range, after)) = &mut self.range else { continue };
            // Read no further than the entries still wanted; an array index may repeat documents, so it reads
            // whole chunks.
            let want = if self.plan.distinct { self.chunk } else { self.page.want(self.chunk) };
            let entries = self.plan.ks.keyspace.scan(&self.plan.index, range, after.as_ref(), want)?;
            self.done = entries.len() < want;
            *after = entries.last().cloned();
            self.chunk = (self.chunk * 2).min(SCAN_CHUNK_MAX);
            let mut fresh = Vec::with_capacity(entries.len());
            for e in entries {
                if self.plan.distinct {
                    if self.seen.contains(&e.doc_id) {
                        continue;
                    }
                    cx.memory.charge(48 + e.doc_id.len())?;
                    self.seen.insert(e.doc_id.clone());
                }
                fresh.push(e);
            }
            let out = self.page.apply(fresh);
            if !out.is_empty() {
                return Ok(Some(out));
            }
        }
    }

    fn start(&mut self, base: &Row, cx: &Cx<'_>) -> Result<(), QueryError> {
        wait_consistent(&self.plan.ks, &self.plan.index, cx)?;
        self.page = Page::of(self.plan.offset.as_ref(), self.plan.limit.as_ref(), cx)?;
        let mut range = compute(&self.plan.span, base, cx)?;
        range.reverse = self.plan.reverse;
        self.done = range.spans.is_empty();
        self.range = Some((range, None));
        Ok(())
    }
}

/// The spans of a plan for this execution; an equality or bound on NULL / MISSING matches nothing.
pub(super) fn compute(span: &SpanPlan, base: &Row, cx: &Cx<'_>) -> Result<ScanRange, QueryError> {
    let mut row = base.clone();
    let mut prefix = Vec::with_capacity(span.eq.len() + 1);
    for e in &span.eq {
        let v = eval(e, &mut row, cx)?;
        if v.is_unknown() {
            return Ok(ScanRange::default());
        }
        prefix.push(v);
    }
    if let Some(list) = &span.in_list {
        let mut values: Vec<Value> = match eval(list, &mut row, cx)? {
            Value::Array(a) => a.iter().filter(|v| !v.is_unknown()).cloned().collect(),
            _ => Vec::new(),
        };
        values.sort();
        values.dedup();
        let spans = values.into_iter().map(|v| Span::exact(vec![v])).collect();
        return Ok(ScanRange::new(spans));
    }
    let Some((low, high)) = &span.range else {
        return Ok(ScanRange::new(vec![Span::exact(prefix)]));
    };
    let bound = |b: &Option<KeyBound>, row: &mut Row| -> Result<Option<Bound>, QueryError> {
        let (v, inclusive) = match b {
            None if prefix.is_empty() => return Ok(Some(Bound::Unbounded)),
            None => return Ok(Some(Bound::Included(prefix.clone()))),
            Some(KeyBound::Null(inclusive)) => (Value::Null, *inclusive),
            Some(KeyBound::Value(e, inclusive)) => {
                let v = eval(e, row, cx)?;
                if v.is_unknown() {
                    return Ok(None);
                }
                (v, *inclusive)
            }
        };
        let mut key = prefix.clone();
        key.push(v);
        Ok(Some(if inclusive { Bound::Included(key) } else { Bound::Excluded(key) }))
    };
    let (Some(low), Some(high)) = (bound(low, &mut row)?, bound(high, &mut row)?) else {
        return Ok(ScanRange::default());
    };
    Ok(ScanRange::new(vec![Span { low, high }]))
}

/// Rows through a secondary index.
pub(super) struct IndexScan<'p> {
    plan: &'p IndexScanPlan,
    base: Row,
    entries: Entries<'p>,
    ready: Ready,
}

impl<'p> IndexScan<'p> {
    pub(super) fn new(plan: &'p IndexScanPlan, base: &Row) -> IndexScan<'p> {
        IndexScan { plan, base: base.clone(), entries: Entries::new(plan), ready: Ready::new() }
    }
}

impl Op for IndexScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            // Checked per row, not per chunk: a timed-out request must not hand out thousands of buffered rows.
            cx.check()?;
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            let Some(entries) = self.entries.next_chunk(&self.base, cx)? else { return Ok(None) };
            match &self.plan.cover {
                Some(cover) => {
                    for e in entries {
                        let mut row = self.base.clone();
                        for (slot, value) in cover.keys.iter().zip(e.key) {
                            if let Some(slot) = slot {
                                row.set(*slot, value);
                            }
                        }
                        row.set(cover.id, Value::String(e.doc_id));
                        self.ready.push_back(row);
                    }
                }
                None => {
                    let keys: Vec<Arc<str>> = entries.into_iter().map(|e| e.doc_id).collect();
                    fetch_rows(&self.plan.ks, &keys, &self.base, self.plan.slot, cx, &mut self.ready)?;
                }
            }
        }
    }
}

/// One row holding the number of entries an exact scan reads.
pub(super) struct IndexCountScan<'p> {
    plan: &'p IndexScanPlan,
    slot: Slot,
    base: Option<Row>,
}

impl<'p> IndexCountScan<'p> {
    pub(super) fn new(plan: &'p IndexScanPlan, slot: Slot, base: &Row) -> IndexCountScan<'p> {
        IndexCountScan { plan, slot, base: Some(base.clone()) }
    }
}

impl Op for IndexCountScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        let Some(mut row) = self.base.take() else { return Ok(None) };
        wait_consistent(&self.plan.ks, &self.plan.index, cx)?;
        let range = compute(&self.plan.span, &row, cx)?;
        let n = if range.spans.is_empty() { 0 } else { self.plan.ks.keyspace.count_range(&self.plan.index, &range)? };
        row.set(self.slot, Value::int(i64::try_from(n).unwrap_or(i64::MAX)));
        Ok(Some(row))
    }
}
