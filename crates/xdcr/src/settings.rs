//! The knobs of one replication's core (Couchbase's replication settings, where it has one).

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Writes per batch sent to a node (Couchbase's `workerBatchSize`, default 500).
    pub batch_count: usize,
    /// Writes in flight to one target node (the pipeline depth).
    pub inflight_per_node_max: usize,
    /// Writes held by the core (queued, in flight, waiting to retry or for a map) before the driver must stop
    /// reading: the back-pressure bound.
    pub pending_max: usize,
    /// Bytes of keys and values those writes may hold before the driver must stop reading (large documents).
    pub pending_bytes_max: usize,
    /// How often checkpoints are saved while changes are replicated (Couchbase's `checkpointInterval`).
    pub checkpoint_interval: Duration,
    /// The first retry's backoff; each further retry of the same write doubles it, up to `retry_backoff_max`.
    pub retry_backoff_min: Duration,
    pub retry_backoff_max: Duration,
    /// How often the target is asked (OBSERVE_SEQNO) whether the acknowledged writes are on its disk; a checkpoint
    /// only covers writes it confirmed.
    pub confirm_interval: Duration,
    /// The source bucket's vBucket count: a target with as many maps source vBucket `v`'s keys to its vBucket `v`,
    /// the one asked about them. A target with another count is not asked, and acknowledged writes count as
    /// persisted (the behaviour before persistence was confirmed).
    pub source_vbuckets: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            batch_count: 500,
            inflight_per_node_max: 1024,
            pending_max: 16_384,
            pending_bytes_max: 64 << 20,
            checkpoint_interval: Duration::from_secs(600),
            retry_backoff_min: Duration::from_millis(10),
            retry_backoff_max: Duration::from_secs(2),
            confirm_interval: Duration::from_secs(1),
            source_vbuckets: usize::from(settee_types::limits::NUM_VBUCKETS),
        }
    }
}
