//! Evaluating compiled expressions against a row, with SQL++'s MISSING and NULL rules.
//!
//! Hot path: called per row and per operator. Range variables (ANY, ARRAY ... FOR) are bound by writing their
//! slots in the row itself and restoring them afterwards, so evaluation allocates only for the values it builds.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{like, Cx, Row};
use crate::ast::{ArrayForKind, BinaryOp, IsTest, Quantifier};
use crate::functions::FnKind;
use crate::plan::{CBinding, CExpr};
use crate::value::{compare_for_operator, Object, Value};
use crate::QueryError;

/// Evaluates `e` for `row`.
pub fn eval(e: &CExpr, row: &mut Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    Ok(match e {
        CExpr::Const(v) => v.clone(),
        CExpr::Var(slot) => row.get(*slot).clone(),
        CExpr::Named(name) => match cx.named.get(&**name) {
            Some(v) => v.clone(),
            None => return Err(QueryError::eval(format!("No value for named parameter ${name}."))),
        },
        CExpr::Positional(i) => match i.checked_sub(1).and_then(|i| cx.positional.get(i)) {
            Some(v) => v.clone(),
            None => return Err(QueryError::eval(format!("No value for positional parameter ${i}."))),
        },
        CExpr::Field(base, name) => field(eval(base, row, cx)?, name),
        CExpr::DynField(base, name) => {
            let b = eval(base, row, cx)?;
            match eval(name, row, cx)? {
                Value::String(n) => field(b, &n),
                Value::Missing => Value::Missing,
                _ => Value::Null,
            }
        }
        CExpr::Element(base, index) => {
            let b = eval(base, row, cx)?;
            let i = eval(index, row, cx)?;
            element(b, i)
        }
        CExpr::Slice(base, start, end) => {
            let b = eval(base, row, cx)?;
            let s = eval(start, row, cx)?;
            let e = end.as_deref().map(|e| eval(e, row, cx)).transpose()?;
            slice(b, s, e)
        }
        CExpr::Neg(x) => match eval(x, row, cx)? {
            Value::Number(n) => Value::Number(n.neg()),
            Value::Missing => Value::Missing,
            _ => Value::Null,
        },
        CExpr::Not(x) => match eval(x, row, cx)? {
            v @ (Value::Missing | Value::Null) => v,
            v => Value::Bool(!v.truth()),
        },
        CExpr::Binary(op, a, b) => {
            let a = eval(a, row, cx)?;
            let b = eval(b, row, cx)?;
            binary(*op, &a, &b)
        }
        CExpr::And(xs) => and(xs, row, cx)?,
        CExpr::Or(xs) => or(xs, row, cx)?,
        CExpr::Like { expr, pattern, escape, negated } => {
            let v = eval(expr, row, cx)?;
            let p = eval(pattern, row, cx)?;
            let esc = escape.as_deref().map(|e| eval(e, row, cx)).transpose()?;
            negate(like::like(&v, &p, esc.as_ref())?, *negated)
        }
        CExpr::In { expr, list, negated } => {
            let v = eval(expr, row, cx)?;
            let l = eval(list, row, cx)?;
            negate(in_list(&v, &l), *negated)
        }
        CExpr::Within { expr, target, negated } => {
            let v = eval(expr, row, cx)?;
            let t = eval(target, row, cx)?;
            negate(within(&v, &t), *negated)
        }
        CExpr::Between { expr, low, high, negated } => {
            let v = eval(expr, row, cx)?;
            let lo = eval(low, row, cx)?;
            let hi = eval(high, row, cx)?;
            negate(between(&v, &lo, &hi), *negated)
        }
        CExpr::Is { expr, test, negated } => is(&eval(expr, row, cx)?, *test, *negated),
        CExpr::Case { operand, whens, otherwise } => {
            let subject = operand.as_deref().map(|o| eval(o, row, cx)).transpose()?;
            for (w, t) in whens {
                let wv = eval(w, row, cx)?;
                let hit = match &subject {
                    Some(s) => binary(BinaryOp::Eq, s, &wv).truth(),
                    None => wv.truth(),
                };
                if hit {
                    return eval(t, row, cx);
                }
            }
            match otherwise {
                Some(o) => eval(o, row, cx)?,
                None => Value::Null,
            }
        }
        CExpr::Call(def, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, row, cx)?);
            }
            match def.kind {
                FnKind::Scalar(f) => f(&vals, &cx.fnctx)?,
                _ => return Err(QueryError::internal(format!("{} is not a scalar function", def.name))),
            }
        }
        CExpr::Meta(slot) => match row.metas.get(*slot).and_then(Option::as_ref) {
            Some(m) => m.to_value(),
            None => Value::Missing,
        },
        CExpr::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            // A MISSING element stays MISSING (IN and the array functions see it) and is written as null.
            for i in items {
                out.push(eval(i, row, cx)?);
            }
            Value::array(out)
        }
        CExpr::Object(members) => object(members, row, cx)?,
        CExpr::Quantified { quantifier, bindings, satisfies } => quantified(*quantifier, bindings, satisfies, row, cx)?,
        CExpr::ArrayFor { kind, mapping, bindings, when } => {
            array_for(*kind, mapping, bindings, when.as_deref(), row, cx)?
        }
        CExpr::ObjectFor { name, value, bindings, when } => {
            object_for(name, value, bindings, when.as_deref(), row, cx)?
        }
        CExpr::Subquery { plan, correlated, id } => super::ops::subquery(plan, *correlated, *id, row, cx)?,
        CExpr::Exists(x) => match eval(x, row, cx)? {
            Value::Array(a) => Value::Bool(!a.is_empty()),
            Value::Missing => Value::Bool(false),
            _ => Value::Bool(false),
        },
    })
}

/// An object constructor: a member whose name is MISSING or NULL is left out, and a name of any other type that is
/// not a string makes the whole object NULL (Couchbase's `ObjectConstruct`).
fn object(members: &[(CExpr, CExpr)], row: &mut Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    let mut o = Object::new();
    for (n, v) in members {
        let name = match eval(n, row, cx)? {
            Value::String(name) => name,
            Value::Missing | Value::Null => continue,
            _ => return Ok(Value::Null),
        };
        let value = eval(v, row, cx)?;
        if !value.is_missing() {
            o.insert(name.to_string(), value);
        }
    }
    Ok(Value::object(o))
}

fn field(base: Value, name: &str) -> Value {
    match base {
        Value::Object(o) => o.get(name).cloned().unwrap_or(Value::Missing),
        Value::Missing => Value::Missing,
        _ => Value::Missing,
    }
}

/// `base[index]` (Couchbase's `Element`): a whole number indexes an array (anything else indexed by a number is
/// MISSING); any other index is NULL, so `obj["name"]` does not read a member (that is `obj.["name"]`).
fn element(base: Value, index: Value) -> Value {
    match (&base, &index) {
        (Value::Missing, _) | (_, Value::Missing) => Value::Missing,
        (_, Value::Number(_)) => match index.as_i64() {
            Some(i) => base.element(i),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

fn slice(base: Value, start: Value, end: Option<Value>) -> Value {
    let Value::Array(a) = &base else {
        return if base.is_missing() { Value::Missing } else { Value::Null };
    };
    let len = a.len() as i64;
    let norm = |v: &Value| v.as_i64().map(|i| if i < 0 { len + i } else { i });
    let Some(s) = norm(&start) else { return Value::Null };
    let e = match &end {
        Some(v) => match norm(v) {
            Some(e) => e,
            None => return Value::Null,
        },
        None => len,
    };
    if s < 0 || e > len || s > e {
        return Value::Null;
    }
    Value::array(a[s as usize..e as usize].to_vec())
}

fn negate(v: Value, negated: bool) -> Value {
    match (negated, v) {
        (true, Value::Bool(b)) => Value::Bool(!b),
        (_, v) => v,
    }
}

/// Arithmetic, concatenation and comparison.
pub(crate) fn binary(op: BinaryOp, a: &Value, b: &Value) -> Value {
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
            if a.is_missing() || b.is_missing() {
                return Value::Missing;
            }
            let (Some(x), Some(y)) = (a.as_number(), b.as_number()) else { return Value::Null };
            let r = match op {
                BinaryOp::Add => Some(x.add(y)),
                BinaryOp::Sub => Some(x.sub(y)),
                BinaryOp::Mul => Some(x.mul(y)),
                BinaryOp::Div => x.div(y),
                _ => x.rem(y),
            };
            r.map_or(Value::Null, Value::Number)
        }
        BinaryOp::Concat => match (a, b) {
            (Value::Missing, _) | (_, Value::Missing) => Value::Missing,
            (Value::String(x), Value::String(y)) => {
                let mut s = String::with_capacity(x.len() + y.len());
                s.push_str(x);
                s.push_str(y);
                Value::from(s)
            }
            _ => Value::Null,
        },
        // Equality compares containers element by element: `[null] = [null]` is NULL, as in Couchbase.
        BinaryOp::Eq => crate::functions::sql_eq(a, b),
        BinaryOp::Ne => match crate::functions::sql_eq(a, b) {
            Value::Bool(e) => Value::Bool(!e),
            other => other,
        },
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => match compare_for_operator(a, b) {
            Err(unknown) => unknown,
            Ok(o) => Value::Bool(match op {
                BinaryOp::Lt => o == Ordering::Less,
                BinaryOp::Le => o != Ordering::Greater,
                BinaryOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
        },
    }
}

fn and(xs: &[CExpr], row: &mut Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    let (mut missing, mut null) = (false, false);
    for x in xs {
        match eval(x, row, cx)? {
            Value::Missing => missing = true,
            Value::Null => null = true,
            v if !v.truth() => return Ok(Value::Bool(false)),
            _ => {}
        }
    }
    Ok(if missing {
        Value::Missing
    } else if null {
        Value::Null
    } else {
        Value::Bool(true)
    })
}

/// `v BETWEEN lo AND hi` as Couchbase's `Between`: MISSING when either comparison is MISSING (the low one first),
/// NULL when either is NULL, even if the other already decides (`5 BETWEEN 6 AND NULL` is NULL).
fn between(v: &Value, lo: &Value, hi: &Value) -> Value {
    let low = compare_for_operator(v, lo);
    if let Err(Value::Missing) = low {
        return Value::Missing;
    }
    let high = compare_for_operator(v, hi);
    match (low, high) {
        (_, Err(Value::Missing)) => Value::Missing,
        (Ok(l), Ok(h)) => Value::Bool(l != Ordering::Less && h != Ordering::Greater),
        _ => Value::Null,
    }
}

fn or(xs: &[CExpr], row: &mut Row, cx: &Cx<'_>) -> Result<Value, QueryError> {
    let (mut missing, mut null) = (false, false);
    for x in xs {
        match eval(x, row, cx)? {
            Value::Missing => missing = true,
            Value::Null => null = true,
            v if v.truth() => return Ok(Value::Bool(true)),
            _ => {}
        }
    }
    Ok(if null {
        Value::Null
    } else if missing {
        Value::Missing
    } else {
        Value::Bool(false)
    })
}

fn in_list(v: &Value, list: &Value) -> Value {
    if v.is_missing() || list.is_missing() {
        return Value::Missing;
    }
    let Value::Array(items) = list else { return Value::Null };
    if v.is_null() {
        return if items.is_empty() { Value::Bool(false) } else { Value::Null };
    }
    // Each element is compared with equality (Couchbase's `In` uses `Equals`), so `[1, null]` is not IN
    // `[[1, null]]`; only elements that are themselves MISSING or NULL make the answer unknown.
    let (mut missing, mut null) = (false, false);
    for item in items.iter() {
        match item {
            Value::Missing => missing = true,
            Value::Null => null = true,
            item if crate::functions::sql_eq(v, item).truth() => return Value::Bool(true),
            _ => {}
        }
    }
    if null {
        Value::Null
    } else if missing {
        Value::Missing
    } else {
        Value::Bool(false)
    }
}

fn within(v: &Value, target: &Value) -> Value {
    if v.is_missing() || target.is_missing() {
        return Value::Missing;
    }
    if !matches!(target, Value::Array(_) | Value::Object(_)) {
        return Value::Null;
    }
    let mut descendants = Vec::new();
    collect_descendants(target, &mut descendants);
    let (mut missing, mut null) = (false, false);
    for d in descendants {
        if !v.is_unknown() && !d.is_unknown() {
            if crate::functions::sql_eq(v, &d).truth() {
                return Value::Bool(true);
            }
        } else if d.is_missing() {
            missing = true;
        } else {
            null = true;
        }
    }
    if null {
        Value::Null
    } else if missing {
        Value::Missing
    } else {
        Value::Bool(false)
    }
}

/// Every value nested inside `v` (children first, then their descendants, depth first), not `v` itself.
pub(crate) fn collect_descendants(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Array(items) => {
            for i in items.iter() {
                out.push(i.clone());
                collect_descendants(i, out);
            }
        }
        Value::Object(members) => {
            for m in members.values() {
                out.push(m.clone());
                collect_descendants(m, out);
            }
        }
        _ => {}
    }
}

/// Every (name or position, value) pair nested inside `v`, depth first.
fn collect_descendant_pairs(v: &Value, out: &mut Vec<(Value, Value)>) {
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                out.push((Value::int(i as i64), item.clone()));
                collect_descendant_pairs(item, out);
            }
        }
        Value::Object(members) => {
            for (k, m) in members.iter() {
                out.push((Value::string(k), m.clone()));
                collect_descendant_pairs(m, out);
            }
        }
        _ => {}
    }
}

fn is(v: &Value, test: IsTest, negated: bool) -> Value {
    match (test, negated) {
        (IsTest::Null, false) => match v {
            Value::Null => Value::Bool(true),
            Value::Missing => Value::Missing,
            _ => Value::Bool(false),
        },
        (IsTest::Null, true) => match v {
            Value::Null => Value::Bool(false),
            Value::Missing => Value::Missing,
            _ => Value::Bool(true),
        },
        (IsTest::Missing, n) => Value::Bool(v.is_missing() != n),
        (IsTest::Valued, n) => Value::Bool(!v.is_unknown() != n),
    }
}

/// The element lists the bindings range over, zipped to the shortest; `Err(v)` when the result is MISSING or
/// NULL without iterating.
type Ranges = Vec<Vec<(Value, Value)>>;

fn ranges(bindings: &[CBinding], row: &mut Row, cx: &Cx<'_>) -> Result<Result<(Ranges, usize), Value>, QueryError> {
    let mut out = Vec::with_capacity(bindings.len());
    let mut null = false;
    for b in bindings {
        let v = eval(&b.expr, row, cx)?;
        match &v {
            Value::Missing => return Ok(Err(Value::Missing)),
            Value::Array(_) | Value::Object(_) => {}
            _ => {
                null = true;
                continue;
            }
        }
        let pairs: Vec<(Value, Value)> = if b.within {
            let mut p = Vec::new();
            collect_descendant_pairs(&v, &mut p);
            p
        } else {
            match &v {
                Value::Array(items) => {
                    items.iter().enumerate().map(|(i, x)| (Value::int(i as i64), x.clone())).collect()
                }
                // Without a name variable IN does not range over an object's members.
                Value::Object(members) if b.name_slot.is_some() => {
                    members.iter().map(|(k, x)| (Value::string(k), x.clone())).collect()
                }
                _ => {
                    null = true;
                    continue;
                }
            }
        };
        out.push(pairs);
    }
    if null {
        return Ok(Err(Value::Null));
    }
    let n = out.iter().map(Vec::len).min().unwrap_or(0);
    Ok(Ok((out, n)))
}

/// Binds element `i` of every range, returning the previous slot values to restore.
fn bind(bindings: &[CBinding], ranges: &Ranges, i: usize, row: &mut Row) {
    for (b, r) in bindings.iter().zip(ranges) {
        let (name, value) = &r[i];
        if let Some(ns) = b.name_slot {
            row.set(ns, name.clone());
        }
        row.set(b.slot, value.clone());
    }
}

fn save(bindings: &[CBinding], row: &Row) -> Vec<Value> {
    bindings
        .iter()
        .flat_map(|b| b.name_slot.into_iter().chain(std::iter::once(b.slot)))
        .map(|s| row.get(s).clone())
        .collect()
}

fn restore(bindings: &[CBinding], saved: Vec<Value>, row: &mut Row) {
    let slots = bindings.iter().flat_map(|b| b.name_slot.into_iter().chain(std::iter::once(b.slot)));
    for (s, v) in slots.zip(saved) {
        row.set(s, v);
    }
}

fn with_ranges(
    bindings: &[CBinding],
    row: &mut Row,
    cx: &Cx<'_>,
    mut each: impl FnMut(&mut Row) -> Result<bool, QueryError>,
) -> Result<Result<(), Value>, QueryError> {
    let (ranges, n) = match ranges(bindings, row, cx)? {
        Ok(r) => r,
        Err(v) => return Ok(Err(v)),
    };
    let saved = save(bindings, row);
    let mut result = Ok(Ok(()));
    for i in 0..n {
        bind(bindings, &ranges, i, row);
        match each(row) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    restore(bindings, saved, row);
    result
}

fn quantified(
    q: Quantifier,
    bindings: &[CBinding],
    satisfies: &CExpr,
    row: &mut Row,
    cx: &Cx<'_>,
) -> Result<Value, QueryError> {
    let (mut any, mut all, mut count) = (false, true, 0usize);
    let r = with_ranges(bindings, row, cx, |row| {
        count += 1;
        let t = eval(satisfies, row, cx)?.truth();
        any |= t;
        all &= t;
        // ANY stops at the first true, EVERY at the first false.
        Ok(match q {
            Quantifier::Any => !any,
            Quantifier::Every | Quantifier::AnyAndEvery => all,
        })
    })?;
    if let Err(v) = r {
        return Ok(v);
    }
    Ok(Value::Bool(match q {
        Quantifier::Any => any,
        Quantifier::Every => all,
        Quantifier::AnyAndEvery => count > 0 && all,
    }))
}

fn array_for(
    kind: ArrayForKind,
    mapping: &CExpr,
    bindings: &[CBinding],
    when: Option<&CExpr>,
    row: &mut Row,
    cx: &Cx<'_>,
) -> Result<Value, QueryError> {
    let mut out = Vec::new();
    let mut first = None;
    let r = with_ranges(bindings, row, cx, |row| {
        if let Some(w) = when {
            if !eval(w, row, cx)?.truth() {
                return Ok(true);
            }
        }
        let v = eval(mapping, row, cx)?;
        if kind == ArrayForKind::First {
            // The first element that passes WHEN decides, even when its mapping is MISSING.
            first = Some(v);
            return Ok(false);
        }
        if v.is_missing() {
            return Ok(true);
        }
        cx.memory.charge(v.size_estimate())?;
        out.push(v);
        Ok(true)
    })?;
    if let Err(v) = r {
        return Ok(v);
    }
    Ok(match kind {
        ArrayForKind::First => first.unwrap_or(Value::Missing),
        ArrayForKind::Array => Value::array(out),
    })
}

fn object_for(
    name: &CExpr,
    value: &CExpr,
    bindings: &[CBinding],
    when: Option<&CExpr>,
    row: &mut Row,
    cx: &Cx<'_>,
) -> Result<Value, QueryError> {
    let mut out = Object::new();
    let mut unnamed = None;
    let r = with_ranges(bindings, row, cx, |row| {
        if let Some(w) = when {
            if !eval(w, row, cx)?.truth() {
                return Ok(true);
            }
        }
        let n = match eval(name, row, cx)? {
            Value::String(n) => n,
            // A name that is MISSING makes the whole result MISSING, any other non-string NULL.
            other => {
                unnamed = Some(if other.is_missing() { Value::Missing } else { Value::Null });
                return Ok(false);
            }
        };
        let v = eval(value, row, cx)?;
        if !v.is_missing() {
            out.insert(n.to_string(), v);
        }
        Ok(true)
    })?;
    if let Err(v) = r {
        return Ok(v);
    }
    Ok(unnamed.unwrap_or_else(|| Value::object(out)))
}

/// The value of a count pushed into a scan (OFFSET, LIMIT), evaluated once per execution.
pub(crate) fn pushed_count(
    p: Option<&crate::plan::Pushed>,
    what: &str,
    cx: &Cx<'_>,
) -> Result<Option<usize>, QueryError> {
    p.map(|p| count_value(&eval(&p.expr, &mut Row::default(), cx)?, what)).transpose()
}

/// A LIMIT or OFFSET value as a count: a whole number, where a negative one counts as 0 (Couchbase's
/// `getLimit` and `newOffsetLimitExpr`); anything else fails with 5030.
pub(crate) fn count_value(v: &Value, what: &str) -> Result<usize, QueryError> {
    match v.as_number().and_then(|n| n.to_exact_i64()) {
        Some(i) => Ok(usize::try_from(i).unwrap_or(0)),
        None => Err(QueryError::ExecutionValue(format!("Invalid {what} value {}", v.to_json_string()))),
    }
}

/// Keys as a list of strings: a string, or an array whose string elements are keys.
pub(crate) fn keys_of(v: &Value) -> Vec<Arc<str>> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(Arc::from)).collect(),
        _ => Vec::new(),
    }
}
