//! "Common" formats such as `YYYY-MM-DD hh:mm:ss.s TZD` (Couchbase's strToTimeCommonFormat and
//! timeToStrCommonFormat): `YYYY`, `CC`, `YY`, `MM`, `DD`, `hh`/`HH24`, `HH`/`HH12`, `mm`/`MI`, `ss`/`SS`, `s`
//! (fraction), `PP`/`pp`/`AM`/`PM`/`am`/`pm`, `TZD`/`TZN`/`TZF`, and month and day names (`MONTH`, `Month`,
//! `month`, `MON`, `DAY`, `DY` and their case variants). When parsing, a space matches any one character and `T`
//! any character.

use super::layout::{gather_number, Parsed};
use super::time::{DateTime, MONTHS, WEEKDAYS};
use super::zone::{formats, gather_zone};

/// The format elements by first letter, longest first (Couchbase's _COMMON_FORMATS).
const ELEMENTS: &[(u8, &[&str])] = &[
    (b'A', &["AM"]),
    (b'a', &["am"]),
    (b'C', &["CC"]),
    (b'D', &["DAY", "Day", "Dy", "DY", "DD"]),
    (b'd', &["day", "dy"]),
    (b'H', &["HH12", "HH24", "HH"]),
    (b'h', &["hh"]),
    (b'M', &["MONTH", "Month", "MON", "Mon", "MM", "MI"]),
    (b'm', &["month", "mon", "mm"]),
    (b'P', &["PP", "PM"]),
    (b'p', &["pp", "pm"]),
    (b'S', &["SS"]),
    (b's', &["ss", "s"]),
    (b'T', &["TZD", "TZN", "TZF", "T"]),
    (b'Y', &["YYYY", "YY"]),
];

/// Whether a format is made only of common-format elements, spaces and punctuation.
pub(crate) fn is_common_format(format: &str) -> bool {
    let f = format.as_bytes();
    let mut i = 0;
    'outer: while i < f.len() {
        if let Some((_, list)) = ELEMENTS.iter().find(|(c, _)| *c == f[i]) {
            for e in list.iter() {
                if f[i..].starts_with(e.as_bytes()) {
                    i += e.len();
                    continue 'outer;
                }
            }
        }
        if f[i].is_ascii_whitespace() || is_punct(f[i]) {
            i += 1;
            continue;
        }
        return false;
    }
    true
}

/// Go's `unicode.IsPunct` for a byte: ASCII punctuation proper, not the symbols `$+<=>^`|~`.
fn is_punct(b: u8) -> bool {
    b.is_ascii_punctuation() && !matches!(b, b'$' | b'+' | b'<' | b'=' | b'>' | b'^' | b'`' | b'|' | b'~')
}

/// The cased form of a name as a format element spells it: `MONTH` upper, `Month` capitalised, `month` lower.
fn cased(name: &str, element: &[u8]) -> String {
    if element[0].is_ascii_lowercase() {
        name.to_ascii_lowercase()
    } else if element.get(1).is_some_and(u8::is_ascii_uppercase) {
        name.to_ascii_uppercase()
    } else {
        name.to_string()
    }
}

/// The index and length of the first of `names` (cut to `short` letters when given) at the start of `rest`,
/// spelled in the case of `element`.
fn find_name(rest: &[u8], names: &[&str], short: Option<usize>, element: &[u8]) -> Option<(usize, usize)> {
    names.iter().enumerate().find_map(|(i, n)| {
        let n = cased(&n[..short.unwrap_or(n.len())], element);
        rest.starts_with(n.as_bytes()).then_some((i, n.len()))
    })
}

pub(crate) fn parse(s: &str, format: &str) -> Option<DateTime> {
    let (s, f) = (s.as_bytes(), format.as_bytes());
    let mut p = Parsed::new();
    let (mut i, mut n) = (0, 0);
    while i < f.len() && n < s.len() {
        let (used, consumed) = element(&f[i..], s, n, &mut p)?;
        i += used;
        n += consumed;
    }
    if i != f.len() || n != s.len() {
        return None;
    }
    p.build()
}

/// One element at the start of `f` against `s[n..]`: format bytes used and text bytes consumed.
fn element(f: &[u8], s: &[u8], n: usize, p: &mut Parsed) -> Option<(usize, usize)> {
    let rest = &s[n..];
    let has = |pat: &str| f.starts_with(pat.as_bytes());
    let num = |max: usize, lo: i64, hi: i64, exact: bool| {
        let (v, len) = gather_number(rest, max, false);
        let ok_len = if exact { len == max } else { len == 1 || len == 2 };
        (ok_len && (lo..=hi).contains(&v)).then_some((v, len))
    };
    let ampm = |upper_only: Option<bool>| -> Option<bool> {
        let (c0, c1) = (*rest.first()?, *rest.get(1)?);
        match upper_only {
            None => match c0 {
                b'p' | b'P' => Some(true),
                b'a' | b'A' => Some(false),
                _ => None,
            },
            Some(upper) => {
                let (a, pm, m) = if upper { (b'A', b'P', b'M') } else { (b'a', b'p', b'm') };
                (c1 == m && (c0 == a || c0 == pm)).then_some(c0 == pm)
            }
        }
    };
    match f[0] {
        b' ' => return Some((1, 1)),
        b'Y' if has("YYYY") => {
            let (y, len) = num(4, 0, i64::MAX, true)?;
            p.set_long_year(y);
            return Some((4, len));
        }
        b'Y' if has("YY") => {
            let (y, len) = num(2, 0, 99, true)?;
            (p.year, p.year_seen) = (y, true);
            return Some((2, len));
        }
        b'Y' => return None,
        _ => {}
    }
    if f.len() > 1 && f[0] == f[1] && f[0] != b's' && f[0] != b'S' {
        return match f[0] {
            b'C' => num(2, 0, 99, true).map(|(c, _)| {
                p.century = Some(c);
                (2, 2)
            }),
            b'M' => num(2, 1, 12, false).map(|(m, len)| {
                p.month = Some(m);
                (2, len)
            }),
            b'D' => num(2, 1, 31, false).map(|(d, len)| {
                p.day = Some(d);
                (2, len)
            }),
            b'h' => num(2, 0, 23, false).map(|(h, len)| {
                (p.hour, p.h12) = (h, false);
                (2, len)
            }),
            b'H' => {
                let (used, lo, hi, h12) = match f.get(2..4) {
                    Some(b"24") => (4, 0, 23, false),
                    Some(b"12") => (4, 1, 12, true),
                    Some([b'1' | b'2', _]) => return None,
                    _ => (2, 1, 12, true),
                };
                let (h, len) = num(2, lo, hi, false)?;
                (p.hour, p.h12) = (h, h12);
                Some((used, len))
            }
            b'p' | b'P' => {
                p.pm = ampm(None)?;
                Some((2, 2))
            }
            b'm' => num(2, 0, 59, false).map(|(m, len)| {
                p.minute = m;
                (2, len)
            }),
            _ => None,
        };
    }
    if has("MI") {
        let (m, len) = num(2, 0, 59, false)?;
        p.minute = m;
        return Some((2, len));
    }
    if has("AM") || has("PM") || has("am") || has("pm") {
        p.pm = ampm(Some(f[0].is_ascii_uppercase()))?;
        return Some((2, 2));
    }
    if f[0] == b's' || f[0] == b'S' {
        let run = f.iter().take_while(|&&c| c == f[0]).count();
        let len = match run {
            2 => {
                let (v, len) = num(2, 0, 59, false)?;
                p.second = v;
                len
            }
            1 | 3 => {
                let (v, len) = gather_number(rest, 9, false);
                if len == 0 {
                    return None;
                }
                p.nanos = v * 10i64.pow(9 - len.min(9) as u32);
                len
            }
            _ => return None,
        };
        return Some((run, len));
    }
    if has("TZD") || has("TZN") || has("TZF") {
        let (end, zone) = gather_zone(s, n, formats::ALL)?;
        p.zone = Some(zone);
        return Some((3, end - n));
    }
    for (pat, names, short) in [("MONTH", &MONTHS[..], None), ("MON", &MONTHS[..], Some(3))] {
        if f.len() >= pat.len() && f[..pat.len()].eq_ignore_ascii_case(pat.as_bytes()) && is_name_case(&f[..pat.len()])
        {
            let (m, len) = find_name(rest, names, short, f)?;
            p.month = Some(m as i64 + 1);
            return Some((pat.len(), len));
        }
    }
    for (pat, short) in [("DAY", None), ("DY", Some(3))] {
        if f.len() >= pat.len() && f[..pat.len()].eq_ignore_ascii_case(pat.as_bytes()) && is_name_case(&f[..pat.len()])
        {
            let (_, len) = find_name(rest, &WEEKDAYS, short, f)?;
            return Some((pat.len(), len));
        }
    }
    if !is_punct(f[0]) && f[0] != b'T' {
        return None;
    }
    (f[0] == b'T' || f[0] == rest[0]).then_some((1, 1))
}

/// Whether a name element is spelled in one of the three accepted cases (`MON`, `Mon`, `mon`).
fn is_name_case(e: &[u8]) -> bool {
    e.iter().all(u8::is_ascii_uppercase)
        || e.iter().all(u8::is_ascii_lowercase)
        || (e[0].is_ascii_uppercase() && e[1..].iter().all(u8::is_ascii_lowercase))
}

/// `t` written with a common format; anything that is not an element is copied.
pub(crate) fn format(t: &DateTime, format: &str) -> String {
    let f = format.as_bytes();
    let d = t.fields();
    let mut out = String::with_capacity(format.len() + 16);
    let hour12 = if d.hour.is_multiple_of(12) { 12 } else { d.hour % 12 };
    let mut i = 0;
    while i < f.len() {
        let rest = &f[i..];
        let has = |pat: &str| rest.starts_with(pat.as_bytes());
        let name_at = |pat: &str| {
            rest.len() >= pat.len()
                && rest[..pat.len()].eq_ignore_ascii_case(pat.as_bytes())
                && is_name_case(&rest[..pat.len()])
        };
        let used = if has("YYYY") {
            out.push_str(&format!("{:04}", d.year));
            4
        } else if rest.len() > 1 && rest[0] == rest[1] && rest[0] != b's' && rest[0] != b'S' {
            match rest[0] {
                b'C' => out.push_str(&format!("{:02}", d.year / 100)),
                b'Y' => out.push_str(&format!("{:02}", d.year % 100)),
                b'M' => out.push_str(&format!("{:02}", d.month)),
                b'D' => out.push_str(&format!("{:02}", d.day)),
                b'h' => out.push_str(&format!("{:02}", d.hour)),
                b'H' if rest.get(2..4) == Some(b"24") => {
                    out.push_str(&format!("{:02}", d.hour));
                    i += 2;
                }
                b'H' => {
                    if rest.get(2..4) == Some(b"12") {
                        i += 2;
                    }
                    out.push_str(&format!("{hour12:02}"));
                }
                b'P' => out.push_str(if d.hour < 12 { "AM" } else { "PM" }),
                b'p' => out.push_str(if d.hour < 12 { "am" } else { "pm" }),
                b'm' => out.push_str(&format!("{:02}", d.minute)),
                c => {
                    out.push(char::from(c));
                    out.push(char::from(c));
                }
            }
            2
        } else if has("MI") {
            out.push_str(&format!("{:02}", d.minute));
            2
        } else if has("AM") || has("PM") {
            out.push_str(if d.hour < 12 { "AM" } else { "PM" });
            2
        } else if has("am") || has("pm") {
            out.push_str(if d.hour < 12 { "am" } else { "pm" });
            2
        } else if has("TZD") {
            match t.offset() {
                0 => out.push('Z'),
                off => out.push_str(&format!("{:+03}:{:02}", off / 3600, (off % 3600 / 60).abs())),
            }
            3
        } else if has("TZN") {
            out.push_str(&t.zone.abbrev);
            3
        } else if has("TZF") {
            out.push_str(&t.zone.location);
            3
        } else if rest[0] == b's' || rest[0] == b'S' {
            let run = rest.iter().take_while(|&&c| c == rest[0]).count();
            match run {
                2 => out.push_str(&format!("{:02}", d.second)),
                1 => out.push_str(&format!("{:03}", (d.nanos + 500_000) / 1_000_000 % 1000)),
                3 => out.push_str(&format!("{:09}", d.nanos)),
                _ => {}
            }
            run
        } else if name_at("MONTH") || name_at("MON") {
            let len = if name_at("MONTH") { 5 } else { 3 };
            let name = MONTHS[d.month as usize - 1];
            out.push_str(&cased(if len == 5 { name } else { &name[..3] }, rest));
            len
        } else if name_at("DAY") || name_at("DY") {
            let len = if name_at("DAY") { 3 } else { 2 };
            let name = WEEKDAYS[d.weekday as usize];
            out.push_str(&cased(if len == 3 { name } else { &name[..3] }, rest));
            len
        } else {
            let ch = format[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            ch.len_utf8()
        };
        i += used;
    }
    out
}
