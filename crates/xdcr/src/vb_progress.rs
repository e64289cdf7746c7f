//! Where the replication of one source vBucket stands: the history it reads, what was delivered, which changes
//! the target has not acknowledged yet, and so the *through* seqno a checkpoint may record.

use std::collections::BTreeSet;

use crate::error::XdcrError;

#[derive(Debug)]
pub(crate) struct VbProgress {
    pub(crate) vbuuid: u64,
    /// Bumped each time the vBucket starts being read, so replies to writes of an earlier reading are ignored.
    pub(crate) epoch: u64,
    /// The highest seqno delivered: the last change, or the end of the last snapshot delivered whole.
    delivered: u64,
    snapshot: Option<(u64, u64)>,
    /// Seqnos of changes not yet acknowledged by the target.
    pending: BTreeSet<u64>,
    /// The through seqno of the last checkpoint saved.
    pub(crate) saved: u64,
}

impl VbProgress {
    pub(crate) fn new(vbuuid: u64, epoch: u64, from: u64) -> VbProgress {
        VbProgress { vbuuid, epoch, delivered: from, snapshot: None, pending: BTreeSet::new(), saved: from }
    }

    pub(crate) fn on_snapshot(&mut self, vb: u16, start: u64, end: u64) -> Result<(), XdcrError> {
        if start <= self.delivered || end < start {
            return Err(XdcrError::OutsideSnapshot { vb, seqno: self.delivered, start, end });
        }
        self.snapshot = Some((start, end));
        Ok(())
    }

    /// Records a delivered change at `seqno`, which must follow everything delivered and lie in the snapshot.
    pub(crate) fn on_change(&mut self, vb: u16, seqno: u64) -> Result<(), XdcrError> {
        if seqno <= self.delivered {
            return Err(XdcrError::OutOfOrder { vb, seqno, after: self.delivered });
        }
        if let Some((start, end)) = self.snapshot {
            if seqno < start || seqno > end {
                return Err(XdcrError::OutsideSnapshot { vb, seqno, start, end });
            }
        }
        self.delivered = seqno;
        self.pending.insert(seqno);
        Ok(())
    }

    pub(crate) fn on_snapshot_done(&mut self) {
        if let Some((_, end)) = self.snapshot.take() {
            self.delivered = self.delivered.max(end);
        }
    }

    /// The target acknowledged (or conflict resolution settled) the change at `seqno`.
    pub(crate) fn on_settled(&mut self, seqno: u64) {
        self.pending.remove(&seqno);
    }

    /// Every change at or below this seqno is on the target.
    pub(crate) fn through(&self) -> u64 {
        match self.pending.first() {
            Some(&oldest) => oldest - 1,
            None => self.delivered,
        }
    }
}
