//! The aborts of a vBucket's sync writes, kept so that a DCP backfill can carry them: a replica that holds a
//! prepare and missed its abort (it was disconnected) must learn of the abort, or it keeps the prepare and commits
//! it if it is promoted. Couchbase keeps aborts on disk as tombstone-like items and sends them from its disk
//! backfills; settee backfills from memory, so the aborts live here too (and on disk, see `sync_record.rs`, so a
//! restart keeps them).
//!
//! Bounded: at most [`ABORTS_MAX`] per vBucket, and none older than the tombstone purge age (the expiry pager
//! drops them with the tombstones). Dropping an abort is a purge: the vBucket's purge seqno moves to its seqno, so a
//! stream resuming below it rolls back (to zero) instead of missing it, exactly as for a purged tombstone.

use std::collections::VecDeque;

use settee_types::Seqno;

/// Aborts one vBucket keeps at most; an older one is purged when a newer one arrives.
pub(crate) const ABORTS_MAX: usize = 1024;
/// Memory charged per abort beyond its key.
const ABORT_BYTES: usize = std::mem::size_of::<Abort>();

/// One aborted prepare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Abort {
    /// The abort's own seqno.
    pub seqno: Seqno,
    pub key: Box<[u8]>,
    /// The seqno of the prepare it aborted.
    pub prepared: Seqno,
    /// When it was aborted (Unix seconds): the purge age counts from here.
    pub time: u32,
}

impl Abort {
    pub(crate) fn charged_bytes(&self) -> usize {
        ABORT_BYTES + self.key.len()
    }
}

#[derive(Debug, Default)]
pub(crate) struct AbortLog {
    /// In seqno order (aborts take increasing seqnos, and warmup loads them in seqno order).
    entries: VecDeque<Abort>,
}

/// What a change to the log did to the bucket's memory and purge seqno.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// Bytes to add to (positive) or take from (negative) the bucket's charge.
    pub charge: isize,
    /// The highest seqno of an abort purged, if any: the vBucket's purge seqno must reach it.
    pub purged_to: Option<Seqno>,
}

impl AbortLog {
    /// Records an abort (its seqno above every one held); purges the oldest when the log is full.
    pub(crate) fn push(&mut self, abort: Abort) -> Dropped {
        debug_assert!(self.entries.back().is_none_or(|a| a.seqno < abort.seqno), "aborts in seqno order");
        let mut d = Dropped { charge: abort.charged_bytes() as isize, purged_to: None };
        self.entries.push_back(abort);
        while self.entries.len() > ABORTS_MAX {
            if let Some(old) = self.entries.pop_front() {
                d.charge -= old.charged_bytes() as isize;
                d.purged_to = Some(old.seqno);
            }
        }
        d
    }

    /// The aborts with seqnos in `(after, end]`, oldest first.
    pub(crate) fn range(&self, after: Seqno, end: Seqno) -> impl Iterator<Item = &Abort> {
        let first = self.entries.partition_point(|a| a.seqno <= after);
        self.entries.range(first..).take_while(move |a| a.seqno <= end)
    }

    /// Purges the aborts made before `before` (Unix seconds), as tombstones older than the purge age are purged.
    pub(crate) fn purge_older_than(&mut self, before: u32) -> Dropped {
        let mut d = Dropped::default();
        while self.entries.front().is_some_and(|a| a.time < before) {
            if let Some(old) = self.entries.pop_front() {
                d.charge -= old.charged_bytes() as isize;
                d.purged_to = Some(old.seqno);
            }
        }
        d
    }

    /// Forgets the aborts above `seqno` (a replica rolled back to it); returns the bytes released (negative).
    pub(crate) fn truncate_above(&mut self, seqno: Seqno) -> isize {
        let keep = self.entries.partition_point(|a| a.seqno <= seqno);
        self.entries.drain(keep..).map(|a| -(a.charged_bytes() as isize)).sum()
    }

    /// Forgets everything (the vBucket was emptied); returns the bytes released (negative).
    pub(crate) fn clear(&mut self) -> isize {
        self.entries.drain(..).map(|a| -(a.charged_bytes() as isize)).sum()
    }

    /// The seqno of the newest abort held.
    pub(crate) fn last_seqno(&self) -> Option<Seqno> {
        self.entries.back().map(|a| a.seqno)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abort(seqno: Seqno, time: u32) -> Abort {
        Abort { seqno, key: b"k".as_slice().into(), prepared: seqno - 1, time }
    }

    /// A full log purges its oldest abort and reports its seqno, so the vBucket's purge seqno covers it; the
    /// charge follows what the log holds.
    #[test]
    fn a_full_log_purges_its_oldest_abort() {
        let mut log = AbortLog::default();
        let mut charge = 0;
        for s in 0..ABORTS_MAX as u64 {
            let d = log.push(abort(2 * s + 2, 0));
            assert_eq!(d.purged_to, None);
            charge += d.charge;
        }
        let d = log.push(abort(5_000, 0));
        assert_eq!((d.charge, d.purged_to), (0, Some(2)), "one in, one out");
        charge += d.charge;
        assert_eq!(log.len(), ABORTS_MAX);
        assert_eq!(charge, (ABORTS_MAX * abort(1, 0).charged_bytes()) as isize);
        assert_eq!(log.clear(), -charge);
        assert_eq!(log.len(), 0);
    }

    /// A range read returns the aborts strictly above `after` up to `end`; an age purge takes the old ones only;
    /// a rollback forgets those above its seqno.
    #[test]
    fn range_age_purge_and_truncation() {
        let mut log = AbortLog::default();
        for (seqno, time) in [(3, 10), (5, 20), (9, 30)] {
            log.push(abort(seqno, time));
        }
        assert_eq!(log.range(3, 9).map(|a| a.seqno).collect::<Vec<_>>(), vec![5, 9]);
        assert_eq!(log.range(0, 8).map(|a| a.seqno).collect::<Vec<_>>(), vec![3, 5]);
        let d = log.purge_older_than(25);
        assert_eq!(d.purged_to, Some(5));
        assert_eq!(log.range(0, u64::MAX).map(|a| a.seqno).collect::<Vec<_>>(), vec![9]);
        assert!(log.truncate_above(8) < 0);
        assert_eq!(log.len(), 0);
    }
}
