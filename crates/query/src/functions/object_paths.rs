//! OBJECT_PATHS and OBJECT_PAIRS_NESTED: every path into an object (or array), with Couchbase's options.
//!
//! Paths are written `a.b[0].c`; names with a space, tab, dot or backquote are backquoted (a backquote inside is
//! written `\u0060`). Options: `composites` (list paths to objects and arrays too), `arraysubscript: false` (`[*]`
//! instead of each index, OBJECT_PATHS), `index` (index-key style: every name quoted, `[]` for arrays),
//! `pattern` with `regex`, `exact`, `ignorecase` and `patternspace: "field"` (match each name rather than the
//! whole path), `unique: false` (OBJECT_PATHS keeps duplicates), `report: "field"` and `types`
//! (OBJECT_PAIRS_NESTED).

use regex::Regex;

use super::args::{arg, is_array, is_object};
use super::regexp::compile;
use super::string::go_lower;
use super::{scalar, FnContext, FunctionDef};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] =
    &[scalar("object_paths", 1, 2, paths), scalar("object_pairs_nested", 1, 2, pairs_nested)];

type Res = Result<Value, QueryError>;

#[derive(Clone, Copy, PartialEq)]
enum Arrays {
    Subscript,
    Star,
    /// Below a `[*]`: objects inside arrays add `[*].` (or `[].` for index paths) to their prefix.
    BelowStar,
}

/// The matching options both functions share.
struct Filter {
    composites: bool,
    index: bool,
    field_pattern: bool,
    ignore_case: bool,
    re: Option<Regex>,
}

impl Filter {
    fn from(options: &Value, composites: bool) -> Result<Filter, QueryError> {
        let flag = |name: &str| options.field(name).as_bool();
        let ignore_case = flag("ignorecase") == Some(true);
        let re = match options.field("pattern") {
            Value::Missing => None,
            p => {
                let mut pattern = p.as_str().map_or_else(|| p.to_json_string(), str::to_string);
                if pattern.is_empty() {
                    None
                } else {
                    if flag("regex") == Some(false) {
                        pattern = regex::escape(&pattern);
                    }
                    if flag("exact") == Some(true) {
                        if !pattern.starts_with('^') {
                            pattern.insert(0, '^');
                        }
                        pattern.push('$');
                    }
                    if ignore_case {
                        pattern = go_lower(&pattern);
                    }
                    Some(compile(&pattern)?)
                }
            }
        };
        Ok(Filter {
            composites: flag("composites").unwrap_or(composites),
            index: flag("index") == Some(true),
            field_pattern: options.field("patternspace").as_str() == Some("field"),
            ignore_case,
            re,
        })
    }

    /// Couchbase's matchPattern: the whole path, or (field pattern space) any name of it.
    fn matches(&self, path: &str) -> bool {
        let Some(re) = &self.re else { return true };
        let lowered;
        let path = if self.ignore_case {
            lowered = go_lower(path);
            lowered.as_str()
        } else {
            path
        };
        if !self.field_pattern {
            return re.is_match(path);
        }
        let mut quoted = false;
        let mut start = 0;
        for (i, c) in path.char_indices() {
            match c {
                '`' => quoted = !quoted,
                '.' if !quoted => {
                    if re.is_match(&path[start..i]) {
                        return true;
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        start < path.len() && re.is_match(&path[start..])
    }

    /// A member's name as a path step after `prefix`, and its bare (quoted if need be) name.
    fn step(&self, prefix: &str, name: &str) -> (String, String) {
        if self.index || name.contains([' ', '\t', '.', '`']) {
            let base = name.replace('`', "\\u0060");
            (format!("{prefix}`{base}`"), base)
        } else {
            (format!("{prefix}{name}"), name.to_string())
        }
    }
}

/// The options argument: MISSING and non-objects are handled by the caller's rules; absent means no options.
fn options(args: &[Value]) -> Result<Option<&Value>, Value> {
    match args.get(1) {
        None => Ok(None),
        Some(Value::Missing) => Err(Value::Missing),
        Some(o) if is_object(o) => Ok(Some(o)),
        Some(_) => Err(Value::Null),
    }
}

static NO_OPTIONS: Value = Value::Null;

fn paths(args: &[Value], _: &FnContext<'_>) -> Res {
    match arg(args, 0) {
        Value::Missing => return Ok(Value::Missing),
        v if !is_object(v) && !is_array(v) => return Ok(Value::Null),
        _ => {}
    }
    let opts = match options(args) {
        Ok(o) => o.unwrap_or(&NO_OPTIONS),
        Err(v) => return Ok(v),
    };
    let filter = Filter::from(opts, true)?;
    let unique = opts.field("unique").as_bool().unwrap_or(true);
    let mut arrays =
        if opts.field("arraysubscript").as_bool() == Some(false) { Arrays::Star } else { Arrays::Subscript };
    let filter = Filter { composites: filter.composites && !filter.index, ..filter };
    if filter.index {
        arrays = Arrays::Star;
    }
    let mut names = Vec::new();
    path_names(&filter, arrays, &mut names, "", &args[0]);
    names.sort();
    if unique {
        names.dedup();
    }
    Ok(Value::array(names.into_iter().map(Value::from).collect()))
}

fn path_names(f: &Filter, arrays: Arrays, out: &mut Vec<String>, prefix: &str, v: &Value) {
    match v {
        Value::Array(items) => {
            for (i, e) in items.iter().enumerate() {
                if arrays == Arrays::Subscript {
                    path_names(f, arrays, out, &format!("{prefix}[{i}]"), e);
                } else {
                    path_names(f, Arrays::BelowStar, out, prefix, e);
                }
            }
        }
        Value::Object(o) => {
            let prefix = match (prefix.is_empty(), arrays, f.index) {
                (true, _, _) => String::new(),
                (false, Arrays::BelowStar, true) => format!("{prefix}[]."),
                (false, Arrays::BelowStar, false) => format!("{prefix}[*]."),
                (false, _, _) => format!("{prefix}."),
            };
            for (name, e) in o.iter() {
                let (path, _) = f.step(&prefix, name);
                if f.composites && f.matches(&path) {
                    out.push(path.clone());
                }
                path_names(f, arrays, out, &path, e);
            }
        }
        _ => {
            if !f.composites && f.matches(prefix) {
                out.push(prefix.to_string());
            }
        }
    }
}

fn pairs_nested(args: &[Value], _: &FnContext<'_>) -> Res {
    match arg(args, 0) {
        Value::Missing => return Ok(Value::Missing),
        v if !is_object(v) && !is_array(v) => return Ok(Value::Null),
        _ => {}
    }
    let opts = match options(args) {
        Ok(o) => o.unwrap_or(&NO_OPTIONS),
        Err(v) => return Ok(v),
    };
    let filter = Filter::from(opts, false)?;
    let filter = Filter { composites: filter.composites && !filter.index, ..filter };
    let name_only = opts.field("report").as_str() == Some("field");
    let types = opts.field("types").as_bool() == Some(true) && !filter.index;
    let mut found = Vec::new();
    pair_values(&filter, name_only, &mut found, "", &args[0], "");
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let pair = |(name, v): (String, Value)| {
        let second = if types { ("type", Value::string(v.value_type().name())) } else { ("val", v) };
        Value::object_from([("name", Value::from(name)), second])
    };
    Ok(Value::array(found.into_iter().map(pair).collect()))
}

fn pair_values(f: &Filter, name_only: bool, out: &mut Vec<(String, Value)>, prefix: &str, v: &Value, base: &str) {
    let composite = |out: &mut Vec<(String, Value)>, name: String, v: &Value| {
        if is_object(v) || is_array(v) {
            out.push((name, v.clone()));
        }
    };
    match v {
        Value::Array(items) if f.index => {
            for e in items.iter() {
                pair_values(f, name_only, out, &format!("{prefix}[]"), e, "");
            }
        }
        Value::Array(items) => {
            for (i, e) in items.iter().enumerate() {
                let path = format!("{prefix}[{i}]");
                if f.composites && f.matches(&path) {
                    composite(out, if name_only { format!("{base}[{i}]") } else { path.clone() }, e);
                }
                pair_values(f, name_only, out, &path, e, "");
            }
        }
        Value::Object(o) => {
            let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}.") };
            for (name, e) in o.iter() {
                let (path, bare) = f.step(&prefix, name);
                if f.composites && f.matches(&path) {
                    composite(out, if name_only { bare.clone() } else { path.clone() }, e);
                }
                pair_values(f, name_only, out, &path, e, &bare);
            }
        }
        _ => {
            if f.matches(prefix) {
                out.push((if name_only { base } else { prefix }.to_string(), v.clone()));
            }
        }
    }
}
