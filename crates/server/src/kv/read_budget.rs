//! The node-wide budget for bytes KV connections hold in their read buffers for frames still arriving.
//!
//! Every connection reads into a small buffer (16 KiB) that needs no budget. A frame that does not fit (a large SET)
//! needs its whole size reserved here before the buffer grows to hold it: a connection that cannot reserve stops
//! reading (its client's writes block, TCP back-pressure) until another connection's frame completes and frees
//! budget. Without this, a thousand clients each streaming a 19 MB SET grow the process by 19 GB, while the
//! per-frame cap alone (30 MiB) bounds only each connection. A frame larger than the whole budget is admitted
//! when nothing else holds any, so no valid frame waits forever.
//!
//! A connection that holds a reservation while its frame stays incomplete for `--kv-frame-timeout-secs` is closed
//! (`kv::connection`), so slow or stalled senders cannot keep the budget.
//!
//! Lock-free (an atomic counter); `freed` wakes throttled connections when bytes are released.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use settee_mcbp::HEADER_BYTES;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The budget and how much of it is reserved.
pub struct ReadBudget {
    limit_bytes: usize,
    held_bytes: AtomicUsize,
    /// The most ever held at once, for tests and statistics.
    peak_bytes: AtomicUsize,
    freed: Notify,
}

impl ReadBudget {
    pub fn new(limit_bytes: usize) -> ReadBudget {
        ReadBudget {
            limit_bytes,
            held_bytes: AtomicUsize::new(0),
            peak_bytes: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn held_bytes(&self) -> usize {
        self.held_bytes.load(Ordering::Acquire)
    }

    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes.load(Ordering::Acquire)
    }

    /// Reserves `bytes` if they fit under the limit, or if nothing is reserved at all; false otherwise.
    fn try_reserve(&self, bytes: usize) -> bool {
        let reserved = self.held_bytes.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            let fits = held == 0 || held.checked_add(bytes).is_some_and(|total| total <= self.limit_bytes);
            fits.then(|| held.saturating_add(bytes))
        });
        match reserved {
            Ok(before) => {
                self.peak_bytes.fetch_max(before.saturating_add(bytes), Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }

    fn release(&self, bytes: usize) {
        if bytes > 0 {
            self.held_bytes.fetch_sub(bytes, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }

    /// Completes after the next release. Call `enable` on it before trying to reserve, so a release between the try
    /// and the wait is not missed.
    pub fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }
}

/// One connection's reservation: the size of the frame it is receiving, or nothing. Dropping it releases it.
pub struct Claim {
    budget: Arc<ReadBudget>,
    bytes: usize,
}

impl Claim {
    pub fn new(budget: Arc<ReadBudget>) -> Claim {
        Claim { budget, bytes: 0 }
    }

    /// Bytes reserved now (0: none).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Makes the reservation fit the partial frame of `frame_bytes` at the head of the read buffer (0 when there is
    /// none or its header is incomplete): frames that fit the connection's own buffer (`free_bytes`) need none.
    /// Returns whether the connection may read on; `Some(true)` means a new reservation was just taken.
    pub fn settle(&mut self, frame_bytes: usize, free_bytes: usize) -> Option<bool> {
        if frame_bytes <= free_bytes {
            self.release();
            return Some(false);
        }
        if self.bytes == frame_bytes {
            return Some(false);
        }
        self.release();
        if self.budget.try_reserve(frame_bytes) {
            self.bytes = frame_bytes;
            Some(true)
        } else {
            None
        }
    }

    /// Releases the reservation unless the frame now at the head of the buffer is one of the same size (which
    /// needs it again): called as soon as a frame is consumed, before its reply goes out. True if released.
    pub fn release_unless(&mut self, frame_bytes: usize) -> bool {
        let release = self.bytes > 0 && frame_bytes != self.bytes;
        if release {
            self.release();
        }
        release
    }

    fn release(&mut self) {
        self.budget.release(std::mem::take(&mut self.bytes));
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.release();
    }
}

/// The whole size (header and body) of the frame at the start of `buf`, once its header has arrived; 0 before.
pub fn pending_frame_bytes(buf: &[u8]) -> usize {
    match buf.get(8..12) {
        Some(len) if buf.len() >= HEADER_BYTES => {
            HEADER_BYTES.saturating_add(u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stay_under_the_limit_and_free_on_drop() {
        // Proves the bound (a third 4-byte frame does not fit in 10), that a frame larger than the whole budget is
        // admitted when nothing else is held, that small frames need nothing, and that dropping a claim frees it.
        let budget = Arc::new(ReadBudget::new(10));
        let (mut a, mut b, mut c) =
            (Claim::new(budget.clone()), Claim::new(budget.clone()), Claim::new(budget.clone()));
        assert_eq!(a.settle(4, 2), Some(true));
        assert_eq!(a.settle(4, 2), Some(false), "the same frame keeps its reservation");
        assert_eq!(b.settle(4, 2), Some(true));
        assert_eq!(c.settle(4, 2), None, "12 bytes would pass the limit of 10");
        assert_eq!(budget.held_bytes(), 8);
        assert_eq!(a.settle(1, 2), Some(false), "a small frame releases the reservation");
        assert_eq!(c.settle(4, 2), Some(true));
        drop((b, c));
        assert_eq!(budget.held_bytes(), 0);
        assert_eq!(a.settle(50, 2), Some(true), "alone, a frame larger than the budget is admitted");
        assert_eq!(budget.peak_bytes(), 50);
    }

    #[test]
    fn frame_size_is_known_once_the_header_is_complete() {
        // Proves the size comes from the header's total body length, and is 0 before the 24th byte.
        let mut header = vec![0x80u8; 24];
        header[8..12].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(pending_frame_bytes(&header), 1024);
        assert_eq!(pending_frame_bytes(&header[..23]), 0);
        assert_eq!(pending_frame_bytes(&[]), 0);
    }

    #[tokio::test]
    async fn a_release_wakes_a_waiter_registered_before_it() {
        // Proves the no-lost-wakeup pattern the connection uses: enable, fail to reserve, release, then wait.
        let budget = Arc::new(ReadBudget::new(4));
        let (mut holder, mut waiter) = (Claim::new(budget.clone()), Claim::new(budget.clone()));
        assert_eq!(holder.settle(4, 1), Some(true));
        let freed = budget.freed();
        tokio::pin!(freed);
        freed.as_mut().enable();
        assert_eq!(waiter.settle(4, 1), None);
        drop(holder);
        freed.await;
        assert_eq!(waiter.settle(4, 1), Some(true));
    }
}
