//! Backup names: the UTC time the backup started, as cbbackupmgr names them
//! (`2026-11-26T02_04_46.123456789Z`), so names sort in the order backups were taken.

use std::time::{SystemTime, UNIX_EPOCH};

/// The name of a backup started now.
pub(crate) fn backup_name_now() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    backup_name(d.as_secs(), d.subsec_nanos())
}

pub(crate) fn backup_name(unix_secs: u64, nanos: u32) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}_{:02}_{:02}.{nanos:09}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The proleptic Gregorian date of a day number counted from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
