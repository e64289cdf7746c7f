//! Array functions that treat arrays as sets: ARRAY_DISTINCT, ARRAY_UNION, ARRAY_INTERSECT, ARRAY_EXCEPT,
//! ARRAY_SYMDIFF (ARRAY_SYMDIFF1), ARRAY_SYMDIFFN, ARRAY_CONTAINS_ANY, ARRAY_CONTAINS_ALL.
//!
//! Set membership is collation equality (1 and 1.0 are the same element; NULL and MISSING are elements too,
//! except in ARRAY_INTERSECT, which drops them). Couchbase returns set results in hash order; settee returns them
//! in order of first appearance, which is one of the orders Couchbase may produce.

use std::collections::{HashMap, HashSet};

use super::args::{eq_true, is_array, items, unknown};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("array_distinct", 1, 1, distinct),
    scalar("array_union", 2, VARIADIC, union),
    scalar("array_intersect", 2, VARIADIC, intersect),
    scalar("array_except", 2, 2, except),
    scalar("array_symdiff", 2, VARIADIC, |a, _| symdiff(a, |n| n == 1)),
    scalar("array_symdiff1", 2, VARIADIC, |a, _| symdiff(a, |n| n == 1)),
    scalar("array_symdiffn", 2, VARIADIC, |a, _| symdiff(a, |n| n % 2 == 1)),
    scalar("array_contains_any", 2, 2, contains_any),
    scalar("array_contains_all", 2, 2, contains_all),
];

type Res = Result<Value, QueryError>;

/// The distinct elements of `values`, in order of first appearance.
fn distinct_of<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<&'a Value> {
    let mut seen = HashSet::new();
    values.filter(|v| seen.insert(*v)).collect()
}

fn owned(values: Vec<&Value>) -> Value {
    Value::array(values.into_iter().cloned().collect())
}

fn distinct(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    Ok(owned(distinct_of(items(&args[0]).iter())))
}

fn union(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    Ok(owned(distinct_of(args.iter().flat_map(|a| items(a).iter()))))
}

/// How many of the arrays hold each element (each array counted once per element), in order of first appearance.
fn counts(args: &[Value]) -> Vec<(&Value, usize)> {
    let mut order = Vec::new();
    let mut count: HashMap<&Value, usize> = HashMap::new();
    for a in args {
        for v in distinct_of(items(a).iter()) {
            let n = count.entry(v).or_insert(0);
            if *n == 0 {
                order.push(v);
            }
            *n += 1;
        }
    }
    order.into_iter().map(|v| (v, count[v])).collect()
}

/// Elements present in every array, NULL and MISSING left out.
fn intersect(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    let all = args.len();
    Ok(owned(counts(args).into_iter().filter(|(v, n)| *n == all && !v.is_unknown()).map(|(v, _)| v).collect()))
}

/// Elements present in a number of arrays that `keep` accepts: exactly one (SYMDIFF1) or an odd number (SYMDIFFN).
fn symdiff(args: &[Value], keep: fn(usize) -> bool) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    Ok(owned(counts(args).into_iter().filter(|(_, n)| keep(*n)).map(|(v, _)| v).collect()))
}

/// ARRAY_EXCEPT(a, b): the elements of `a` (duplicates kept) that are not in `b`.
fn except(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    let drop: HashSet<&Value> = items(&args[1]).iter().collect();
    Ok(Value::array(items(&args[0]).iter().filter(|v| !drop.contains(v)).cloned().collect()))
}

/// Whether the array holds any of the values (an array of them, or one value); NULL values never match.
fn contains_any(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { !v.is_null() }) {
        return Ok(v);
    }
    let wanted: &[Value] = if is_array(&args[1]) { items(&args[1]) } else { std::slice::from_ref(&args[1]) };
    let found = items(&args[0]).iter().any(|e| wanted.iter().any(|w| eq_true(w, e)));
    Ok(Value::Bool(found))
}

/// Whether the array holds every one of the values (an array of them, or one value).
fn contains_all(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { !v.is_null() }) {
        return Ok(v);
    }
    let wanted: &[Value] = if is_array(&args[1]) { items(&args[1]) } else { std::slice::from_ref(&args[1]) };
    let held = items(&args[0]);
    Ok(Value::Bool(wanted.iter().all(|w| held.iter().any(|e| eq_true(w, e)))))
}
