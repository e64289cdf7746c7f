//! Notifications a thread holds back while it runs a batch, each target notified once when the batch ends.
//!
//! Two places use it: a KV worker holds the DCP producers' wake-ups while it runs a client's batch of writes
//! (`dcp::hub`), and a DCP producer holds the KV connections' wake-ups while it applies one read's acknowledgements
//! (`kv::durable_replies`). Each keeps its own thread-local [`Held`]; the holder must release before it awaits
//! anything, or the other tasks of its thread would hold their notifications too.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

use tokio::sync::Notify;

/// Something woken through a [`Notify`] of its own.
pub(crate) trait Wakeable {
    fn notify(&self) -> &Notify;
}

/// The targets a thread will notify at [`Held::release`], while it holds.
pub(crate) struct Held<T> {
    holding: bool,
    /// Each target once (a batch meets a few: a bucket's producers, the connections of one read).
    targets: Vec<Arc<T>>,
}

/// The thread-local list of one kind of target.
pub(crate) type HeldKey<T> = LocalKey<RefCell<Held<T>>>;

impl<T: Wakeable> Held<T> {
    pub(crate) const fn new() -> Held<T> {
        Held { holding: false, targets: Vec::new() }
    }

    /// From now until [`Held::release`], targets woken on this thread are notified only then.
    pub(crate) fn hold(key: &'static HeldKey<T>) {
        key.with_borrow_mut(|held| held.holding = true);
    }

    /// Notifies `target` now, or at the release when this thread holds.
    pub(crate) fn wake(key: &'static HeldKey<T>, target: &Arc<T>) {
        key.with_borrow_mut(|held| {
            if !held.holding {
                target.notify().notify_one();
            } else if !held.targets.iter().any(|t| Arc::ptr_eq(t, target)) {
                held.targets.push(target.clone());
            }
        });
    }

    /// Notifies, once each, the targets woken since [`Held::hold`], and stops holding.
    pub(crate) fn release(key: &'static HeldKey<T>) {
        let mut targets = key.with_borrow_mut(|held| {
            held.holding = false;
            std::mem::take(&mut held.targets)
        });
        if targets.is_empty() {
            return;
        }
        for target in targets.drain(..) {
            target.notify().notify_one();
        }
        // Keep the list's allocation for the next batch.
        key.with_borrow_mut(|held| {
            if held.targets.capacity() == 0 {
                held.targets = targets;
            }
        });
    }
}
