//! Operators: each pulls rows from its input and hands rows on, one at a time.

mod blocking;
mod index_scan;
mod join;
mod scan;
mod union_scan;

use std::collections::VecDeque;

use super::eval::{count_value, eval};
use super::{Cx, Row};
use crate::plan::{CExpr, Node, Plan, ProjTerm, Slot};
use crate::value::{Object, Value};
use crate::QueryError;

/// A pull-based operator.
pub trait Op {
    /// The next row, or `None` when there are no more.
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError>;
}

/// Builds the operator tree of `node`; rows it creates start as copies of `base` (which holds the outer row of a
/// correlated subquery or the left row of a nested-loop join).
pub fn build<'p>(node: &'p Node, base: &Row) -> Box<dyn Op + 'p> {
    match node {
        Node::Dummy => Box::new(Dummy { row: Some(base.clone()) }),
        Node::KeyScan { .. }
        | Node::PrimaryScan { .. }
        | Node::IndexScan(_)
        | Node::UnionScan { .. }
        | Node::IndexCountScan { .. }
        | Node::CountScan { .. }
        | Node::SystemScan { .. }
        | Node::ExprScan { .. }
        | Node::SubqueryScan { .. } => scan::build(node, base),
        Node::LookupJoin { .. } | Node::NestedLoopJoin { .. } | Node::NestedLoopNest { .. } | Node::Unnest { .. } => {
            join::build(node, base)
        }
        Node::Let { input, bindings } => Box::new(Let { input: build(input, base), bindings }),
        Node::With { input, bindings } => Box::new(With { node: input, bindings, base: base.clone(), input: None }),
        Node::Filter { input, cond } => Box::new(Filter { input: build(input, base), cond }),
        Node::Project { input, terms, raw, out } => {
            Box::new(Project { input: build(input, base), terms, raw: *raw, out: *out })
        }
        Node::Offset { input, n } => Box::new(Offset { input: build(input, base), n, skip: None }),
        Node::Limit { input, n } => Box::new(Limit { input: build(input, base), n, left: None }),
        Node::Group { .. } | Node::Distinct { .. } | Node::Order { .. } | Node::SetOp { .. } => {
            blocking::build(node, base)
        }
        Node::Dml(d) => super::dml::build(d, base),
        Node::PendingScan { error, .. } => Box::new(Failed { error: Some(error.clone()) }),
    }
}

/// A scan the planner could not serve (it refuses such statements; this only guards against a plan that slips
/// through): the first row read fails with the planner's error.
struct Failed {
    error: Option<QueryError>,
}

impl Op for Failed {
    fn next(&mut self, _: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }
}

struct Dummy {
    row: Option<Row>,
}

impl Op for Dummy {
    fn next(&mut self, _: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        Ok(self.row.take())
    }
}

struct Let<'p> {
    input: Box<dyn Op + 'p>,
    bindings: &'p [(Slot, CExpr)],
}

impl Op for Let<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        let Some(mut row) = self.input.next(cx)? else { return Ok(None) };
        for (slot, e) in self.bindings {
            let v = eval(e, &mut row, cx)?;
            row.set(*slot, v);
        }
        Ok(Some(row))
    }
}

/// WITH: the bindings are computed once, into the base every later row starts from.
struct With<'p> {
    node: &'p Node,
    bindings: &'p [(Slot, CExpr)],
    base: Row,
    input: Option<Box<dyn Op + 'p>>,
}

impl Op for With<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.input.is_none() {
            let mut base = self.base.clone();
            for (slot, e) in self.bindings {
                let v = eval(e, &mut base, cx)?;
                base.set(*slot, v);
            }
            self.input = Some(build(self.node, &base));
        }
        match &mut self.input {
            Some(input) => input.next(cx),
            None => Ok(None),
        }
    }
}

struct Filter<'p> {
    input: Box<dyn Op + 'p>,
    cond: &'p CExpr,
}

impl Op for Filter<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        while let Some(mut row) = self.input.next(cx)? {
            if eval(self.cond, &mut row, cx)?.truth() {
                return Ok(Some(row));
            }
            cx.check()?;
        }
        Ok(None)
    }
}

struct Project<'p> {
    input: Box<dyn Op + 'p>,
    terms: &'p [ProjTerm],
    raw: bool,
    out: Slot,
}

impl Op for Project<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        let Some(mut row) = self.input.next(cx)? else { return Ok(None) };
        let v = project(self.terms, self.raw, &mut row, cx)?;
        row.set(self.out, v);
        Ok(Some(row))
    }
}

/// Evaluates projection terms into the row's result value.
pub(crate) fn project(terms: &[ProjTerm], raw: bool, row: &mut Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    if raw {
        return match terms.first() {
            Some(ProjTerm::Named(_, e)) | Some(ProjTerm::ExprStar(e)) => eval(e, row, cx),
            Some(ProjTerm::Star(_)) | None => Ok(Value::Missing),
        };
    }
    let mut o = Object::new();
    for t in terms {
        match t {
            ProjTerm::Star(aliases) => {
                for (name, slot) in aliases {
                    let v = row.get(*slot).clone();
                    if !v.is_missing() {
                        o.insert(name.to_string(), v);
                    }
                }
            }
            ProjTerm::ExprStar(e) => {
                if let Value::Object(members) = eval(e, row, cx)? {
                    for (k, v) in members.iter() {
                        o.insert(k.clone(), v.clone());
                    }
                }
            }
            ProjTerm::Named(name, e) => {
                let v = eval(e, row, cx)?;
                if !v.is_missing() {
                    o.insert(name.to_string(), v);
                }
            }
        }
    }
    Ok(Value::object(o))
}

struct Offset<'p> {
    input: Box<dyn Op + 'p>,
    n: &'p CExpr,
    skip: Option<usize>,
}

impl Op for Offset<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.skip.is_none() {
            let v = eval(self.n, &mut Row::default(), cx)?;
            self.skip = Some(count_value(&v, "OFFSET")?);
        }
        while self.skip.is_some_and(|s| s > 0) {
            if self.input.next(cx)?.is_none() {
                return Ok(None);
            }
            self.skip = self.skip.map(|s| s - 1);
        }
        self.input.next(cx)
    }
}

struct Limit<'p> {
    input: Box<dyn Op + 'p>,
    n: &'p CExpr,
    left: Option<usize>,
}

impl Op for Limit<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.left.is_none() {
            let v = eval(self.n, &mut Row::default(), cx)?;
            self.left = Some(count_value(&v, "LIMIT")?);
        }
        match self.left {
            Some(0) | None => Ok(None),
            Some(n) => {
                self.left = Some(n - 1);
                self.input.next(cx)
            }
        }
    }
}

/// Runs a subquery for `row` and returns its result values as an array; uncorrelated subqueries run once per
/// request.
pub(crate) fn subquery(plan: &Plan, correlated: bool, id: usize, row: &Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    if !correlated {
        if let Some(v) = cx.subquery_cache.borrow().get(&id) {
            return Ok(v.clone());
        }
    }
    let base = if correlated { row.clone() } else { Row::new(row.vals.len()) };
    let mut op = build(&plan.root, &base);
    let mut out = Vec::new();
    let mut held = 0;
    while let Some(r) = op.next(cx)? {
        let v = r.get(plan.out).clone();
        if v.is_missing() {
            continue;
        }
        let size = v.size_estimate();
        held += size;
        cx.memory.charge(size)?;
        out.push(v);
    }
    let v = Value::array(out);
    if correlated {
        cx.memory.release(held);
    } else {
        cx.subquery_cache.borrow_mut().insert(id, v.clone());
    }
    Ok(v)
}

/// A queue of rows an operator has ready.
pub(crate) type Ready = VecDeque<Row>;
