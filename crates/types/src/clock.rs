use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where all time comes from, so that tests and the simulator can drive it.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since the Unix epoch.
    fn now_nanos(&self) -> u64;
    /// Whole seconds since the Unix epoch.
    fn now_secs(&self) -> u32 {
        (self.now_nanos() / 1_000_000_000) as u32
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_nanos(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
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
