//! Joins, nests and unnests.
//!
//! A lookup join fetches the right-side documents named by an expression over the left row (`ON KEYS`). Every
//! other join runs its right side once per left row, built with the left row as its base, so the right side's
//! rows already carry the left side's values; a right side that has a `META().id = <left expression>` condition
//! was turned into a key lookup by the planner.

use super::scan::fetch_rows;
use super::{build as build_op, Op, Ready};
use crate::exec::eval::{eval, keys_of};
use crate::exec::{Cx, Row};
use crate::plan::{CExpr, KeyspaceHandle, Node, Slot};
use crate::value::Value;
use crate::QueryError;

pub(super) fn build<'p>(node: &'p Node, base: &Row) -> Box<dyn Op + 'p> {
    match node {
        Node::LookupJoin { input, ks, slot, keys, outer, nest } => Box::new(LookupJoin {
            input: build_op(input, base),
            ks,
            slot: *slot,
            keys,
            outer: *outer,
            nest: *nest,
            ready: Ready::new(),
        }),
        Node::NestedLoopJoin { input, right, on, outer, right_slots } => Box::new(NestedLoopJoin {
            input: build_op(input, base),
            right,
            on: on.as_ref(),
            outer: *outer,
            right_slots,
            current: None,
        }),
        Node::NestedLoopNest { input, right, on, outer, right_slot, slot } => Box::new(NestedLoopNest {
            input: build_op(input, base),
            right,
            on,
            outer: *outer,
            right_slot: *right_slot,
            slot: *slot,
        }),
        Node::Unnest { input, expr, slot, outer } => {
            Box::new(Unnest { input: build_op(input, base), expr, slot: *slot, outer: *outer, ready: Ready::new() })
        }
        _ => unreachable!("join::build is called for join nodes only"),
    }
}

struct LookupJoin<'p> {
    input: Box<dyn Op + 'p>,
    ks: &'p KeyspaceHandle,
    slot: Slot,
    keys: &'p CExpr,
    outer: bool,
    nest: bool,
    ready: Ready,
}

impl Op for LookupJoin<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            let Some(mut left) = self.input.next(cx)? else { return Ok(None) };
            let keys = keys_of(&eval(self.keys, &mut left, cx)?);
            let mut found = Ready::new();
            fetch_rows(self.ks, &keys, &left, self.slot, cx, &mut found)?;
            if self.nest {
                let docs: Vec<Value> = found.iter().map(|r| r.get(self.slot).clone()).collect();
                if docs.is_empty() && !self.outer {
                    continue;
                }
                // An outer nest that looked keys up and found none gives an empty array; one with no key to look
                // up leaves the alias MISSING (Couchbase's joinBase.nestEntries).
                let nested = if docs.is_empty() && keys.is_empty() { Value::Missing } else { Value::array(docs) };
                let mut row = left;
                row.set(self.slot, nested);
                self.ready.push_back(row);
            } else if found.is_empty() {
                if self.outer {
                    self.ready.push_back(left);
                }
            } else {
                self.ready.extend(found);
            }
        }
    }
}

struct NestedLoopJoin<'p> {
    input: Box<dyn Op + 'p>,
    right: &'p Node,
    on: Option<&'p CExpr>,
    outer: bool,
    right_slots: &'p [Slot],
    /// The left row being joined, its right side, and whether it matched anything yet.
    current: Option<(Row, Box<dyn Op + 'p>, bool)>,
}

impl Op for NestedLoopJoin<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            if self.current.is_none() {
                let Some(left) = self.input.next(cx)? else { return Ok(None) };
                let right = build_op(self.right, &left);
                self.current = Some((left, right, false));
            }
            let Some((_, right, matched)) = &mut self.current else { continue };
            match right.next(cx)? {
                Some(mut row) => {
                    cx.check()?;
                    let keep = match self.on {
                        Some(on) => eval(on, &mut row, cx)?.truth(),
                        None => true,
                    };
                    if keep {
                        *matched = true;
                        return Ok(Some(row));
                    }
                }
                None => {
                    let (mut left, _, matched) = self.current.take().expect("checked above");
                    if !matched && self.outer {
                        for s in self.right_slots {
                            left.set_doc(*s, Value::Missing, None);
                        }
                        return Ok(Some(left));
                    }
                }
            }
        }
    }
}

struct NestedLoopNest<'p> {
    input: Box<dyn Op + 'p>,
    right: &'p Node,
    on: &'p CExpr,
    outer: bool,
    right_slot: Slot,
    slot: Slot,
}

impl Op for NestedLoopNest<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        while let Some(mut left) = self.input.next(cx)? {
            let mut right = build_op(self.right, &left);
            let mut docs = Vec::new();
            let mut held = 0;
            while let Some(mut row) = right.next(cx)? {
                cx.check()?;
                if eval(self.on, &mut row, cx)?.truth() {
                    let v = row.get(self.right_slot).clone();
                    held += v.size_estimate();
                    cx.memory.charge(v.size_estimate())?;
                    docs.push(v);
                }
            }
            cx.memory.release(held);
            if docs.is_empty() && !self.outer {
                continue;
            }
            // An outer ANSI nest without matches gives an empty array (Couchbase's processAnsiNest).
            left.set_doc(self.slot, Value::array(docs), None);
            return Ok(Some(left));
        }
        Ok(None)
    }
}

struct Unnest<'p> {
    input: Box<dyn Op + 'p>,
    expr: &'p CExpr,
    slot: Slot,
    outer: bool,
    ready: Ready,
}

impl Op for Unnest<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            let Some(mut row) = self.input.next(cx)? else { return Ok(None) };
            match eval(self.expr, &mut row, cx)? {
                Value::Array(items) if !items.is_empty() => {
                    for item in items.iter() {
                        // MISSING elements produce no row.
                        if item.is_missing() {
                            continue;
                        }
                        let mut r = row.clone();
                        r.set(self.slot, item.clone());
                        self.ready.push_back(r);
                    }
                }
                _ if self.outer => {
                    row.set(self.slot, Value::Missing);
                    self.ready.push_back(row);
                }
                _ => {}
            }
        }
    }
}
