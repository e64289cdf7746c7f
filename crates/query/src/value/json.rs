//! JSON text to values and back.
//!
//! Parsing goes through serde (`Value` implements `Deserialize`), straight into sorted objects without an
//! intermediate tree. Writing is hand-made so that numbers come out as Couchbase writes them and MISSING members
//! are left out.

use std::fmt;
use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{Number, Object, Value};

/// JSON text that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON: {0}")]
pub struct JsonError(#[from] serde_json::Error);

pub(crate) fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    Ok(serde_json::from_slice(bytes)?)
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(Number::Int(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(i64::try_from(v).map_or(Number::Float(v as f64), Number::Int)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Number(Number::Float(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(Arc::from(v)))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(Arc::from(v)))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Deserialize::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element::<Value>()? {
            items.push(v);
        }
        Ok(Value::Array(Arc::new(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Object::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            // A repeated name keeps its last value, as Couchbase's parser does.
            members.insert(k, v);
        }
        Ok(Value::Object(Arc::new(members)))
    }
}

/// Writes `v` as JSON text. MISSING writes nothing at the top level, `null` as an array element, and is left out
/// as an object member.
pub fn write_json(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Missing => {}
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => n.write(out),
        Value::String(s) => write_string(s, out),
        Value::Binary(b) => write_string(&format!("<binary ({} b)>", b.len()), out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if item.is_missing() {
                    out.extend_from_slice(b"null");
                } else {
                    write_json(item, out);
                }
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            let mut first = true;
            for (k, item) in members.iter() {
                if item.is_missing() {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                write_string(k, out);
                out.push(b':');
                write_json(item, out);
            }
            out.push(b'}');
        }
    }
}

/// A JSON string literal with the escapes JSON requires.
pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            0..=0x1f => None,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}
