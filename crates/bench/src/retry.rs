//! Requests sent again, as the SDKs do, so a rebalance or a failover shows up as latency rather than errors: after
//! NOT_MY_VBUCKET (the vBucket moved, or its node holds it for a takeover), when the key's vBucket has no active
//! node or its node has no connection, and when the node a request was in flight on left the map or lost its
//! connection.
//!
//! A request goes again at once when the map now sends it elsewhere; otherwise after a short backoff (1 ms,
//! doubling up to 10 ms), since asking the same node again at once would only get the same answer. It gives up,
//! and counts as an error, once `--timeout` has passed since its first send or after [`RETRIES_MAX`] retries.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

use tokio::time::Instant;

/// Retries of one request at most: with the backoff at its 10 ms ceiling, about ten seconds of a node refusing.
pub(crate) const RETRIES_MAX: u32 = 1000;
const BACKOFF_MIN: Duration = Duration::from_millis(1);
const BACKOFF_MAX: Duration = Duration::from_millis(10);

/// When a request may go again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend {
    /// The map routes it to another node now: at once.
    Now,
    /// Same node as before, or no node to send it to: after a backoff.
    Backoff,
}

/// When to send a request again that has been retried `retries` times and was first sent at `first_sent`; None
/// when it must give up.
pub(crate) fn next_attempt(
    retries: u32,
    first_sent: Instant,
    now: Instant,
    timeout: Duration,
    resend: Resend,
) -> Option<Instant> {
    if retries >= RETRIES_MAX || now.saturating_duration_since(first_sent) >= timeout {
        return None;
    }
    match resend {
        Resend::Now => Some(now),
        Resend::Backoff => {
            let backoff = BACKOFF_MIN.saturating_mul(1u32 << retries.min(4)).min(BACKOFF_MAX);
            Some(now + backoff)
        }
    }
}

/// Requests waiting to be sent again, earliest first (ties in the order they came).
#[derive(Debug)]
pub(crate) struct RetryQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    next_seq: u64,
}

#[derive(Debug)]
struct Entry<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    /// Reversed, so the max-heap pops the earliest entry.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl<T> RetryQueue<T> {
    pub(crate) fn new() -> RetryQueue<T> {
        RetryQueue { heap: BinaryHeap::new(), next_seq: 0 }
    }

    pub(crate) fn push(&mut self, at: Instant, item: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { at, seq, item });
    }

    /// The earliest request due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.heap.peek()?.at > now {
            return None;
        }
        self.heap.pop().map(|e| e.item)
    }

    /// When the earliest request is due.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Takes every waiting request, in no particular order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.heap.drain().map(|e| e.item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    /// A request the map now sends elsewhere goes at once; one that would go to the same node waits 1, 2, 4, 8,
    /// then 10 ms at most.
    #[test]
    fn backoff_doubles_up_to_ten_milliseconds_unless_the_route_moved() {
        let t0 = Instant::now();
        assert_eq!(next_attempt(0, t0, t0, TIMEOUT, Resend::Now), Some(t0));
        let waits: Vec<u128> = (0..7)
            .map(|n| next_attempt(n, t0, t0, TIMEOUT, Resend::Backoff).unwrap().duration_since(t0).as_millis())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10, 10]);
    }

    /// A request gives up once the timeout has passed since its first send, or after RETRIES_MAX retries, even
    /// when it could go at once.
    #[test]
    fn retries_are_bounded_by_the_timeout_and_a_count() {
        let t0 = Instant::now();
        assert!(next_attempt(3, t0, t0 + TIMEOUT - Duration::from_millis(1), TIMEOUT, Resend::Now).is_some());
        assert_eq!(next_attempt(3, t0, t0 + TIMEOUT, TIMEOUT, Resend::Now), None);
        assert!(next_attempt(RETRIES_MAX - 1, t0, t0, TIMEOUT, Resend::Backoff).is_some());
        assert_eq!(next_attempt(RETRIES_MAX, t0, t0, TIMEOUT, Resend::Now), None);
    }

    /// Requests come out when due, earliest first, ties in arrival order; nothing comes out early.
    #[test]
    fn queue_releases_requests_when_due_in_order() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut q = RetryQueue::new();
        q.push(at(5), "c");
        q.push(at(0), "a");
        q.push(at(0), "b");
        assert_eq!((q.len(), q.next_at()), (3, Some(at(0))));
        assert_eq!([q.pop_due(at(1)), q.pop_due(at(1)), q.pop_due(at(1))], [Some("a"), Some("b"), None]);
        assert_eq!(q.next_at(), Some(at(5)));
        assert_eq!(q.pop_due(at(5)), Some("c"));
        assert!(q.is_empty() && q.next_at().is_none());
    }
}
