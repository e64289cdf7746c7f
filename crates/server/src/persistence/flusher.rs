//! A flusher thread: runs the rounds of its shard of vBuckets (`settee_persist::flusher`: drain the checkpoints
//! into the store in one commit, then one fsync per round, a group commit shared by every durable write waiting in
//! it, then the persisted seqnos advance). A failed write or fsync stops persistence for the bucket: writes get
//! TMPFAIL and waiting durable writes are ambiguous, never acknowledged. A vBucket whose batch the store refuses
//! (a record breaking its rules, data damaged on disk) costs only that vBucket, never the bucket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::Bucket;
use settee_persist::ROUND_BYTES_TARGET;
use settee_store::{StoreError, VbStore};
use settee_types::VbId;

use super::FlushSignal;

/// A round's fsync that takes this long is logged as a slow disk.
const SLOW_FSYNC_WARN: Duration = Duration::from_secs(1);

/// Longest a dirty item waits when no notification comes (expiry tombstones are not notified).
const FLUSH_IDLE_WAIT: Duration = Duration::from_millis(50);

pub(crate) struct Flusher {
    pub bucket: Arc<Bucket>,
    pub store: Arc<dyn VbStore>,
    pub signals: Arc<Vec<FlushSignal>>,
    pub stop: Arc<AtomicBool>,
    pub shard: u16,
}

impl Flusher {
    /// The vBuckets this flusher owns.
    fn vbuckets(&self) -> Vec<VbId> {
        (self.shard..self.bucket.num_vbuckets()).step_by(usize::from(super::FLUSHER_SHARDS)).map(VbId).collect()
    }

    pub(crate) fn run(self) {
        super::background::lower_this_thread();
        self.test_start_delay();
        let vbuckets = self.vbuckets();
        let mut next = 0;
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            match self.round(&vbuckets, next) {
                Ok(Some(resume)) => {
                    next = resume;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(bucket = %self.bucket.name(), error = %e, "persistence failed: bucket refuses writes until restart");
                    self.bucket.fail_persistence();
                    return;
                }
            }
            if stopping {
                return;
            }
            self.signals[usize::from(self.shard)].wait(FLUSH_IDLE_WAIT);
        }
    }

    /// Test only: `SETTEE_TEST_FLUSHER_START_DELAY_MS` holds the flusher back that long after the bucket opens,
    /// so a test can crash a node while its acknowledged writes are still in memory only (the XDCR crash test).
    /// Unset (always, outside tests) it costs one environment lookup per bucket open.
    fn test_start_delay(&self) {
        let Some(ms) = std::env::var("SETTEE_TEST_FLUSHER_START_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        tracing::warn!(bucket = %self.bucket.name(), ms, "test knob: the flusher starts late");
        let until = std::time::Instant::now() + Duration::from_millis(ms);
        while std::time::Instant::now() < until && !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One round: the shard's dirty vBuckets from position `first` on (wrapping), until about
    /// [`ROUND_BYTES_TARGET`] bytes are taken; one commit and one fsync. Returns where the next round must resume
    /// when this one stopped early. An error is one the whole store suffers (a failed write or fsync).
    pub(super) fn round(&self, vbuckets: &[VbId], first: usize) -> Result<Option<usize>, StoreError> {
        let bucket = self.bucket.as_ref();
        let store = self.store.as_ref();
        let Some(written) = settee_persist::write_round(bucket, store, vbuckets, first, ROUND_BYTES_TARGET)? else {
            return Ok(None);
        };
        let fsync_started = std::time::Instant::now();
        store.sync()?;
        let fsync = fsync_started.elapsed();
        if fsync >= SLOW_FSYNC_WARN {
            // A slow disk: durable writes wait (and time out as ambiguous), the checkpoints grow up to the quota.
            tracing::warn!(bucket = %bucket.name(), fsync_ms = fsync.as_millis() as u64, vbuckets = written.vbuckets(), "slow disk: a flusher round's fsync took over a second");
        }
        let resume = written.resume;
        written.persisted(bucket);
        Ok(resume)
    }
}
