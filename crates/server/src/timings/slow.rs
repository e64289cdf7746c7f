//! The slow-operation log: a KV operation that took longer than the threshold (`--slow-op-threshold-ms`, 500 ms by
//! default as Couchbase's) logs one WARN line naming the command, its vBucket, the duration and the connection, as
//! kv_engine logs "Slow operation" lines. At most [`LINES_PER_SECOND`] lines a second for the whole node: a slow
//! disk makes every durable write slow, and the log must not grow with the load; the next line that is logged says
//! how many were left out.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Slow-operation lines a node writes in one second at most.
pub const LINES_PER_SECOND: u64 = 10;

/// The threshold and the rate limit's state; checking an operation is one relaxed load.
#[derive(Debug)]
pub struct SlowOps {
    /// Milliseconds; 0 turns the log off.
    threshold_ms: AtomicU64,
    /// The monotonic second the count below is for.
    window_secs: AtomicU64,
    lines_in_window: AtomicU64,
    /// Slow operations not logged since the last line.
    suppressed: AtomicU64,
}

/// What the line says about one slow operation.
#[derive(Debug)]
pub struct SlowOp<'a> {
    pub opcode: u8,
    pub vbucket: u16,
    pub elapsed: Duration,
    pub peer: SocketAddr,
    /// The client's HELLO agent (the SDKs put their connection id in it).
    pub agent: &'a str,
    pub bucket: &'a str,
}

impl SlowOps {
    pub fn new(threshold_ms: u64) -> SlowOps {
        SlowOps {
            threshold_ms: AtomicU64::new(threshold_ms),
            window_secs: AtomicU64::new(0),
            lines_in_window: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    pub fn threshold_ms(&self) -> u64 {
        self.threshold_ms.load(Relaxed)
    }

    /// Changes the threshold at run time (0 turns the log off).
    pub fn set_threshold_ms(&self, ms: u64) {
        self.threshold_ms.store(ms, Relaxed);
    }

    pub fn is_slow(&self, elapsed: Duration) -> bool {
        let ms = self.threshold_ms.load(Relaxed);
        ms > 0 && elapsed >= Duration::from_millis(ms)
    }

    /// Logs `op` unless this second's lines are used up (then it is counted for the next line). `now` is the
    /// node clock's monotonic time. True when a line was written.
    pub fn report(&self, op: &SlowOp<'_>, now: Duration) -> bool {
        let second = now.as_secs();
        let window = self.window_secs.load(Relaxed);
        if window != second && self.window_secs.compare_exchange(window, second, Relaxed, Relaxed).is_ok() {
            self.lines_in_window.store(0, Relaxed);
        }
        if self.lines_in_window.fetch_add(1, Relaxed) >= LINES_PER_SECOND {
            self.suppressed.fetch_add(1, Relaxed);
            return false;
        }
        let suppressed = self.suppressed.swap(0, Relaxed);
        let command = super::opcode_label(op.opcode);
        tracing::warn!(
            command = command.as_str(),
            vbucket = op.vbucket,
            duration_ms = op.elapsed.as_millis() as u64,
            peer = %op.peer,
            agent = op.agent,
            bucket = op.bucket,
            threshold_ms = self.threshold_ms(),
            not_logged_since_last = suppressed,
            "Slow operation"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(ms: u64) -> SlowOp<'static> {
        SlowOp {
            opcode: 0x01,
            vbucket: 7,
            elapsed: Duration::from_millis(ms),
            peer: "127.0.0.1:4000".parse().expect("addr"),
            agent: "test",
            bucket: "default",
        }
    }

    #[test]
    fn only_operations_over_the_threshold_are_slow_and_zero_turns_it_off() {
        // Proves the threshold comparison and that it can be changed at run time.
        let slow = SlowOps::new(500);
        assert!(!slow.is_slow(Duration::from_millis(499)));
        assert!(slow.is_slow(Duration::from_millis(500)));
        slow.set_threshold_ms(0);
        assert!(!slow.is_slow(Duration::from_secs(60)));
    }

    #[test]
    fn lines_are_limited_per_second_and_the_next_line_counts_the_rest() {
        // Proves a burst of slow operations writes LINES_PER_SECOND lines in one second, the rest are counted, and
        // the next second logs again.
        let slow = SlowOps::new(500);
        let second = Duration::from_secs(100);
        let logged = (0..50).filter(|_| slow.report(&op(600), second)).count() as u64;
        assert_eq!(logged, LINES_PER_SECOND);
        assert_eq!(slow.suppressed.load(Relaxed), 50 - LINES_PER_SECOND);
        assert!(slow.report(&op(600), second + Duration::from_secs(1)));
        assert_eq!(slow.suppressed.load(Relaxed), 0, "the line after the burst reports the ones left out");
    }
}
