//! What every family shares: argument access that never panics, Couchbase's MISSING/NULL rules, numbers as
//! Couchbase builds them, the equality its functions use, and the bounds on work and output.

use std::cmp::Ordering;

use crate::value::{collate, Number, Value};
use crate::QueryError;

/// The most bytes one function may produce (Couchbase's fallback limit when no memory quota is set).
pub(crate) const MAX_RESULT_BYTES: usize = 20 << 20;

/// The most elements a range or repetition may have (Couchbase's RANGE_LIMIT).
pub(crate) const RANGE_LIMIT: u64 = i32::MAX as u64;

pub(crate) static MISSING: Value = Value::Missing;

/// Argument `i`, or MISSING past the end (the registry's arity check makes that unreachable in practice).
pub(crate) fn arg(args: &[Value], i: usize) -> &Value {
    args.get(i).unwrap_or(&MISSING)
}

/// Couchbase's usual rule: MISSING when any argument is MISSING, else NULL when any argument fails `ok`; `None`
/// when the function should go on.
pub(crate) fn unknown(args: &[Value], ok: impl Fn(usize, &Value) -> bool) -> Option<Value> {
    if args.iter().any(Value::is_missing) {
        return Some(Value::Missing);
    }
    if args.iter().enumerate().any(|(i, v)| !ok(i, v)) {
        return Some(Value::Null);
    }
    None
}

/// `unknown` for functions whose arguments must all be strings.
pub(crate) fn unknown_unless_strings(args: &[Value]) -> Option<Value> {
    unknown(args, |_, v| matches!(v, Value::String(_)))
}

pub(crate) fn is_str(v: &Value) -> bool {
    matches!(v, Value::String(_))
}

pub(crate) fn is_num(v: &Value) -> bool {
    matches!(v, Value::Number(_))
}

pub(crate) fn is_array(v: &Value) -> bool {
    matches!(v, Value::Array(_))
}

pub(crate) fn is_object(v: &Value) -> bool {
    matches!(v, Value::Object(_))
}

/// The string in `v`, or "" (callers check types first).
pub(crate) fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// The number in `v` as a float, or NaN (callers check types first).
pub(crate) fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The elements of an array, or none (callers check types first).
pub(crate) fn items(v: &Value) -> &[Value] {
    v.as_array().unwrap_or(&[])
}

/// A number with no fractional part, as Couchbase requires for positions, counts and precisions; `None` for a
/// fraction, NaN, an infinity or a value that is not a number. Values beyond the `i64` range saturate.
pub(crate) fn whole(v: &Value) -> Option<i64> {
    match v.as_number()? {
        Number::Int(i) => Some(i),
        Number::Float(f) if f.is_finite() && f.trunc() == f => Some(f as i64),
        Number::Float(_) => None,
    }
}

/// A float as Couchbase stores a computed number: an integer when it is whole and fits in 64 bits.
pub(crate) fn num(f: f64) -> Value {
    Value::Number(Number::Float(f).normalized())
}

pub(crate) fn int(i: i64) -> Value {
    Value::int(i)
}

pub(crate) fn usize_value(n: usize) -> Value {
    Value::int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Couchbase's equality for functions (`Equals`): MISSING if either side is MISSING, NULL if either is NULL (also
/// inside arrays and objects), false across types, numbers by value with IEEE rules (NaN equals nothing).
pub fn sql_eq(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Missing, _) | (_, Value::Missing) => Value::Missing,
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (Value::Number(x), Value::Number(y)) => Value::Bool(match (x, y) {
            (Number::Int(p), Number::Int(q)) => p == q,
            _ => x.to_f64() == y.to_f64(),
        }),
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Value::Bool(false);
            }
            let (mut missing, mut null) = (false, false);
            for (p, q) in x.iter().zip(y.iter()) {
                match sql_eq(p, q) {
                    Value::Missing => missing = true,
                    Value::Null => null = true,
                    Value::Bool(false) => return Value::Bool(false),
                    _ => {}
                }
            }
            if missing {
                Value::Missing
            } else if null {
                Value::Null
            } else {
                Value::Bool(true)
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Value::Bool(false);
            }
            let mut null = false;
            for (k, p) in x.iter() {
                let Some(q) = y.get(k) else { return Value::Bool(false) };
                match sql_eq(p, q) {
                    Value::Null | Value::Missing => null = true,
                    Value::Bool(false) => return Value::Bool(false),
                    _ => {}
                }
            }
            if null {
                Value::Null
            } else {
                Value::Bool(true)
            }
        }
        _ if a.value_type() != b.value_type() => Value::Bool(false),
        _ => Value::Bool(collate(a, b) == Ordering::Equal),
    }
}

/// Whether `sql_eq` is TRUE.
pub(crate) fn eq_true(a: &Value, b: &Value) -> bool {
    matches!(sql_eq(a, b), Value::Bool(true))
}

/// Couchbase's size error (E_SIZE) when `size` bytes would exceed the limit.
pub(crate) fn check_size(function: &str, size: u64) -> Result<(), QueryError> {
    if size > MAX_RESULT_BYTES as u64 {
        return Err(QueryError::eval(format!(
            "Size of {function}() result exceeds limit ({size} > {MAX_RESULT_BYTES})."
        )));
    }
    Ok(())
}

/// The bytes a result of many small strings really takes (a value and an allocation each, about 32 bytes, plus
/// the text), checked like any result: splitting a large string into characters multiplies its size.
pub(crate) fn check_pieces(function: &str, pieces: &[&str]) -> Result<(), QueryError> {
    let text: u64 = pieces.iter().map(|p| p.len() as u64).sum();
    check_size(function, text + 32 * pieces.len() as u64)
}

/// Couchbase's range error (E_RANGE) for a range or repetition of more than `RANGE_LIMIT` elements.
pub(crate) fn range_error(function: &str) -> QueryError {
    QueryError::eval(format!("Out of range evaluating {function}()."))
}

/// A string from bytes that may not be UTF-8 (a byte-wise substring or padding): each byte that is not part of a
/// valid sequence becomes U+FFFD, as Go's JSON encoder writes it.
pub(crate) fn lossy_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                // `good` is valid UTF-8 by construction.
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{fffd}');
                rest = &bad[1..];
            }
        }
    }
}

/// Go's `unicode.IsSpace`.
pub(crate) fn is_go_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ' | '\u{85}' | '\u{a0}')
        || (c > '\u{ff}' && c.is_whitespace())
}
