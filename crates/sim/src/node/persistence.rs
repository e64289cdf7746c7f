//! A persistent node's disk work, driven as the server's `persistence` module drives it, with the same code
//! (`settee_persist`): warmup when the process starts (the bucket answers TMPFAIL and streams wait until it is
//! done), and two flusher shards whose rounds are written at once and fsynced some simulated milliseconds later
//! (seconds on a slow disk), while everything else goes on, as a flusher thread blocked in fsync lets it. A failed
//! write or fsync stops persistence for the bucket (`Bucket::fail_persistence`) until the process restarts.

use std::collections::BTreeMap;
use std::time::Duration;

use settee_engine::Bucket;
use settee_persist::{Written, ROUND_BYTES_TARGET};
use settee_store::VbStore;
use settee_types::VbId;

use super::VBUCKETS;
use crate::disk::SimDisk;
use crate::rng::SimRng;

/// Flusher threads per bucket, as the server's `FLUSHER_SHARDS`: shard `s` owns the vBuckets `vb % 2 == s`.
const SHARDS: u16 = 2;

#[derive(Default)]
struct Shard {
    /// Where the next round starts when the last one stopped at its byte budget.
    next: usize,
    /// A round written, and when its fsync completes.
    in_flight: Option<(Written, Duration)>,
    /// Persistence failed: the shard's thread has returned.
    stopped: bool,
}

#[derive(Default)]
pub(super) struct Persistence {
    pub(super) disk: SimDisk,
    /// When the warmup running since the start finishes.
    warm_at: Option<Duration>,
    shards: [Shard; SHARDS as usize],
    /// A slow disk: every fsync takes this long, until then.
    slow: Option<(Duration, Duration)>,
}

impl Persistence {
    /// The process started: warmup loads the bucket from disk, which takes a few milliseconds.
    pub(super) fn start(&mut self, bucket: &Bucket, now: Duration, rng: &mut SimRng) {
        bucket.set_warming_up(true);
        self.warm_at = Some(now + Duration::from_millis(rng.between(5, 150)));
        self.shards = Default::default();
    }

    /// kill -9: the rounds in flight never complete; the disk keeps what a crash keeps. Returns how many
    /// changes written but not synced were lost.
    pub(super) fn crash(&mut self, rng: &mut SimRng) -> usize {
        self.shards = Default::default();
        self.warm_at = None;
        // The operator who restarts the node also deals with a stalled disk.
        self.slow = None;
        self.disk.crash(rng)
    }

    pub(super) fn slow_down(&mut self, until: Duration, fsync: Duration) {
        self.slow = Some((until, fsync));
    }

    /// One step: warmup's end, the fsyncs that complete now, and new rounds. Returns true when warmup finished in
    /// this step (the caller applies the map again, as the server's reconcile does after warmup).
    pub(super) fn tick(
        &mut self,
        bucket: &Bucket,
        now: Duration,
        rng: &mut SimRng,
        counters: &mut BTreeMap<&'static str, u64>,
    ) -> bool {
        if let Some(at) = self.warm_at {
            if now < at {
                return false;
            }
            self.warm_at = None;
            let warmed = settee_persist::load(bucket, &self.disk);
            *counters.entry("warmups").or_default() += 1;
            *counters.entry("prepares restored by warmup").or_default() += warmed.prepares;
            return true;
        }
        for s in 0..SHARDS {
            let shard = &mut self.shards[usize::from(s)];
            if shard.stopped {
                continue;
            }
            let outcome = match shard.in_flight.take() {
                Some((written, at)) if at <= now => self.disk.sync().map(|()| written.persisted(bucket)),
                Some(waiting) => {
                    shard.in_flight = Some(waiting);
                    Ok(())
                }
                None => {
                    let vbuckets: Vec<VbId> = (s..VBUCKETS).step_by(usize::from(SHARDS)).map(VbId).collect();
                    let round =
                        settee_persist::write_round(bucket, &self.disk, &vbuckets, shard.next, ROUND_BYTES_TARGET);
                    round.map(|written| {
                        let Some(written) = written else { return };
                        shard.next = written.resume.unwrap_or(shard.next);
                        let fsync = match self.slow {
                            Some((until, fsync)) if now < until => fsync,
                            _ => Duration::from_millis(rng.between(1, 4)),
                        };
                        shard.in_flight = Some((written, now + fsync));
                    })
                }
            };
            if outcome.is_err() {
                // The server's flusher: "persistence failed: bucket refuses writes until restart".
                bucket.fail_persistence();
                shard.stopped = true;
                *counters.entry("persistence failures").or_default() += 1;
            }
        }
        false
    }
}
