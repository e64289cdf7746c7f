//! Instants with a time zone, and the calendar arithmetic on them (proleptic Gregorian, days-from-civil), written
//! to behave as Go's `time.Time` does for the operations Couchbase's date functions use.

use super::zone::Zone;

const NANOS_PER_SEC: i128 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;

/// The furthest instant from the epoch that date functions accept (about 300 million years): beyond it results
/// are NULL instead of overflowing.
const MAX_SECS: i64 = 10_000_000_000_000_000;

/// An instant (seconds and nanoseconds since the Unix epoch, UTC) seen in a time zone.
#[derive(Clone, Debug)]
pub(crate) struct DateTime {
    secs: i64,
    nanos: u32,
    pub zone: Zone,
}

/// The calendar fields of an instant in its zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fields {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
    /// Day of the year, 1..=366.
    pub yday: u32,
    /// Day of the week, 0 = Sunday.
    pub weekday: u32,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (Hinnant's civil_from_days).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

pub(crate) fn is_leap_year(year: i64) -> bool {
    year % 400 == 0 || (year % 4 == 0 && year % 100 != 0)
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub(crate) const WEEKDAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

impl DateTime {
    /// The instant `total` nanoseconds after the epoch, if within range.
    fn from_total_nanos(total: i128, zone: Zone) -> Option<DateTime> {
        let secs = i64::try_from(total.div_euclid(NANOS_PER_SEC)).ok()?;
        if secs.unsigned_abs() > MAX_SECS as u64 {
            return None;
        }
        Some(DateTime { secs, nanos: total.rem_euclid(NANOS_PER_SEC) as u32, zone })
    }

    fn total_nanos(&self) -> i128 {
        i128::from(self.secs) * NANOS_PER_SEC + i128::from(self.nanos)
    }

    pub(crate) fn from_unix_nanos(nanos: i64, zone: Zone) -> DateTime {
        let total = i128::from(nanos);
        DateTime { secs: total.div_euclid(NANOS_PER_SEC) as i64, nanos: total.rem_euclid(NANOS_PER_SEC) as u32, zone }
    }

    /// Couchbase's millisToTime: fractional milliseconds keep their nanoseconds; NaN, infinities and instants out
    /// of range give `None`.
    pub(crate) fn from_millis(millis: f64, zone: Zone) -> Option<DateTime> {
        if !millis.is_finite() || millis.abs() > (MAX_SECS as f64) * 1000.0 {
            return None;
        }
        let whole_secs = (millis / 1000.0).trunc();
        let rest_nanos = (millis % 1000.0) * 1_000_000.0;
        DateTime::from_total_nanos(whole_secs as i128 * NANOS_PER_SEC + rest_nanos as i128, zone)
    }

    /// Milliseconds since the epoch, rounded to the nearest millisecond (halves up), as Couchbase's timeToMillis.
    pub(crate) fn to_millis(&self) -> f64 {
        (self.total_nanos() + 500_000).div_euclid(1_000_000) as f64
    }

    pub(crate) fn unix_secs(&self) -> i64 {
        self.secs
    }

    pub(crate) fn unix_nanos(&self) -> i128 {
        self.total_nanos()
    }

    /// The same instant in another zone.
    pub(crate) fn in_zone(&self, zone: Zone) -> DateTime {
        DateTime { secs: self.secs, nanos: self.nanos, zone }
    }

    pub(crate) fn offset(&self) -> i32 {
        self.zone.offset
    }

    pub(crate) fn fields(&self) -> Fields {
        let local = self.secs + i64::from(self.zone.offset);
        let days = local.div_euclid(SECS_PER_DAY);
        let in_day = local.rem_euclid(SECS_PER_DAY) as u32;
        let (year, month, day) = civil_from_days(days);
        Fields {
            year,
            month,
            day,
            hour: in_day / 3600,
            minute: in_day / 60 % 60,
            second: in_day % 60,
            nanos: self.nanos,
            yday: (days - days_from_civil(year, 1, 1) + 1) as u32,
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }

    /// Go's `time.Date`: out-of-range fields carry into the next larger unit (month 13 is January of the next year,
    /// day 0 the last day of the previous month).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_fields(
        year: i64,
        month: i64,
        day: i64,
        hour: i64,
        minute: i64,
        second: i64,
        nanos: i64,
        zone: Zone,
    ) -> Option<DateTime> {
        let months = year.checked_mul(12)?.checked_add(month.checked_sub(1)?)?;
        let (y, m) = (months.div_euclid(12), months.rem_euclid(12) as u32 + 1);
        if y.unsigned_abs() > 400_000_000 {
            return None;
        }
        let days = i128::from(days_from_civil(y, m, 1)) + i128::from(day) - 1;
        let secs =
            days * i128::from(SECS_PER_DAY) + i128::from(hour) * 3600 + i128::from(minute) * 60 + i128::from(second)
                - i128::from(zone.offset);
        DateTime::from_total_nanos(secs.checked_mul(NANOS_PER_SEC)?.checked_add(i128::from(nanos))?, zone)
    }

    /// Go's `AddDate`: the calendar fields moved and normalised (January 31 plus one month is March 2 or 3).
    pub(crate) fn add_date(&self, years: i64, months: i64, days: i64) -> Option<DateTime> {
        let f = self.fields();
        DateTime::from_fields(
            f.year.checked_add(years)?,
            i64::from(f.month).checked_add(months)?,
            i64::from(f.day).checked_add(days)?,
            i64::from(f.hour),
            i64::from(f.minute),
            i64::from(f.second),
            i64::from(f.nanos),
            self.zone.clone(),
        )
    }

    /// The instant `nanos` later (earlier when negative).
    pub(crate) fn add_nanos(&self, nanos: i128) -> Option<DateTime> {
        DateTime::from_total_nanos(self.total_nanos().checked_add(nanos)?, self.zone.clone())
    }

    /// Go's `Truncate`: rounded down to a multiple of `unit` nanoseconds of absolute time (whole hours, minutes...
    /// of UTC, whatever the zone).
    pub(crate) fn truncate(&self, unit: i128) -> DateTime {
        let total = self.total_nanos();
        DateTime::from_total_nanos(total - total.rem_euclid(unit), self.zone.clone()).unwrap_or_else(|| self.clone())
    }

    /// Go's ISOWeek: the ISO 8601 year and week number.
    pub(crate) fn iso_week(&self) -> (i64, u32) {
        let f = self.fields();
        let days = days_from_civil(f.year, f.month, f.day);
        let monday_based = i64::from((f.weekday + 6) % 7);
        let thursday = days - monday_based + 3;
        let (year, _, _) = civil_from_days(thursday);
        (year, ((thursday - days_from_civil(year, 1, 1)) / 7 + 1) as u32)
    }

    /// Go's `Time.String()` ("2006-01-02 15:04:05.999999999 -0700 MST"), which Couchbase compares to order two
    /// times before a difference.
    pub(crate) fn go_string(&self) -> String {
        super::layout::format(self, "2006-01-02 15:04:05.999999999 -0700 MST")
    }
}
