//! Wakes a bucket's DCP producer connections when a vBucket they stream has new mutations.
//!
//! The engine calls [`DcpHub::wake`] under the vBucket's lock, once per batch of mutations a reader has not seen
//! yet, so it only sets bits and notifies: no allocation, no await, no engine call.
//!
//! A KV worker thread running a client's batch of writes holds its wake-ups back ([`hold_wakes`]) until the batch
//! is done ([`release_wakes`]): a producer woken at the batch's first write would read it alone while the worker
//! writes the rest, so a batch of durable writes (each in its own vBucket) would leave as one prepare per pass.
//! Held back, the producer wakes once and reads the whole batch into one frame train. The vBucket bits are set at
//! once either way, so a wake-up that is never released costs at most the producer's tick, never a lost change.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use settee_types::{limits::NUM_VBUCKETS, VbId};
use tokio::sync::Notify;

use crate::held_wakes::{Held, Wakeable};

const WORDS: usize = (NUM_VBUCKETS as usize).div_ceil(64);

/// A set of vBuckets that can be changed from any thread.
#[derive(Default)]
pub(crate) struct VbSet([AtomicU64; WORDS]);

impl VbSet {
    pub(crate) fn insert(&self, vb: VbId) {
        let (w, bit) = (usize::from(vb.0) / 64, vb.0 % 64);
        if let Some(word) = self.0.get(w) {
            word.fetch_or(1 << bit, Ordering::AcqRel);
        }
    }
    pub(crate) fn remove(&self, vb: VbId) {
        let (w, bit) = (usize::from(vb.0) / 64, vb.0 % 64);
        if let Some(word) = self.0.get(w) {
            word.fetch_and(!(1 << bit), Ordering::AcqRel);
        }
    }
    pub(crate) fn contains(&self, vb: VbId) -> bool {
        let (w, bit) = (usize::from(vb.0) / 64, vb.0 % 64);
        self.0.get(w).is_some_and(|word| word.load(Ordering::Acquire) & (1 << bit) != 0)
    }
    /// Empties the set and returns what it held.
    pub(crate) fn take(&self) -> Vec<VbId> {
        let mut out = Vec::new();
        for (w, word) in self.0.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                out.push(VbId((w * 64) as u16 + bit as u16));
                bits &= bits - 1;
            }
        }
        out
    }
}

/// One producer connection's interest and wake-up.
#[derive(Default)]
pub(crate) struct StreamWaker {
    pub(crate) notify: Notify,
    /// vBuckets this connection streams.
    pub(crate) interested: VbSet,
    /// vBuckets with mutations the connection has not read yet.
    pub(crate) pending: VbSet,
}

#[derive(Default)]
pub struct DcpHub {
    wakers: RwLock<Vec<Weak<StreamWaker>>>,
    /// Bytes of frames the bucket's producer connections hold queued for their consumers, and the most ever held
    /// at once (for tests and statistics).
    queued_bytes: AtomicUsize,
    queued_bytes_peak: AtomicUsize,
}

impl DcpHub {
    pub(crate) fn subscribe(&self) -> Arc<StreamWaker> {
        let waker = Arc::new(StreamWaker::default());
        let mut wakers = self.wakers.write();
        wakers.retain(|w| w.strong_count() > 0);
        wakers.push(Arc::downgrade(&waker));
        waker
    }

    /// A producer's queue went from `before` to `after` bytes.
    pub(crate) fn queued(&self, before: usize, after: usize) {
        if after >= before {
            let now = self.queued_bytes.fetch_add(after - before, Ordering::AcqRel) + (after - before);
            self.queued_bytes_peak.fetch_max(now, Ordering::AcqRel);
        } else {
            self.queued_bytes.fetch_sub(before - after, Ordering::AcqRel);
        }
    }

    /// Bytes the bucket's producers hold queued now.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Acquire)
    }

    /// The most the bucket's producers ever held queued at once.
    pub fn queued_bytes_peak(&self) -> usize {
        self.queued_bytes_peak.load(Ordering::Acquire)
    }

    /// Called by the engine (under a vBucket lock) when `vb` has new mutations.
    pub fn wake(&self, vb: VbId) {
        for w in self.wakers.read().iter() {
            if let Some(w) = w.upgrade() {
                if w.interested.contains(vb) {
                    w.pending.insert(vb);
                    Held::wake(&HELD, &w);
                }
            }
        }
    }
}

impl Wakeable for StreamWaker {
    fn notify(&self) -> &Notify {
        &self.notify
    }
}

thread_local! {
    /// The producers this thread notifies at the end of its batch of client requests.
    static HELD: RefCell<Held<StreamWaker>> = const { RefCell::new(Held::new()) };
}

/// From now until [`release_wakes`], producers woken on this thread are notified only then. The caller must release
/// before it awaits anything: other tasks of the thread would otherwise hold their wake-ups too.
pub(crate) fn hold_wakes() {
    Held::hold(&HELD);
}

/// Notifies, once each, the producers woken since [`hold_wakes`], and stops holding.
pub(crate) fn release_wakes() {
    Held::release(&HELD);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_interested_connections_are_woken() {
        let hub = DcpHub::default();
        let (a, b) = (hub.subscribe(), hub.subscribe());
        a.interested.insert(VbId(3));
        b.interested.insert(VbId(1000));
        hub.wake(VbId(3));
        hub.wake(VbId(1000));
        hub.wake(VbId(7));
        assert_eq!(a.pending.take(), vec![VbId(3)]);
        assert_eq!(b.pending.take(), vec![VbId(1000)]);
        assert!(a.pending.take().is_empty(), "take empties the set");
        drop(a);
        hub.wake(VbId(3));
        assert_eq!(hub.subscribe().pending.take(), vec![]);
    }

    /// Wake-ups held back during a batch notify each producer once, at the release, and mark every vBucket at once.
    #[test]
    fn held_wakes_notify_once_when_released() {
        use futures_util::FutureExt;
        let hub = DcpHub::default();
        let a = hub.subscribe();
        a.interested.insert(VbId(3));
        a.interested.insert(VbId(4));
        hold_wakes();
        hub.wake(VbId(3));
        hub.wake(VbId(4));
        assert!(a.notify.notified().now_or_never().is_none(), "no notification while held");
        assert_eq!(a.pending.take(), vec![VbId(3), VbId(4)], "the vBuckets are marked at once");
        release_wakes();
        assert!(a.notify.notified().now_or_never().is_some(), "released: notified");
        assert!(a.notify.notified().now_or_never().is_none(), "notified once for the whole batch");
        hub.wake(VbId(3));
        assert!(a.notify.notified().now_or_never().is_some(), "not held: notified at once");
    }
}
