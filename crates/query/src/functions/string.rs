//! String functions: CONCAT, CONCAT2, CONTAINS, INITCAP/TITLE, LENGTH, LOWER, UPPER, LTRIM, RTRIM, TRIM,
//! POSITION(0/1), REPEAT, REPLACE, REVERSE, SPLIT, SUBSTR(0/1), SUFFIXES, LPAD, RPAD, URLENCODE, URLDECODE, and
//! the MB_ variants that count characters instead of bytes. MASK is in `mask.rs`.
//!
//! Positions and lengths count bytes of the UTF-8 text, as Couchbase's do (Go strings are bytes); a substring that
//! cuts a character in two shows each stray byte as U+FFFD. Case mapping is Go's simple one-character mapping
//! (`ß` stays `ß` in UPPER). FORMALIZE is not provided: it needs the statement parser. Results are bounded by
//! `MAX_RESULT_BYTES`: REPEAT, LPAD/RPAD, REPLACE, CONCAT and SUFFIXES check the size before building.

use std::sync::OnceLock;

use regex::Regex;

use super::args::{
    arg, check_pieces, check_size, f64_of, int, is_go_space, is_num, is_str, lossy_string, range_error, str_of,
    unknown, unknown_unless_strings, usize_value, whole, RANGE_LIMIT,
};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("array_to_string", 2, VARIADIC, concat2),
    scalar("concat", 2, VARIADIC, concat),
    scalar("concat2", 2, VARIADIC, concat2),
    scalar("contains", 2, 2, contains),
    scalar("initcap", 1, 1, title),
    scalar("title", 1, 1, title),
    scalar("length", 1, 1, length),
    scalar("mb_length", 1, 1, mb_length),
    scalar("lower", 1, 1, lower),
    scalar("mask", 1, 2, super::mask::mask),
    scalar("upper", 1, 1, upper),
    scalar("ltrim", 1, 2, ltrim),
    scalar("rtrim", 1, 2, rtrim),
    scalar("trim", 1, 2, trim),
    scalar("position", 2, 2, position0),
    scalar("pos", 2, 2, position0),
    scalar("position0", 2, 2, position0),
    scalar("pos0", 2, 2, position0),
    scalar("position1", 2, 2, position1),
    scalar("pos1", 2, 2, position1),
    scalar("mb_position", 2, 2, mb_position0),
    scalar("mb_pos", 2, 2, mb_position0),
    scalar("mb_position0", 2, 2, mb_position0),
    scalar("mb_pos0", 2, 2, mb_position0),
    scalar("mb_position1", 2, 2, mb_position1),
    scalar("mb_pos1", 2, 2, mb_position1),
    scalar("repeat", 2, 2, repeat),
    scalar("replace", 3, 4, replace),
    scalar("reverse", 1, 1, reverse),
    scalar("split", 1, 2, split),
    scalar("substr", 2, 3, substr0),
    scalar("substr0", 2, 3, substr0),
    scalar("substr1", 2, 3, substr1),
    scalar("mb_substr", 2, 3, mb_substr0),
    scalar("mb_substr0", 2, 3, mb_substr0),
    scalar("mb_substr1", 2, 3, mb_substr1),
    scalar("suffixes", 1, 1, suffixes),
    scalar("lpad", 2, 3, lpad),
    scalar("rpad", 2, 3, rpad),
    scalar("mb_lpad", 2, 3, mb_lpad),
    scalar("mb_rpad", 2, 3, mb_rpad),
    scalar("urlencode", 1, 1, urlencode),
    scalar("urldecode", 1, 1, urldecode),
];

type Res = Result<Value, QueryError>;

/// A one-string function: MISSING stays MISSING, anything but a string is NULL.
fn unary(args: &[Value], f: impl FnOnce(&str) -> Value) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::String(s) => f(s),
        _ => Value::Null,
    })
}

fn concat(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let size: usize = args.iter().map(|a| str_of(a).len()).sum();
    check_size("CONCAT", size as u64)?;
    let mut out = String::with_capacity(size);
    args.iter().for_each(|a| out.push_str(str_of(a)));
    Ok(Value::from(out))
}

/// CONCAT2(separator, ...): strings and arrays of strings, joined by the separator.
fn concat2(args: &[Value], _: &FnContext<'_>) -> Res {
    let nested = args.iter().skip(1).filter_map(Value::as_array).flatten();
    if args.iter().any(Value::is_missing) || nested.clone().any(Value::is_missing) {
        return Ok(Value::Missing);
    }
    let valid = is_str(arg(args, 0))
        && args[1..].iter().all(|a| is_str(a) || a.as_array().is_some_and(|items| items.iter().all(is_str)));
    if !valid {
        return Ok(Value::Null);
    }
    let parts: Vec<&str> = args[1..]
        .iter()
        .flat_map(|a| match a {
            Value::Array(items) => items.iter().map(str_of).collect::<Vec<_>>(),
            _ => vec![str_of(a)],
        })
        .collect();
    let sep = str_of(&args[0]);
    let size = parts.iter().map(|p| p.len()).sum::<usize>() + sep.len() * parts.len().saturating_sub(1);
    check_size("CONCAT2", size as u64)?;
    Ok(Value::from(parts.join(sep)))
}

fn contains(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    Ok(Value::Bool(str_of(&args[0]).contains(str_of(&args[1]))))
}

fn length(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| usize_value(s.len()))
}

fn mb_length(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| usize_value(s.chars().count()))
}

fn lower(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| Value::from(go_lower(s)))
}

fn upper(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| Value::from(go_upper(s)))
}

/// Go's `strings.ToLower`: each character's simple lowercase mapping.
pub(crate) fn go_lower(s: &str) -> String {
    s.chars().map(|c| c.to_lowercase().next().unwrap_or(c)).collect()
}

/// Go's `strings.ToUpper`: each character's simple uppercase mapping; characters whose uppercase is several
/// characters (ß, ligatures) have none and stay as they are.
pub(crate) fn go_upper(s: &str) -> String {
    s.chars().map(upper_char).collect()
}

fn upper_char(c: char) -> char {
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `strings.Title(strings.ToLower(s))`: the first letter of every word upper-cased.
fn title(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| {
        let mut prev_separator = true;
        let out: String = go_lower(s)
            .chars()
            .map(|c| {
                let out = if prev_separator { upper_char(c) } else { c };
                prev_separator = is_word_separator(c);
                out
            })
            .collect();
        Value::from(out)
    })
}

/// Go's word separator for Title: ASCII other than letters, digits and `_`; beyond ASCII, spaces only.
fn is_word_separator(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_alphanumeric() || c == '_');
    }
    c.is_whitespace()
}

/// The characters TRIM and friends remove without a second argument.
const WHITESPACE: &str = " \t\n\u{0c}\r";

fn trim_with(args: &[Value], f: impl FnOnce(&str, &str) -> String) -> Res {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let cutset = if args.len() > 1 { str_of(&args[1]) } else { WHITESPACE };
    Ok(Value::from(f(str_of(&args[0]), cutset)))
}

fn ltrim(args: &[Value], _: &FnContext<'_>) -> Res {
    trim_with(args, |s, cut| s.trim_start_matches(|c| cut.contains(c)).to_string())
}

fn rtrim(args: &[Value], _: &FnContext<'_>) -> Res {
    trim_with(args, |s, cut| s.trim_end_matches(|c| cut.contains(c)).to_string())
}

fn trim(args: &[Value], _: &FnContext<'_>) -> Res {
    trim_with(args, |s, cut| s.trim_matches(|c| cut.contains(c)).to_string())
}

fn position0(args: &[Value], _: &FnContext<'_>) -> Res {
    position(args, false, 0)
}

fn position1(args: &[Value], _: &FnContext<'_>) -> Res {
    position(args, false, 1)
}

fn mb_position0(args: &[Value], _: &FnContext<'_>) -> Res {
    position(args, true, 0)
}

fn mb_position1(args: &[Value], _: &FnContext<'_>) -> Res {
    position(args, true, 1)
}

/// The offset of the first occurrence plus `base`; not found is -1 plus the base (so 0 for POSITION1), as in
/// Couchbase.
fn position(args: &[Value], chars: bool, base: i64) -> Res {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let s = str_of(&args[0]);
    let found = match s.find(str_of(&args[1])) {
        Some(b) if chars => s[..b].chars().count() as i64,
        Some(b) => b as i64,
        None => -1,
    };
    Ok(int(found + base))
}

fn repeat(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_str(v) } else { is_num(v) }) {
        return Ok(v);
    }
    let Some(n) = whole(&args[1]).filter(|n| *n >= 0) else { return Ok(Value::Null) };
    if n as u64 > RANGE_LIMIT {
        return Err(range_error("REPEAT"));
    }
    let s = str_of(&args[0]);
    check_size("REPEAT", (s.len() as u64).saturating_mul(n as u64))?;
    Ok(Value::from(s.repeat(n as usize)))
}

/// REPLACE(s, old, new [, n]): the first `n` occurrences (all when `n` is negative or absent).
fn replace(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i < 3 { is_str(v) } else { is_num(v) }) {
        return Ok(v);
    }
    let (s, old, new) = (str_of(&args[0]), str_of(&args[1]), str_of(&args[2]));
    let limit = if args.len() > 3 {
        // Go turns an infinite count into the smallest integer: replace all.
        match whole(&args[3]) {
            Some(n) => n,
            None if f64_of(&args[3]).is_infinite() => -1,
            None => return Ok(Value::Null),
        }
    } else {
        -1
    };
    let occurrences = if old.is_empty() { s.chars().count() + 1 } else { s.matches(old).count() };
    let replaced = if limit < 0 { occurrences } else { occurrences.min(limit as usize) };
    let size = s.len() as u64 + (replaced as u64).saturating_mul(new.len() as u64);
    check_size("REPLACE", size)?;
    Ok(Value::from(if limit < 0 { s.replace(old, new) } else { s.replacen(old, new, replaced) }))
}

/// Characters in reverse order, each combining mark staying after its base character.
fn reverse(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| Value::from(reverse_keeping_marks(s)))
}

/// Go's ReversePreservingCombiningCharacters (Couchbase util): clusters of a character and the combining marks
/// after it, in reverse order; a U+FFFD that starts a cluster (invalid UTF-8 in Go) is dropped.
pub(crate) fn reverse_keeping_marks(s: &str) -> String {
    static CLUSTER: OnceLock<Option<Regex>> = OnceLock::new();
    let re = CLUSTER.get_or_init(|| Regex::new(r"(?s).\p{M}*").ok());
    let Some(re) = re else { return s.chars().rev().collect() };
    let clusters: Vec<&str> = re.find_iter(s).map(|m| m.as_str()).filter(|c| !c.starts_with('\u{fffd}')).collect();
    clusters.into_iter().rev().collect()
}

/// SPLIT(s): the words between runs of white space; SPLIT(s, sep): the pieces between separators (an empty
/// separator splits into characters).
fn split(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown_unless_strings(args) {
        return Ok(v);
    }
    let s = str_of(&args[0]);
    let pieces: Vec<&str> = match args.get(1).map(str_of) {
        None => s.split(is_go_space).filter(|w| !w.is_empty()).collect(),
        Some("") => s.char_indices().map(|(i, c)| &s[i..i + c.len_utf8()]).collect(),
        Some(sep) => s.split(sep).collect(),
    };
    check_pieces("SPLIT", &pieces)?;
    Ok(Value::array(pieces.into_iter().map(Value::string).collect()))
}

fn substr0(args: &[Value], _: &FnContext<'_>) -> Res {
    substr(args, false, 0)
}

fn substr1(args: &[Value], _: &FnContext<'_>) -> Res {
    substr(args, false, 1)
}

fn mb_substr0(args: &[Value], _: &FnContext<'_>) -> Res {
    substr(args, true, 0)
}

fn mb_substr1(args: &[Value], _: &FnContext<'_>) -> Res {
    substr(args, true, 1)
}

/// SUBSTR(s, pos [, len]) after Couchbase's strSubstrApply: a negative position counts from the end, a position
/// past the end or a negative length is NULL, a length past the end is cut.
fn substr(args: &[Value], chars: bool, base: i64) -> Res {
    let fractional = |v: &Value| whole(v).is_none() && !f64_of(v).is_infinite();
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_str(v) } else { is_num(v) && !fractional(v) }) {
        return Ok(v);
    }
    let s = str_of(&args[0]);
    let len = if chars { s.chars().count() } else { s.len() } as i64;
    let mut pos = int_arg(&args[1]);
    if pos < 0 {
        pos = len.saturating_add(pos);
    } else if pos > 0 && base > 0 {
        pos -= base;
    }
    if pos < 0 || pos >= len {
        return Ok(Value::Null);
    }
    let end = match args.get(2) {
        None => len,
        Some(n) => match int_arg(n) {
            n if n < 0 => return Ok(Value::Null),
            n => pos.saturating_add(n).min(len),
        },
    };
    let (pos, end) = (pos as usize, end as usize);
    Ok(Value::from(if chars {
        s.chars().skip(pos).take(end - pos).collect::<String>()
    } else {
        lossy_string(&s.as_bytes()[pos..end])
    }))
}

/// A number converted the way Go's `int(f)` does on amd64 for the values that reach it: whole values exactly,
/// infinities to the smallest integer.
fn int_arg(v: &Value) -> i64 {
    whole(v).unwrap_or(i64::MIN)
}

/// Every suffix starting at a character boundary, longest first.
fn suffixes(args: &[Value], _: &FnContext<'_>) -> Res {
    let Some(s) = arg(args, 0).as_str() else { return unary(args, |_| Value::Null) };
    let total: u64 = s.char_indices().map(|(i, _)| (s.len() - i) as u64).sum();
    check_size("SUFFIXES", total)?;
    Ok(Value::array(s.char_indices().map(|(i, _)| Value::string(&s[i..])).collect()))
}

fn lpad(args: &[Value], _: &FnContext<'_>) -> Res {
    pad(args, false, false)
}

fn rpad(args: &[Value], _: &FnContext<'_>) -> Res {
    pad(args, true, false)
}

fn mb_lpad(args: &[Value], _: &FnContext<'_>) -> Res {
    pad(args, false, true)
}

fn mb_rpad(args: &[Value], _: &FnContext<'_>) -> Res {
    pad(args, true, true)
}

/// LPAD/RPAD(s, n [, pad]): `s` padded (or cut) to `n` bytes (characters for the MB_ forms) with repetitions of
/// `pad` (a space by default); a negative or fractional `n`, or an empty pad, is NULL.
fn pad(args: &[Value], right: bool, chars: bool) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 1 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(n) = whole(&args[1]).filter(|n| *n >= 0) else { return Ok(Value::Null) };
    let padding = args.get(2).map_or(" ", str_of);
    if padding.is_empty() {
        return Ok(Value::Null);
    }
    let name = match (right, chars) {
        (false, false) => "LPAD",
        (true, false) => "RPAD",
        (false, true) => "MB_LPAD",
        (true, true) => "MB_RPAD",
    };
    check_size(name, n as u64)?;
    let n = n as usize;
    let s = str_of(&args[0]);
    if chars {
        let have = s.chars().count();
        if have >= n {
            return Ok(Value::from(s.chars().take(n).collect::<String>()));
        }
        let fill: String = padding.chars().cycle().take(n - have).collect();
        check_size(name, (s.len() + fill.len()) as u64)?;
        return Ok(Value::from(if right { format!("{s}{fill}") } else { format!("{fill}{s}") }));
    }
    if s.len() >= n {
        return Ok(Value::from(lossy_string(&s.as_bytes()[..n])));
    }
    let fill: Vec<u8> = padding.bytes().cycle().take(n - s.len()).collect();
    let mut out = Vec::with_capacity(n);
    if right {
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(&fill);
    } else {
        out.extend_from_slice(&fill);
        out.extend_from_slice(s.as_bytes());
    }
    Ok(Value::from(lossy_string(&out)))
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes `+`, every other byte `%XX`.
fn urlencode(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| {
        let mut out = String::with_capacity(s.len() * 3);
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        Value::from(out)
    })
}

/// Go's `url.QueryUnescape`: `+` is a space and `%XX` a byte; a malformed escape gives NULL.
fn urldecode(args: &[Value], _: &FnContext<'_>) -> Res {
    unary(args, |s| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' => {
                    let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(b) if hex.is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit())) => out.push(b),
                        _ => return Value::Null,
                    }
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        Value::from(lossy_string(&out))
    })
}
