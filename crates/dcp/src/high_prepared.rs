//! A replica's high prepared seqno (HPS): the newest prepare it may acknowledge to the active with
//! DCP_SEQNO_ACKNOWLEDGED. Couchbase's replica moves it only at snapshot boundaries, in seqno order, over prepares
//! that are locally satisfied:
//! - a prepare in a memory snapshot, once that snapshot is complete; a `persistToMajority` one also once it is
//!   persisted;
//! - a prepare in a disk snapshot, once the whole snapshot is complete and persisted (a disk snapshot is only
//!   consistent as a whole).
//!
//! The queue holds the received prepares above the HPS, so it is bounded by the prepares in flight.

use std::collections::VecDeque;

use settee_types::Seqno;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    seqno: Seqno,
    /// The persisted seqno this prepare waits for; 0 for none.
    persist_upto: Seqno,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct HighPrepared {
    pending: VecDeque<Pending>,
    complete_upto: Seqno,
    persisted: Seqno,
    hps: Seqno,
    acked: Seqno,
}

impl HighPrepared {
    /// Records a received prepare; `persist_upto` is what must be persisted before it counts (0 for nothing).
    pub(crate) fn prepare(&mut self, seqno: Seqno, persist_upto: Seqno) {
        debug_assert!(self.pending.back().is_none_or(|p| p.seqno < seqno));
        self.pending.push_back(Pending { seqno, persist_upto });
    }

    /// Every snapshot up to `end` is complete.
    pub(crate) fn snapshot_complete(&mut self, end: Seqno) {
        self.complete_upto = self.complete_upto.max(end);
        self.advance();
    }

    /// The driver persisted everything up to `seqno`.
    pub(crate) fn persisted(&mut self, seqno: Seqno) {
        self.persisted = self.persisted.max(seqno);
        self.advance();
    }

    /// Whether received prepares still wait to count (for their snapshot to complete or to be persisted).
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The new HPS to acknowledge, once per increase.
    pub(crate) fn take_ack(&mut self) -> Option<Seqno> {
        (self.hps > self.acked).then(|| {
            self.acked = self.hps;
            self.hps
        })
    }

    fn advance(&mut self) {
        while let Some(p) = self.pending.front() {
            if p.seqno > self.complete_upto || p.persist_upto > self.persisted {
                break;
            }
            self.hps = p.seqno;
            self.pending.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Majority prepares count once their snapshot completes; a persist-level prepare holds back every later one
    /// until it is persisted, and each increase is acknowledged once.
    #[test]
    fn hps_moves_at_snapshot_end_and_in_order() {
        let mut h = HighPrepared::default();
        h.prepare(3, 0);
        h.prepare(5, 5);
        h.prepare(7, 0);
        assert_eq!(h.take_ack(), None);
        h.snapshot_complete(8);
        assert_eq!(h.take_ack(), Some(3));
        assert_eq!(h.take_ack(), None);
        h.persisted(5);
        assert_eq!(h.take_ack(), Some(7));
    }
}
