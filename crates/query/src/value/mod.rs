//! The SQL++ value model: JSON plus MISSING (a path that leads nowhere) and binary (a document that is not JSON).
//!
//! Values are cheap to clone: strings, arrays and objects sit behind an `Arc`, so a path into a document hands out
//! its sub-tree without copying it, and an UPDATE copies only what it changes (`Arc::make_mut`). Objects keep
//! their members sorted by name (a `BTreeMap`), which is the order Couchbase's query service writes nested objects
//! in and the order collation compares them in.

mod collate;
mod json;
mod number;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use collate::{collate, compare_for_operator};
pub use json::{write_json, JsonError};
pub use number::Number;

/// The members of an object, sorted by name.
pub type Object = BTreeMap<String, Value>;

/// One SQL++ value.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// The result of a path that does not exist; left out of objects, `null` inside arrays.
    #[default]
    Missing,
    Null,
    Bool(bool),
    Number(Number),
    String(Arc<str>),
    Array(Arc<Vec<Value>>),
    Object(Arc<Object>),
    /// A document whose body is not JSON.
    Binary(Arc<[u8]>),
}

/// The type of a value, in collation order (MISSING sorts first, binary last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueType {
    Missing,
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
    Binary,
}

impl ValueType {
    /// The name `TYPE()` returns.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Missing => "missing",
            ValueType::Null => "null",
            ValueType::Boolean => "boolean",
            ValueType::Number => "number",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::Object => "object",
            ValueType::Binary => "binary",
        }
    }
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Missing => ValueType::Missing,
            Value::Null => ValueType::Null,
            Value::Bool(_) => ValueType::Boolean,
            Value::Number(_) => ValueType::Number,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::Object(_) => ValueType::Object,
            Value::Binary(_) => ValueType::Binary,
        }
    }

    pub fn string(s: &str) -> Value {
        Value::String(Arc::from(s))
    }

    pub fn int(i: i64) -> Value {
        Value::Number(Number::Int(i))
    }

    pub fn float(f: f64) -> Value {
        Value::Number(Number::Float(f))
    }

    pub fn array(items: Vec<Value>) -> Value {
        Value::Array(Arc::new(items))
    }

    pub fn object(members: Object) -> Value {
        Value::Object(Arc::new(members))
    }

    /// An object from name/value pairs; MISSING values are left out.
    pub fn object_from<I, K>(pairs: I) -> Value
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        let members = pairs.into_iter().filter(|(_, v)| !v.is_missing()).map(|(k, v)| (k.into(), v)).collect();
        Value::Object(Arc::new(members))
    }

    pub fn is_missing(&self) -> bool {
        matches!(self, Value::Missing)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// MISSING or NULL: the values most functions pass through unchanged.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Missing | Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<Number> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().map(Number::to_f64)
    }

    /// The value as an integer when it is a number with no fractional part.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::to_exact_i64)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// SQL++ truth: `true`, non-zero numbers and non-empty strings, arrays and objects are true; MISSING, NULL,
    /// `false`, zero and empty values are not. WHERE, HAVING and WHEN keep a row only when this holds.
    pub fn truth(&self) -> bool {
        match self {
            Value::Missing | Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => {
                let f = n.to_f64();
                f != 0.0 && !f.is_nan()
            }
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Binary(b) => !b.is_empty(),
        }
    }

    /// The member `name` of an object; MISSING for a missing member or a value that is not an object.
    pub fn field(&self, name: &str) -> Value {
        match self {
            Value::Object(o) => o.get(name).cloned().unwrap_or(Value::Missing),
            _ => Value::Missing,
        }
    }

    /// The element at `index` of an array (negative counts from the end); MISSING outside it or for a value
    /// that is not an array.
    pub fn element(&self, index: i64) -> Value {
        match self {
            Value::Array(a) => {
                let len = a.len() as i64;
                let i = if index < 0 { len + index } else { index };
                if (0..len).contains(&i) {
                    a[i as usize].clone()
                } else {
                    Value::Missing
                }
            }
            _ => Value::Missing,
        }
    }

    /// The value as it goes into an array: MISSING becomes NULL.
    pub fn or_null(self) -> Value {
        if self.is_missing() {
            Value::Null
        } else {
            self
        }
    }

    /// Structural equality under collation (`1` equals `1.0`; MISSING equals MISSING).
    pub fn equals(&self, other: &Value) -> bool {
        collate(self, other) == std::cmp::Ordering::Equal
    }

    /// A mutable view of an object's members, copying them first if they are shared.
    pub fn object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(Arc::make_mut(o)),
            _ => None,
        }
    }

    /// A mutable view of an array's elements, copying them first if they are shared.
    pub fn array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(a) => Some(Arc::make_mut(a)),
            _ => None,
        }
    }

    /// The JSON text of the value (MISSING writes as nothing at the top level, as `null` inside arrays).
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::new();
        write_json(self, &mut out);
        // write_json only writes UTF-8: JSON text from strings that are valid UTF-8.
        String::from_utf8(out).expect("JSON text is UTF-8")
    }

    /// Parses JSON text into a value.
    pub fn from_json(bytes: &[u8]) -> Result<Value, JsonError> {
        json::parse(bytes)
    }

    /// An approximate count of the bytes the value holds, for the per-request memory quota.
    pub fn size_estimate(&self) -> usize {
        const NODE: usize = std::mem::size_of::<Value>();
        match self {
            Value::Missing | Value::Null | Value::Bool(_) | Value::Number(_) => NODE,
            Value::String(s) => NODE + s.len(),
            Value::Binary(b) => NODE + b.len(),
            Value::Array(a) => NODE + a.iter().map(Value::size_estimate).sum::<usize>(),
            Value::Object(o) => NODE + o.iter().map(|(k, v)| 32 + k.len() + v.size_estimate()).sum::<usize>(),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::int(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Value {
        Value::float(f)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::string(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(Arc::from(s))
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::array(items)
    }
}

impl From<Object> for Value {
    fn from(members: Object) -> Value {
        Value::object(members)
    }
}

impl From<&serde_json::Value> for Value {
    fn from(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Number(Number::from_json(n)),
            serde_json::Value::String(s) => Value::string(s),
            serde_json::Value::Array(a) => Value::array(a.iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => Value::object(o.iter().map(|(k, v)| (k.clone(), Value::from(v))).collect()),
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Value {
        Value::from(&v)
    }
}

/// Equality under collation, so that tests and sets can compare values directly.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.equals(other)
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The total order of collation: ORDER BY, DISTINCT, GROUP BY and index keys all use it.
impl Ord for Value {
    fn cmp(&self, other: &Value) -> std::cmp::Ordering {
        collate(self, other)
    }
}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.value_type().hash(state);
        match self {
            Value::Missing | Value::Null => {}
            Value::Bool(b) => b.hash(state),
            // Equal numbers must hash alike whether int or float: hash the float's bits of the value.
            Value::Number(n) => n.hash_key().hash(state),
            Value::String(s) => s.hash(state),
            Value::Binary(b) => b.hash(state),
            Value::Array(a) => a.iter().for_each(|v| v.hash(state)),
            Value::Object(o) => o.iter().for_each(|(k, v)| {
                k.hash(state);
                v.hash(state);
            }),
        }
    }
}

#[cfg(test)]
mod tests;
