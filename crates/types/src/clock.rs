use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where all time comes from, so that tests and the simulator can drive it.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since the Unix epoch.
    fn now_nanos(&self) -> u64;
    /// Whole seconds since the Unix epoch.
    fn now_secs(&self) -> u32 {
        (self.now_nanos() / 1_000_000_000) as u32
    }
    /// Time since an arbitrary origin that never goes backwards (wall-clock steps do not move it): what timeouts
    /// and leases measure. A clock that is driven by hand returns its own time.
    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.now_nanos())
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_nanos(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    }

    fn monotonic(&self) -> Duration {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// A clock that moves only when told to; for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    pub fn new(secs: u32) -> ManualClock {
        ManualClock { nanos: AtomicU64::new(u64::from(secs) * 1_000_000_000) }
    }
    pub fn advance_secs(&self, secs: u32) {
        self.nanos.fetch_add(u64::from(secs) * 1_000_000_000, Ordering::SeqCst);
    }
    pub fn set_nanos(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-driven clock's monotonic time is its own time, so state machines driven through it see exactly the
    /// time a test sets; the system clock's never goes backwards between two readings.
    #[test]
    fn monotonic_time_follows_the_clock() {
        let manual = ManualClock::new(10);
        assert_eq!(manual.monotonic(), Duration::from_secs(10));
        manual.advance_secs(5);
        assert_eq!(manual.monotonic(), Duration::from_secs(15));
        let first = SystemClock.monotonic();
        assert!(SystemClock.monotonic() >= first);
    }
}
