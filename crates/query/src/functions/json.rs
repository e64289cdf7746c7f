//! JSON and encoding functions: DECODE_JSON (JSON_DECODE), ENCODE_JSON (JSON_ENCODE), ENCODED_SIZE, POLY_LENGTH,
//! PAIRS, BASE64 (BASE64_ENCODE, ENCODE_BASE64), BASE64_DECODE (DECODE_BASE64).
//!
//! As in Couchbase, ENCODE_JSON and ENCODED_SIZE take any value, MISSING included (encoded as `null`), and the
//! BASE64 functions encode a value's JSON text and decode back to a value: decoded bytes that are not JSON become a
//! binary value. JSON text is written by `value::write_json`, the same writer as query results.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::args::{arg, check_size, usize_value};
use super::{scalar, FnContext, FunctionDef};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("decode_json", 1, 1, decode_json),
    scalar("json_decode", 1, 1, decode_json),
    scalar("encode_json", 1, 1, encode_json),
    scalar("json_encode", 1, 1, encode_json),
    scalar("encoded_size", 1, 1, |a, _| Ok(usize_value(json_text(arg(a, 0)).len()))),
    scalar("poly_length", 1, 1, poly_length),
    scalar("pairs", 1, 1, pairs),
    scalar("base64", 1, 1, base64_encode),
    scalar("base64_encode", 1, 1, base64_encode),
    scalar("encode_base64", 1, 1, base64_encode),
    scalar("base64_decode", 1, 1, base64_decode),
    scalar("decode_base64", 1, 1, base64_decode),
];

type Res = Result<Value, QueryError>;

/// A value's JSON text as Couchbase marshals it: MISSING is `null`.
fn json_text(v: &Value) -> String {
    if v.is_missing() {
        "null".to_string()
    } else {
        v.to_json_string()
    }
}

/// The value a JSON string holds; NULL for text that is empty (after trimming white space) or not JSON.
fn decode_json(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::String(s) => match s.trim() {
            "" => Value::Null,
            text => Value::from_json(text.as_bytes()).unwrap_or(Value::Null),
        },
        _ => Value::Null,
    })
}

fn encode_json(args: &[Value], _: &FnContext<'_>) -> Res {
    let text = json_text(arg(args, 0));
    check_size("ENCODE_JSON", text.len() as u64)?;
    Ok(Value::from(text))
}

/// The length of a string (bytes), array or object; NULL for anything else.
fn poly_length(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::String(s) => usize_value(s.len()),
        Value::Array(a) => usize_value(a.len()),
        Value::Object(o) => usize_value(o.len()),
        _ => Value::Null,
    })
}

/// PAIRS(v): `[name, value]` for every member at any depth, plus `[name, element]` for each element of an array
/// member (Couchbase's traversePairs), members in name order.
fn pairs(args: &[Value], _: &FnContext<'_>) -> Res {
    fn traverse(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(o) => {
                for (name, member) in o.iter() {
                    out.push(Value::array(vec![Value::string(name), member.clone()]));
                    if let Value::Array(items) = member {
                        out.extend(items.iter().map(|e| Value::array(vec![Value::string(name), e.clone()])));
                    }
                    traverse(member, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|e| traverse(e, out)),
            _ => {}
        }
    }
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        v @ (Value::Object(_) | Value::Array(_)) => {
            let mut out = Vec::new();
            traverse(v, &mut out);
            Value::array(out)
        }
        _ => Value::Null,
    })
}

fn base64_encode(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        v => {
            let text = json_text(v);
            check_size("BASE64_ENCODE", (text.len() as u64).div_ceil(3) * 4)?;
            Value::from(STANDARD.encode(text))
        }
    })
}

/// Standard base64 (padding required; line breaks ignored, as Go's decoder does) back to the value whose JSON text
/// it holds, or to a binary value; NULL when it is not base64.
fn base64_decode(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::String(s) => {
            let cleaned: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            match STANDARD.decode(cleaned) {
                Ok(bytes) => Value::from_json(&bytes).unwrap_or_else(|_| Value::Binary(bytes.into())),
                Err(_) => Value::Null,
            }
        }
        _ => Value::Null,
    })
}
