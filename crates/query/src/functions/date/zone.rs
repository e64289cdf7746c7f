//! Time zones: UTC, the server's local zone (UTC in settee, which has no time zone database), fixed offsets, and
//! the zone names Couchbase accepts (its gatherZone and loadLocation).
//!
//! Named zones other than the fixed ones (UTC, GMT, Etc/GMT±N, their aliases, "Local") would need the IANA time
//! zone database: they are not known here, so functions given one return NULL.

use std::borrow::Cow;

/// A zone: its offset east of UTC in seconds, the abbreviation formats print (`MST`, `%Z`, `TZN`), and the
/// location name (`%^Z`, `TZF`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Zone {
    pub offset: i32,
    pub abbrev: Cow<'static, str>,
    pub location: Cow<'static, str>,
}

impl Zone {
    pub(crate) const UTC: Zone = Zone { offset: 0, abbrev: Cow::Borrowed("UTC"), location: Cow::Borrowed("UTC") };

    /// The server's zone: settee runs on UTC.
    pub(crate) const LOCAL: Zone = Zone { offset: 0, abbrev: Cow::Borrowed("UTC"), location: Cow::Borrowed("Local") };

    /// Go's `FixedZone(name, offset)`.
    pub(crate) fn fixed(name: String, offset: i32) -> Zone {
        Zone { offset, abbrev: Cow::Owned(name.clone()), location: Cow::Owned(name) }
    }

    /// Couchbase's getLocation for a parsed numeric offset: a fixed zone named like `+0530`. Unlike Couchbase, an
    /// offset of -01:xx is not mistaken for "no zone", and -00:30 keeps its sign.
    pub(crate) fn from_offset(negative: bool, hours: i32, minutes: i32) -> Zone {
        let negative = negative && (hours, minutes) != (0, 0);
        let sign = if negative { '-' } else { '+' };
        let offset = (hours * 3600 + minutes * 60) * if negative { -1 } else { 1 };
        Zone::fixed(format!("{sign}{hours:02}{minutes:02}"), offset)
    }
}

/// Which zone spellings a parser accepts (Couchbase's _FORMAT_* bits).
pub(crate) mod formats {
    pub(crate) const TWO_COLON: u32 = 1;
    pub(crate) const ONE_COLON: u32 = 1 << 1;
    pub(crate) const THREE_PART: u32 = 1 << 2;
    pub(crate) const TWO_PART: u32 = 1 << 3;
    pub(crate) const ONE_PART: u32 = 1 << 4;
    pub(crate) const NAME: u32 = 1 << 5;
    pub(crate) const ALLOW_Z: u32 = 1 << 6;
    pub(crate) const ALL: u32 = u32::MAX;
}

fn digits(s: &[u8], at: &[usize]) -> bool {
    at.iter().all(|&i| s.get(i).is_some_and(u8::is_ascii_digit))
}

fn number(s: &[u8], from: usize, to: usize) -> i32 {
    s[from..to].iter().fold(0, |n, d| n * 10 + i32::from(d - b'0'))
}

/// Couchbase's gatherZone: a zone at byte `n` of `s` in one of the `allowed` spellings (`+hh:mm:ss`, `+hh:mm`,
/// `+hhmmss`, `+hhmm`, `+hh`, `Z`, or a name); the position after it and the zone, or `None`.
pub(crate) fn gather_zone(s: &[u8], n: usize, allowed: u32) -> Option<(usize, Zone)> {
    use formats::*;
    let signed = matches!(s.get(n), Some(b'+' | b'-'));
    let negative = s.get(n) == Some(&b'-');
    let numeric = |len: usize, hh: usize, mm: Option<usize>, ss: Option<usize>| {
        let (h, m) = (number(s, n + hh, n + hh + 2), mm.map_or(0, |i| number(s, n + i, n + i + 2)));
        let sec = ss.map_or(0, |i| number(s, n + i, n + i + 2));
        let (lo, hi) = if negative { (0, 12) } else { (0, 14) };
        ((lo..=hi).contains(&h) && m <= 59 && sec <= 59).then(|| (n + len, Zone::from_offset(negative, h, m)))
    };
    let at = |i: usize, c: u8| s.get(n + i) == Some(&c);
    if allowed & TWO_COLON != 0
        && signed
        && at(3, b':')
        && at(6, b':')
        && digits(s, &[n + 1, n + 2, n + 4, n + 5, n + 7, n + 8])
    {
        return numeric(9, 1, Some(4), Some(7));
    }
    if allowed & ONE_COLON != 0 && signed && at(3, b':') && digits(s, &[n + 1, n + 2, n + 4, n + 5]) {
        return numeric(6, 1, Some(4), None);
    }
    if allowed & THREE_PART != 0 && signed && digits(s, &[n + 1, n + 2, n + 3, n + 4, n + 5, n + 6]) {
        return numeric(7, 1, Some(3), Some(5));
    }
    if allowed & TWO_PART != 0 && signed && digits(s, &[n + 1, n + 2, n + 3, n + 4]) {
        return numeric(5, 1, Some(3), None);
    }
    if allowed & ONE_PART != 0 && signed && digits(s, &[n + 1, n + 2]) {
        return numeric(3, 1, None, None);
    }
    if allowed & ALLOW_Z != 0 && s.get(n) == Some(&b'Z') {
        return Some((n + 1, Zone::from_offset(false, 0, 0)));
    }
    if allowed & NAME != 0 {
        let rest = std::str::from_utf8(s.get(n..)?).ok()?;
        let token =
            rest.split(|c: char| !(c.is_alphanumeric() || "/_+-".contains(c))).find(|t| !t.is_empty()).unwrap_or("");
        let token = token.trim_end_matches(['+', '-', '/', '_']);
        let start = rest.find(token).unwrap_or(0);
        return named_zone(token).map(|z| (n + start + token.len(), z));
    }
    None
}

/// A zone by name, as Go's LoadLocation would find it without a time zone database: UTC and its aliases, GMT,
/// `GMT+5`-style offsets (Couchbase's own reading, hours east), `Etc/GMT+5`-style zones (hours west, as IANA
/// defines them) and "Local". Anything else is unknown.
pub(crate) fn named_zone(name: &str) -> Option<Zone> {
    // Couchbase's own GMT+h / GMT-h spelling, checked before any zone lookup: any number of hour digits, at most
    // 23 hours, counted east.
    if let Some(rest) = name.strip_prefix("GMT") {
        let (west, digits) = match (rest.strip_prefix('+'), rest.strip_prefix('-')) {
            (Some(d), _) => (false, d),
            (_, Some(d)) => (true, d),
            _ => (false, ""),
        };
        if digits.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
            let h: i32 = digits.parse().ok().filter(|h| *h <= 23)?;
            return Some(Zone::fixed(name.to_string(), if west { -h * 3600 } else { h * 3600 }));
        }
    }
    let utc = |location: &'static str| Zone { location: Cow::Borrowed(location), ..Zone::UTC };
    let gmt =
        |location: &'static str| Zone { offset: 0, abbrev: Cow::Borrowed("GMT"), location: Cow::Borrowed(location) };
    match name {
        "" | "UTC" => return Some(Zone::UTC),
        "Local" => return Some(Zone::LOCAL),
        "Etc/UTC" => return Some(utc("Etc/UTC")),
        "UCT" => return Some(utc("UCT")),
        "Etc/UCT" => return Some(utc("Etc/UCT")),
        "Universal" => return Some(utc("Universal")),
        "Etc/Universal" => return Some(utc("Etc/Universal")),
        "Zulu" => return Some(utc("Zulu")),
        "Etc/Zulu" => return Some(utc("Etc/Zulu")),
        "GMT" => return Some(gmt("GMT")),
        "Etc/GMT" => return Some(gmt("Etc/GMT")),
        "GMT0" => return Some(gmt("GMT0")),
        "Etc/GMT0" | "Etc/GMT+0" | "Etc/GMT-0" => return Some(gmt("Etc/GMT0")),
        "Greenwich" => return Some(gmt("Greenwich")),
        "Etc/Greenwich" => return Some(gmt("Etc/Greenwich")),
        _ => {}
    }
    if let Some(hours) = name.strip_prefix("Etc/GMT") {
        let (west, digits) = match (hours.strip_prefix('+'), hours.strip_prefix('-')) {
            (Some(d), _) => (true, d),
            (_, Some(d)) => (false, d),
            _ => return None,
        };
        if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let h: i32 = digits.parse().ok()?;
        // IANA's Etc zones count hours west: Etc/GMT+5 is five hours behind UTC.
        let east = match west {
            true if (1..=12).contains(&h) => -h,
            false if (1..=14).contains(&h) => h,
            _ => return None,
        };
        let abbrev = format!("{}{:02}", if east < 0 { '-' } else { '+' }, east.abs());
        return Some(Zone { offset: east * 3600, abbrev: Cow::Owned(abbrev), location: Cow::Owned(name.to_string()) });
    }
    None
}

/// Couchbase's loadLocation: a zone in any spelling at the start of `tz` (what follows it is ignored).
pub(crate) fn load_location(tz: &str) -> Option<Zone> {
    gather_zone(tz.as_bytes(), 0, formats::ALL).map(|(_, z)| z)
}
