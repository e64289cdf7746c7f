//! Backup names: the UTC time the backup started, as cbbackupmgr names them
//! (`2026-11-26T02_04_46.123456789Z`), so names sort in the order backups were taken.

use std::time::{SystemTime, UNIX_EPOCH};

/// The name of a backup started now.
pub(crate) fn backup_name_now() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    backup_name(d.as_secs(), d.subsec_nanos())
}

pub(crate) fn backup_name(unix_secs: u64, nanos: u32) -> String {
    let t = settee_types::UtcTime::from_unix_nanos(unix_secs * 1_000_000_000 + u64::from(nanos));
    let (y, mo, d, h, mi, s) = (t.year, t.month, t.day, t.hour, t.minute, t.second);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}_{mi:02}_{s:02}.{nanos:09}Z")
}

#[cfg(test)]
mod tests {
    /// Proves names are the UTC calendar time with nanoseconds, zero-padded so they sort as text.
    #[test]
    fn backup_name_is_utc_time_when_formatted() {
        assert_eq!(super::backup_name(0, 5), "1970-01-01T00_00_00.000000005Z");
        assert_eq!(super::backup_name(1_795_486_486, 0), "2026-11-24T02_14_46.000000000Z");
        assert_eq!(super::backup_name(951_782_400, 0), "2000-02-29T00_00_00.000000000Z");
    }
}
