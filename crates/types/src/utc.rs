//! Calendar time in UTC from a Unix-epoch instant, for the names and timestamps settee writes (audit events,
//! rotated log files, backup names). No time zone database: everything settee writes is in UTC.

/// A Unix-epoch instant as a UTC calendar date and time of day (proleptic Gregorian calendar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
}

impl UtcTime {
    pub fn from_unix_nanos(nanos: u64) -> UtcTime {
        let secs = nanos / 1_000_000_000;
        let (year, month, day) = civil_from_days((secs / 86_400) as i64);
        let rem = (secs % 86_400) as u32;
        UtcTime {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
            nanos: (nanos % 1_000_000_000) as u32,
        }
    }

    /// ISO-8601 with milliseconds, `2026-11-26T02:04:45.123Z` (RFC 3339, as Couchbase writes timestamps).
    pub fn iso8601_millis(&self) -> String {
        let (y, mo, d, h, mi, s, ms) =
            (self.year, self.month, self.day, self.hour, self.minute, self.second, self.nanos / 1_000_000);
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    }
}

/// Year, month, day of the `days`-th day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the calendar arithmetic on the epoch, a leap day and the last instant of a year.
    #[test]
    fn known_instants_are_their_utc_calendar_time() {
        let t =
            |y, mo, d, h, mi, s, n| UtcTime { year: y, month: mo, day: d, hour: h, minute: mi, second: s, nanos: n };
        assert_eq!(UtcTime::from_unix_nanos(0), t(1970, 1, 1, 0, 0, 0, 0));
        assert_eq!(UtcTime::from_unix_nanos(951_782_400_123_000_000), t(2000, 2, 29, 0, 0, 0, 123_000_000));
        assert_eq!(UtcTime::from_unix_nanos(1_735_689_599_999_999_999), t(2024, 12, 31, 23, 59, 59, 999_999_999));
        assert_eq!(UtcTime::from_unix_nanos(951_782_400_123_000_000).iso8601_millis(), "2000-02-29T00:00:00.123Z");
    }
}
