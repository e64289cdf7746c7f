//! Rolling a vBucket back to a seqno, as a DCP consumer must when its history diverged from its active's (the
//! producer answers its stream request with ROLLBACK and a seqno `n`): everything above the point it rolls back to
//! goes, what lies below stays, and the stream resumes from there instead of copying the whole vBucket again.
//!
//! The engine keeps only each key's latest version, in memory and on disk, so dropping the items above `n` is not
//! enough: a key whose version at or below `n` was overwritten above `n` would be lost, and a stream resuming from
//! `n` would not send it again (its active holds it at that old seqno). The vBucket therefore remembers, in
//! [`OverwriteLog`], the seqnos of the versions its writes replaced, and rolls back to just below the oldest version
//! replaced above `n` when there is one: a stream from there sends every key changed since, those included. Where
//! it cannot know (the log dropped what it needs, the bucket uses full eviction, whose ejected keys are replaced
//! unseen, or warmup lost the log), it empties the vBucket and streams it from zero, as before. Couchbase rolls
//! back from disk to its highest snapshot at or below `n`, else to zero.
//!
//! A persistent vBucket rolls back no further than its persisted seqno (everything kept is on disk), and its
//! flusher removes the records above that seqno from the store before it writes anything of the new generation
//! (`VbStore::rollback_vbucket`).

use std::collections::VecDeque;

use settee_types::{FailoverLog, Seqno, VbId};

use crate::bucket::{Bucket, EvictionPolicy};
use crate::vbucket::{complete, VbInner};
use crate::EngineError;

/// Entries the overwrite log keeps at most per vBucket (16 bytes each); when it is full the oldest goes, and a
/// rollback to below what it covered empties the vBucket.
pub(crate) const OVERWRITES_MAX: usize = 1024;

/// What a vBucket's writes replaced, enough to answer [`OverwriteLog::oldest_replaced_above`]: a deque of
/// (replacing seqno, replaced seqno), the replacing seqnos increasing, and the replaced seqnos increasing too (an
/// entry whose replaced seqno is not below every later entry's can never be the answer, and goes).
#[derive(Debug, Default)]
pub(crate) struct OverwriteLog {
    entries: VecDeque<(Seqno, Seqno)>,
    /// Questions about seqnos below this one cannot be answered: entries above it were dropped (the log was full),
    /// or the vBucket was loaded from disk at it.
    known_from: Seqno,
}

impl OverwriteLog {
    /// The change at `seqno` replaced the key's version at `replaced`.
    pub(crate) fn record(&mut self, seqno: Seqno, replaced: Seqno) {
        while self.entries.back().is_some_and(|(_, r)| *r >= replaced) {
            self.entries.pop_back();
        }
        self.entries.push_back((seqno, replaced));
        if self.entries.len() > OVERWRITES_MAX {
            if let Some((dropped, _)) = self.entries.pop_front() {
                self.known_from = self.known_from.max(dropped);
            }
        }
    }

    /// The oldest version replaced by a change above `n`: Some(None) when no change above `n` replaced anything,
    /// None when the log cannot tell.
    pub(crate) fn oldest_replaced_above(&self, n: Seqno) -> Option<Option<Seqno>> {
        if n < self.known_from {
            return None;
        }
        let first = self.entries.partition_point(|(seqno, _)| *seqno <= n);
        Some(self.entries.get(first).map(|(_, replaced)| *replaced))
    }

    /// Nothing is known before `seqno` (warmup loaded the vBucket at it, or a rollback cut it there).
    pub(crate) fn forget_before(&mut self, seqno: Seqno) {
        self.entries.clear();
        self.known_from = seqno;
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.known_from = 0;
    }
}

impl Bucket {
    /// A replica's stream was answered with ROLLBACK to `n`: rolls the vBucket back to the highest seqno at or
    /// below `n` it can (see the module documentation) and returns it; 0 means the vBucket was emptied. The
    /// vBucket starts a new generation either way, as [`Bucket::reset_vbucket`].
    pub fn rollback_replica(&self, vb: VbId, n: Seqno) -> Seqno {
        let Some(vbucket) = self.vbucket(vb) else { return 0 };
        let full_eviction = self.config().eviction == EvictionPolicy::FullEviction;
        let mut inner = vbucket.inner.lock();
        let to = if full_eviction { None } else { rollback_point(&inner, n) };
        let Some(to) = to.filter(|to| *to > 0) else {
            let (freed, waiters) = self.reset_locked(&mut inner);
            drop(inner);
            self.after_reset(vb, true, freed);
            complete(waiters, Err(EngineError::SyncWriteAmbiguous));
            return 0;
        };
        let (freed, waiters) = self.truncate_locked(&mut inner, to);
        drop(inner);
        self.after_reset(vb, true, freed);
        complete(waiters, Err(EngineError::SyncWriteAmbiguous));
        to
    }

    /// Drops everything of the vBucket above `to` (which its failover log and, when persistent, its disk cover);
    /// returns the bytes freed and the waiters of the prepares dropped.
    fn truncate_locked(&self, inner: &mut VbInner, to: Seqno) -> (usize, Vec<crate::PersistWaiter>) {
        let mut waiters = inner.monitor.take_waiters();
        let doomed: Vec<Seqno> = inner.monitor.prepares_after(to).map(|(s, _)| *s).collect();
        for seqno in doomed {
            if let Some(p) = inner.monitor.remove(seqno) {
                self.charge(-p.footprint());
                waiters.extend(p.waiter);
            }
        }
        self.charge(inner.aborts.truncate_above(to));
        let mut freed = inner.remove_above(to);
        freed += std::mem::take(&mut inner.dirty).charged_bytes();
        let kept = inner.failover.entries().iter().filter(|e| e.seqno <= to).map(|e| (e.uuid, e.seqno));
        if let Some(log) = FailoverLog::from_entries(kept.collect::<Vec<_>>()) {
            inner.failover = log;
        }
        inner.overwrites.forget_before(to);
        inner.prepares_completed_to = inner.prepares_completed_to.min(to);
        inner.high_seqno = to;
        inner.persisted_seqno = inner.persisted_seqno.min(to);
        inner.drained_seqno = to;
        inner.purge_seqno = inner.purge_seqno.min(to);
        inner.snapshot = (to, to);
        inner.known_absent.clear();
        inner.log.reset(to);
        inner.generation += 1;
        if inner.persistent {
            inner.rollback_on_disk = Some(inner.rollback_on_disk.map_or(to, |earlier| earlier.min(to)));
        }
        (freed, waiters)
    }
}

/// Where a vBucket told to roll back to `n` can go: just below the oldest version replaced above `n` (so a stream
/// from there sends it again), at most `n`, at most what is on disk, and within its failover log's history; None
/// when it cannot tell.
fn rollback_point(inner: &VbInner, n: Seqno) -> Option<Seqno> {
    let n = n.min(inner.high_seqno);
    let oldest = inner.overwrites.oldest_replaced_above(n)?;
    let mut to = oldest.map_or(n, |replaced| n.min(replaced.saturating_sub(1)));
    if inner.persistent {
        to = to.min(inner.persisted_seqno);
    }
    // The stream resumes from the newest history branch at or below `to`; without one there is nothing to resume.
    inner.failover.entries().iter().any(|e| e.seqno <= to).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log answers with the oldest version replaced above a seqno, keeps only the entries that can be an
    /// answer, and says it cannot tell once it dropped what a question needs.
    #[test]
    fn the_overwrite_log_finds_the_oldest_version_replaced_above_a_seqno() {
        let mut log = OverwriteLog::default();
        log.record(5, 3);
        log.record(8, 6);
        log.record(10, 2);
        log.record(12, 9);
        assert_eq!(log.oldest_replaced_above(4), Some(Some(2)));
        assert_eq!(log.oldest_replaced_above(10), Some(Some(9)));
        assert_eq!(log.oldest_replaced_above(12), Some(None));
        assert_eq!(log.entries.len(), 2, "(5, 3) and (8, 6) can no longer be an answer");
        for s in 0..OVERWRITES_MAX as u64 + 1 {
            log.record(100 + s, 50 + s);
        }
        assert_eq!(log.oldest_replaced_above(50), None, "what a rollback to 50 needs was dropped");
        let last = 99 + OVERWRITES_MAX as u64;
        assert_eq!(log.oldest_replaced_above(last), Some(Some(last - 49)));
        log.forget_before(2_000);
        assert_eq!(log.oldest_replaced_above(1_999), None);
        assert_eq!(log.oldest_replaced_above(2_000), Some(None));
    }
}
