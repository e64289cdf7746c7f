//! Which kind of format a format string is, and parsing or writing a time with it (Couchbase's determineFormat,
//! strToTime and timeToStr).
//!
//! A format is `%`-style when it has a `%`, a "common" format (`YYYY-MM-DD`) when made only of those elements, a Go
//! layout when it starts with something other than a digit or with the digits of Go's reference time (`2006`,
//! `01`..`06`, `1`..`6`), and otherwise an example such as `1111-11-11T11:11:11Z`: the first of the default
//! layouts that parses the example is used. Without a format, parsing tries the default layouts in turn.

use std::borrow::Cow;

use super::time::DateTime;
use super::{common, layout, percent, DEFAULT_FORMAT};

/// The layouts tried, in order, for a date without a format (Couchbase's _DATE_FORMATS).
pub(crate) const DATE_FORMATS: [&str; 23] = [
    "2006-01-02T15:04:05.999Z07:00",
    "2006-01-02 15:04:05.999Z07:00",
    "2006-01-02T15:04:05.999Z0700",
    "2006-01-02 15:04:05.999Z0700",
    "2006-01-02T15:04:05.999Z07",
    "2006-01-02 15:04:05.999Z07",
    "2006-01-02T15:04:05Z07:00",
    "2006-01-02 15:04:05Z07:00",
    "2006-01-02T15:04:05Z0700",
    "2006-01-02 15:04:05Z0700",
    "2006-01-02T15:04:05Z07",
    "2006-01-02 15:04:05Z07",
    "2006-01-02T15:04:05.999",
    "2006-01-02 15:04:05.999",
    "2006-01-02T15:04:05",
    "2006-01-02 15:04:05",
    "2006-01-02",
    "15:04:05.999Z07:00",
    "15:04:05Z07:00",
    "15:04:05.000000000",
    "15:04:05.000000",
    "15:04:05.999",
    "15:04:05",
];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Default,
    Percent,
    Common,
    Go,
    Example,
}

fn kind(format: &str) -> Kind {
    if format.is_empty() {
        return Kind::Default;
    }
    if format.contains('%') {
        return Kind::Percent;
    }
    if common::is_common_format(format) {
        return Kind::Common;
    }
    let digits = format.bytes().take_while(u8::is_ascii_digit).count();
    let lead = &format[..digits];
    let reference =
        matches!(lead, "2006" | "01" | "02" | "03" | "04" | "05" | "06" | "1" | "2" | "3" | "4" | "5" | "6");
    if digits == 0 || reference {
        Kind::Go
    } else {
        Kind::Example
    }
}

/// Parses `s` with `format` (the default layouts when empty).
pub(crate) fn str_to_time(s: &str, format: &str) -> Option<DateTime> {
    match kind(format) {
        Kind::Default => closest(s).map(|(t, _)| t),
        Kind::Percent => percent::parse(s, format),
        Kind::Common => common::parse(s, format),
        Kind::Go => layout::parse(s, format),
        Kind::Example => layout::parse(s, &example_layout(format)),
    }
}

/// Writes `t` with `format` (Couchbase's default layout when empty).
pub(crate) fn time_to_str(t: &DateTime, format: &str) -> String {
    match kind(format) {
        Kind::Default => layout::format(t, DEFAULT_FORMAT),
        Kind::Percent => percent::format(t, format),
        Kind::Common => common::format(t, format),
        Kind::Go => layout::format(t, format),
        Kind::Example => layout::format(t, &example_layout(format)),
    }
}

/// The default layout an example parses with, or the default format when none does.
fn example_layout(example: &str) -> Cow<'static, str> {
    closest(example).map_or(Cow::Borrowed(DEFAULT_FORMAT), |(_, f)| f)
}

/// Couchbase's strToTimeFormatClosest: the first default layout of the same length that parses `s`, else the
/// layout its shape suggests; the time and the layout.
pub(crate) fn closest(s: &str) -> Option<(DateTime, Cow<'static, str>)> {
    for f in DATE_FORMATS.iter().filter(|f| f.len() == s.len()) {
        if let Some(t) = layout::parse(s, f) {
            return Some((t, Cow::Borrowed(f)));
        }
    }
    let f = known_shape(s.trim().as_bytes())?;
    layout::parse(s, &f).map(|t| (t, Cow::Owned(f)))
}

/// Couchbase's formatFromStr: the input with every digit replaced by 1, an example format of its own shape.
pub(crate) fn example_of(s: &str) -> String {
    s.chars().map(|c| if c.is_numeric() { '1' } else { c }).collect()
}

/// Couchbase's determineKnownFormat: the layout a date's shape calls for (date with `-`, `/` or `.`, then `T` or
/// spaces, a time with an optional 1-9 digit fraction, an optional zone), when the default layouts' lengths did
/// not match.
fn known_shape(s: &[u8]) -> Option<String> {
    if s.len() < 8 {
        return None;
    }
    let mut layout = String::new();
    let mut s = s;
    if matches!(s[4], b'/' | b'.' | b'-') && s.len() >= 10 {
        let sep = char::from(s[4]);
        if s[7] != s[4] || !(0..10).all(|i| i == 4 || i == 7 || s[i].is_ascii_digit()) {
            return None;
        }
        if s.len() == 10 {
            return Some(format!("2006{sep}01{sep}02"));
        }
        let mut n = 10;
        if s[n] == b' ' {
            while s.len() > n + 1 && s[n + 1] == b' ' {
                n += 1;
            }
        }
        if s[n] != b'T' && s[n] != b' ' {
            return None;
        }
        layout = format!("2006{sep}01{sep}02{}", char::from(s[n]));
        s = &s[n + 1..];
    }
    if s.is_empty() {
        return Some(layout);
    }
    if s.len() < 5 || s[2] != b':' || !(s.len() == 5 || s[5] == b':') {
        return None;
    }
    for (i, &b) in s.iter().enumerate().take(8) {
        if (i == 2 || i == 5) != (b == b':') || (i != 2 && i != 5 && !b.is_ascii_digit()) {
            return None;
        }
    }
    match s.len() {
        5 => return Some(layout + "15:04"),
        8 => return Some(layout + "15:04:05"),
        n if n < 8 => return None,
        _ => {}
    }
    let mut n = 8;
    let mut frac = "";
    if s[n] == b'.' {
        n += 1;
        let digits = s[n..].iter().take_while(|b| b.is_ascii_digit()).count();
        frac = match digits {
            1..=3 => ".999",
            4..=6 => ".999999",
            7..=9 => ".999999999",
            _ => return None,
        };
        if s.len() == n + digits {
            return Some(layout + "15:04:05" + frac);
        }
        n += digits;
    }
    let mut sep = format!("{frac}Z");
    if s[n] == b' ' {
        while n < s.len() && s[n] == b' ' {
            n += 1;
        }
        sep = format!("{frac} Z");
    }
    let zone = match s.get(n)? {
        b'Z' if s.len() == n + 1 => "07:00",
        b'+' | b'-' if s.len() >= n + 3 && s[n + 1].is_ascii_digit() && s[n + 2].is_ascii_digit() => {
            match s.len() - n {
                3 => "07",
                5 if s[n + 3].is_ascii_digit() || s[n + 4].is_ascii_digit() => "0700",
                6 if s[n + 3] == b':' && s[n + 4].is_ascii_digit() && s[n + 5].is_ascii_digit() => "07:00",
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(format!("{layout}15:04:05{sep}{zone}"))
}
