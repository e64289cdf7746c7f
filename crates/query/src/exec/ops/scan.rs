//! Row sources: documents by key, through the primary index, a keyspace's count, system keyspaces, the elements
//! of an expression, and the rows of a subquery.

use std::sync::Arc;

use super::{build as build_op, Op, Ready};
use crate::exec::eval::{eval, keys_of, pushed_count};
use crate::exec::{Cx, Row, RowMeta};
use crate::index::{Bound, IndexEntry, ScanRange, Span};
use crate::plan::{CExpr, IdSpans, KeyspaceHandle, Node, Plan, Slot, SystemKeyspace};
use crate::value::Value;
use crate::QueryError;

/// Keys fetched per call to the datastore.
const FETCH_BATCH_MAX: usize = 1024;
/// Index entries read per chunk: small first (a LIMIT 10 should not read thousands), growing to this.
pub(super) const SCAN_CHUNK_MAX: usize = 4096;
pub(super) const SCAN_CHUNK_MIN: usize = 64;

/// OFFSET and LIMIT pushed into a scan: results still to skip, and the most still wanted.
#[derive(Debug, Default)]
pub(super) struct Page {
    skip: usize,
    left: Option<usize>,
}

impl Page {
    /// The page of one execution: the pushed expressions evaluated once.
    pub(super) fn of(
        offset: Option<&crate::plan::Pushed>,
        limit: Option<&crate::plan::Pushed>,
        cx: &Cx<'_>,
    ) -> Result<Page, QueryError> {
        Ok(Page { skip: pushed_count(offset, "OFFSET", cx)?.unwrap_or(0), left: pushed_count(limit, "LIMIT", cx)? })
    }

    /// Every result wanted has been given.
    pub(super) fn is_full(&self) -> bool {
        self.left == Some(0)
    }

    /// How many entries to read next, when reads otherwise come `chunk` at a time: no more than the page still
    /// needs, and, while skipping (skipped entries need no document), in the largest chunks.
    pub(super) fn want(&self, chunk: usize) -> usize {
        let cap = if self.skip > 0 { SCAN_CHUNK_MAX } else { chunk };
        self.left.map_or(cap, |left| (self.skip + left).clamp(1, cap))
    }

    /// `items` without those still to skip at its front and those past the limit at its end.
    pub(super) fn apply<T>(&mut self, mut items: Vec<T>) -> Vec<T> {
        let skipped = self.skip.min(items.len());
        self.skip -= skipped;
        items.drain(..skipped);
        if let Some(left) = self.left.as_mut() {
            items.truncate(*left);
            *left -= items.len();
        }
        items
    }
}

pub(super) fn build<'p>(node: &'p Node, base: &Row) -> Box<dyn Op + 'p> {
    match node {
        Node::KeyScan { ks, slot, keys, distinct } => {
            Box::new(KeyScan { ks, slot: *slot, keys, distinct: *distinct, base: base.clone(), pending: None })
        }
        Node::PrimaryScan { ks, slot, index, spans, reverse, offset, limit } => Box::new(PrimaryScan {
            ks,
            slot: *slot,
            index,
            spans,
            reverse: *reverse,
            offset: offset.as_ref(),
            limit: limit.as_ref(),
            page: Page::default(),
            base: base.clone(),
            state: ScanState::Start,
            ready: Ready::new(),
            chunk: SCAN_CHUNK_MIN,
        }),
        Node::IndexScan(plan) => Box::new(super::index_scan::IndexScan::new(plan, base)),
        Node::UnionScan { ks, slot, scans } => Box::new(super::union_scan::UnionScan::new(ks, *slot, scans, base)),
        Node::IndexCountScan { scan, slot } => Box::new(super::index_scan::IndexCountScan::new(scan, *slot, base)),
        Node::CountScan { ks, slot } => Box::new(CountScan { ks, slot: *slot, base: Some(base.clone()) }),
        Node::SystemScan { which, slot } => {
            Box::new(SystemScan { which: *which, slot: *slot, base: base.clone(), rows: None })
        }
        Node::ExprScan { expr, slot } => Box::new(ExprScan { expr, slot: *slot, base: base.clone(), items: None }),
        Node::SubqueryScan { plan, slot } => {
            Box::new(SubqueryScan { plan, slot: *slot, base: base.clone(), input: None })
        }
        _ => unreachable!("scan::build is called for scan nodes only"),
    }
}

/// A row holding `doc` in `slot`.
pub(crate) fn doc_row(base: &Row, slot: Slot, ks: &KeyspaceHandle, doc: crate::datastore::Document) -> Row {
    let mut row = base.clone();
    let meta = RowMeta { id: doc.key, meta: doc.meta, keyspace: Arc::from(ks.name.display_path()) };
    row.set_doc(slot, doc.value, Some(Arc::new(meta)));
    row
}

/// Fetches `keys` (in batches) and queues a row per document found.
pub(crate) fn fetch_rows(
    ks: &KeyspaceHandle,
    keys: &[Arc<str>],
    base: &Row,
    slot: Slot,
    cx: &Cx<'_>,
    out: &mut Ready,
) -> Result<(), QueryError> {
    for batch in keys.chunks(FETCH_BATCH_MAX) {
        cx.check()?;
        for doc in ks.keyspace.fetch(batch)?.into_iter().flatten() {
            out.push_back(doc_row(base, slot, ks, doc));
        }
    }
    Ok(())
}

struct KeyScan<'p> {
    ks: &'p KeyspaceHandle,
    slot: Slot,
    keys: &'p CExpr,
    distinct: bool,
    base: Row,
    pending: Option<(Vec<Arc<str>>, usize, Ready)>,
}

impl Op for KeyScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.pending.is_none() {
            let mut keys = keys_of(&eval(self.keys, &mut self.base.clone(), cx)?);
            if self.distinct {
                let mut seen = std::collections::HashSet::new();
                keys.retain(|k| seen.insert(k.clone()));
            }
            self.pending = Some((keys, 0, Ready::new()));
        }
        let Some((keys, done, ready)) = &mut self.pending else { return Ok(None) };
        loop {
            if let Some(row) = ready.pop_front() {
                return Ok(Some(row));
            }
            if *done >= keys.len() {
                return Ok(None);
            }
            let end = (*done + FETCH_BATCH_MAX).min(keys.len());
            fetch_rows(self.ks, &keys[*done..end], &self.base, self.slot, cx, ready)?;
            *done = end;
        }
    }
}

enum ScanState {
    Start,
    Range(ScanRange, Option<IndexEntry>),
    Keys(Vec<Arc<str>>, usize),
    Done,
}

struct PrimaryScan<'p> {
    ks: &'p KeyspaceHandle,
    slot: Slot,
    index: &'p Arc<str>,
    spans: &'p IdSpans,
    reverse: bool,
    offset: Option<&'p crate::plan::Pushed>,
    limit: Option<&'p crate::plan::Pushed>,
    /// The pushed OFFSET and LIMIT, in ids.
    page: Page,
    base: Row,
    state: ScanState,
    ready: Ready,
    chunk: usize,
}

/// Waits once per (keyspace, index) for the request's scan consistency.
pub(crate) fn wait_consistent(ks: &KeyspaceHandle, index: &Arc<str>, cx: &Cx<'_>) -> Result<(), QueryError> {
    if cx.consistency == crate::datastore::Consistency::NotBounded {
        return Ok(());
    }
    let key = (ks.name.clone(), index.clone());
    if cx.waited.borrow().contains(&key) {
        return Ok(());
    }
    ks.keyspace.wait_for(index, &cx.consistency, cx.scan_deadline_nanos)?;
    cx.waited.borrow_mut().push(key);
    Ok(())
}

impl PrimaryScan<'_> {
    fn start(&mut self, cx: &Cx<'_>) -> Result<ScanState, QueryError> {
        self.page = Page::of(self.offset, self.limit, cx)?;
        let mut row = self.base.clone();
        Ok(match self.spans {
            IdSpans::All => ScanState::Range(ScanRange { reverse: self.reverse, ..ScanRange::all() }, None),
            IdSpans::Keys { expr, array } => {
                let v = eval(expr, &mut row, cx)?;
                let mut keys =
                    if *array { keys_of(&v) } else { v.as_str().map(|s| vec![Arc::from(s)]).unwrap_or_default() };
                keys.sort();
                keys.dedup();
                if self.reverse {
                    keys.reverse();
                }
                ScanState::Keys(keys, 0)
            }
            IdSpans::Range { low, high } => {
                let bound = |b: &Option<crate::plan::SpanBound>, row: &mut Row| -> Result<Bound, QueryError> {
                    Ok(match b {
                        None => Bound::Unbounded,
                        Some(b) => {
                            let v = eval(&b.expr, row, cx)?;
                            if v.is_unknown() {
                                // `id < NULL` selects nothing.
                                return Ok(Bound::Excluded(vec![Value::Missing]));
                            }
                            if b.inclusive {
                                Bound::Included(vec![v])
                            } else {
                                Bound::Excluded(vec![v])
                            }
                        }
                    })
                };
                let span = Span { low: bound(low, &mut row)?, high: bound(high, &mut row)? };
                ScanState::Range(ScanRange { spans: vec![span], reverse: self.reverse }, None)
            }
        })
    }
}

impl Op for PrimaryScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            // Checked per row, not per chunk: a timed-out request must not hand out thousands of buffered rows.
            cx.check()?;
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            match &mut self.state {
                ScanState::Start => {
                    wait_consistent(self.ks, self.index, cx)?;
                    self.state = self.start(cx)?;
                }
                ScanState::Done => return Ok(None),
                ScanState::Keys(keys, done) => {
                    if *done >= keys.len() {
                        self.state = ScanState::Done;
                        continue;
                    }
                    let end = (*done + self.chunk).min(keys.len());
                    fetch_rows(self.ks, &keys[*done..end], &self.base, self.slot, cx, &mut self.ready)?;
                    *done = end;
                    self.chunk = (self.chunk * 2).min(SCAN_CHUNK_MAX);
                }
                ScanState::Range(range, after) => {
                    if self.page.is_full() {
                        self.state = ScanState::Done;
                        continue;
                    }
                    let want = self.page.want(self.chunk);
                    let entries = self.ks.keyspace.scan(self.index, range, after.as_ref(), want)?;
                    let finished = entries.len() < want;
                    *after = entries.last().cloned();
                    let keys: Vec<Arc<str>> = self.page.apply(entries.into_iter().map(|e| e.doc_id).collect());
                    fetch_rows(self.ks, &keys, &self.base, self.slot, cx, &mut self.ready)?;
                    if !keys.is_empty() {
                        self.chunk = (self.chunk * 2).min(SCAN_CHUNK_MAX);
                    }
                    if finished {
                        self.state = ScanState::Done;
                    }
                }
            }
        }
    }
}

struct CountScan<'p> {
    ks: &'p KeyspaceHandle,
    slot: Slot,
    base: Option<Row>,
}

impl Op for CountScan<'_> {
    fn next(&mut self, _cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        let Some(mut row) = self.base.take() else { return Ok(None) };
        let n = self.ks.keyspace.count()?;
        row.set(self.slot, Value::int(n as i64));
        Ok(Some(row))
    }
}

struct SystemScan {
    which: SystemKeyspace,
    slot: Slot,
    base: Row,
    rows: Option<std::vec::IntoIter<(Arc<str>, Value)>>,
}

impl Op for SystemScan {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.rows.is_none() {
            self.rows = Some(crate::exec::system::rows(self.which, cx)?.into_iter());
        }
        let Some((key, value)) = self.rows.as_mut().and_then(Iterator::next) else { return Ok(None) };
        let mut row = self.base.clone();
        let meta = RowMeta {
            id: key,
            meta: crate::datastore::DocMeta { is_json: true, ..Default::default() },
            keyspace: Arc::from(format!("system:{}", self.which.name())),
        };
        row.set_doc(self.slot, value, Some(Arc::new(meta)));
        Ok(Some(row))
    }
}

struct ExprScan<'p> {
    expr: &'p CExpr,
    slot: Slot,
    base: Row,
    items: Option<std::vec::IntoIter<Value>>,
}

impl Op for ExprScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.items.is_none() {
            let v = eval(self.expr, &mut self.base.clone(), cx)?;
            let items = match v {
                Value::Array(a) => a.iter().cloned().collect(),
                Value::Missing | Value::Null => Vec::new(),
                v => vec![v],
            };
            self.items = Some(items.into_iter());
        }
        cx.check()?;
        let Some(v) = self.items.as_mut().and_then(Iterator::next) else { return Ok(None) };
        let mut row = self.base.clone();
        row.set(self.slot, v);
        Ok(Some(row))
    }
}

struct SubqueryScan<'p> {
    plan: &'p Plan,
    slot: Slot,
    base: Row,
    input: Option<Box<dyn Op + 'p>>,
}

impl Op for SubqueryScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.input.is_none() {
            self.input = Some(build_op(&self.plan.root, &self.base));
        }
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        while let Some(r) = input.next(cx)? {
            let v = r.get(self.plan.out).clone();
            if v.is_missing() {
                continue;
            }
            let mut row = self.base.clone();
            row.set(self.slot, v);
            return Ok(Some(row));
        }
        Ok(None)
    }
}
