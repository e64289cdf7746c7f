//! UUID, TOKENS, LEN and MB_LEN.
//!
//! UUID() is a version-4 UUID built from the context's random source (so the simulator controls it). TOKENS(v [,
//! options]) lists the distinct tokens of a value: scalars as they are, strings split into words (runs of letters
//! and digits), arrays and objects searched through (member names too unless `names` is false); options `case`
//! (`lower`/`upper`), `specials` (also keep e-mail addresses, URLs, hyphenated words), `split` and `trim`.
//! Couchbase returns the tokens in hash order; settee in order of first appearance.

use std::collections::HashSet;

use super::args::{arg, usize_value};
use super::string::{go_lower, go_upper};
use super::types::number_text;
use super::{scalar, volatile, FnContext, FunctionDef};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    volatile("uuid", 0, 0, uuid),
    scalar("tokens", 1, 2, tokens),
    scalar("len", 1, 1, |a, _| Ok(len(arg(a, 0), false))),
    scalar("mb_len", 1, 1, |a, _| Ok(len(arg(a, 0), true))),
];

type Res = Result<Value, QueryError>;

fn uuid(_: &[Value], ctx: &FnContext<'_>) -> Res {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&(ctx.random)().to_be_bytes());
    bytes[8..].copy_from_slice(&(ctx.random)().to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Value::from(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])))
}

/// LEN(v): bytes of a string (characters for MB_LEN), members or elements of a container, bytes of a binary, 1 for
/// a boolean, the length of a number's text; NULL for NULL.
fn len(v: &Value, chars: bool) -> Value {
    match v {
        Value::Missing => Value::Missing,
        Value::Null => Value::Null,
        Value::String(s) if chars => usize_value(s.chars().count()),
        Value::String(s) => usize_value(s.len()),
        Value::Object(o) => usize_value(o.len()),
        Value::Array(a) => usize_value(a.len()),
        Value::Binary(b) => usize_value(b.len()),
        Value::Bool(_) => Value::int(1),
        Value::Number(n) => usize_value(number_text(*n).len()),
    }
}

/// How strings are cut into tokens.
struct TokenOptions {
    names: bool,
    case: Option<bool>,
    split: bool,
    trim: bool,
    specials: bool,
}

impl TokenOptions {
    fn from(o: &Value) -> TokenOptions {
        let flag = |name: &str| o.field(name).as_bool();
        let case = o.field("case").as_str().map(str::to_ascii_lowercase);
        TokenOptions {
            names: flag("names").unwrap_or(true),
            case: match case.as_deref() {
                Some("lower") => Some(false),
                Some("upper") => Some(true),
                _ => None,
            },
            split: flag("split") != Some(false),
            trim: flag("trim") != Some(false),
            specials: flag("specials") == Some(true),
        }
    }

    fn cased(&self, s: &str) -> String {
        match self.case {
            Some(true) => go_upper(s),
            Some(false) => go_lower(s),
            None => s.to_string(),
        }
    }
}

fn tokens(args: &[Value], _: &FnContext<'_>) -> Res {
    let options = args.get(1);
    if arg(args, 0).is_missing() || options.is_some_and(Value::is_missing) {
        return Ok(Value::Missing);
    }
    let options = match options {
        None => TokenOptions::from(&Value::Null),
        Some(o @ Value::Object(_)) => TokenOptions::from(o),
        Some(_) => return Ok(Value::Null),
    };
    let mut out = Tokens { seen: HashSet::new(), list: Vec::new() };
    collect(&args[0], &options, &mut out);
    Ok(Value::array(out.list))
}

struct Tokens {
    seen: HashSet<Value>,
    list: Vec<Value>,
}

impl Tokens {
    fn add(&mut self, v: Value) {
        if self.seen.insert(v.clone()) {
            self.list.push(v);
        }
    }
}

fn collect(v: &Value, o: &TokenOptions, out: &mut Tokens) {
    match v {
        Value::Missing => {}
        Value::String(s) => string_tokens(s, o, out),
        Value::Array(items) => items.iter().for_each(|e| collect(e, o, out)),
        Value::Object(members) => {
            for (name, member) in members.iter() {
                if o.names {
                    string_tokens(name, o, out);
                }
                collect(member, o, out);
            }
        }
        _ => out.add(v.clone()),
    }
}

/// Couchbase's stringValue.tokens: words of letters and digits, or the whole (trimmed) string with `split` off,
/// and with `specials` the white-space-separated pieces with trailing punctuation removed.
fn string_tokens(s: &str, o: &TokenOptions, out: &mut Tokens) {
    let word_char = |c: char| c.is_alphabetic() || c.is_numeric();
    if !o.split {
        let whole = if o.trim { s.trim() } else { s };
        out.add(Value::from(o.cased(whole)));
        return;
    }
    for word in s.split(|c: char| !word_char(c)).filter(|w| !w.is_empty()) {
        out.add(Value::from(o.cased(word)));
    }
    if o.specials {
        let separator = |c: char| c.is_whitespace() || "()[]{}".contains(c);
        for piece in s.split(separator) {
            let piece = piece.trim_end_matches(|c: char| !word_char(c));
            if !piece.is_empty() {
                out.add(Value::from(o.cased(piece)));
            }
        }
    }
}
