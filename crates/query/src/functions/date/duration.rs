//! DURATION_TO_STR and STR_TO_DURATION: nanoseconds to and from text in Couchbase's duration styles.
//!
//! Styles: `legacy` (Go's Duration text, `1h2m3.5s`, the default), `compatible` (seconds with an `s`),
//! `seconds` (plain seconds), `interval` (`h:mm:ss.fffffffff`). STR_TO_DURATION without a style reads `h:m:s`
//! intervals when the text has a colon, else seconds, else Go's duration syntax.

use super::super::args::{arg, f64_of, int, is_num, is_str, str_of, unknown};
use crate::value::Value;
use crate::QueryError;

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Legacy,
    Interval,
    Compatible,
    Seconds,
    /// Reading only: interval or seconds by the text's shape, falling back to Go's syntax.
    Default,
}

fn style(name: &str) -> Option<Style> {
    Some(match name.to_ascii_lowercase().as_str() {
        "legacy" => Style::Legacy,
        "interval" => Style::Interval,
        "compatible" => Style::Compatible,
        "seconds" => Style::Seconds,
        "default" => Style::Default,
        _ => return None,
    })
}

pub(super) fn duration_to_str(args: &[Value]) -> Result<Value, QueryError> {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let style = match args.get(1).map(str_of).filter(|s| !s.is_empty()) {
        None => Style::Legacy,
        Some(name) => match style(name) {
            Some(Style::Default) => Style::Legacy,
            Some(s) => s,
            None => return Ok(Value::Null),
        },
    };
    // Go converts the float to an integer Duration; out-of-range values saturate here.
    let d = f64_of(arg(args, 0)) as i64;
    Ok(Value::from(format_duration(d, style)))
}

pub(super) fn str_to_duration(args: &[Value]) -> Result<Value, QueryError> {
    if let Some(v) = unknown(args, |_, v| is_str(v)) {
        return Ok(v);
    }
    let style = match args.get(1).map(str_of).filter(|s| !s.is_empty()) {
        None => Style::Default,
        Some(name) => match style(name) {
            Some(s) => s,
            None => return Ok(Value::Null),
        },
    };
    Ok(parse_duration_style(str_of(arg(args, 0)), style).map_or(Value::Null, int))
}

fn format_duration(d: i64, style: Style) -> String {
    let seconds = || trim_zeros(format!("{:.9}", d as f64 / 1e9));
    match style {
        Style::Interval => trim_zeros(interval(d)),
        Style::Compatible => seconds() + "s",
        Style::Seconds => seconds(),
        Style::Legacy | Style::Default => go_duration(d),
    }
}

/// Couchbase's trimTrailingZeros: six or three trailing zeros dropped.
fn trim_zeros(mut s: String) -> String {
    if s.len() > 6 && s.ends_with("000000") {
        s.truncate(s.len() - 6);
    } else if s.len() > 3 && s.ends_with("000") {
        s.truncate(s.len() - 3);
    }
    s
}

/// `h:mm:ss.fffffffff` (Couchbase's ToQualifiedInterval from hours to nanoseconds, uncapped).
fn interval(d: i64) -> String {
    let sign = if d < 0 { "-" } else { "" };
    let n = d.unsigned_abs();
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let (s, frac) = (rest / 1_000_000_000, rest % 1_000_000_000);
    format!("{sign}{h}:{m:02}:{s:02}.{frac:09}")
}

/// Go's `Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
fn go_duration(d: i64) -> String {
    let sign = if d < 0 { "-" } else { "" };
    let u = d.unsigned_abs();
    // A value with its fractional digits (trailing zeros and a bare point dropped).
    let fixed = |v: u64, prec: u32| {
        let scale = 10u64.pow(prec);
        let frac = format!("{:0width$}", v % scale, width = prec as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            (v / scale).to_string()
        } else {
            format!("{}.{frac}", v / scale)
        }
    };
    if u == 0 {
        return "0s".to_string();
    }
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            0..=999 => (0, "ns"),
            1_000..=999_999 => (3, "µs"),
            _ => (6, "ms"),
        };
        return format!("{sign}{}{unit}", fixed(u, prec));
    }
    let secs = fixed(u % 60_000_000_000, 9);
    let minutes = u / 60_000_000_000;
    match (minutes / 60, minutes % 60) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

fn parse_duration_style(s: &str, style: Style) -> Option<i64> {
    let fallback = style == Style::Default;
    let style = match style {
        Style::Default if s.contains(':') => Style::Interval,
        Style::Default => Style::Seconds,
        other => other,
    };
    let seconds =
        |text: &str| -> Option<f64> { text.parse::<f64>().ok().filter(|f| f.is_finite() || text.contains("nf")) };
    match style {
        Style::Seconds => match seconds(s) {
            Some(f) => Some((f * 1e9) as i64),
            None if fallback => parse_go_duration(s),
            None => None,
        },
        Style::Interval => {
            let parts: Vec<&str> = s.split(':').collect();
            let (h, m, sec) = match parts.as_slice() {
                [h, m, sec] => (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?, *sec),
                [m, sec] => (0, m.parse::<i64>().ok()?, *sec),
                [sec] => (0, 0, *sec),
                _ => return None,
            };
            let sec = match seconds(sec) {
                Some(f) => f,
                None if fallback && parts.len() == 1 => return parse_go_duration(s),
                None => return None,
            };
            let whole = h.checked_mul(3_600_000_000_000)?.checked_add(m.checked_mul(60_000_000_000)?)?;
            whole.checked_add((sec * 1e9) as i64)
        }
        _ => parse_go_duration(s),
    }
}

/// Go's `time.ParseDuration`: `[-+]` then one or more of `<digits>[.<digits>]<unit>`, units ns, us, µs, μs, ms, s,
/// m, h; or a bare `0`.
fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole: u64 = if int_len == 0 { 0 } else { rest[..int_len].parse().ok()? };
        rest = &rest[int_len..];
        let mut frac = "";
        if let Some(r) = rest.strip_prefix('.') {
            let len = r.bytes().take_while(u8::is_ascii_digit).count();
            (frac, rest) = (&r[..len], &r[len..]);
        }
        if int_len == 0 && frac.is_empty() {
            return None;
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let mut v = whole.checked_mul(unit)?;
        if !frac.is_empty() {
            let scale = 10f64.powi(frac.len().min(300) as i32);
            let f: f64 = frac.parse::<f64>().ok()? * (unit as f64 / scale);
            v = v.checked_add(f as u64)?;
        }
        total = total.checked_add(v)?;
    }
    if neg {
        0i64.checked_sub_unsigned(total)
    } else {
        i64::try_from(total).ok()
    }
}
