//! Audit timestamps in UTC: ISO-8601 with milliseconds for events (`2026-11-26T02:04:45.123Z`, Couchbase's
//! format with the zone the node runs in), and the `YYYY-MM-DDTHH-MM-SS` stamp of rotated file names.

/// `2026-11-26T02:04:45.123Z`.
pub fn iso8601(nanos: u64) -> String {
    settee_types::UtcTime::from_unix_nanos(nanos).iso8601_millis()
}

/// `2026-11-26T02-04-45`, for rotated file names.
pub fn file_stamp(nanos: u64) -> String {
    let t = settee_types::UtcTime::from_unix_nanos(nanos);
    let (y, mo, d, h, mi, s) = (t.year, t.month, t.day, t.hour, t.minute, t.second);
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
