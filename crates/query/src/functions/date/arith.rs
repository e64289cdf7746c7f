//! Date parts, addition, truncation and differences (Couchbase's datePart, dateAdd, dateTrunc and dateDiff).
//!
//! An unknown part name is an evaluation error, as in Couchbase; an addition that leaves the supported range is
//! `Ok(None)` (NULL).

use super::time::{days_in_month, DateTime};
use crate::QueryError;

const NANOS_PER_MILLI: i128 = 1_000_000;
const NANOS_PER_SEC: i128 = 1_000 * NANOS_PER_MILLI;

fn unsupported(what: &str, part: &str) -> QueryError {
    QueryError::eval(format!("Unsupported date {what} part {part}."))
}

/// The value of a date part (`year`, `month`, `iso_week`, `timezone_hour`...) of `t` in its zone.
pub(crate) fn date_part(t: &DateTime, part: &str) -> Result<i64, QueryError> {
    let f = t.fields();
    let offset = i64::from(t.offset());
    Ok(match part.to_ascii_lowercase().as_str() {
        "millennium" => f.year / 1000 + 1,
        "century" => f.year / 100 + 1,
        "decade" => f.year / 10,
        "year" => f.year,
        "quarter" => i64::from(f.month.div_ceil(3)),
        "month" | "calendar_month" => f.month.into(),
        "day" => f.day.into(),
        "hour" => f.hour.into(),
        "minute" => f.minute.into(),
        "second" => f.second.into(),
        "millisecond" => i64::from(f.nanos / 1_000_000),
        "week" => (i64::from(f.yday) + 6) / 7,
        "day_of_year" | "doy" => f.yday.into(),
        "day_of_week" | "dow" => f.weekday.into(),
        "iso_week" => t.iso_week().1.into(),
        "iso_year" => t.iso_week().0,
        "iso_dow" => i64::from(if f.weekday == 0 { 7 } else { f.weekday }),
        "timezone" => offset,
        "timezone_hour" => offset / 3600,
        "timezone_minute" => (offset - offset / 3600 * 3600) / 60,
        _ => return Err(QueryError::eval(format!("Unsupported date part {part}."))),
    })
}

/// `n` parts added to `t`: calendar parts through the calendar (Go's AddDate), clock parts as durations.
pub(crate) fn date_add(t: &DateTime, n: i64, part: &str) -> Result<Option<DateTime>, QueryError> {
    let years = |k: i64| n.checked_mul(k).and_then(|y| t.add_date(y, 0, 0));
    let duration = |unit: i128| t.add_nanos(i128::from(n) * unit);
    Ok(match part.to_ascii_lowercase().as_str() {
        "millennium" => years(1000),
        "century" => years(100),
        "decade" => years(10),
        "year" => years(1),
        "quarter" => n.checked_mul(3).and_then(|m| t.add_date(0, m, 0)),
        "month" => t.add_date(0, n, 0),
        "calendar_month" => add_calendar_months(t, n),
        "week" => n.checked_mul(7).and_then(|d| t.add_date(0, 0, d)),
        "day" => t.add_date(0, 0, n),
        "hour" => duration(3600 * NANOS_PER_SEC),
        "minute" => duration(60 * NANOS_PER_SEC),
        "second" => duration(NANOS_PER_SEC),
        "millisecond" => duration(NANOS_PER_MILLI),
        _ => return Err(unsupported("add", part)),
    })
}

/// Months added keeping to the month's end: the last day of a month stays the last day, and a day past the end of
/// the new month becomes its last day (2021-01-31 plus one is 2021-02-28).
fn add_calendar_months(t: &DateTime, n: i64) -> Option<DateTime> {
    if n == 0 {
        return Some(t.clone());
    }
    let f = t.fields();
    let last = f.day == days_in_month(f.year, f.month);
    let months = f.year.checked_mul(12)?.checked_add(i64::from(f.month) - 1)?.checked_add(n)?;
    let (year, month) = (months.div_euclid(12), months.rem_euclid(12) as u32 + 1);
    let len = days_in_month(year, month);
    let day = if last { len } else { f.day.min(len) };
    DateTime::from_fields(
        year,
        month.into(),
        day.into(),
        f.hour.into(),
        f.minute.into(),
        f.second.into(),
        f.nanos.into(),
        t.zone.clone(),
    )
}

/// `t` with everything below `part` set to its start (midnight, the first of the month, Sunday for `week`,
/// Monday for `iso_week`...).
pub(crate) fn date_trunc(t: &DateTime, part: &str) -> Result<DateTime, QueryError> {
    let p = part.to_ascii_lowercase();
    let day = |t: &DateTime| trunc_day(t);
    let year_start = |t: &DateTime| {
        let d = day(t);
        d.add_date(0, 0, 1 - i64::from(d.fields().yday)).unwrap_or(d)
    };
    let month_start = |t: &DateTime| {
        let d = day(t);
        d.add_date(0, 0, 1 - i64::from(d.fields().day)).unwrap_or(d)
    };
    let back_years = |t: DateTime, every: i64| {
        let y = t.fields().year;
        t.add_date(-(y % every), 0, 0).unwrap_or(t)
    };
    Ok(match p.as_str() {
        "millennium" => back_years(year_start(t), 1000),
        "century" => back_years(year_start(t), 100),
        "decade" => back_years(year_start(t), 10),
        "year" => year_start(t),
        "quarter" => {
            let m = month_start(t);
            let back = (i64::from(m.fields().month) - 1) % 3;
            m.add_date(0, -back, 0).unwrap_or(m)
        }
        "month" | "calendar_month" => month_start(t),
        "week" | "iso_week" => {
            let d = day(t);
            let wd = i64::from(d.fields().weekday);
            let back = if p == "week" { wd } else { (wd + 6) % 7 };
            d.add_date(0, 0, -back).unwrap_or(d)
        }
        "day" => day(t),
        "hour" => t.truncate(3600 * NANOS_PER_SEC),
        "minute" => t.truncate(60 * NANOS_PER_SEC),
        "second" => t.truncate(NANOS_PER_SEC),
        "millisecond" => t.truncate(NANOS_PER_MILLI),
        _ => return Err(unsupported("trunc", part)),
    })
}

/// Midnight of `t`'s day in its zone.
fn trunc_day(t: &DateTime) -> DateTime {
    let offset = i128::from(t.offset()) * NANOS_PER_SEC;
    let local = t.add_nanos(offset).unwrap_or_else(|| t.clone()).truncate(86_400 * NANOS_PER_SEC);
    local.add_nanos(-offset).unwrap_or(local)
}

/// The elapsed time from `t2` to `t1` in whole `part`s (negative when `t1` is earlier), computed as Couchbase
/// does: on calendar fields, years then days of the year then clock fields, each time in its own zone.
pub(crate) fn date_diff(t1: &DateTime, t2: &DateTime, part: &str) -> Result<i64, QueryError> {
    let (mut a, mut b, mut sign) = (t1, t2, 1);
    // Couchbase orders the two by their Go String() text.
    if a.go_string() < b.go_string() {
        (a, b, sign) = (t2, t1, -1);
    }
    diff_part(a, b, &part.to_ascii_lowercase()).map(|d| d * sign).ok_or_else(|| unsupported("diff", part))
}

fn diff_part(a: &DateTime, b: &DateTime, part: &str) -> Option<i64> {
    let (fa, fb) = (a.fields(), b.fields());
    let years = fa.year - fb.year;
    let days = || {
        let mut d = years * 365 + i64::from(fa.yday) - i64::from(fb.yday);
        if years != 0 {
            d += leap_years_within(fa.year) - leap_years_within(fb.year);
        }
        d
    };
    let hours = || days() * 24 + i64::from(fa.hour) - i64::from(fb.hour);
    let minutes = || hours() * 60 + i64::from(fa.minute) - i64::from(fb.minute);
    let seconds = || minutes() * 60 + i64::from(fa.second) - i64::from(fb.second);
    Some(match part {
        "millisecond" => seconds() * 1000 + i64::from(fa.nanos / 1_000_000) - i64::from(fb.nanos / 1_000_000),
        "second" => seconds(),
        "minute" => minutes(),
        "hour" => hours(),
        "day" => days(),
        "week" => days() / 7,
        "month" | "calendar_month" => (fa.year * 12 + i64::from(fa.month) - (fb.year * 12 + i64::from(fb.month))).abs(),
        "quarter" => {
            let q = |f: &super::time::Fields| f.year * 4 + i64::from(f.month.div_ceil(3));
            (q(&fa) - q(&fb)).abs()
        }
        "year" => years,
        "decade" => years / 10,
        "century" => years / 100,
        "millennium" => years / 1000,
        _ => return None,
    })
}

/// Couchbase's leapYearsWithin: leap years counted up to (not including) `year`, as its formula does it.
fn leap_years_within(year: i64) -> i64 {
    let y = if year > 0 { year - 1 } else { year + 1 };
    y / 4 - y / 100 + y / 400
}
