//! Counters reported by STAT and the REST API. Relaxed atomics: they are statistics, not synchronisation.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct BucketStats {
    pub cmd_get: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub cmd_set: AtomicU64,
    pub delete_hits: AtomicU64,
    pub delete_misses: AtomicU64,
    pub incr_hits: AtomicU64,
    pub incr_misses: AtomicU64,
    pub decr_hits: AtomicU64,
    pub decr_misses: AtomicU64,
    pub cas_hits: AtomicU64,
    pub cas_badval: AtomicU64,
    pub cas_misses: AtomicU64,
    pub touch_hits: AtomicU64,
    pub touch_misses: AtomicU64,
    pub cmd_lookup: AtomicU64,
    pub cmd_mutation: AtomicU64,
    pub expired: AtomicU64,
    pub tmp_oom_errors: AtomicU64,
    pub ejected: AtomicU64,
    pub bg_fetched: AtomicU64,
    /// Changes replica vBuckets applied from their active over DCP (mutations, deletions, sync-write steps).
    pub replica_items_received: AtomicU64,
    /// Records the flusher wrote and fsynced (Couchbase's `ep_total_persisted`): a key written several times
    /// between two flusher rounds counts once, so this against `cmd_set` shows how much the checkpoint saved.
    pub total_persisted: AtomicU64,
}

impl BucketStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }
    /// Name/value pairs for the STAT default group (memcached naming).
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Relaxed);
        vec![
            ("cmd_get", g(&self.cmd_get)),
            ("get_hits", g(&self.get_hits)),
            ("get_misses", g(&self.get_misses)),
            ("cmd_set", g(&self.cmd_set)),
            ("delete_hits", g(&self.delete_hits)),
            ("delete_misses", g(&self.delete_misses)),
            ("incr_hits", g(&self.incr_hits)),
            ("incr_misses", g(&self.incr_misses)),
            ("decr_hits", g(&self.decr_hits)),
            ("decr_misses", g(&self.decr_misses)),
            ("cas_hits", g(&self.cas_hits)),
            ("cas_badval", g(&self.cas_badval)),
            ("cas_misses", g(&self.cas_misses)),
            ("touch_hits", g(&self.touch_hits)),
            ("touch_misses", g(&self.touch_misses)),
            ("cmd_lookup", g(&self.cmd_lookup)),
            ("cmd_mutation", g(&self.cmd_mutation)),
            ("ep_expired", g(&self.expired)),
            ("ep_tmp_oom_errors", g(&self.tmp_oom_errors)),
            ("ep_num_value_ejects", g(&self.ejected)),
            ("ep_bg_fetched", g(&self.bg_fetched)),
            ("ep_dcp_replica_items_received", g(&self.replica_items_received)),
            ("ep_total_persisted", g(&self.total_persisted)),
        ]
    }
}
