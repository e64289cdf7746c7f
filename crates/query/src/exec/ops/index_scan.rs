//! Documents through a secondary index: the spans are computed once per execution from the plan's expressions,
//! the index is read in growing chunks, and each document id is fetched (once, for an array index that holds a
//! document under several keys).

use std::collections::HashSet;
use std::sync::Arc;

use super::scan::{fetch_rows, wait_consistent, SCAN_CHUNK_MAX, SCAN_CHUNK_MIN};
use super::{Op, Ready};
use crate::exec::eval::eval;
use crate::exec::{Cx, Row};
use crate::index::{Bound, IndexEntry, ScanRange, Span};
use crate::plan::{KeyspaceHandle, Slot, SpanPlan};
use crate::value::Value;
use crate::QueryError;

pub(super) struct IndexScan<'p> {
    pub(super) ks: &'p KeyspaceHandle,
    pub(super) slot: Slot,
    pub(super) index: &'p Arc<str>,
    pub(super) span: &'p SpanPlan,
    pub(super) distinct: bool,
    pub(super) base: Row,
    /// `None` before the first read; then the range and the last entry read (`Some(None)` at the start).
    pub(super) range: Option<(ScanRange, Option<IndexEntry>)>,
    pub(super) done: bool,
    pub(super) seen: HashSet<Arc<str>>,
    pub(super) ready: Ready,
    pub(super) chunk: usize,
}

impl<'p> IndexScan<'p> {
    pub(super) fn new(
        ks: &'p KeyspaceHandle,
        slot: Slot,
        index: &'p Arc<str>,
        span: &'p SpanPlan,
        distinct: bool,
        base: &Row,
    ) -> IndexScan<'p> {
        IndexScan {
            ks,
            slot,
            index,
            span,
            distinct,
            base: base.clone(),
            range: None,
            done: false,
            seen: HashSet::new(),
            ready: Ready::new(),
            chunk: SCAN_CHUNK_MIN,
        }
    }
}

/// The spans of a plan for this execution; an equality or bound on NULL / MISSING matches nothing.
fn compute(span: &SpanPlan, base: &Row, cx: &Cx<'_>) -> Result<ScanRange, QueryError> {
    let mut row = base.clone();
    let mut prefix = Vec::with_capacity(span.eq.len() + 1);
    for e in &span.eq {
        let v = eval(e, &mut row, cx)?;
        if v.is_unknown() {
            return Ok(ScanRange { spans: Vec::new() });
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
        return Ok(ScanRange { spans });
    }
    let Some((low, high)) = &span.range else {
        return Ok(ScanRange { spans: vec![Span::exact(prefix)] });
    };
    let bound = |b: &Option<(crate::plan::CExpr, bool)>, row: &mut Row| -> Result<Option<Bound>, QueryError> {
        Ok(Some(match b {
            None if prefix.is_empty() => Bound::Unbounded,
            None => Bound::Included(prefix.clone()),
            Some((e, inclusive)) => {
                let v = eval(e, row, cx)?;
                if v.is_missing() || (v.is_null() && !matches!(e, crate::plan::CExpr::Const(Value::Null))) {
                    return Ok(None);
                }
                let mut key = prefix.clone();
                key.push(v);
                if *inclusive {
                    Bound::Included(key)
                } else {
                    Bound::Excluded(key)
                }
            }
        }))
    };
    let (Some(low), Some(high)) = (bound(low, &mut row)?, bound(high, &mut row)?) else {
        return Ok(ScanRange { spans: Vec::new() });
    };
    Ok(ScanRange { spans: vec![Span { low, high }] })
}

impl Op for IndexScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            // Checked per row, not per chunk: a timed-out request must not hand out thousands of buffered rows.
            cx.check()?;
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            if self.done {
                return Ok(None);
            }
            if self.range.is_none() {
                wait_consistent(self.ks, self.index, cx)?;
                let range = compute(self.span, &self.base, cx)?;
                if range.spans.is_empty() {
                    self.done = true;
                    continue;
                }
                self.range = Some((range, None));
            }
            let Some((range, after)) = &mut self.range else { continue };
            let entries = self.ks.keyspace.scan(self.index, range, after.as_ref(), self.chunk)?;
            if entries.len() < self.chunk {
                self.done = true;
            }
            *after = entries.last().cloned();
            let mut keys = Vec::with_capacity(entries.len());
            for e in entries {
                if self.distinct {
                    if self.seen.contains(&e.doc_id) {
                        continue;
                    }
                    cx.memory.charge(48 + e.doc_id.len())?;
                    self.seen.insert(e.doc_id.clone());
                }
                keys.push(e.doc_id);
            }
            fetch_rows(self.ks, &keys, &self.base, self.slot, cx, &mut self.ready)?;
            self.chunk = (self.chunk * 2).min(SCAN_CHUNK_MAX);
        }
    }
}
