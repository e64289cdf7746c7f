//! How many replication connections (DCP producers whose consumer is another node's feed) this node serves now,
//! by transport: what shows whether node-to-node encryption covers replication (`/metrics`:
//! `settee_dcp_replication_producers{transport}`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The two gauges.
#[derive(Debug, Default)]
pub struct ReplicationProducers {
    plain: AtomicU64,
    tls: AtomicU64,
}

impl ReplicationProducers {
    /// Counts one connection until the guard drops (its connection ended).
    pub fn open(self: &Arc<Self>, tls: bool) -> ReplicationGuard {
        self.gauge(tls).fetch_add(1, Relaxed);
        ReplicationGuard { gauges: self.clone(), tls }
    }

    /// (plain, tls) replication connections open now.
    pub fn counts(&self) -> (u64, u64) {
        (self.plain.load(Relaxed), self.tls.load(Relaxed))
    }

    fn gauge(&self, tls: bool) -> &AtomicU64 {
        if tls {
            &self.tls
        } else {
            &self.plain
        }
    }
}

/// One counted replication connection.
#[derive(Debug)]
pub struct ReplicationGuard {
    gauges: Arc<ReplicationProducers>,
    tls: bool,
}

impl Drop for ReplicationGuard {
    fn drop(&mut self) {
        self.gauges.gauge(self.tls).fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves a connection counts under its transport while its guard lives, and no longer after.
    #[test]
    fn guard_counts_its_connection_under_its_transport_until_dropped() {
        let gauges = Arc::new(ReplicationProducers::default());
        let tls = gauges.open(true);
        let plain = gauges.open(false);
        assert_eq!(gauges.counts(), (1, 1));
        drop(tls);
        assert_eq!(gauges.counts(), (1, 0));
        drop(plain);
        assert_eq!(gauges.counts(), (0, 0));
    }
}
