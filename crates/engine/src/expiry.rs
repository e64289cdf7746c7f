use settee_types::limits::EXPIRY_RELATIVE_SECS_MAX;

/// Converts a protocol expiry to absolute Unix seconds: 0 stays 0 (never), values up to 30 days are relative to
/// `now`, larger values are already absolute. An absolute time in the past means "already expired", which is kept
/// as a time at or before now (never 0, which would mean "never").
pub fn absolute_expiry(expiry: u32, now_secs: u32) -> u32 {
    match expiry {
        0 => 0,
        e if e <= EXPIRY_RELATIVE_SECS_MAX => now_secs.saturating_add(e),
        e => e,
    }
}

/// Applies a collection's maxTTL: an item may not live longer than `max_ttl` seconds from now.
pub(crate) fn cap_expiry(abs: u32, max_ttl: Option<u32>, now_secs: u32) -> u32 {
    match max_ttl {
        Some(ttl) if ttl > 0 => {
            let cap = now_secs.saturating_add(ttl);
            if abs == 0 || abs > cap {
                cap
            } else {
                abs
            }
        }
        _ => abs,
    }
}

pub(crate) fn is_expired(abs: u32, now_secs: u32) -> bool {
    abs != 0 && abs <= now_secs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memcached convention: relative up to 30 days, absolute beyond, 0 never.
    #[test]
    fn relative_and_absolute_expiry() {
        assert_eq!(absolute_expiry(0, 1000), 0);
        assert_eq!(absolute_expiry(10, 1000), 1010);
        assert_eq!(absolute_expiry(EXPIRY_RELATIVE_SECS_MAX, 1000), 1000 + EXPIRY_RELATIVE_SECS_MAX);
        assert_eq!(absolute_expiry(EXPIRY_RELATIVE_SECS_MAX + 1, 1000), EXPIRY_RELATIVE_SECS_MAX + 1);
        assert!(is_expired(absolute_expiry(EXPIRY_RELATIVE_SECS_MAX + 1, 1_700_000_000), 1_700_000_000));
    }

    /// maxTTL caps both "never" and longer expiries, and leaves shorter ones alone.
    #[test]
    fn max_ttl_caps_expiry() {
        assert_eq!(cap_expiry(0, Some(60), 100), 160);
        assert_eq!(cap_expiry(500, Some(60), 100), 160);
        assert_eq!(cap_expiry(120, Some(60), 100), 120);
        assert_eq!(cap_expiry(0, None, 100), 0);
    }
}
