//! Regular expressions: REGEXP_CONTAINS, REGEXP_LIKE, REGEXP_MATCHES, REGEXP_POSITION(0/1), REGEXP_REPLACE and
//! REGEXP_SPLIT, with Couchbase's aliases.
//!
//! Patterns use Go's RE2 syntax; the `regex` crate speaks the same family (leftmost-first, linear time, no
//! backreferences). `translate` closes the gaps: `\d \w \s \b` and their negations are ASCII-only in Go and
//! Unicode-aware in `regex`, so they are rewritten to ASCII classes, `\Q...\E` quoting (Go only) becomes escaped
//! literals, and octal escapes are enabled. Compiled patterns are kept in a small per-thread cache keyed by the
//! pattern text (`MAX_CACHED` entries, dropped all at once when full), so a constant pattern is compiled once per
//! executor thread and no lock is taken. A pattern that does not compile is an evaluation error, as in Couchbase.

use std::cell::RefCell;
use std::collections::HashMap;

use regex::{NoExpand, Regex, RegexBuilder};

use super::args::{arg, check_pieces, check_size, f64_of, int, str_of, unknown, unknown_unless_strings, whole};
use super::{scalar, FnContext, FunctionDef};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("contains_regex", 2, 2, regexp_contains),
    scalar("contains_regexp", 2, 2, regexp_contains),
    scalar("regex_contains", 2, 2, regexp_contains),
    scalar("regexp_contains", 2, 2, regexp_contains),
    scalar("regex_like", 2, 2, regexp_like),
    scalar("regexp_like", 2, 2, regexp_like),
    scalar("regex_position", 2, 2, regexp_position0),
    scalar("regex_pos", 2, 2, regexp_position0),
    scalar("regex_position0", 2, 2, regexp_position0),
    scalar("regex_pos0", 2, 2, regexp_position0),
    scalar("regexp_position", 2, 2, regexp_position0),
    scalar("regexp_pos", 2, 2, regexp_position0),
    scalar("regexp_position0", 2, 2, regexp_position0),
    scalar("regexp_pos0", 2, 2, regexp_position0),
    scalar("regex_position1", 2, 2, regexp_position1),
    scalar("regex_pos1", 2, 2, regexp_position1),
    scalar("regexp_position1", 2, 2, regexp_position1),
    scalar("regexp_pos1", 2, 2, regexp_position1),
    scalar("regex_replace", 3, 4, regexp_replace),
    scalar("regexp_replace", 3, 4, regexp_replace),
    scalar("regexp_matches", 2, 2, regexp_matches),
    scalar("regexp_split", 2, 2, regexp_split),
];

/// Patterns kept per thread before the cache is emptied.
const MAX_CACHED: usize = 64;

/// The most bytes a compiled pattern may take (a guard against patterns like `(a{1000}){1000}`).
const COMPILED_SIZE_LIMIT: usize = 8 << 20;

thread_local! {
    static CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// The compiled form of a Go-syntax pattern, from the cache when it was seen before.
pub(crate) fn compile(pattern: &str) -> Result<Regex, QueryError> {
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = RegexBuilder::new(&translate(pattern))
        .octal(true)
        .size_limit(COMPILED_SIZE_LIMIT)
        .build()
        .map_err(|e| QueryError::eval(format!("Invalid regular expression {pattern:?}: {e}")))?;
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(pattern.to_string(), re.clone());
    });
    Ok(re)
}

/// Rewrites Go RE2 syntax into the `regex` crate's: ASCII-only Perl classes and word boundaries, `\Q...\E`.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match next {
                    'Q' => {
                        let mut literal = String::new();
                        while let Some(q) = chars.next() {
                            if q == '\\' && chars.peek() == Some(&'E') {
                                chars.next();
                                break;
                            }
                            literal.push(q);
                        }
                        out.push_str(&regex::escape(&literal));
                    }
                    'd' | 'D' | 'w' | 'W' | 's' | 'S' => out.push_str(ascii_class(next, in_class)),
                    'b' if !in_class => out.push_str(r"(?-u:\b)"),
                    'B' if !in_class => out.push_str(r"(?-u:\B)"),
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A `]` (after an optional `^`) right at the start is a literal member, not the end.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str(r"\]");
                    chars.next();
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // A POSIX class such as [:alpha:] inside a bracket expression.
                out.push('[');
                for p in chars.by_ref() {
                    out.push(p);
                    if p == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Go's ASCII meaning of a Perl class, as a class or as members of the enclosing class.
fn ascii_class(c: char, in_class: bool) -> &'static str {
    match (c, in_class) {
        ('d', false) => "[0-9]",
        ('D', false) => "[^0-9]",
        ('w', false) => "[0-9A-Za-z_]",
        ('W', false) => "[^0-9A-Za-z_]",
        ('s', false) => r"[\t\n\f\r ]",
        ('S', false) => r"[^\t\n\f\r ]",
        ('d', true) => "0-9",
        ('w', true) => "0-9A-Za-z_",
        ('s', true) => r"\t\n\f\r ",
        // Negated classes inside a bracket expression: nested classes are the `regex` crate's way to say it.
        ('D', true) => "[^0-9]",
        ('W', true) => "[^0-9A-Za-z_]",
        _ => r"[^\t\n\f\r ]",
    }
}

fn regexp_contains(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let re = compile(str_of(arg(args, 1)))?;
    Ok(Value::Bool(re.is_match(str_of(arg(args, 0)))))
}

/// The whole string must match: Couchbase wraps the pattern as `^pattern$` (so `a|b` means `^a|b$`), after checking
/// that the pattern compiles on its own.
fn regexp_like(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let pattern = str_of(arg(args, 1));
    compile(pattern)?;
    let re = compile(&format!("^{pattern}$"))?;
    Ok(Value::Bool(re.is_match(str_of(arg(args, 0)))))
}

fn regexp_position0(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    regexp_position(args, 0)
}

fn regexp_position1(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    regexp_position(args, 1)
}

/// The byte offset of the first match plus `base`, or -1 (whatever the base) when nothing matches.
fn regexp_position(args: &[Value], base: i64) -> Result<Value, QueryError> {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let re = compile(str_of(arg(args, 1)))?;
    Ok(match re.find(str_of(arg(args, 0))) {
        Some(m) => int(i64::try_from(m.start()).unwrap_or(i64::MAX) + base),
        None => int(-1),
    })
}

/// Replaces every match, or the first `n`, with the replacement taken literally (no `$1` expansion).
fn regexp_replace(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    if let Some(v) = unknown(args, |i, v| if i < 3 { v.as_str().is_some() } else { v.as_number().is_some() }) {
        return Ok(v);
    }
    let (text, replacement) = (str_of(arg(args, 0)), str_of(arg(args, 2)));
    let re = compile(str_of(arg(args, 1)))?;
    let limit = if args.len() < 4 {
        usize::MAX
    } else if f64_of(arg(args, 3)).is_infinite() {
        // Go converts an infinite count to the smallest integer: no replacement.
        0
    } else {
        match whole(arg(args, 3)) {
            Some(n) => usize::try_from(n).unwrap_or(0),
            None => return Ok(Value::Null),
        }
    };
    if limit == 0 {
        return Ok(Value::string(text));
    }
    // An empty match everywhere with a long replacement could multiply the text: check the size first.
    let replaced = re.find_iter(text).take(limit).count() as u64;
    check_size("REGEXP_REPLACE", text.len() as u64 + replaced.saturating_mul(replacement.len() as u64))?;
    Ok(Value::from(re.replacen(text, limit, NoExpand(replacement)).into_owned()))
}

/// Every match, in order; NULL when there is none (Couchbase returns an empty Go slice, which it writes as null).
fn regexp_matches(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let re = compile(str_of(arg(args, 1)))?;
    let found: Vec<&str> = re.find_iter(str_of(arg(args, 0))).map(|m| m.as_str()).collect();
    check_pieces("REGEXP_MATCHES", &found)?;
    Ok(if found.is_empty() { Value::Null } else { Value::array(found.into_iter().map(Value::string).collect()) })
}

/// The pieces between matches. As in Couchbase, an empty match at the very start is skipped, nothing follows the
/// last match when it ends the string, and a string without any match gives NULL (an empty Go slice).
fn regexp_split(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let text = str_of(arg(args, 0));
    let re = compile(str_of(arg(args, 1)))?;
    let mut pieces = Vec::new();
    let mut start = 0;
    for m in re.find_iter(text) {
        if m.start() == 0 && m.end() == 0 {
            continue;
        }
        pieces.push(&text[start..m.start()]);
        start = m.end();
    }
    if !pieces.is_empty() && start < text.len() {
        pieces.push(&text[start..]);
    }
    check_pieces("REGEXP_SPLIT", &pieces)?;
    Ok(if pieces.is_empty() { Value::Null } else { Value::array(pieces.into_iter().map(Value::string).collect()) })
}

/// The number of patterns in this thread's cache (for tests).
#[cfg(test)]
pub(super) fn cached_patterns() -> usize {
    CACHE.with(|c| c.borrow().len())
}
