//! Conditional functions: IFMISSING, IFMISSINGORNULL (COALESCE), IFNULL, MISSINGIF, NULLIF, NVL, NVL2, DECODE,
//! the numeric ones IFINF, IFNAN, IFNANORINF, NANIF, NEGINFIF, POSINFIF (each also spelled with underscores),
//! GREATEST and LEAST, and the comparison functions EQ, LT, LE, BETWEEN and IS_[NOT_]MISSING / NULL / KNOWN /
//! VALUED / DISTINCT_FROM with their aliases.
//!
//! These are the functions that look at MISSING and NULL instead of passing them through; each follows its
//! Couchbase counterpart (func_cond_unknown.go, func_cond_num.go, func_comp.go, comp_*.go).

use std::cmp::Ordering;

use super::args::{arg, num, sql_eq};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::{compare_for_operator, Value};
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("ifmissing", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_missing()))),
    scalar("if_missing", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_missing()))),
    scalar("ifmissingornull", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_unknown()))),
    scalar("if_missing_or_null", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_unknown()))),
    scalar("coalesce", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_unknown()))),
    scalar("ifnull", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_null()))),
    scalar("if_null", 2, VARIADIC, |a, _| Ok(first(a, |v| !v.is_null()))),
    scalar("missingif", 2, 2, |a, _| Ok(value_if_equal(a, Value::Missing))),
    scalar("missing_if", 2, 2, |a, _| Ok(value_if_equal(a, Value::Missing))),
    scalar("nullif", 2, 2, |a, _| Ok(value_if_equal(a, Value::Null))),
    scalar("null_if", 2, 2, |a, _| Ok(value_if_equal(a, Value::Null))),
    scalar("nanif", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::NAN)))),
    scalar("nan_if", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::NAN)))),
    scalar("neginfif", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::NEG_INFINITY)))),
    scalar("neginf_if", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::NEG_INFINITY)))),
    scalar("posinfif", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::INFINITY)))),
    scalar("posinf_if", 2, 2, |a, _| Ok(value_if_equal(a, num(f64::INFINITY)))),
    scalar("nvl", 2, 2, |a, _| Ok(if arg(a, 0).is_unknown() { arg(a, 1) } else { arg(a, 0) }.clone())),
    scalar("nvl2", 3, 3, |a, _| Ok(if arg(a, 0).is_unknown() { arg(a, 2) } else { arg(a, 1) }.clone())),
    scalar("decode", 3, VARIADIC, decode),
    scalar("ifinf", 2, VARIADIC, |a, _| Ok(first_number(a, |f| !f.is_infinite()))),
    scalar("if_inf", 2, VARIADIC, |a, _| Ok(first_number(a, |f| !f.is_infinite()))),
    scalar("ifnan", 2, VARIADIC, |a, _| Ok(first_number(a, |f| !f.is_nan()))),
    scalar("if_nan", 2, VARIADIC, |a, _| Ok(first_number(a, |f| !f.is_nan()))),
    scalar("ifnanorinf", 2, VARIADIC, |a, _| Ok(first_number(a, f64::is_finite))),
    scalar("if_nan_or_inf", 2, VARIADIC, |a, _| Ok(first_number(a, f64::is_finite))),
    scalar("greatest", 2, VARIADIC, |a, _| Ok(extreme(a, Ordering::Greater))),
    scalar("least", 2, VARIADIC, |a, _| Ok(extreme(a, Ordering::Less))),
    scalar("eq", 2, 2, |a, _| Ok(sql_eq(arg(a, 0), arg(a, 1)))),
    scalar("lt", 2, 2, |a, _| Ok(compare(a, |o| o == Ordering::Less))),
    scalar("le", 2, 2, |a, _| Ok(compare(a, |o| o != Ordering::Greater))),
    scalar("between", 3, 3, between),
    scalar("is_missing", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_missing()))),
    scalar("ismissing", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_missing()))),
    scalar("is_not_missing", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_missing()))),
    scalar("isnotmissing", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_missing()))),
    scalar("is_null", 1, 1, |a, _| Ok(is_null(arg(a, 0), true))),
    scalar("isnull", 1, 1, |a, _| Ok(is_null(arg(a, 0), true))),
    scalar("is_not_null", 1, 1, |a, _| Ok(is_null(arg(a, 0), false))),
    scalar("isnotnull", 1, 1, |a, _| Ok(is_null(arg(a, 0), false))),
    scalar("is_valued", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("isvalued", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("is_known", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("isknown", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("is_not_unknown", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("isnotunknown", 1, 1, |a, _| Ok(Value::Bool(!arg(a, 0).is_unknown()))),
    scalar("is_not_valued", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_unknown()))),
    scalar("isnotvalued", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_unknown()))),
    scalar("is_not_known", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_unknown()))),
    scalar("isnotknown", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_unknown()))),
    scalar("isunknown", 1, 1, |a, _| Ok(Value::Bool(arg(a, 0).is_unknown()))),
    scalar("is_distinct_from", 2, 2, |a, _| Ok(Value::Bool(!not_distinct(arg(a, 0), arg(a, 1))))),
    scalar("isdistinctfrom", 2, 2, |a, _| Ok(Value::Bool(!not_distinct(arg(a, 0), arg(a, 1))))),
    scalar("is_not_distinct_from", 2, 2, |a, _| Ok(Value::Bool(not_distinct(arg(a, 0), arg(a, 1))))),
    scalar("isnotdistinctfrom", 2, 2, |a, _| Ok(Value::Bool(not_distinct(arg(a, 0), arg(a, 1))))),
];

type Res = Result<Value, QueryError>;

/// The first argument `keep` accepts, or NULL.
fn first(args: &[Value], keep: fn(&Value) -> bool) -> Value {
    args.iter().find(|v| keep(v)).cloned().unwrap_or(Value::Null)
}

/// MISSINGIF/NULLIF/NANIF...: `replacement` when the two arguments are equal, the first otherwise; MISSING or
/// NULL when the comparison itself is.
fn value_if_equal(args: &[Value], replacement: Value) -> Value {
    match sql_eq(arg(args, 0), arg(args, 1)) {
        eq @ (Value::Missing | Value::Null) => eq,
        Value::Bool(true) => replacement,
        _ => arg(args, 0).clone(),
    }
}

/// IFINF/IFNAN/IFNANORINF: the first number `keep` accepts, skipping MISSING; a non-number ends the search with
/// NULL; nothing found is MISSING when a MISSING was skipped, else NULL.
fn first_number(args: &[Value], keep: fn(f64) -> bool) -> Value {
    let mut missing = false;
    for v in args {
        match v {
            Value::Missing => missing = true,
            Value::Number(n) if keep(n.to_f64()) => return num(n.to_f64()),
            Value::Number(_) => {}
            _ => return Value::Null,
        }
    }
    if missing {
        Value::Missing
    } else {
        Value::Null
    }
}

/// GREATEST/LEAST: the extreme in collation order of the arguments that are neither MISSING nor NULL.
fn extreme(args: &[Value], want: Ordering) -> Value {
    let mut best: Option<&Value> = None;
    for v in args.iter().filter(|v| !v.is_unknown()) {
        if best.is_none_or(|b| v.cmp(b) == want) {
            best = Some(v);
        }
    }
    best.cloned().unwrap_or(Value::Null)
}

/// DECODE(expr, search1, result1, ... [, default]): the result after the first search value equal to `expr`
/// (MISSING equals MISSING and NULL equals NULL here), else the default (NULL when there is none).
fn decode(args: &[Value], _: &FnContext<'_>) -> Res {
    let subject = arg(args, 0);
    let rest = &args[1.min(args.len())..];
    for pair in rest.chunks_exact(2) {
        if subject.equals(&pair[0]) {
            return Ok(pair[1].clone());
        }
    }
    Ok(if rest.len() % 2 == 1 { rest[rest.len() - 1].clone() } else { Value::Null })
}

/// A comparison operator as a function: MISSING or NULL when either side is.
fn compare(args: &[Value], test: fn(Ordering) -> bool) -> Value {
    match compare_for_operator(arg(args, 0), arg(args, 1)) {
        Ok(o) => Value::Bool(test(o)),
        Err(unknown) => unknown,
    }
}

/// BETWEEN(v, low, high): low <= v <= high; MISSING when either comparison is, else NULL when either is.
fn between(args: &[Value], _: &FnContext<'_>) -> Res {
    let low = compare(&[arg(args, 1).clone(), arg(args, 0).clone()], |o| o != Ordering::Greater);
    let high = compare(&[arg(args, 0).clone(), arg(args, 2).clone()], |o| o != Ordering::Greater);
    Ok(match (low, high) {
        (Value::Missing, _) | (_, Value::Missing) => Value::Missing,
        (Value::Bool(l), Value::Bool(h)) => Value::Bool(l && h),
        _ => Value::Null,
    })
}

/// IS_NULL / IS_NOT_NULL: MISSING for a MISSING argument, as the `IS NULL` operator gives.
fn is_null(v: &Value, null: bool) -> Value {
    if v.is_missing() {
        Value::Missing
    } else {
        Value::Bool(v.is_null() == null)
    }
}

/// IS NOT DISTINCT FROM: equal, with MISSING only like MISSING and NULL only like NULL.
fn not_distinct(a: &Value, b: &Value) -> bool {
    match (a.is_unknown(), b.is_unknown()) {
        (false, false) => a.equals(b),
        _ => a.value_type() == b.value_type(),
    }
}
