//! The simulated clock: a monotonic time the simulation advances step by step, and a wall clock that follows it
//! with an offset a nemesis can jump forwards or backwards (as NTP steps a real one), while the monotonic time the
//! engine measures timeouts with never goes back.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use settee_types::Clock;

/// Wall time at the start of every run: 2025-01-01T00:00:00Z.
const EPOCH_NANOS: u64 = 1_735_689_600 * 1_000_000_000;

#[derive(Debug, Default)]
pub struct SimClock {
    /// Simulated nanoseconds since the run began.
    mono: AtomicU64,
    /// What the wall clock adds to `EPOCH_NANOS + mono` (clock jumps).
    wall_offset: AtomicI64,
}

impl SimClock {
    pub fn new() -> SimClock {
        SimClock::default()
    }

    /// Moves simulated time forward.
    pub fn advance(&self, by: Duration) {
        self.mono.fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }

    /// The simulation's time since the run began.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.mono.load(Ordering::SeqCst))
    }

    /// Steps the wall clock by `secs` (negative: backwards); monotonic time is unaffected.
    pub fn jump_wall(&self, secs: i64) {
        self.wall_offset.fetch_add(secs * 1_000_000_000, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_nanos(&self) -> u64 {
        let base = EPOCH_NANOS + self.mono.load(Ordering::SeqCst);
        base.saturating_add_signed(self.wall_offset.load(Ordering::SeqCst))
    }

    fn monotonic(&self) -> Duration {
        self.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wall-clock jump moves `now_nanos` but not the monotonic time the engine's timeouts use.
    #[test]
    fn wall_jumps_leave_monotonic_time_alone() {
        let c = SimClock::new();
        c.advance(Duration::from_secs(3));
        let wall = c.now_nanos();
        c.jump_wall(-10);
        assert_eq!(c.now_nanos(), wall - 10_000_000_000);
        assert_eq!(c.monotonic(), Duration::from_secs(3));
    }
}
