//! `%` formats, like the Unix `date` command (Couchbase's strToTimePercentFormat and timeToStrPercentFormat):
//! `%Y-%m-%dT%H:%M:%S.%N%z`, with the `_` (space), `-` (no padding), `0` and `^` (upper case; when parsing,
//! any case) modifiers and a width (at most 64; Couchbase has no cap). When parsing, a space in the format
//! matches any one character.
//!
//! Three Couchbase slips are not reproduced: parsing `%%` consumes the `%` it matches, parsing `%r` applies its
//! am/pm, and formatting `%r` writes noon as PM.

use super::layout::{self, gather_number, name_at, Parsed};
use super::time::{DateTime, MONTHS, WEEKDAYS};
use super::zone::{formats, gather_zone, Zone};
use super::{DEFAULT_FORMAT, SHORT_DATE_FORMAT};

/// The widest field a `%` directive may ask for.
const MAX_WIDTH: usize = 64;

#[derive(Clone, Copy, PartialEq)]
enum Pad {
    Zero,
    Space,
    None,
}

/// The modifiers and the conversion character of a `%` directive starting after the `%` at `f[i]`: the index of
/// the conversion character, padding, upper case, width and colon count; `None` for a malformed directive.
fn directive(f: &[u8], mut i: usize) -> Option<(usize, Pad, bool, usize, usize)> {
    let (mut pad, mut upper) = (Pad::Zero, false);
    match f.get(i)? {
        b'_' => pad = Pad::Space,
        b'-' => pad = Pad::None,
        b'^' => upper = true,
        b'0' => {}
        _ => i = i.wrapping_sub(1),
    }
    i = i.wrapping_add(1);
    let start = i;
    while f.get(i)?.is_ascii_digit() {
        i += 1;
    }
    // Widths are capped (Couchbase has no cap, and a width of millions would build a huge string).
    let digits = std::str::from_utf8(&f[start..i]).ok()?;
    let width = if digits.is_empty() { 0 } else { digits.parse::<usize>().unwrap_or(MAX_WIDTH).min(MAX_WIDTH) };
    if matches!(f.get(i)?, b'E' | b'O') {
        i += 1;
    }
    let mut colons = 0;
    while *f.get(i)? == b':' {
        colons += 1;
        i += 1;
    }
    if colons > 0 && f[i] != b'z' {
        return None;
    }
    Some((i, pad, upper, width, colons))
}

pub(crate) fn parse(s: &str, format: &str) -> Option<DateTime> {
    let (s, f) = (s.as_bytes(), format.as_bytes());
    let mut p = Parsed::new();
    let (mut i, mut n) = (0, 0);
    while i < f.len() && n < s.len() {
        if f[i] != b'%' {
            // A space in the format matches any character.
            if f[i] != b' ' && f[i] != s[n] {
                return None;
            }
            i += 1;
            n += 1;
            continue;
        }
        let (at, pad, upper, _, _) = directive(f, i + 1)?;
        match element(f[at], pad, upper, s, n, at + 1 == f.len(), &mut p)? {
            Step::Consumed(len) => n += len,
            Step::Done(t) => return Some(t),
        }
        i = at + 1;
    }
    if i != f.len() || n != s.len() {
        return None;
    }
    p.build()
}

enum Step {
    Consumed(usize),
    /// A complete time: a `%#` or `%@` duration since the epoch that ends both the format and the text.
    Done(DateTime),
}

/// A number of at most `max` digits: exactly `max` of them unless unpadded, within `lo..=hi`.
fn number(rest: &[u8], max: usize, pad: Pad, lo: i64, hi: i64) -> Option<(i64, usize)> {
    let (v, len) = gather_number(rest, max, pad == Pad::Space);
    let ok_len = if pad == Pad::None { len >= 1 } else { len == max };
    (ok_len && (lo..=hi).contains(&v)).then_some((v, len))
}

/// A name (full or three letters), matched exactly or, with `^`, in any case.
fn name(rest: &[u8], names: &[&str], short: bool, upper: bool) -> Option<(usize, usize)> {
    name_at(rest, names, short).or_else(|| {
        upper.then(|| {
            names.iter().enumerate().find_map(|(i, n)| {
                let n = if short { &n[..3] } else { n };
                rest.get(..n.len()).filter(|r| r.eq_ignore_ascii_case(n.as_bytes())).map(|_| (i, n.len()))
            })
        })?
    })
}

/// `am`/`pm` (or `AM`/`PM` when `capital`), either case with `^`.
fn meridiem(rest: &[u8], capital: bool, upper: bool) -> Option<bool> {
    let (a, p, m) = if capital { (b'A', b'P', b'M') } else { (b'a', b'p', b'm') };
    let first = rest
        .first()
        .copied()
        .filter(|&c| c == a || c == p || (upper && (c.eq_ignore_ascii_case(&a) || c.eq_ignore_ascii_case(&p))))?;
    let second = rest.get(1).copied()?;
    (second == m || (upper && second.eq_ignore_ascii_case(&m))).then_some(first.eq_ignore_ascii_case(&p))
}

/// Hours, minutes and optionally seconds separated by optional colons, each per the padding rules.
fn clock(rest: &[u8], pad: Pad, hours: (i64, i64), seconds: bool, p: &mut Parsed) -> Option<usize> {
    let (h, mut n) = number(rest, 2, pad, hours.0, hours.1)?;
    let colon = |n: usize| if rest.get(n) == Some(&b':') { n + 1 } else { n };
    n = colon(n);
    let (m, len) = number(rest.get(n..)?, 2, pad, 0, 59)?;
    n += len;
    (p.hour, p.minute) = (h, m);
    if seconds {
        n = colon(n);
        let (sec, len) = number(rest.get(n..)?, 2, pad, 0, 59)?;
        p.second = sec;
        n += len;
    }
    Some(n)
}

/// Copies an already complete time's fields (from `%D`, `%F`, `%s`, `%#`, `%@`).
fn take_fields(p: &mut Parsed, t: &DateTime, with_clock: bool) {
    let f = t.fields();
    p.set_long_year(f.year);
    (p.month, p.day) = (Some(f.month.into()), Some(f.day.into()));
    if with_clock {
        (p.hour, p.minute, p.second, p.h12) = (f.hour.into(), f.minute.into(), f.second.into(), false);
    }
}

fn element(c: u8, pad: Pad, upper: bool, s: &[u8], n: usize, last: bool, p: &mut Parsed) -> Option<Step> {
    let rest = &s[n..];
    let text = std::str::from_utf8(s).ok()?;
    let consumed = match c {
        b'%' => (rest[0] == b'%').then_some(1)?,
        b'x' | b'D' => {
            let t = layout::parse(text.get(n..n + SHORT_DATE_FORMAT.len())?, SHORT_DATE_FORMAT)?;
            take_fields(p, &t, false);
            SHORT_DATE_FORMAT.len()
        }
        b'F' => {
            let t = layout::parse(text.get(n..n + DEFAULT_FORMAT.len())?, DEFAULT_FORMAT)?;
            take_fields(p, &t, true);
            (p.nanos, p.zone) = (t.fields().nanos.into(), Some(t.zone.clone()));
            DEFAULT_FORMAT.len()
        }
        b'Y' => number(rest, 4, pad, 0, i64::MAX).map(|(y, len)| {
            p.set_long_year(y);
            len
        })?,
        b'C' => number(rest, 2, pad, 0, 99).map(|(v, len)| {
            p.century = Some(v);
            len
        })?,
        b'y' => number(rest, 2, pad, 0, 99).map(|(v, len)| {
            (p.year, p.year_seen) = (v, true);
            len
        })?,
        b'm' => number(rest, 2, pad, 1, 12).map(|(v, len)| {
            p.month = Some(v);
            len
        })?,
        b'B' | b'b' => name(rest, &MONTHS, c == b'b', upper).map(|(m, len)| {
            p.month = Some(m as i64 + 1);
            len
        })?,
        b'd' => number(rest, 2, pad, 1, 31).map(|(v, len)| {
            p.day = Some(v);
            len
        })?,
        b'e' => number(rest, 2, Pad::Space, 1, 31).map(|(v, len)| {
            p.day = Some(v);
            len
        })?,
        b'A' | b'a' => name(rest, &WEEKDAYS, c == b'a', upper)?.1,
        b'f' => match rest.get(..2).map(|x| if upper { x.to_ascii_lowercase() } else { x.to_vec() }) {
            Some(x) if [&b"st"[..], b"nd", b"rd", b"th"].contains(&x.as_slice()) => 2,
            _ => 0,
        },
        b'H' | b'I' | b'k' | b'l' => {
            let (pad, (lo, hi), h12) = match c {
                b'H' => (pad, (0, 23), false),
                b'I' => (pad, (1, 12), true),
                b'k' => (Pad::Space, (0, 23), false),
                _ => (Pad::Space, (0, 11), true),
            };
            let (h, len) = number(rest, 2, pad, lo, hi)?;
            (p.hour, p.h12) = (h, h12);
            len
        }
        b'p' | b'P' => {
            p.pm = meridiem(rest, c == b'p', upper)?;
            2
        }
        b'M' => number(rest, 2, pad, 0, 59).map(|(v, len)| {
            p.minute = v;
            len
        })?,
        b'S' => number(rest, 2, pad, 0, 59).map(|(v, len)| {
            p.second = v;
            len
        })?,
        b'R' | b'T' | b'X' => {
            p.h12 = false;
            clock(rest, pad, (0, 23), c != b'R', p)?
        }
        b'r' => {
            let len = clock(rest, pad, (1, 12), true, p)?;
            p.pm = meridiem(rest.get(len..)?, false, upper)?;
            p.h12 = true;
            len + 2
        }
        b'n' | b'N' => {
            let (v, len) = gather_number(rest, 9, pad == Pad::Space);
            if len == 0 {
                return None;
            }
            p.nanos = v * 10i64.pow(9 - len.min(9) as u32);
            len
        }
        b'Z' | b'z' => {
            let (end, zone) = gather_zone(s, n, formats::ALL)?;
            p.zone = Some(zone);
            end - n
        }
        b's' => {
            let (epoch, len) = gather_number(rest, if upper { 19 } else { 10 }, pad == Pad::Space);
            if len == 0 {
                return None;
            }
            let nanos = if upper { epoch } else { epoch.checked_mul(1_000_000_000)? };
            take_fields(p, &DateTime::from_unix_nanos(nanos, Zone::LOCAL), true);
            p.zone = Some(Zone::from_offset(false, 0, 0));
            len
        }
        b'V' => number(rest, 2, pad, 1, 53)?.1,
        b'G' => number(rest, 4, pad, 0, i64::MAX)?.1,
        b'j' => number(rest, 3, pad, 1, 366)?.1,
        b'q' => number(rest, 2, pad, 1, 4)?.1,
        b'u' => number(rest, 2, pad, 1, 7)?.1,
        b'w' => number(rest, 2, pad, 0, 6)?.1,
        b'U' | b'W' => number(rest, 2, pad, 0, 53)?.1,
        b'@' | b'#' => return since_epoch(c == b'@', pad, rest, last, p),
        _ => return None,
    };
    Some(Step::Consumed(consumed))
}

/// `%#` (h:mm:ss) and `%@` (h:mm:ss.fff) since the epoch.
fn since_epoch(millis: bool, pad: Pad, rest: &[u8], last: bool, p: &mut Parsed) -> Option<Step> {
    let (h, mut n) = gather_number(rest, 10, pad == Pad::Space);
    if n == 0 {
        return None;
    }
    let part = |n: &mut usize, max: usize, hi: i64| -> Option<i64> {
        if rest.get(*n) == Some(&b':') || (max == 3 && rest.get(*n) == Some(&b'.')) {
            *n += 1;
        }
        let (v, len) = number(rest.get(*n..)?, max, pad, 0, hi)?;
        *n += len;
        Some(v)
    };
    let m = part(&mut n, 2, 59)?;
    let sec = part(&mut n, 2, 59)?;
    let ms = if millis { part(&mut n, 3, 999)? } else { 0 };
    let total = h.checked_mul(3_600_000)?.checked_add(m * 60_000 + sec * 1000 + ms)?;
    let t = DateTime::from_millis(total as f64, Zone::LOCAL)?;
    if last && n == rest.len() {
        return Some(Step::Done(t));
    }
    take_fields(p, &t, true);
    p.nanos = t.fields().nanos.into();
    Some(Step::Consumed(n))
}

/// `t` written with a `%` format. A malformed directive gives Couchbase's `!(Invalid format: '...')` text.
pub(crate) fn format(t: &DateTime, format: &str) -> String {
    let f = format.as_bytes();
    let mut out = String::with_capacity(format.len() * 3);
    let mut i = 0;
    while i < f.len() {
        if f[i] != b'%' || i + 1 == f.len() {
            let ch = format[i..].chars().next().unwrap_or('%');
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let Some((at, pad, upper, width, colons)) = directive(f, i + 1) else {
            return format!("!(Invalid format: '{format}')");
        };
        let conversion = format[at..].chars().next().unwrap_or('%');
        if !conversion.is_ascii() {
            out.push_str(&format!("!(Unknown format: '{conversion}')"));
            i = at + conversion.len_utf8();
            continue;
        }
        match write_directive(&mut out, t, f[at], pad, upper, width, colons) {
            Ok(()) => {}
            Err(()) => return format!("!(Invalid format: '{format}')"),
        }
        i = at + 1;
    }
    out
}

/// Couchbase's formatInt: `width` (or the default width) zero- or space-padded, or no padding.
fn int(out: &mut String, width: usize, default: usize, pad: Pad, v: i64) {
    let w = if width == 0 { default } else { width };
    out.push_str(&match pad {
        Pad::Space => format!("{v:>w$}"),
        Pad::None => v.to_string(),
        Pad::Zero => format!("{v:0w$}"),
    });
}

fn write_directive(
    out: &mut String,
    t: &DateTime,
    c: u8,
    pad: Pad,
    upper: bool,
    width: usize,
    colons: usize,
) -> Result<(), ()> {
    let f = t.fields();
    let cased = |s: &str| if upper { s.to_ascii_uppercase() } else { s.to_string() };
    let hour12 = i64::from(if f.hour.is_multiple_of(12) { 12 } else { f.hour % 12 });
    match c {
        b'x' | b'D' => out.push_str(&layout::format(t, SHORT_DATE_FORMAT)),
        b'F' => out.push_str(&layout::format(t, DEFAULT_FORMAT)),
        b'Y' => int(out, width, 4, pad, f.year),
        b'C' => int(out, width, 2, pad, f.year / 100),
        b'y' => int(out, width, 2, pad, f.year % 100),
        b'm' => int(out, width, 2, pad, f.month.into()),
        b'B' => out.push_str(&cased(MONTHS[f.month as usize - 1])),
        b'b' => out.push_str(&cased(&MONTHS[f.month as usize - 1][..3])),
        b'd' => int(out, width, 2, pad, f.day.into()),
        b'f' => out.push_str(&cased(match f.day {
            1 | 21 => "st",
            2 | 22 => "nd",
            3 | 23 => "rd",
            _ => "th",
        })),
        b'A' => out.push_str(&cased(WEEKDAYS[f.weekday as usize])),
        b'a' => out.push_str(&cased(&WEEKDAYS[f.weekday as usize][..3])),
        b'H' => int(out, width, 2, pad, f.hour.into()),
        b'I' => int(out, width, 2, pad, hour12),
        b'p' => out.push_str(if f.hour < 12 { "AM" } else { "PM" }),
        b'P' => out.push_str(&cased(if f.hour < 12 { "am" } else { "pm" })),
        b'M' => int(out, width, 2, pad, f.minute.into()),
        b'S' => int(out, width, 2, pad, f.second.into()),
        b's' if upper => int(out, width, 0, pad, i64::try_from(t.unix_nanos()).unwrap_or(i64::MAX)),
        b's' => int(out, width, 0, pad, t.unix_secs()),
        b'r' => {
            int(out, width, 2, pad, hour12);
            out.push(':');
            int(out, width, 2, pad, f.minute.into());
            out.push(':');
            int(out, width, 2, pad, f.second.into());
            out.push_str(if f.hour >= 12 { " PM" } else { " AM" });
        }
        b'R' | b'T' | b'X' => {
            int(out, width, 2, pad, f.hour.into());
            out.push(':');
            int(out, width, 2, pad, f.minute.into());
            if c != b'R' {
                out.push(':');
                int(out, width, 2, pad, f.second.into());
            }
        }
        b'N' => int(out, width, 9, pad, f.nanos.into()),
        b'n' => int(out, width, 3, pad, i64::from((f.nanos + 500_000) / 1_000_000 % 1000)),
        b'z' => write_offset(out, t.offset(), colons)?,
        b'Z' if pad == Pad::None && t.offset() == 0 => out.push('Z'),
        b'Z' if upper => out.push_str(&t.zone.location),
        b'Z' => out.push_str(&t.zone.abbrev),
        b'%' => out.push('%'),
        b'V' => int(out, width, 1, pad, t.iso_week().1.into()),
        b'G' => int(out, width, 1, pad, t.iso_week().0),
        b'j' => int(out, width, 1, pad, f.yday.into()),
        b'q' => int(out, width, 1, pad, i64::from((f.month - 1) / 3 + 1)),
        b'u' => int(out, width, 1, pad, i64::from(if f.weekday == 0 { 7 } else { f.weekday })),
        b'w' => int(out, width, 1, pad, f.weekday.into()),
        b'U' | b'W' => {
            // The weekday of January 1st in the same zone, counted from Sunday (%U) or Monday (%W).
            let jan1 = (i64::from(f.weekday) - i64::from(f.yday) + 1).rem_euclid(7);
            let first = if c == b'U' { jan1 } else { (jan1 - 1).rem_euclid(7) };
            int(out, width, 1, pad, (i64::from(f.yday) - 1 + first) / 7);
        }
        b'#' => {
            let secs = t.unix_secs().max(0);
            out.push_str(&format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60));
        }
        b'@' => {
            let ms = (t.unix_nanos() / 1_000_000).max(0);
            out.push_str(&format!("{}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000));
        }
        other => out.push_str(&format!("!(Unknown format: '{}')", char::from(other))),
    }
    Ok(())
}

/// `%z` with 0 to 3 colons: `+hhmm`, `+hh:mm`, `+hh:mm:ss`, or the shortest of those.
fn write_offset(out: &mut String, offset: i32, colons: usize) -> Result<(), ()> {
    let h = offset / 3600;
    let mut m = offset - h * 3600;
    let mut s = m % 60;
    m /= 60;
    if m < 0 {
        (m, s) = (-m, -s);
    }
    out.push_str(&match colons {
        0 => format!("{h:+03}{m:02}"),
        1 => format!("{h:+03}:{m:02}"),
        2 => format!("{h:+03}:{m:02}:{s:02}"),
        3 if m == 0 && s == 0 => format!("{h:+03}"),
        3 if s == 0 => format!("{h:+03}:{m:02}"),
        3 => format!("{h:+03}:{m:02}:{s:02}"),
        _ => return Err(()),
    });
    Ok(())
}
