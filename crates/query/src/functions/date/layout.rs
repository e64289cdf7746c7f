//! Go's reference-time layouts (`2006-01-02T15:04:05.999Z07:00`): formatting as Go's `Time.Format` does, and
//! parsing as Couchbase's own strToTimeGoFormat does (stricter than Go's parser in places: a `.999` fraction is
//! required when the layout has one; spaces match runs of spaces). Unlike Couchbase's parser, `.0`/`.9` is a
//! fraction only when followed by a non-digit, as in Go, so `2006.01.02` reads a dotted date.

use super::time::{days_in_month, DateTime, Fields, MONTHS, WEEKDAYS};
use super::zone::{formats, gather_zone, Zone};

/// A layout element (Go's std* constants).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    Pm,
    PmLower,
    Tz,
    /// A numeric zone: `Z` for UTC when `iso`, colons, minutes and seconds as the layout says.
    NumTz {
        iso: bool,
        colon: bool,
        minutes: bool,
        seconds: bool,
    },
    /// A fractional second with its separator (`.` or `,`), digit count, and whether trailing zeros are trimmed.
    Frac {
        sep: u8,
        digits: usize,
        trim: bool,
    },
}

const ZONE_LAYOUTS: [(&str, bool, bool, bool); 5] = [
    ("070000", false, true, true),
    ("07:00:00", true, true, true),
    ("0700", false, true, false),
    ("07:00", true, true, false),
    ("07", false, false, false),
];

/// Go's nextStdChunk: the layout element starting at byte `i`, and its length.
fn std_at(l: &[u8], i: usize) -> Option<(Std, usize)> {
    let rest = &l[i..];
    let has = |p: &str| rest.starts_with(p.as_bytes());
    let next = |k: usize| l.get(i + k).copied();
    match l[i] {
        b'J' if has("January") => Some((Std::LongMonth, 7)),
        b'J' if has("Jan") => Some((Std::Month, 3)),
        b'M' if has("Monday") => Some((Std::LongWeekDay, 6)),
        b'M' if has("Mon") => Some((Std::WeekDay, 3)),
        b'M' if has("MST") => Some((Std::Tz, 3)),
        b'0' => match next(1) {
            Some(d @ b'1'..=b'6') => {
                let std = [Std::ZeroMonth, Std::ZeroDay, Std::ZeroHour12, Std::ZeroMinute, Std::ZeroSecond, Std::Year];
                Some((std[usize::from(d - b'1')], 2))
            }
            Some(b'0') if next(2) == Some(b'2') => Some((Std::ZeroYearDay, 3)),
            _ => None,
        },
        b'1' if has("15") => Some((Std::Hour, 2)),
        b'1' => Some((Std::NumMonth, 1)),
        b'2' if has("2006") => Some((Std::LongYear, 4)),
        b'2' => Some((Std::Day, 1)),
        // `_2006` is a literal underscore followed by a year.
        b'_' if has("_2") && !has("_2006") => Some((Std::UnderDay, 2)),
        b'_' if has("__2") => Some((Std::UnderYearDay, 3)),
        b'3' => Some((Std::Hour12, 1)),
        b'4' => Some((Std::Minute, 1)),
        b'5' => Some((Std::Second, 1)),
        b'P' if has("PM") => Some((Std::Pm, 2)),
        b'p' if has("pm") => Some((Std::PmLower, 2)),
        c @ (b'-' | b'Z') => ZONE_LAYOUTS
            .iter()
            .find(|(p, ..)| rest[1..].starts_with(p.as_bytes()))
            .map(|&(p, colon, minutes, seconds)| (Std::NumTz { iso: c == b'Z', colon, minutes, seconds }, p.len() + 1)),
        sep @ (b'.' | b',') => match next(1) {
            Some(ch @ (b'0' | b'9')) => {
                let digits = rest[1..].iter().take_while(|&&b| b == ch).count();
                let after = next(1 + digits);
                (!after.is_some_and(|b| b.is_ascii_digit()))
                    .then_some((Std::Frac { sep, digits, trim: ch == b'9' }, digits + 1))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Go's appendInt: a minus sign, then at least `width` digits.
fn push_int(out: &mut String, v: i64, width: usize) {
    if v < 0 {
        out.push('-');
    }
    out.push_str(&format!("{:0width$}", v.unsigned_abs()));
}

/// `t` written in a Go layout.
pub(crate) fn format(t: &DateTime, layout: &str) -> String {
    let l = layout.as_bytes();
    let f = t.fields();
    let mut out = String::with_capacity(layout.len() + 16);
    let mut literal_start = 0;
    let mut i = 0;
    while i < l.len() {
        match std_at(l, i) {
            Some((std, len)) => {
                out.push_str(&layout[literal_start..i]);
                write_std(&mut out, std, t, &f);
                i += len;
                literal_start = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&layout[literal_start..]);
    out
}

fn write_std(out: &mut String, std: Std, t: &DateTime, f: &Fields) {
    let hour12 = |h: u32| if h.is_multiple_of(12) { 12 } else { h % 12 };
    match std {
        Std::LongMonth => out.push_str(MONTHS[f.month as usize - 1]),
        Std::Month => out.push_str(&MONTHS[f.month as usize - 1][..3]),
        Std::NumMonth => push_int(out, f.month.into(), 0),
        Std::ZeroMonth => push_int(out, f.month.into(), 2),
        Std::LongWeekDay => out.push_str(WEEKDAYS[f.weekday as usize]),
        Std::WeekDay => out.push_str(&WEEKDAYS[f.weekday as usize][..3]),
        Std::Day => push_int(out, f.day.into(), 0),
        Std::UnderDay => out.push_str(&format!("{:>2}", f.day)),
        Std::ZeroDay => push_int(out, f.day.into(), 2),
        Std::UnderYearDay => out.push_str(&format!("{:>3}", f.yday)),
        Std::ZeroYearDay => push_int(out, f.yday.into(), 3),
        Std::Hour => push_int(out, f.hour.into(), 2),
        Std::Hour12 => push_int(out, hour12(f.hour).into(), 0),
        Std::ZeroHour12 => push_int(out, hour12(f.hour).into(), 2),
        Std::Minute => push_int(out, f.minute.into(), 0),
        Std::ZeroMinute => push_int(out, f.minute.into(), 2),
        Std::Second => push_int(out, f.second.into(), 0),
        Std::ZeroSecond => push_int(out, f.second.into(), 2),
        Std::LongYear => push_int(out, f.year, 4),
        Std::Year => push_int(out, f.year % 100, 2),
        Std::Pm => out.push_str(if f.hour >= 12 { "PM" } else { "AM" }),
        Std::PmLower => out.push_str(if f.hour >= 12 { "pm" } else { "am" }),
        Std::Tz if !t.zone.abbrev.is_empty() => out.push_str(&t.zone.abbrev),
        Std::Tz => write_zone(out, t.offset(), true, false, false),
        Std::NumTz { iso: true, .. } if t.offset() == 0 => out.push('Z'),
        Std::NumTz { colon, minutes, seconds, .. } => write_zone(out, t.offset(), minutes, colon, seconds),
        Std::Frac { sep, digits, trim } => {
            let all = format!("{:09}", f.nanos);
            let mut frac = &all[..digits.min(9)];
            if trim {
                frac = frac.trim_end_matches('0');
                if frac.is_empty() {
                    return;
                }
            }
            out.push(char::from(sep));
            out.push_str(frac);
            // Go pads layouts longer than nine digits with zeros.
            (9..digits).filter(|_| !trim).for_each(|_| out.push('0'));
        }
    }
}

/// `+hh[:]mm[[:]ss]` for an offset in seconds.
fn write_zone(out: &mut String, offset: i32, minutes: bool, colon: bool, seconds: bool) {
    let zone = offset / 60;
    out.push(if zone < 0 { '-' } else { '+' });
    let (zone, abs) = (zone.abs(), offset.abs());
    push_int(out, (zone / 60).into(), 2);
    if colon {
        out.push(':');
    }
    if minutes {
        push_int(out, (zone % 60).into(), 2);
    }
    if seconds {
        if colon {
            out.push(':');
        }
        push_int(out, (abs % 60).into(), 2);
    }
}

/// Couchbase's gatherNumber: up to `max` ASCII digits at the start of `s` (after spaces when
/// `leading_spaces`); the number (of at most nine digits when spaces are not counted) and the bytes consumed.
pub(crate) fn gather_number(s: &[u8], max: usize, leading_spaces: bool) -> (i64, usize) {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x85 | 0xa0);
    let (mut i, mut start, mut leading) = (0, 0, true);
    while i < s.len() && i < max {
        if leading && leading_spaces && is_space(s[i]) {
            start += 1;
            i += 1;
            continue;
        }
        if !s[i].is_ascii_digit() {
            break;
        }
        leading = false;
        i += 1;
    }
    if i == 0 || leading {
        return (0, 0);
    }
    let end = if i > 9 && !leading_spaces { 9 } else { i };
    let digits = &s[start..end.max(start)];
    (digits.iter().fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0'))), i)
}

/// The fields a parser gathers before building the time (Couchbase's parse state).
pub(crate) struct Parsed {
    pub century: Option<i64>,
    pub year: i64,
    pub year_seen: bool,
    pub month: Option<i64>,
    pub day: Option<i64>,
    pub yday: Option<i64>,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    pub nanos: i64,
    pub pm: bool,
    pub h12: bool,
    pub zone: Option<Zone>,
}

impl Parsed {
    pub(crate) fn new() -> Parsed {
        Parsed {
            century: None,
            year: 0,
            year_seen: false,
            month: None,
            day: None,
            yday: None,
            hour: 0,
            minute: 0,
            second: 0,
            nanos: 0,
            pm: false,
            h12: false,
            zone: None,
        }
    }

    /// A four-digit year: century and year within it.
    pub(crate) fn set_long_year(&mut self, y: i64) {
        self.century = Some(y / 100);
        self.year = y % 100;
    }

    /// The time the fields describe: two-digit years pivot at 69 (1969-2068), a missing month or day is 1, the
    /// day must exist, 12-hour clocks are converted, a missing zone is the local one.
    pub(crate) fn build(self) -> Option<DateTime> {
        let century = self.century.or(if self.year_seen { Some(if self.year >= 69 { 19 } else { 20 }) } else { None });
        let year = century.map_or(self.year, |c| c * 100 + self.year);
        let (mut month, mut day) = (self.month, self.day);
        if let Some(yday) = self.yday {
            let (m, d) = month_day_of_year(year, yday)?;
            if month.is_some_and(|x| x != m) || day.is_some_and(|x| x != d) {
                return None;
            }
            (month, day) = (Some(m), Some(d));
        }
        let (month, day) = (month.unwrap_or(1), day.unwrap_or(1));
        if !(1..=12).contains(&month) || day < 1 || day > i64::from(days_in_month(year, month as u32)) {
            return None;
        }
        let mut hour = self.hour;
        if self.h12 {
            if self.pm && hour < 12 {
                hour += 12;
            } else if !self.pm && hour == 12 {
                hour = 0;
            }
        }
        let zone = self.zone.unwrap_or(Zone::LOCAL);
        DateTime::from_fields(year, month, day, hour, self.minute, self.second, self.nanos, zone)
    }
}

/// Month and day of a day of the year (1..=366).
fn month_day_of_year(year: i64, yday: i64) -> Option<(i64, i64)> {
    let mut left = yday;
    for m in 1..=12 {
        let len = i64::from(days_in_month(year, m));
        if left <= len {
            return (left >= 1).then_some((i64::from(m), left));
        }
        left -= len;
    }
    None
}

/// A name from `names` (or its first three letters when `short`) at the start of `s`: its index and length.
pub(crate) fn name_at(s: &[u8], names: &[&str], short: bool) -> Option<(usize, usize)> {
    names.iter().enumerate().find_map(|(i, n)| {
        let n = if short { &n[..3] } else { n };
        s.starts_with(n.as_bytes()).then_some((i, n.len()))
    })
}

/// Parses `s` with a Go layout the way Couchbase's strToTimeGoFormat does.
pub(crate) fn parse(s: &str, layout: &str) -> Option<DateTime> {
    let (s, f) = (s.as_bytes(), layout.as_bytes());
    let mut p = Parsed::new();
    let (mut i, mut n) = (0, 0);
    while i < f.len() && n < s.len() {
        if f[i] == b' ' && s[n] == b' ' {
            // A space matches any run of spaces; runs of spaces in the layout count as one.
            while i < f.len() && f[i] == b' ' {
                i += 1;
            }
            while n < s.len() && s[n] == b' ' {
                n += 1;
            }
            continue;
        }
        let (used, consumed) = parse_element(&f[i..], &s[n..], s, n, &mut p)?;
        i += used;
        n += consumed;
    }
    if i != f.len() || n != s.len() {
        return None;
    }
    p.build()
}

/// One layout element at the start of `f` against the text at `s[n..]` (`rest`): layout bytes used and text bytes
/// consumed, or `None` when the text does not match.
fn parse_element(f: &[u8], rest: &[u8], s: &[u8], n: usize, p: &mut Parsed) -> Option<(usize, usize)> {
    let has = |pat: &str| f.starts_with(pat.as_bytes());
    let number = |max: usize, spaces: bool, ok: &dyn Fn(i64, usize) -> bool| {
        let (v, len) = gather_number(rest, max, spaces);
        ok(v, len).then_some((v, len))
    };
    let one_or_two = |v: i64, len: usize, lo: i64, hi: i64| (len == 1 || len == 2) && (lo..=hi).contains(&v);
    if has("January") || has("Jan") {
        let short = !has("January");
        let (m, len) = name_at(rest, &MONTHS, short)?;
        p.month = Some(m as i64 + 1);
        return Some((if short { 3 } else { 7 }, len));
    }
    if has("Monday") || has("Mon") {
        let short = !has("Monday");
        let (_, len) = name_at(rest, &WEEKDAYS, short)?;
        return Some((if short { 3 } else { 6 }, len));
    }
    if has("2006") {
        let (y, len) = number(4, false, &|v, len| len == 4 && v >= 0)?;
        p.set_long_year(y);
        return Some((4, len));
    }
    if has("MST") {
        let (end, zone) = gather_zone(s, n, formats::NAME)?;
        p.zone = Some(zone);
        return Some((3, end - n));
    }
    if has("__2") || has("002") {
        let exact = has("002");
        let (d, len) = number(3, true, &|v, len| {
            (if exact { len == 3 } else { (1..=3).contains(&len) }) && (1..=366).contains(&v)
        })?;
        p.yday = Some(d);
        return Some((3, len));
    }
    let two = |p: &mut Parsed, field: fn(&mut Parsed) -> &mut i64, v: (i64, usize)| {
        *field(p) = v.0;
        Some((2, v.1))
    };
    match f.get(..2) {
        Some(b"01") => {
            return number(2, true, &|v, len| len == 2 && (1..=12).contains(&v)).map(|(v, len)| {
                p.month = Some(v);
                (2, len)
            })
        }
        Some(b"02") => {
            return number(2, true, &|v, len| len == 2 && (1..=31).contains(&v)).map(|(v, len)| {
                p.day = Some(v);
                (2, len)
            })
        }
        Some(b"_2") => {
            return number(2, false, &|v, len| one_or_two(v, len, 1, 31)).map(|(v, len)| {
                p.day = Some(v);
                (2, len)
            })
        }
        Some(b"15") => {
            p.h12 = false;
            return two(p, |p| &mut p.hour, number(2, false, &|v, len| one_or_two(v, len, 0, 23))?);
        }
        Some(b"03") => {
            p.h12 = true;
            return two(p, |p| &mut p.hour, number(2, true, &|v, len| len == 2 && (1..=12).contains(&v))?);
        }
        Some(b"PM") | Some(b"pm") => {
            let (am, pm) = if f[0] == b'P' { (b'A', b'P') } else { (b'a', b'p') };
            match rest.first() {
                Some(&c) if rest.len() >= 2 && (c == am || c == pm) => p.pm = c == pm,
                _ => return None,
            }
            return Some((2, 2));
        }
        Some(b"04") => return two(p, |p| &mut p.minute, number(2, true, &|v, len| len == 2 && (0..=59).contains(&v))?),
        Some(b"05") => return two(p, |p| &mut p.second, number(2, true, &|v, len| len == 2 && (0..=59).contains(&v))?),
        Some(b"06") => {
            p.year_seen = true;
            return two(p, |p| &mut p.year, number(2, true, &|v, len| len == 2 && (0..=99).contains(&v))?);
        }
        // A fraction only when the run of 0s or 9s ends the number (Go's rule; Couchbase's parser would also read
        // the `.0` of `2006.01.02` as a fraction).
        Some(b".0") | Some(b".9") if !f[1..].iter().find(|&&b| b != f[1]).is_some_and(u8::is_ascii_digit) => {
            if rest.first() != Some(&b'.') {
                return None;
            }
            let ch = f[1];
            let run = f[1..].iter().take_while(|&&b| b == ch).count();
            let digits = &rest[1..];
            let (v, len) = if ch == b'0' { gather_number(digits, run, false) } else { gather_number(digits, 9, true) };
            if len == 0 || (ch == b'0' && len != run) {
                return None;
            }
            p.nanos = v * 10i64.pow(9 - len.min(9) as u32);
            return Some((1 + run, 1 + len));
        }
        _ => {}
    }
    let single = |lo: i64, hi: i64| number(2, false, &move |v, len| one_or_two(v, len, lo, hi));
    match f[0] {
        b'1' => {
            return single(1, 12).map(|(v, len)| {
                p.month = Some(v);
                (1, len)
            })
        }
        b'2' => {
            return single(1, 31).map(|(v, len)| {
                p.day = Some(v);
                (1, len)
            })
        }
        b'3' => {
            p.h12 = true;
            return single(1, 12).map(|(v, len)| {
                p.hour = v;
                (1, len)
            });
        }
        b'4' => {
            return single(0, 59).map(|(v, len)| {
                p.minute = v;
                (1, len)
            })
        }
        b'5' => {
            return single(0, 59).map(|(v, len)| {
                p.second = v;
                (1, len)
            })
        }
        c @ (b'Z' | b'-') => {
            let spelled = ZONE_LAYOUTS.iter().zip([
                formats::THREE_PART,
                formats::TWO_COLON,
                formats::TWO_PART,
                formats::ONE_COLON,
                formats::ONE_PART,
            ]);
            let found = spelled.into_iter().find(|((pat, ..), _)| f[1..].starts_with(pat.as_bytes()));
            if found.is_some() || c == b'Z' {
                let (layout_len, mut allowed) = found.map_or((1, 0), |((pat, ..), bits)| (1 + pat.len(), bits));
                if c == b'Z' {
                    allowed |= formats::ALLOW_Z;
                }
                let (end, zone) = gather_zone(s, n, allowed)?;
                p.zone = Some(zone);
                return Some((layout_len, end - n));
            }
        }
        _ => {}
    }
    (f[0] == rest[0]).then_some((1, 1))
}
