//! Object functions: OBJECT_ADD, OBJECT_CONCAT, OBJECT_CONCAT2, OBJECT_FIELD, OBJECT_INNER_PAIRS,
//! OBJECT_INNER_VALUES, OBJECT_LENGTH, OBJECT_NAMES, OBJECT_PAIRS (OBJECT_OUTER_PAIRS), OBJECT_PUT, OBJECT_REMOVE,
//! OBJECT_RENAME, OBJECT_REPLACE, OBJECT_TYPES, OBJECT_TYPES_NESTED, OBJECT_UNWRAP, OBJECT_VALUES
//! (OBJECT_OUTER_VALUES). OBJECT_PATHS and OBJECT_PAIRS_NESTED are in `object_paths.rs`.
//!
//! Objects keep their members sorted by name, so names, values and pairs come out in name order as Couchbase
//! sorts them. Setting a member to MISSING removes it, as in Couchbase. OBJECT_FIELD understands paths of names,
//! backquoted names (with an `i` suffix for a case-insensitive match) and `[n]` subscripts; it does not evaluate
//! general expressions (Couchbase parses the path as an expression). OBJECT_REMOVE_FIELDS, OBJECT_EXTRACT and
//! OBJECT_FILTER are not provided.

use super::args::{arg, eq_true, is_object, is_str, str_of, unknown, usize_value};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::{Object, Value};
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("object_add", 3, 3, add),
    scalar("object_concat", 2, VARIADIC, |a, _| concat(a, false)),
    scalar("object_concat2", 2, VARIADIC, |a, _| concat(a, true)),
    scalar("object_field", 2, 2, field),
    scalar("object_inner_pairs", 1, 1, |a, _| unary(a, |o| pairs(&without_missing_elements(o), false))),
    scalar("object_innerpairs", 1, 1, |a, _| unary(a, |o| pairs(&without_missing_elements(o), false))),
    scalar("object_inner_values", 1, 1, |a, _| unary(a, |o| values(&without_missing_elements(o)))),
    scalar("object_innervalues", 1, 1, |a, _| unary(a, |o| values(&without_missing_elements(o)))),
    scalar("object_length", 1, 1, |a, _| unary(a, |o| usize_value(o.len()))),
    scalar("object_names", 1, 1, |a, _| unary(a, |o| Value::array(o.keys().map(|k| Value::string(k)).collect()))),
    scalar("object_pairs", 1, 2, outer_pairs),
    scalar("object_outer_pairs", 1, 2, outer_pairs),
    scalar("object_outerpairs", 1, 2, outer_pairs),
    scalar("object_put", 3, 3, put),
    scalar("object_remove", 2, VARIADIC, remove),
    scalar("object_rename", 3, 3, rename),
    scalar("object_replace", 3, 3, replace),
    scalar("object_types", 1, 1, |a, _| {
        unary(a, |o| Value::object(o.iter().map(|(k, v)| (k.clone(), type_name(v))).collect()))
    }),
    scalar("object_types_nested", 1, 1, |a, _| unary(a, |o| types_nested(&Value::object(o.clone())))),
    scalar("object_unwrap", 1, 1, |a, _| unary(a, unwrap)),
    scalar("object_values", 1, 1, |a, _| unary(a, values)),
    scalar("object_outer_values", 1, 1, |a, _| unary(a, values)),
    scalar("object_outervalues", 1, 1, |a, _| unary(a, values)),
];

type Res = Result<Value, QueryError>;

/// A one-object function: MISSING stays MISSING, anything but an object is NULL.
fn unary(args: &[Value], f: impl FnOnce(&Object) -> Value) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::Object(o) => f(o),
        _ => Value::Null,
    })
}

/// Sets a member; MISSING removes it.
fn set(o: &mut Object, name: &str, v: &Value) {
    if v.is_missing() {
        o.remove(name);
    } else {
        o.insert(name.to_string(), v.clone());
    }
}

fn type_name(v: &Value) -> Value {
    Value::string(v.value_type().name())
}

fn types_nested(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::object(o.iter().map(|(k, v)| (k.clone(), types_nested(v))).collect()),
        Value::Array(a) => Value::array(a.iter().map(types_nested).collect()),
        _ => type_name(v),
    }
}

fn values(o: &Object) -> Value {
    Value::array(o.values().cloned().collect())
}

fn unwrap(o: &Object) -> Value {
    match o.values().next() {
        Some(v) if o.len() == 1 => v.clone(),
        _ => Value::Null,
    }
}

/// `[{"name": n, "val": v}]` (or `"type"` instead of `"val"` with `types`), in name order.
fn pairs(o: &Object, types: bool) -> Value {
    let pair = |k: &String, v: &Value| {
        let second = if types { ("type", type_name(v)) } else { ("val", v.clone()) };
        Value::object_from([("name", Value::string(k)), second])
    };
    Value::array(o.iter().map(|(k, v)| pair(k, v)).collect())
}

/// OBJECT_PAIRS(obj [, {"types": true}]).
fn outer_pairs(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_object(v)) {
        return Ok(v);
    }
    let types = args.get(1).and_then(|o| o.field("types").as_bool()).unwrap_or(false);
    unary(args, |o| pairs(o, types))
}

/// Couchbase's removeMissing for the INNER functions: array members lose their MISSING elements, and an array left
/// with one element becomes that element (objects of one member are left alone).
fn without_missing_elements(o: &Object) -> Object {
    if o.len() == 1 {
        return o.clone();
    }
    o.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::Array(a) => {
                    let mut kept: Vec<Value> = a.iter().filter(|e| !e.is_missing()).cloned().collect();
                    if kept.len() == 1 {
                        kept.pop().unwrap_or(Value::Null)
                    } else {
                        Value::array(kept)
                    }
                }
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// OBJECT_ADD(obj, name, v): `v` added unless the name exists (then the object is returned unchanged).
fn add(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(&args[..2], |i, v| if i == 0 { is_object(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let (name, v) = (str_of(&args[1]), arg(args, 2));
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        if !o.contains_key(name) && !v.is_missing() {
            o.insert(name.to_string(), v.clone());
        }
    }
    Ok(out)
}

/// OBJECT_PUT(obj, name, v): `v` set, replacing any member of that name; MISSING removes it.
fn put(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(&args[..2], |i, v| if i == 0 { is_object(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        set(o, str_of(&args[1]), arg(args, 2));
    }
    Ok(out)
}

/// OBJECT_CONCAT(obj, ...): members merged left to right; OBJECT_CONCAT2 also takes arrays of objects after the
/// first argument.
fn concat(args: &[Value], arrays: bool) -> Res {
    let ok = |i: usize, v: &Value| match v {
        Value::Object(_) => true,
        Value::Array(a) if arrays && i > 0 => a.iter().all(is_object),
        _ => false,
    };
    if let Some(v) = unknown(args, ok) {
        return Ok(v);
    }
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        for a in &args[1..] {
            let objects: &[Value] = match a {
                Value::Array(items) => items,
                _ => std::slice::from_ref(a),
            };
            for (k, v) in objects.iter().filter_map(Value::as_object).flatten() {
                set(o, k, v);
            }
        }
    }
    Ok(out)
}

/// OBJECT_REMOVE(obj, name...): the named members taken out; a NULL anywhere gives NULL.
fn remove(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_object(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        for name in &args[1..] {
            o.remove(str_of(name));
        }
    }
    Ok(out)
}

/// OBJECT_RENAME(obj, old, new): the member moved to a new name (unchanged when `old` is absent).
fn rename(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_object(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let (old, new) = (str_of(&args[1]), str_of(&args[2]));
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        if old != new {
            if let Some(v) = o.remove(old) {
                o.insert(new.to_string(), v);
            }
        }
    }
    Ok(out)
}

/// OBJECT_REPLACE(obj, old, new): every member whose value equals `old` set to `new`.
fn replace(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(&args[..2], |i, v| if i == 0 { is_object(v) } else { !v.is_null() }) {
        return Ok(v);
    }
    let (old, new) = (&args[1], arg(args, 2));
    let mut out = args[0].clone();
    if let Some(o) = out.object_mut() {
        let names: Vec<String> = o.iter().filter(|(_, v)| eq_true(old, v)).map(|(k, _)| k.clone()).collect();
        for name in names {
            set(o, &name, new);
        }
    }
    Ok(out)
}

/// OBJECT_FIELD(obj, path): the value at a path such as `a.b[0]` or `` `A`i.b ``; NULL when the path does not
/// parse, MISSING when it leads nowhere.
fn field(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_object(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(steps) = parse_path(str_of(&args[1])) else { return Ok(Value::Null) };
    let mut at = args[0].clone();
    for step in steps {
        at = match step {
            Step::Name(n) => at.field(&n),
            Step::AnyCase(n) => match &at {
                Value::Object(o) => o.iter().find(|(k, _)| k.eq_ignore_ascii_case(&n)).map(|(_, v)| v.clone()),
                _ => None,
            }
            .unwrap_or(Value::Missing),
            Step::Index(i) => at.element(i),
        };
    }
    Ok(at)
}

enum Step {
    Name(String),
    AnyCase(String),
    Index(i64),
}

/// Parses `name`, `` `quoted name` ``, `` `name`i ``, `.step` and `[n]` steps.
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = path.trim();
    let mut first = true;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            steps.push(Step::Index(r[..end].trim().parse().ok()?));
            rest = &r[end + 1..];
        } else {
            if !first {
                rest = rest.strip_prefix('.')?;
            }
            if let Some(r) = rest.strip_prefix('`') {
                let (name, after) = quoted(r)?;
                match after.strip_prefix('i') {
                    Some(a) => {
                        steps.push(Step::AnyCase(name));
                        rest = a;
                    }
                    None => {
                        steps.push(Step::Name(name));
                        rest = after;
                    }
                }
            } else {
                let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len());
                if end == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                steps.push(Step::Name(rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
        first = false;
    }
    (!steps.is_empty()).then_some(steps)
}

/// The name up to the closing backquote (a doubled backquote is one backquote), and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut name = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '`' {
            if s[i + 1..].starts_with('`') {
                name.push('`');
                chars.next();
            } else {
                return Some((name, &s[i + 1..]));
            }
        } else {
            name.push(c);
        }
    }
    None
}
