//! Where the replication of one source vBucket stands: the history it reads, what was delivered, which changes
//! the target has not acknowledged yet, and so the *through* seqno a checkpoint may record.

use std::collections::BTreeMap;

use crate::error::XdcrError;

#[derive(Debug)]
pub(crate) struct VbProgress {
    pub(crate) vbuuid: u64,
    /// Bumped each time the vBucket starts being read, so replies to writes of an earlier reading are ignored.
    pub(crate) epoch: u64,
    /// The highest seqno delivered: the last change, or the end of the last snapshot delivered whole.
    delivered: u64,
    snapshot: Option<(u64, u64)>,
    /// Seqnos of changes not yet acknowledged by the target, with how many writes of each are outstanding (a
    /// change copied to several target collections, as the collections migration mode does, is several writes).
    pending: BTreeMap<u64, u32>,
    /// The seqno of the last checkpoint saved.
    pub(crate) saved: u64,
    /// Every change at or below it is on the target's disk: what a checkpoint records.
    pub(crate) confirmed: u64,
    /// The confirmation under way, if any.
    pub(crate) probe: Option<Probe>,
    /// The target vBucket's history (vbuuid) last seen, kept across probes: a change means what the target
    /// acknowledged but had not persisted may be gone.
    pub(crate) target_uuid: Option<u64>,
}

/// One confirmation: every change at or below `seqno` was acknowledged before the probe's first OBSERVE_SEQNO was
/// sent; its answer's (vbuuid, current seqno) is the target position those writes lie under, and once the target
/// reports that position persisted on the same history, `seqno` is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) id: u64,
    pub(crate) seqno: u64,
    pub(crate) target: Option<(u64, u64)>,
}

impl VbProgress {
    pub(crate) fn new(vbuuid: u64, epoch: u64, from: u64) -> VbProgress {
        VbProgress {
            vbuuid,
            epoch,
            delivered: from,
            snapshot: None,
            pending: BTreeMap::new(),
            saved: from,
            confirmed: from,
            probe: None,
            target_uuid: None,
        }
    }

    pub(crate) fn on_snapshot(&mut self, vb: u16, start: u64, end: u64) -> Result<(), XdcrError> {
        if start <= self.delivered || end < start {
            return Err(XdcrError::OutsideSnapshot { vb, seqno: self.delivered, start, end });
        }
        self.snapshot = Some((start, end));
        Ok(())
    }

    /// Records a delivered change at `seqno`, which must follow everything delivered and lie in the snapshot, or
    /// be a further copy of the change just delivered (still unacknowledged, same seqno).
    pub(crate) fn on_change(&mut self, vb: u16, seqno: u64) -> Result<(), XdcrError> {
        if seqno == self.delivered {
            if let Some(copies) = self.pending.get_mut(&seqno) {
                *copies += 1;
                return Ok(());
            }
        }
        if seqno <= self.delivered {
            return Err(XdcrError::OutOfOrder { vb, seqno, after: self.delivered });
        }
        if let Some((start, end)) = self.snapshot {
            if seqno < start || seqno > end {
                return Err(XdcrError::OutsideSnapshot { vb, seqno, start, end });
            }
        }
        self.delivered = seqno;
        self.pending.insert(seqno, 1);
        Ok(())
    }

    pub(crate) fn on_snapshot_done(&mut self) {
        if let Some((_, end)) = self.snapshot.take() {
            self.delivered = self.delivered.max(end);
        }
    }

    /// The target acknowledged (or conflict resolution settled) one write of the change at `seqno`.
    pub(crate) fn on_settled(&mut self, seqno: u64) {
        if let Some(copies) = self.pending.get_mut(&seqno) {
            *copies -= 1;
            if *copies == 0 {
                self.pending.remove(&seqno);
            }
        }
    }

    /// Every change at or below this seqno is on the target.
    pub(crate) fn through(&self) -> u64 {
        match self.pending.keys().next() {
            Some(&oldest) => oldest - 1,
            None => self.delivered,
        }
    }
}
