//! Operators that must see their input before they can answer: GROUP BY, DISTINCT, ORDER BY and the set
//! operations. What they hold is charged to the request's memory quota.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use super::{build as build_op, Op};
use crate::ast::SetOp as SetOpKind;
use crate::exec::aggregate::AggState;
use crate::exec::eval::{count_value, eval};
use crate::exec::{Cx, Row};
use crate::plan::{AggSpec, CExpr, Node, Slot, SortTerm};
use crate::value::{collate, Value};
use crate::QueryError;

/// A row's bytes, roughly: its values plus a fixed overhead.
fn row_size(row: &Row) -> usize {
    64 + row.vals.iter().map(Value::size_estimate).sum::<usize>()
}

pub(super) fn build<'p>(node: &'p Node, base: &Row) -> Box<dyn Op + 'p> {
    match node {
        Node::Group { input, keys, aggs } => {
            Box::new(Group { input: build_op(input, base), keys, aggs, base: base.clone(), output: None })
        }
        Node::Distinct { input, out } => {
            Box::new(Distinct { input: build_op(input, base), out: *out, seen: HashSet::new() })
        }
        Node::Order { input, terms, limit } => {
            Box::new(Order { input: build_op(input, base), terms, limit: limit.as_ref(), output: None })
        }
        Node::SetOp { op, all, left, left_out, right, right_out, out } => Box::new(SetOp {
            op: *op,
            all: *all,
            left: build_op(left, base),
            left_out: *left_out,
            right: Some(build_op(right, base)),
            right_out: *right_out,
            out: *out,
            counts: HashMap::new(),
            seen: HashSet::new(),
            left_done: false,
        }),
        _ => unreachable!("blocking::build is called for blocking nodes only"),
    }
}

struct Group<'p> {
    input: Box<dyn Op + 'p>,
    keys: &'p [(CExpr, Option<Slot>)],
    aggs: &'p [AggSpec],
    base: Row,
    output: Option<std::vec::IntoIter<Row>>,
}

impl Group<'_> {
    fn collect(&mut self, cx: &Cx<'_>) -> Result<Vec<Row>, QueryError> {
        let mut index: HashMap<Vec<Value>, usize> = HashMap::new();
        let mut groups: Vec<(Vec<Value>, Row, Vec<AggState>)> = Vec::new();
        let new_states = || self.aggs.iter().map(|a| AggState::new(a.func, a.distinct)).collect::<Vec<_>>();
        while let Some(mut row) = self.input.next(cx)? {
            cx.check()?;
            let mut key = Vec::with_capacity(self.keys.len());
            for (k, _) in self.keys {
                key.push(eval(k, &mut row, cx)?);
            }
            let mut args = Vec::with_capacity(self.aggs.len());
            for a in self.aggs {
                args.push(a.arg.as_ref().map(|e| eval(e, &mut row, cx)).transpose()?);
            }
            let i = match index.get(&key) {
                Some(&i) => i,
                None => {
                    cx.memory.charge(row_size(&row) + key.iter().map(Value::size_estimate).sum::<usize>())?;
                    index.insert(key.clone(), groups.len());
                    groups.push((key, row, new_states()));
                    groups.len() - 1
                }
            };
            for (state, arg) in groups[i].2.iter_mut().zip(args) {
                cx.memory.charge(state.add(arg))?;
            }
        }
        if groups.is_empty() && self.keys.is_empty() {
            // Aggregates over no rows still give one row (COUNT 0, SUM NULL ...).
            groups.push((Vec::new(), self.base.clone(), new_states()));
        }
        Ok(groups
            .into_iter()
            .map(|(key, mut row, states)| {
                for ((_, alias), v) in self.keys.iter().zip(key) {
                    if let Some(slot) = alias {
                        row.set(*slot, v);
                    }
                }
                for (spec, state) in self.aggs.iter().zip(states) {
                    row.set(spec.slot, state.result());
                }
                row
            })
            .collect())
    }
}

impl Op for Group<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.output.is_none() {
            self.output = Some(self.collect(cx)?.into_iter());
        }
        Ok(self.output.as_mut().and_then(Iterator::next))
    }
}

struct Distinct<'p> {
    input: Box<dyn Op + 'p>,
    out: Slot,
    seen: HashSet<Value>,
}

impl Op for Distinct<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        while let Some(row) = self.input.next(cx)? {
            let v = row.get(self.out);
            if self.seen.contains(v) {
                cx.check()?;
                continue;
            }
            cx.memory.charge(v.size_estimate())?;
            self.seen.insert(v.clone());
            return Ok(Some(row));
        }
        Ok(None)
    }
}

/// Compares two rows' sort keys.
fn compare_keys(terms: &[SortTerm], a: &[Value], b: &[Value]) -> Ordering {
    for (t, (x, y)) in terms.iter().zip(a.iter().zip(b)) {
        let (ux, uy) = (x.is_unknown(), y.is_unknown());
        let o = if ux != uy {
            // Exactly one is MISSING or NULL: it goes where NULLS FIRST/LAST says.
            if ux == t.nulls_first {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        } else {
            let o = collate(x, y);
            if t.desc {
                o.reverse()
            } else {
                o
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

struct Order<'p> {
    input: Box<dyn Op + 'p>,
    terms: &'p [SortTerm],
    limit: Option<&'p (Option<CExpr>, CExpr)>,
    output: Option<std::vec::IntoIter<(Vec<Value>, Row)>>,
}

impl Order<'_> {
    fn collect(&mut self, cx: &Cx<'_>) -> Result<Vec<(Vec<Value>, Row)>, QueryError> {
        // With LIMIT (and OFFSET) only the first offset + limit rows matter: keep at most twice that.
        let keep = match self.limit {
            Some((offset, limit)) => {
                let mut empty = Row::default();
                let off = offset.as_ref().map(|o| eval(o, &mut empty, cx)).transpose()?;
                let off = off.map(|v| count_value(&v, "OFFSET")).transpose()?.unwrap_or(0);
                let lim = count_value(&eval(limit, &mut empty, cx)?, "LIMIT")?;
                Some(off.saturating_add(lim))
            }
            None => None,
        };
        let mut rows: Vec<(Vec<Value>, Row)> = Vec::new();
        let mut held = 0usize;
        while let Some(mut row) = self.input.next(cx)? {
            cx.check()?;
            let mut key = Vec::with_capacity(self.terms.len());
            for t in self.terms {
                key.push(eval(&t.expr, &mut row, cx)?);
            }
            let size = row_size(&row);
            cx.memory.charge(size)?;
            held += size;
            rows.push((key, row));
            if let Some(k) = keep {
                if rows.len() > k.saturating_mul(2).max(1024) {
                    rows.sort_by(|a, b| compare_keys(self.terms, &a.0, &b.0));
                    for (_, r) in rows.drain(k..) {
                        let s = row_size(&r);
                        held -= s;
                        cx.memory.release(s);
                    }
                }
            }
        }
        rows.sort_by(|a, b| compare_keys(self.terms, &a.0, &b.0));
        if let Some(k) = keep {
            rows.truncate(k);
        }
        cx.stats.sorts.set(cx.stats.sorts.get() + rows.len() as u64);
        let _ = held;
        Ok(rows)
    }
}

impl Op for Order<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.output.is_none() {
            self.output = Some(self.collect(cx)?.into_iter());
        }
        Ok(self.output.as_mut().and_then(Iterator::next).map(|(_, r)| r))
    }
}

struct SetOp<'p> {
    op: SetOpKind,
    all: bool,
    left: Box<dyn Op + 'p>,
    left_out: Slot,
    right: Option<Box<dyn Op + 'p>>,
    right_out: Slot,
    out: Slot,
    /// INTERSECT / EXCEPT: how many times each right-side value occurs.
    counts: HashMap<Value, usize>,
    /// UNION and the distinct forms: values already emitted.
    seen: HashSet<Value>,
    left_done: bool,
}

impl SetOp<'_> {
    fn emit(&mut self, mut row: Row, v: Value, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if !self.all {
            if self.seen.contains(&v) {
                return Ok(None);
            }
            cx.memory.charge(v.size_estimate())?;
            self.seen.insert(v.clone());
        }
        row.set(self.out, v);
        Ok(Some(row))
    }

    fn load_right(&mut self, cx: &Cx<'_>) -> Result<(), QueryError> {
        if let Some(mut right) = self.right.take() {
            while let Some(row) = right.next(cx)? {
                let v = row.get(self.right_out).clone();
                cx.memory.charge(v.size_estimate())?;
                *self.counts.entry(v).or_insert(0) += 1;
            }
        }
        Ok(())
    }
}

impl Op for SetOp<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.op != SetOpKind::Union {
            self.load_right(cx)?;
        }
        loop {
            cx.check()?;
            if !self.left_done {
                let Some(row) = self.left.next(cx)? else {
                    self.left_done = true;
                    continue;
                };
                let v = row.get(self.left_out).clone();
                if v.is_missing() {
                    continue;
                }
                let pass = match self.op {
                    SetOpKind::Union => true,
                    SetOpKind::Intersect | SetOpKind::Except => {
                        let in_right = match self.counts.get_mut(&v) {
                            Some(n) if *n > 0 => {
                                if self.all {
                                    *n -= 1;
                                }
                                true
                            }
                            _ => false,
                        };
                        in_right == (self.op == SetOpKind::Intersect)
                    }
                };
                if pass {
                    if let Some(r) = self.emit(row, v, cx)? {
                        return Ok(Some(r));
                    }
                }
                continue;
            }
            // UNION: then the right side.
            let Some(right) = self.right.as_mut() else { return Ok(None) };
            let Some(row) = right.next(cx)? else {
                self.right = None;
                return Ok(None);
            };
            let v = row.get(self.right_out).clone();
            if v.is_missing() {
                continue;
            }
            if let Some(r) = self.emit(row, v, cx)? {
                return Ok(Some(r));
            }
        }
    }
}
