//! The KV connections that have not authenticated yet, oldest first, so that a flood of them cannot hold every
//! connection slot: when `--max-connections` is reached, the listener closes the oldest unauthenticated connection
//! to admit the newcomer (authenticated connections are never closed for room). Together with the authentication
//! timeout (`--kv-auth-timeout-secs`), which closes each such connection after a few seconds anyway, a legitimate
//! client is only locked out while the flood opens connections faster than the client completes its handshake.
//!
//! The set is a leaf lock: held to insert, remove or pop one entry, never across an await, and nothing else is
//! locked under it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Every unauthenticated connection's eviction signal, by registration order.
#[derive(Default)]
pub struct Unauthenticated {
    next_id: AtomicU64,
    waiting: Mutex<BTreeMap<u64, Arc<Notify>>>,
}

/// One connection's place in the set; leaving the set (authenticated, or closed) is dropping it.
pub struct PreAuth {
    id: u64,
    /// Notified when the listener closes this connection to make room.
    pub evicted: Arc<Notify>,
    set: Arc<Unauthenticated>,
}

impl Unauthenticated {
    /// Adds a connection that has just been accepted.
    pub fn register(self: &Arc<Self>) -> PreAuth {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        self.waiting.lock().insert(id, evicted.clone());
        PreAuth { id, evicted, set: self.clone() }
    }

    /// Tells the oldest unauthenticated connection to close; false when there is none.
    pub fn evict_oldest(&self) -> bool {
        let oldest = self.waiting.lock().pop_first();
        match oldest {
            Some((_, evicted)) => {
                // A stored permit: the connection sees it at its next wait even if it is busy now.
                evicted.notify_one();
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PreAuth {
    fn drop(&mut self) {
        self.set.waiting.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_is_evicted_and_authenticated_ones_leave_the_set() {
        // Proves eviction order (oldest first), that a dropped entry (authenticated or closed) is never picked,
        // and that the eviction signal waits for a connection that was busy when it was sent.
        let set = Arc::new(Unauthenticated::default());
        let (first, second, third) = (set.register(), set.register(), set.register());
        drop(first);
        assert_eq!(set.len(), 2);
        assert!(set.evict_oldest());
        second.evicted.notified().await;
        assert_eq!(set.len(), 1);
        drop(second);
        assert_eq!(set.len(), 1, "an evicted entry is already gone; dropping it later is harmless");
        assert!(set.evict_oldest());
        third.evicted.notified().await;
        assert!(!set.evict_oldest() && set.is_empty());
    }
}
