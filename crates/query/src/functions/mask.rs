//! MASK(s [, options]): hides part of a string behind a mask, after Couchbase's func_str.go.
//!
//! Options: `mask` (default `********`), `hole` (mask characters that let the source show through, default a
//! space), `inject` (mask characters inserted without consuming source), `length: "source"` (keep the source's
//! length instead of the mask's), `anchor` (`"start"`, `"end"`, a character position, negative from the end, or a
//! regular expression whose first match marks where masking starts). Characters are whole code points; with an
//! end anchor, combining marks stay with their base character.

use super::args::{arg, is_object, str_of};
use super::regexp::compile;
use super::string::reverse_keeping_marks;
use super::FnContext;
use crate::value::Value;
use crate::QueryError;

enum Anchor {
    Start,
    End,
    Position(i64),
    Text(String),
}

struct Options {
    mask: String,
    hole: String,
    inject: String,
    preserve_length: bool,
    anchor: Anchor,
}

fn options(v: Option<&Value>) -> Options {
    let field = |name: &str| v.map(|o| o.field(name)).unwrap_or(Value::Missing);
    let string = |name: &str| field(name).as_str().map(str::to_string);
    let anchor = match field("anchor") {
        Value::Number(n) => Anchor::Position(n.to_f64().trunc() as i64),
        Value::String(s) if s.eq_ignore_ascii_case("start") => Anchor::Start,
        Value::String(s) if s.eq_ignore_ascii_case("end") => Anchor::End,
        Value::String(s) => Anchor::Text(s.to_string()),
        _ => Anchor::Start,
    };
    Options {
        mask: string("mask").filter(|m| !m.is_empty()).unwrap_or_else(|| "********".to_string()),
        hole: string("hole").unwrap_or_else(|| " ".to_string()),
        inject: string("inject").unwrap_or_default(),
        preserve_length: string("length").is_some_and(|l| l.eq_ignore_ascii_case("source")),
        anchor,
    }
}

pub(super) fn mask(args: &[Value], _: &FnContext<'_>) -> Result<Value, QueryError> {
    let (source, opts) = (arg(args, 0), args.get(1));
    if source.is_missing() || opts.is_some_and(Value::is_missing) {
        return Ok(Value::Missing);
    }
    if source.as_str().is_none() || opts.is_some_and(|o| !is_object(o)) {
        return Ok(Value::Null);
    }
    let s = str_of(source);
    let o = options(opts);
    let (right, mut anchor_pos) = match &o.anchor {
        Anchor::Start => (false, 0),
        Anchor::End => (true, 0),
        Anchor::Position(p) => (*p < 0, p.saturating_abs()),
        Anchor::Text(pattern) => match compile(pattern)?.find(s) {
            Some(m) => (false, s[..m.start()].chars().count() as i64),
            None => return Ok(Value::string(s)),
        },
    };
    let source_len = s.chars().count();
    if anchor_pos > source_len as i64 {
        return Ok(Value::string(s));
    }
    let mask_len = o.mask.chars().count();
    let len = if o.preserve_length {
        source_len + o.mask.chars().filter(|c| o.inject.contains(*c)).count()
    } else {
        mask_len + anchor_pos as usize
    };
    let (mask_chars, source_chars): (Vec<char>, Vec<char>) = if right {
        (reverse_keeping_marks(&o.mask).chars().collect(), reverse_keeping_marks(s).chars().collect())
    } else {
        (o.mask.chars().collect(), s.chars().collect())
    };
    let mut from_mask = mask_chars.into_iter();
    let mut from_source = source_chars.into_iter();
    // Slots never written stay U+0000, as in Couchbase's rune buffer.
    let mut out = vec!['\0'; len];
    // Slot k of the walk: from the start, or from the end with an end anchor.
    let slot = |k: usize| if right { len - 1 - k } else { k };
    let mut k = 0;
    while anchor_pos > 0 && k < len {
        let Some(c) = from_source.next() else { break };
        out[slot(k)] = c;
        k += 1;
        anchor_pos -= 1;
    }
    for k in k..len {
        let i = slot(k);
        match from_mask.next() {
            Some(m) if o.hole.contains(m) => out[i] = from_source.next().unwrap_or(m),
            Some(m) if o.inject.contains(m) => out[i] = m,
            Some(m) => {
                out[i] = m;
                from_source.next();
            }
            None => {
                if let Some(c) = from_source.next() {
                    out[i] = c;
                }
            }
        }
    }
    Ok(Value::from(out.into_iter().collect::<String>()))
}
