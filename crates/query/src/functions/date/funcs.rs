//! The date functions themselves: argument rules (each follows its Couchbase counterpart, which checks some
//! arguments before evaluating others) and the conversions between numbers, strings and times.

use super::super::args::{arg, f64_of, int, is_num, is_str, num, str_of, unknown, whole};
use super::super::FnContext;
use super::arith::{date_add, date_diff, date_part, date_trunc};
use super::formats::{closest, example_of, str_to_time, time_to_str};
use super::layout;
use super::time::{DateTime, WEEKDAYS};
use super::zone::{load_location, Zone};
use crate::value::Value;
use crate::QueryError;

type Res = Result<Value, QueryError>;

fn now(ctx: &FnContext<'_>) -> DateTime {
    DateTime::from_unix_nanos(ctx.now_nanos, Zone::LOCAL)
}

fn clock(ctx: &FnContext<'_>) -> DateTime {
    DateTime::from_unix_nanos((ctx.clock)(), Zone::LOCAL)
}

/// The optional format argument at `i`: `Ok("")` when absent, `Err(MISSING/NULL)` when it is not a string.
fn format_arg(args: &[Value], i: usize) -> Result<&str, Value> {
    match args.get(i) {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(Value::Missing) => Err(Value::Missing),
        Some(_) => Err(Value::Null),
    }
}

/// A time as a string with an optional format argument (CLOCK_STR, NOW_UTC...).
fn time_str(args: &[Value], t: DateTime) -> Res {
    Ok(match format_arg(args, 0) {
        Ok(f) => Value::from(time_to_str(&t, f)),
        Err(v) => v,
    })
}

/// A time in the zone named by the first argument, written with the optional second (CLOCK_TZ, NOW_TZ).
fn time_in_zone(args: &[Value], t: DateTime) -> Res {
    if let Some(v) = unknown(args, |_, v| is_str(v)) {
        return Ok(v);
    }
    let Some(zone) = load_location(str_of(&args[0])) else { return Ok(Value::Null) };
    Ok(Value::from(time_to_str(&t.in_zone(zone), format_arg(args, 1).unwrap_or(""))))
}

pub(super) fn clock_millis(_: &[Value], ctx: &FnContext<'_>) -> Res {
    Ok(num(clock(ctx).to_millis()))
}

pub(super) fn clock_str(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_str(args, clock(ctx))
}

pub(super) fn clock_utc(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_str(args, clock(ctx).in_zone(Zone::UTC))
}

pub(super) fn clock_tz(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_in_zone(args, clock(ctx))
}

pub(super) fn now_millis(_: &[Value], ctx: &FnContext<'_>) -> Res {
    Ok(num(now(ctx).to_millis()))
}

pub(super) fn now_str(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_str(args, now(ctx))
}

pub(super) fn now_utc(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_str(args, now(ctx).in_zone(Zone::UTC))
}

pub(super) fn now_tz(args: &[Value], ctx: &FnContext<'_>) -> Res {
    time_in_zone(args, now(ctx))
}

/// Milliseconds as a local time; `None` for a value out of range.
fn from_millis(v: &Value) -> Option<DateTime> {
    DateTime::from_millis(f64_of(v), Zone::LOCAL)
}

fn or_null(t: Option<Value>) -> Value {
    t.unwrap_or(Value::Null)
}

pub(super) fn date_add_millis(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i < 2 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let (Some(t), Some(n)) = (from_millis(&args[0]), whole(&args[1])) else { return Ok(Value::Null) };
    Ok(or_null(date_add(&t, n, str_of(&args[2]))?.map(|t| num(t.to_millis()))))
}

/// DATE_ADD_STR: the result is written in the layout the input was recognised by.
pub(super) fn date_add_str(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 1 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some((t, format)) = closest(str_of(&args[0])) else { return Ok(Value::Null) };
    let Some(n) = whole(&args[1]) else { return Ok(Value::Null) };
    Ok(or_null(date_add(&t, n, str_of(&args[2]))?.map(|t| Value::from(layout::format(&t, &format)))))
}

pub(super) fn date_diff_millis(args: &[Value], absolute: bool) -> Res {
    if let Some(v) = unknown(args, |i, v| if i < 2 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let (Some(a), Some(b)) = (from_millis(&args[0]), from_millis(&args[1])) else { return Ok(Value::Null) };
    let d = date_diff(&a, &b, str_of(&args[2]))?;
    Ok(int(if absolute { d.abs() } else { d }))
}

pub(super) fn date_diff_str(args: &[Value], absolute: bool) -> Res {
    if let Some(v) = unknown(args, |_, v| is_str(v)) {
        return Ok(v);
    }
    let (Some(a), Some(b)) = (str_to_time(str_of(&args[0]), ""), str_to_time(str_of(&args[1]), "")) else {
        return Ok(Value::Null);
    };
    let d = date_diff(&a, &b, str_of(&args[2]))?;
    Ok(int(if absolute { d.abs() } else { d }))
}

/// DATE_FORMAT_STR(date, out_format) or (date, in_format, out_format).
pub(super) fn date_format_str(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_str(v)) {
        return Ok(v);
    }
    let input_format = if args.len() == 3 { str_of(&args[1]) } else { "" };
    let Some(t) = str_to_time(str_of(&args[0]), input_format) else { return Ok(Value::Null) };
    Ok(Value::from(time_to_str(&t, str_of(&args[args.len() - 1]))))
}

pub(super) fn date_part_millis(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(mut t) = from_millis(&args[0]) else { return Ok(Value::Null) };
    if let Some(tz) = args.get(2) {
        let Some(zone) = load_location(str_of(tz)) else { return Ok(Value::Null) };
        t = t.in_zone(zone);
    }
    Ok(int(date_part(&t, str_of(&args[1]))?))
}

pub(super) fn date_part_str(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_str(v)) {
        return Ok(v);
    }
    let Some(t) = str_to_time(str_of(&args[0]), "") else { return Ok(Value::Null) };
    Ok(int(date_part(&t, str_of(&args[1]))?))
}

/// DATE_TRUNC_MILLIS truncates in UTC.
pub(super) fn date_trunc_millis(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(t) = from_millis(&args[0]) else { return Ok(Value::Null) };
    Ok(num(date_trunc(&t.in_zone(Zone::UTC), str_of(&args[1]))?.to_millis()))
}

/// DATE_TRUNC_STR(date, part [, format]): without a format the input's own shape is kept.
pub(super) fn date_trunc_str(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(&args[..2.min(args.len())], |_, v| is_str(v)) {
        return Ok(v);
    }
    let s = str_of(&args[0]);
    let format = match format_arg(args, 2) {
        Ok("") if args.len() < 3 => example_of(s),
        Ok(f) => f.to_string(),
        Err(v) => return Ok(v),
    };
    let Some(t) = str_to_time(s, &format) else { return Ok(Value::Null) };
    Ok(Value::from(time_to_str(&date_trunc(&t, str_of(&args[1]))?, &format)))
}

/// Milliseconds written in a zone with an optional format (the argument after the zone, or the second).
fn millis_in(args: &[Value], zone: Option<Zone>, format_at: usize) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(t) = from_millis(&args[0]) else { return Ok(Value::Null) };
    let t = zone.map_or(t.clone(), |z| t.in_zone(z));
    Ok(Value::from(time_to_str(&t, format_arg(args, format_at).unwrap_or(""))))
}

pub(super) fn millis_to_str(args: &[Value], _: &FnContext<'_>) -> Res {
    millis_in(args, None, 1)
}

pub(super) fn millis_to_utc(args: &[Value], _: &FnContext<'_>) -> Res {
    millis_in(args, Some(Zone::UTC), 1)
}

pub(super) fn millis_to_zone_name(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    match load_location(str_of(&args[1])) {
        Some(zone) => millis_in(args, Some(zone), 2),
        None => Ok(Value::Null),
    }
}

/// STR_TO_MILLIS(date [, format]): the date argument is checked before the format.
pub(super) fn str_to_millis(args: &[Value], _: &FnContext<'_>) -> Res {
    let s = match arg(args, 0) {
        Value::Missing => return Ok(Value::Missing),
        Value::String(s) => s,
        _ => return Ok(Value::Null),
    };
    let format = match format_arg(args, 1) {
        Ok(f) => f,
        Err(v) => return Ok(v),
    };
    Ok(or_null(str_to_time(s, format).map(|t| num(t.to_millis()))))
}

/// STR_TO_UTC(date [, format [, out_format]]): the output keeps the input's format unless one is given.
pub(super) fn str_to_utc(args: &[Value], _: &FnContext<'_>) -> Res {
    let s = match arg(args, 0) {
        Value::Missing => return Ok(Value::Missing),
        Value::String(s) => s,
        _ => return Ok(Value::Null),
    };
    convert(s, Zone::UTC, args, 1, true)
}

/// STR_TO_ZONE_NAME / STR_TO_TZ(date, zone [, format [, out_format]]).
pub(super) fn str_to_zone_name(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(&args[..2.min(args.len())], |_, v| is_str(v)) {
        return Ok(v);
    }
    let Some(zone) = load_location(str_of(&args[1])) else { return Ok(Value::Null) };
    convert(str_of(&args[0]), zone, args, 2, false)
}

/// Parses `s` with the format at `args[at]` (when absent: the default layouts if `default_parse`, else an example
/// of its own shape) and writes it in `zone` with the format at `args[at + 1]` (when absent: the input format, or
/// the example).
fn convert(s: &str, zone: Zone, args: &[Value], at: usize, default_parse: bool) -> Res {
    let out = match args.get(at + 1) {
        Some(_) => match format_arg(args, at + 1) {
            Ok(f) => Some(f.to_string()),
            Err(v) => return Ok(v),
        },
        None => None,
    };
    let (in_format, out_format) = match args.get(at) {
        Some(_) => {
            let f = match format_arg(args, at) {
                Ok(f) => f.to_string(),
                Err(v) => return Ok(v),
            };
            (f.clone(), out.unwrap_or(f))
        }
        None => {
            let example = example_of(s);
            (if default_parse { String::new() } else { example.clone() }, example)
        }
    };
    let Some(t) = str_to_time(s, &in_format) else { return Ok(Value::Null) };
    Ok(Value::from(time_to_str(&t.in_zone(zone), &out_format)))
}

pub(super) fn weekday_millis(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_str(v) }) {
        return Ok(v);
    }
    let Some(mut t) = from_millis(&args[0]) else { return Ok(Value::Null) };
    if let Some(tz) = args.get(1) {
        let Some(zone) = load_location(str_of(tz)) else { return Ok(Value::Null) };
        t = t.in_zone(zone);
    }
    Ok(Value::string(WEEKDAYS[t.fields().weekday as usize]))
}

pub(super) fn weekday_str(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::String(s) => or_null(str_to_time(s, "").map(|t| Value::string(WEEKDAYS[t.fields().weekday as usize]))),
        _ => Value::Null,
    })
}
