//! Primary-index spans from `META(alias).id` predicates: `= x` and `IN [...]` read those keys only, `<`, `<=`,
//! `>`, `>=`, `BETWEEN` and `LIKE 'prefix%'` a range. The WHERE clause still filters every row, so a span only
//! has to cover the rows that can pass, never to match exactly.

use std::sync::Arc;

use super::{CExpr, IdSpans, Node, Slot, SpanBound};
use crate::ast::BinaryOp;
use crate::value::Value;

/// Narrows a full primary scan with what `cond` says about the scanned document's id.
pub(crate) fn choose_primary_spans(node: Node, cond: &CExpr) -> Node {
    let Node::PrimaryScan { ks, slot, index, spans: IdSpans::All, reverse, offset, limit } = node else {
        return node;
    };
    let mut conjuncts = Vec::new();
    flatten_and(cond, &mut conjuncts);
    let mut low: Option<SpanBound> = None;
    let mut high: Option<SpanBound> = None;
    for c in conjuncts {
        if let Some(spans) = keys_span(c, slot) {
            return Node::PrimaryScan { ks, slot, index, spans, reverse, offset, limit };
        }
        if let Some((l, h)) = range_span(c, slot) {
            low = low.or(l);
            high = high.or(h);
        }
    }
    let spans = if low.is_some() || high.is_some() { IdSpans::Range { low, high } } else { IdSpans::All };
    Node::PrimaryScan { ks, slot, index, spans, reverse, offset, limit }
}

fn flatten_and<'a>(e: &'a CExpr, out: &mut Vec<&'a CExpr>) {
    match e {
        CExpr::And(xs) => xs.iter().for_each(|x| flatten_and(x, out)),
        e => out.push(e),
    }
}

fn is_id(e: &CExpr, slot: Slot) -> bool {
    matches!(e, CExpr::Field(base, name) if &**name == "id" && matches!(**base, CExpr::Meta(s) if s == slot))
}

/// Whether `e` has the same value for every row (constants and parameters).
fn row_independent(e: &CExpr) -> bool {
    match e {
        CExpr::Const(_) | CExpr::Named(_) | CExpr::Positional(_) => true,
        CExpr::Neg(x) => row_independent(x),
        CExpr::Array(xs) => xs.iter().all(row_independent),
        CExpr::Binary(op, a, b) if matches!(op, BinaryOp::Concat) => row_independent(a) && row_independent(b),
        CExpr::Call(def, args) => def.deterministic && args.iter().all(row_independent),
        _ => false,
    }
}

fn keys_span(c: &CExpr, slot: Slot) -> Option<IdSpans> {
    match c {
        CExpr::Binary(BinaryOp::Eq, a, b) => {
            let other = if is_id(a, slot) {
                b
            } else if is_id(b, slot) {
                a
            } else {
                return None;
            };
            row_independent(other).then(|| IdSpans::Keys { expr: (**other).clone(), array: false })
        }
        CExpr::In { expr, list, negated: false } if is_id(expr, slot) && row_independent(list) => {
            Some(IdSpans::Keys { expr: (**list).clone(), array: true })
        }
        _ => None,
    }
}

type Range = (Option<SpanBound>, Option<SpanBound>);

fn range_span(c: &CExpr, slot: Slot) -> Option<Range> {
    let bound = |e: &CExpr, inclusive| SpanBound { expr: e.clone(), inclusive };
    match c {
        CExpr::Binary(op @ (BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge), a, b) => {
            // Normalise to `id op value`.
            let (op, value) = if is_id(a, slot) && row_independent(b) {
                (*op, &**b)
            } else if is_id(b, slot) && row_independent(a) {
                (flip(*op), &**a)
            } else {
                return None;
            };
            Some(match op {
                BinaryOp::Lt => (None, Some(bound(value, false))),
                BinaryOp::Le => (None, Some(bound(value, true))),
                BinaryOp::Gt => (Some(bound(value, false)), None),
                _ => (Some(bound(value, true)), None),
            })
        }
        CExpr::Between { expr, low, high, negated: false }
            if is_id(expr, slot) && row_independent(low) && row_independent(high) =>
        {
            Some((Some(bound(low, true)), Some(bound(high, true))))
        }
        CExpr::Like { expr, pattern, escape: None, negated: false } if is_id(expr, slot) => {
            let CExpr::Const(Value::String(p)) = &**pattern else { return None };
            let prefix: String = p.chars().take_while(|ch| *ch != '%' && *ch != '_' && *ch != '\\').collect();
            if prefix.is_empty() {
                return None;
            }
            let low = SpanBound { expr: CExpr::Const(Value::String(Arc::from(prefix.as_str()))), inclusive: true };
            let high = successor(&prefix).map(|s| SpanBound { expr: CExpr::Const(Value::from(s)), inclusive: false });
            Some((Some(low), high))
        }
        _ => None,
    }
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}

/// The smallest string greater than every string starting with `prefix` (by bytes), if one exists.
pub(crate) fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = char::from_u32(last as u32 + 1) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}
