//! Type checking and conversion: IS_ARRAY, IS_ATOM, IS_BINARY, IS_BOOLEAN, IS_NUMBER, IS_OBJECT, IS_STRING (each
//! also spelled ISxxx and with Couchbase's short forms), TYPE (TYPE_NAME, TYPENAME), TOARRAY, TOATOM, TOBOOLEAN,
//! TONUMBER, TOOBJECT, TOSTRING (each also TO_xxx and short forms).
//!
//! The IS_ functions and the conversions return MISSING and NULL unchanged. TOSTRING writes numbers as Go's
//! `FormatFloat(f, 'f', -1)` does: never an exponent (`TOSTRING(1e-7)` is `"0.0000001"`), NaN as `"NaN"` and the
//! infinities as `"+Inf"`/`"-Inf"`. TONUMBER parses Go's integer and float syntax (hexadecimal floats excepted)
//! and, with a second argument, first removes white space and the listed characters and reads a single comma
//! as the decimal point.

use super::args::{arg, is_go_space, lossy_string, num};
use super::{scalar, FnContext, FunctionDef};
use crate::value::{Number, Object, Value, ValueType};
use crate::QueryError;

macro_rules! checks {
    ($($name:literal => $test:expr),* $(,)?) => {
        &[$(scalar($name, 1, 1, |a, _| Ok(is_type(a, $test))),)*]
    };
}

pub(super) static CHECKS: &[FunctionDef] = checks! {
    "is_array" => |t| t == ValueType::Array,
    "isarray" => |t| t == ValueType::Array,
    "is_atom" => |t| matches!(t, ValueType::Boolean | ValueType::Number | ValueType::String),
    "isatom" => |t| matches!(t, ValueType::Boolean | ValueType::Number | ValueType::String),
    "is_bin" => |t| t == ValueType::Binary,
    "is_binary" => |t| t == ValueType::Binary,
    "isbin" => |t| t == ValueType::Binary,
    "isbinary" => |t| t == ValueType::Binary,
    "is_bool" => |t| t == ValueType::Boolean,
    "is_boolean" => |t| t == ValueType::Boolean,
    "isbool" => |t| t == ValueType::Boolean,
    "isboolean" => |t| t == ValueType::Boolean,
    "is_num" => |t| t == ValueType::Number,
    "is_number" => |t| t == ValueType::Number,
    "isnum" => |t| t == ValueType::Number,
    "isnumber" => |t| t == ValueType::Number,
    "is_obj" => |t| t == ValueType::Object,
    "is_object" => |t| t == ValueType::Object,
    "isobj" => |t| t == ValueType::Object,
    "isobject" => |t| t == ValueType::Object,
    "is_str" => |t| t == ValueType::String,
    "is_string" => |t| t == ValueType::String,
    "isstr" => |t| t == ValueType::String,
    "isstring" => |t| t == ValueType::String,
};

pub(super) static CONVERSIONS: &[FunctionDef] = &[
    scalar("type", 1, 1, type_of),
    scalar("type_name", 1, 1, type_of),
    scalar("typename", 1, 1, type_of),
    scalar("to_array", 1, 1, to_array),
    scalar("toarray", 1, 1, to_array),
    scalar("to_atom", 1, 1, |a, _| Ok(to_atom(arg(a, 0)))),
    scalar("toatom", 1, 1, |a, _| Ok(to_atom(arg(a, 0)))),
    scalar("to_bool", 1, 1, to_boolean),
    scalar("to_boolean", 1, 1, to_boolean),
    scalar("tobool", 1, 1, to_boolean),
    scalar("toboolean", 1, 1, to_boolean),
    scalar("to_num", 1, 2, to_number),
    scalar("to_number", 1, 2, to_number),
    scalar("tonum", 1, 2, to_number),
    scalar("tonumber", 1, 2, to_number),
    scalar("to_obj", 1, 1, to_object),
    scalar("to_object", 1, 1, to_object),
    scalar("toobj", 1, 1, to_object),
    scalar("toobject", 1, 1, to_object),
    scalar("to_str", 1, 1, to_string),
    scalar("to_string", 1, 1, to_string),
    scalar("tostr", 1, 1, to_string),
    scalar("tostring", 1, 1, to_string),
];

type Res = Result<Value, QueryError>;

fn is_type(args: &[Value], test: fn(ValueType) -> bool) -> Value {
    match arg(args, 0) {
        v @ (Value::Missing | Value::Null) => v.clone(),
        v => Value::Bool(test(v.value_type())),
    }
}

fn type_of(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(Value::string(arg(args, 0).value_type().name()))
}

fn to_array(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        v @ (Value::Missing | Value::Null | Value::Array(_)) => v.clone(),
        Value::Binary(_) => Value::Null,
        v => Value::array(vec![v.clone()]),
    })
}

/// A scalar as it is; a one-element array or one-member object as its (converted) content; NULL otherwise.
fn to_atom(v: &Value) -> Value {
    match v {
        Value::Array(a) if a.len() == 1 => to_atom(&a[0]),
        Value::Object(o) if o.len() == 1 => o.values().next().map_or(Value::Null, to_atom),
        Value::Array(_) | Value::Object(_) => Value::Null,
        _ => v.clone(),
    }
}

fn to_boolean(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        v @ (Value::Missing | Value::Null | Value::Bool(_)) => v.clone(),
        Value::Number(n) => {
            let f = n.to_f64();
            Value::Bool(!f.is_nan() && f != 0.0)
        }
        Value::String(s) => Value::Bool(!s.is_empty()),
        Value::Binary(b) => Value::Bool(!b.is_empty()),
        Value::Array(a) => Value::Bool(!a.is_empty()),
        Value::Object(o) => Value::Bool(!o.is_empty()),
    })
}

fn to_object(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        v @ (Value::Missing | Value::Null | Value::Object(_)) => v.clone(),
        _ => Value::object(Object::new()),
    })
}

fn to_string(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        v @ (Value::Missing | Value::Null | Value::String(_)) => v.clone(),
        Value::Bool(b) => Value::string(if *b { "true" } else { "false" }),
        Value::Number(n) => Value::from(number_text(*n)),
        Value::Binary(b) => Value::from(lossy_string(b)),
        Value::Array(_) | Value::Object(_) => Value::Null,
    })
}

/// A number as Go's FormatInt / FormatFloat(f, 'f', -1, 64) writes it.
pub(crate) fn number_text(n: Number) -> String {
    match n.normalized() {
        Number::Int(i) => i.to_string(),
        Number::Float(f) if f.is_nan() => "NaN".to_string(),
        Number::Float(f) if f.is_infinite() => if f > 0.0 { "+Inf" } else { "-Inf" }.to_string(),
        // Rust's Display writes the shortest digits that round-trip, without an exponent.
        Number::Float(f) => format!("{f}"),
    }
}

/// TONUMBER(v [, strip]): numbers as they are, booleans as 1/0, strings parsed; NULL otherwise.
fn to_number(args: &[Value], _: &FnContext<'_>) -> Res {
    let s = match arg(args, 0) {
        v @ (Value::Missing | Value::Null | Value::Number(_)) => return Ok(v.clone()),
        Value::Bool(b) => return Ok(Value::int(i64::from(*b))),
        Value::String(s) => s,
        _ => return Ok(Value::Null),
    };
    let text = match args.get(1) {
        None => s.to_string(),
        Some(Value::String(strip)) => match stripped(s, strip) {
            Some(t) => t,
            None => return Ok(Value::Null),
        },
        Some(_) => return Ok(Value::Null),
    };
    Ok(parse_number(&text).unwrap_or(Value::Null))
}

/// Couchbase's cleaning for TONUMBER's second argument: white space and the listed characters removed, and a
/// lone comma before any dot turned into the decimal point. `None` when nothing is left.
fn stripped(s: &str, strip: &str) -> Option<String> {
    let mut out: Vec<char> = Vec::with_capacity(s.len());
    // -1: no comma seen; -2: comma ruled out as the decimal point; n: the comma's position.
    let mut comma: isize = -1;
    for c in s.chars() {
        if c == '.' && comma >= 0 {
            comma = -2;
        }
        if is_go_space(c) || (!strip.is_empty() && strip.contains(c)) {
            continue;
        }
        match c {
            ',' if comma == -1 => comma = out.len() as isize,
            ',' | '.' => comma = -2,
            _ => {}
        }
        out.push(c);
    }
    if out.is_empty() {
        return None;
    }
    if comma >= 0 {
        out[comma as usize] = '.';
    }
    Some(out.into_iter().collect())
}

/// Go's ParseInt (base 10) then ParseFloat: an optional sign, digits, fraction and exponent, or Inf/Infinity/NaN.
fn parse_number(s: &str) -> Option<Value> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = s.parse::<i64>() {
            return Some(Value::int(i));
        }
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s).to_ascii_lowercase();
    let special = matches!(body.as_str(), "inf" | "infinity" | "nan");
    let numeric = body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'));
    if !special && !numeric {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    // Go reports overflow as an error rather than an infinity.
    if f.is_infinite() && !special {
        return None;
    }
    Some(num(f))
}
