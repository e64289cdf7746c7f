//! Audit timestamps in UTC: ISO-8601 with milliseconds for events (`2026-11-26T02:04:45.123Z`, Couchbase's
//! format with the zone the node runs in), and the `YYYY-MM-DDTHH-MM-SS` stamp of rotated file names.

/// Year, month, day of the `days`-th day since 1970-01-01 (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day, hour, minute, second, millisecond) of Unix-epoch nanoseconds.
fn parts(nanos: u64) -> (i64, u32, u32, u64, u64, u64, u64) {
    let secs = nanos / 1_000_000_000;
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    (y, mo, d, rem / 3600, rem % 3600 / 60, rem % 60, nanos % 1_000_000_000 / 1_000_000)
}

/// `2026-11-26T02:04:45.123Z`.
pub fn iso8601(nanos: u64) -> String {
    let (y, mo, d, h, mi, s, ms) = parts(nanos);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// `2026-11-26T02-04-45`, for rotated file names.
pub fn file_stamp(nanos: u64) -> String {
    let (y, mo, d, h, mi, s, _) = parts(nanos);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}-{mi:02}-{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_format_as_utc() {
        // Proves the calendar arithmetic on the epoch, a leap day and an end of year.
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123_000_000), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_735_689_599_999_999_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(file_stamp(1_700_000_000_000_000_000), "2023-11-14T22-13-20");
    }
}
