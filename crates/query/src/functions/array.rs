//! Array functions: ARRAY_APPEND, ARRAY_AVG, ARRAY_BINARY_SEARCH, ARRAY_CONCAT, ARRAY_CONTAINS, ARRAY_COUNT,
//! ARRAY_FLATTEN, ARRAY_IFNULL, ARRAY_INSERT, ARRAY_LENGTH, ARRAY_MAX, ARRAY_MIN, ARRAY_MOVE, ARRAY_POSITION,
//! ARRAY_PREPEND, ARRAY_PUT (ARRAY_ADD, ARRAY_UPSERT), ARRAY_RANGE, ARRAY_REMOVE, ARRAY_REPEAT, ARRAY_REPLACE,
//! ARRAY_REVERSE, ARRAY_SORT, ARRAY_STAR, ARRAY_SUM, ARRAY_SWAP. The set-like functions are in `array_set.rs`.
//!
//! Membership tests use Couchbase's function equality (`args::sql_eq`: a NULL never matches), ordering uses
//! collation. ARRAY_RANGE and ARRAY_REPEAT refuse more than 2^31 - 1 elements (Couchbase's range error) or a
//! result over 20 MiB counted as Couchbase counts it (8 bytes per number), before allocating.

use super::args::{
    arg, check_size, eq_true, f64_of, int, is_array, is_num, items, num, range_error, unknown, usize_value, whole,
    RANGE_LIMIT,
};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::{Number, Object, Value};
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("array_append", 2, VARIADIC, append),
    scalar("array_avg", 1, 1, avg),
    scalar("array_binary_search", 2, 2, binary_search),
    scalar("array_concat", 2, VARIADIC, concat),
    scalar("array_contains", 2, 2, contains),
    scalar("array_count", 1, 1, count),
    scalar("array_flatten", 2, 2, flatten),
    scalar("array_ifnull", 1, 1, ifnull),
    scalar("array_insert", 3, VARIADIC, insert),
    scalar("array_length", 1, 1, length),
    scalar("array_max", 1, 1, max),
    scalar("array_min", 1, 1, min),
    scalar("array_move", 3, 3, |a, _| reorder(a, false)),
    scalar("array_swap", 3, 3, |a, _| reorder(a, true)),
    scalar("array_position", 2, 2, position),
    scalar("array_pos", 2, 2, position),
    scalar("array_prepend", 2, VARIADIC, prepend),
    scalar("array_put", 2, VARIADIC, put),
    scalar("array_add", 2, VARIADIC, put),
    scalar("array_upsert", 2, VARIADIC, put),
    scalar("array_range", 2, 3, range),
    scalar("array_remove", 2, VARIADIC, remove),
    scalar("array_repeat", 2, 2, repeat),
    scalar("array_replace", 3, 4, replace),
    scalar("array_reverse", 1, 1, reverse),
    scalar("array_sort", 1, 1, sort),
    scalar("array_star", 1, 1, star),
    scalar("array_sum", 1, 1, sum),
];

type Res = Result<Value, QueryError>;

/// A one-array function: MISSING stays MISSING, anything but an array is NULL.
fn unary(args: &[Value], f: impl FnOnce(&[Value]) -> Res) -> Res {
    match arg(args, 0) {
        Value::Missing => Ok(Value::Missing),
        Value::Array(a) => f(a),
        _ => Ok(Value::Null),
    }
}

fn append(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| i > 0 || is_array(v)) {
        return Ok(v);
    }
    let mut out = items(&args[0]).to_vec();
    out.extend_from_slice(&args[1..]);
    Ok(Value::array(out))
}

fn prepend(args: &[Value], _: &FnContext<'_>) -> Res {
    let last = args.len().saturating_sub(1);
    if let Some(v) = unknown(args, |i, v| i < last || is_array(v)) {
        return Ok(v);
    }
    let mut out = args[..last].to_vec();
    out.extend_from_slice(items(&args[last]));
    Ok(Value::array(out))
}

fn concat(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_array(v)) {
        return Ok(v);
    }
    Ok(Value::array(args.iter().flat_map(|a| items(a).iter().cloned()).collect()))
}

fn avg(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| {
        let numbers: Vec<Number> = a.iter().filter_map(Value::as_number).collect();
        if numbers.is_empty() {
            return Ok(Value::Null);
        }
        let total = numbers.iter().fold(Number::Int(0), |s, n| s.add(*n));
        Ok(num(total.to_f64() / numbers.len() as f64))
    })
}

fn sum(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(Value::Number(a.iter().filter_map(Value::as_number).fold(Number::Int(0), Number::add))))
}

fn count(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(usize_value(a.iter().filter(|v| !v.is_unknown()).count())))
}

fn length(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(usize_value(a.len())))
}

fn ifnull(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(a.iter().find(|v| !v.is_unknown()).cloned().unwrap_or(Value::Null)))
}

/// The greatest element in collation order, NULL for an empty array.
fn max(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(a.iter().filter(|v| !v.is_unknown()).max().cloned().unwrap_or(Value::Null)))
}

/// The least element that is neither MISSING nor NULL, NULL when there is none.
fn min(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(a.iter().filter(|v| !v.is_unknown()).min().cloned().unwrap_or(Value::Null)))
}

fn contains(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { !v.is_null() }) {
        return Ok(v);
    }
    Ok(Value::Bool(items(&args[0]).iter().any(|e| eq_true(&args[1], e))))
}

fn position(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { !v.is_null() }) {
        return Ok(v);
    }
    Ok(match items(&args[0]).iter().position(|e| eq_true(&args[1], e)) {
        Some(i) => usize_value(i),
        None => int(-1),
    })
}

/// The position of the first element equal to the value in a sorted array, or -1; only the array is checked.
fn binary_search(args: &[Value], _: &FnContext<'_>) -> Res {
    match arg(args, 0) {
        Value::Missing => return Ok(Value::Missing),
        Value::Array(_) => {}
        _ => return Ok(Value::Null),
    }
    let (a, target) = (items(&args[0]), arg(args, 1));
    let at = a.partition_point(|e| e < target);
    Ok(if a.get(at).is_some_and(|e| e == target) { usize_value(at) } else { int(-1) })
}

/// Nested arrays spliced in, `depth` levels deep (a negative depth flattens completely).
fn flatten(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { whole(v).is_some() }) {
        return Ok(v);
    }
    fn into(out: &mut Vec<Value>, from: &[Value], depth: i64) {
        for e in from {
            match e {
                Value::Array(inner) if depth != 0 => into(out, inner, depth - 1),
                _ => out.push(e.clone()),
            }
        }
    }
    let mut out = Vec::new();
    into(&mut out, items(&args[0]), whole(&args[1]).unwrap_or(0));
    Ok(Value::array(out))
}

/// ARRAY_INSERT(arr, pos, v...): the values inserted before `pos` (negative from the end, up to the length).
fn insert(args: &[Value], _: &FnContext<'_>) -> Res {
    if args.iter().any(Value::is_missing) {
        return Ok(Value::Missing);
    }
    let (Value::Array(a), Some(pos)) = (&args[0], whole(&args[1])) else { return Ok(Value::Null) };
    let len = a.len() as i64;
    let pos = if pos < 0 { pos.saturating_add(len) } else { pos };
    if !(0..=len).contains(&pos) {
        return Ok(Value::Null);
    }
    let mut out = Vec::with_capacity(a.len() + args.len() - 2);
    out.extend_from_slice(&a[..pos as usize]);
    out.extend_from_slice(&args[2..]);
    out.extend_from_slice(&a[pos as usize..]);
    Ok(Value::array(out))
}

/// ARRAY_PUT(arr, v...): the values not already in the array appended; a NULL anywhere gives NULL.
fn put(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| !v.is_null() && (i > 0 || is_array(v))) {
        return Ok(v);
    }
    let original = items(&args[0]);
    let mut out = original.to_vec();
    for v in &args[1..] {
        if !original.iter().any(|e| eq_true(v, e)) {
            out.push(v.clone());
        }
    }
    Ok(Value::array(out))
}

/// ARRAY_REMOVE(arr, v...): every element equal to one of the values taken out; a NULL anywhere gives NULL.
fn remove(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| !v.is_null() && (i > 0 || is_array(v))) {
        return Ok(v);
    }
    let drop = &args[1..];
    Ok(Value::array(items(&args[0]).iter().filter(|e| !drop.iter().any(|d| eq_true(e, d))).cloned().collect()))
}

/// ARRAY_RANGE(start, end [, step]): numbers from `start` up to (not including) `end`.
fn range(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_num(v)) {
        return Ok(v);
    }
    let (start, end) = (f64_of(&args[0]), f64_of(&args[1]));
    let step = args.get(2).map_or(1.0, f64_of);
    let empty = [start, end, step].iter().any(|f| f.is_nan());
    if empty || step == 0.0 || start == end || (step > 0.0 && start > end) || (step < 0.0 && start < end) {
        return Ok(Value::array(Vec::new()));
    }
    let n = ((end - start) / step).abs();
    if n > RANGE_LIMIT as f64 {
        return Err(range_error("ARRAY_RANGE"));
    }
    check_size("ARRAY_RANGE", (n as u64).saturating_mul(8))?;
    let mut out = Vec::with_capacity(n as usize + 1);
    let mut v = start;
    while (step > 0.0 && v < end) || (step < 0.0 && v > end) {
        out.push(num(v));
        v += step;
    }
    Ok(Value::array(out))
}

fn repeat(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| i == 0 || is_num(v)) {
        return Ok(v);
    }
    let Some(n) = whole(&args[1]).filter(|n| *n >= 0) else { return Ok(Value::Null) };
    if n as u64 > RANGE_LIMIT {
        return Err(range_error("ARRAY_REPEAT"));
    }
    check_size("ARRAY_REPEAT", couchbase_size(&args[0]).saturating_mul(n as u64))?;
    Ok(Value::array(vec![args[0].clone(); n as usize]))
}

/// Roughly what Couchbase charges for a value in its size checks, at least 8 bytes.
fn couchbase_size(v: &Value) -> u64 {
    let size = match v {
        Value::String(s) => s.len() as u64,
        Value::Binary(b) => b.len() as u64,
        Value::Array(a) => a.iter().map(|e| 16 + couchbase_size(e)).sum(),
        Value::Object(o) => o.iter().map(|(k, e)| 16 + k.len() as u64 + couchbase_size(e)).sum(),
        _ => 8,
    };
    size.max(8)
}

/// ARRAY_REPLACE(arr, old, new [, max]): elements equal to `old` replaced by `new`, at most `max` of them.
fn replace(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| match i {
        0 => is_array(v),
        1 => !v.is_null(),
        2 => true,
        _ => is_num(v),
    }) {
        return Ok(v);
    }
    let mut left = match args.get(3) {
        None => i64::MAX,
        Some(m) if f64_of(m).is_infinite() => i64::MIN,
        Some(m) => match whole(m) {
            Some(m) => m,
            None => return Ok(Value::Null),
        },
    };
    let (old, new) = (&args[1], &args[2]);
    let out = items(&args[0])
        .iter()
        .map(|e| {
            if left > 0 && eq_true(old, e) {
                left -= 1;
                new.clone()
            } else {
                e.clone()
            }
        })
        .collect();
    Ok(Value::array(out))
}

fn reverse(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| Ok(Value::array(a.iter().rev().cloned().collect())))
}

/// Elements in collation order.
fn sort(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| {
        let mut out = a.to_vec();
        out.sort();
        Ok(Value::array(out))
    })
}

/// ARRAY_STAR(arr of objects): one object whose members are arrays of each element's member (MISSING where an
/// element lacks it).
fn star(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |a| {
        let mut names: Vec<&String> = a.iter().filter_map(Value::as_object).flat_map(|o| o.keys()).collect();
        names.sort();
        names.dedup();
        let members: Object =
            names.into_iter().map(|n| (n.clone(), Value::array(a.iter().map(|e| e.field(n)).collect()))).collect();
        Ok(Value::object(members))
    })
}

/// ARRAY_MOVE / ARRAY_SWAP(arr, from, to): positions may be negative (from the end); outside the array is NULL.
fn reorder(args: &[Value], swap: bool) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_array(v) } else { is_num(v) }) {
        return Ok(v);
    }
    let (Some(from), Some(to)) = (whole(&args[1]), whole(&args[2])) else { return Ok(Value::Null) };
    let a = items(&args[0]);
    let len = a.len() as i64;
    if !(-len..len).contains(&from) || !(-len..len).contains(&to) {
        return Ok(Value::Null);
    }
    let (from, to) = (from.rem_euclid(len) as usize, to.rem_euclid(len) as usize);
    let mut out = a.to_vec();
    if swap {
        out.swap(from, to);
    } else {
        let moved = out.remove(from);
        out.insert(to, moved);
    }
    Ok(Value::array(out))
}
