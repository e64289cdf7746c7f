//! The failover log of a vBucket: the branches of its history, newest first. A DCP stream request names the branch
//! the consumer's data came from, and the log decides whether the consumer may resume or must roll back first
//! (kv_engine's docs/dcp/documentation/rollback.md).

use crate::{Seqno, VbUuid};

/// One branch point: from `seqno` on, the vBucket's history is the one named `uuid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FailoverEntry {
    pub uuid: VbUuid,
    pub seqno: Seqno,
}

/// The bytes one entry takes on the wire: uuid u64 then seqno u64, both big-endian.
pub const FAILOVER_ENTRY_BYTES: usize = 16;

/// A vBucket's failover log: never empty, newest entry first, at most [`FailoverLog::ENTRIES_MAX`] entries, and
/// seqnos never increase from one entry to the next older one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverLog {
    entries: Vec<FailoverEntry>,
}

/// What a consumer says about its data when it asks for a stream (the fields of DCP_STREAM_REQ that the rollback
/// decision reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamStart {
    /// The newest uuid of the consumer's own failover log; 0 when it has no history.
    pub uuid: VbUuid,
    /// The last seqno the consumer has.
    pub start_seqno: Seqno,
    /// The snapshot the consumer was receiving when it stopped.
    pub snap_start: Seqno,
    pub snap_end: Seqno,
    /// Stream-request flag 0x20: check the uuid even when `start_seqno` is 0.
    pub strict_uuid: bool,
    /// Stream-request flag 0x80: do not roll back only because tombstones were purged past `start_seqno`.
    pub ignore_purged_tombstones: bool,
}

impl StreamStart {
    /// A request with no flags set.
    pub fn new(uuid: VbUuid, start_seqno: Seqno, snap_start: Seqno, snap_end: Seqno) -> StreamStart {
        StreamStart { uuid, start_seqno, snap_start, snap_end, strict_uuid: false, ignore_purged_tombstones: false }
    }
}

impl FailoverLog {
    /// Couchbase's default `max_failover_entries`.
    pub const ENTRIES_MAX: usize = 25;

    /// A log with a single branch starting at `seqno`.
    pub fn new(uuid: VbUuid, seqno: Seqno) -> FailoverLog {
        FailoverLog { entries: vec![FailoverEntry { uuid, seqno }] }
    }

    /// The branch the vBucket is on now.
    pub fn latest(&self) -> FailoverEntry {
        // The log is never empty: every constructor makes at least one entry and nothing removes the last one.
        self.entries[0]
    }

    /// Every entry, newest first.
    pub fn entries(&self) -> &[FailoverEntry] {
        &self.entries
    }

    /// Starts a new history branch at `seqno` (the vBucket's high seqno when it becomes active after a takeover, a
    /// failover or an unclean restart). Entries newer than `seqno` belong to a history this vBucket has diverged
    /// from, so they are dropped first; the oldest entry goes when the log is full.
    pub fn push(&mut self, uuid: VbUuid, seqno: Seqno) {
        let keep_from = self.entries.iter().position(|e| e.seqno <= seqno).unwrap_or(self.entries.len());
        self.entries.drain(..keep_from);
        self.entries.insert(0, FailoverEntry { uuid, seqno });
        self.entries.truncate(Self::ENTRIES_MAX);
        debug_assert!(self.is_well_formed());
    }

    /// Appends the DCP wire form (the body of a successful STREAM_REQ or GET_FAILOVER_LOG reply).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.entries.len() * FAILOVER_ENTRY_BYTES);
        for e in &self.entries {
            out.extend_from_slice(&e.uuid.to_be_bytes());
            out.extend_from_slice(&e.seqno.to_be_bytes());
        }
    }

    /// Reads the DCP wire form. None when the body is empty, not a whole number of entries, or its seqnos increase
    /// from newer to older entries (a log no producer can have). A log longer than [`Self::ENTRIES_MAX`] keeps its
    /// newest entries: losing the oldest branch points can only cause a rollback, never a wrong resume.
    pub fn decode(body: &[u8]) -> Option<FailoverLog> {
        if body.is_empty() || !body.len().is_multiple_of(FAILOVER_ENTRY_BYTES) {
            return None;
        }
        Self::from_entries(body.chunks_exact(FAILOVER_ENTRY_BYTES).map(|c| {
            let (uuid, seqno) = c.split_at(8);
            (be_u64(uuid), be_u64(seqno))
        }))
    }

    /// A log from (uuid, seqno) pairs, newest first (as the store keeps them), under the same checks as
    /// [`Self::decode`].
    pub fn from_entries(entries: impl IntoIterator<Item = (VbUuid, Seqno)>) -> Option<FailoverLog> {
        let entries: Vec<FailoverEntry> =
            entries.into_iter().take(Self::ENTRIES_MAX).map(|(uuid, seqno)| FailoverEntry { uuid, seqno }).collect();
        let log = FailoverLog { entries };
        log.is_well_formed().then_some(log)
    }

    /// Where a consumer must roll back to before it may stream from `req`, or None when it may start as asked.
    ///
    /// The rules, in order (rollback.md, and kv_engine's behaviour where the document is silent):
    /// 1. `start_seqno` 0 never rolls back, unless `strict_uuid` is set and the uuid is not 0.
    /// 2. `start_seqno` below `purge_seqno`: roll back to 0, since deletions the consumer never saw were purged
    ///    (skipped with `ignore_purged_tombstones`).
    /// 3. A uuid not in the log: no common history, roll back to 0.
    /// 4. Otherwise the histories agree up to `upper`: the seqno of the next newer entry, or `high_seqno` for the
    ///    latest entry. A consumer whose snapshot ends at or below `upper` may resume. Else it rolls back to `upper`
    ///    when its whole snapshot lies above it, or to `snap_start` when the snapshot straddles it (a partial
    ///    snapshot may miss deduplicated keys). A consumer that has none of its snapshot's items (`start_seqno ==
    ///    snap_start`) counts as ending at `start_seqno`; one that has all of them (`start_seqno == snap_end`)
    ///    counts as starting there.
    ///
    /// Total on every input: a request whose snapshot does not contain `start_seqno` is invalid (ERANGE, checked by
    /// the stream request before it asks) and is first widened to contain it, and `upper` never exceeds
    /// `high_seqno`. So the answer is always at most `start_seqno` and at most `high_seqno`.
    pub fn rollback_point(&self, req: StreamStart, high_seqno: Seqno, purge_seqno: Seqno) -> Option<Seqno> {
        let start = req.start_seqno;
        if start == 0 && (!req.strict_uuid || req.uuid == 0) {
            return None;
        }
        if start != 0 && start < purge_seqno && !req.ignore_purged_tombstones {
            return Some(0);
        }
        let Some(index) = self.entries.iter().position(|e| e.uuid == req.uuid) else {
            return Some(0);
        };
        let upper = match index.checked_sub(1) {
            Some(newer) => self.entries[newer].seqno.min(high_seqno),
            None => high_seqno,
        };
        let mut snap_start = req.snap_start.min(start);
        let mut snap_end = req.snap_end.max(start);
        if start == snap_start {
            snap_end = start;
        }
        if snap_end <= upper {
            return None;
        }
        if start == snap_end {
            snap_start = start;
        }
        let to = if upper < snap_start { upper } else { snap_start };
        debug_assert!(to <= start && to <= high_seqno);
        Some(to)
    }

    fn is_well_formed(&self) -> bool {
        !self.entries.is_empty()
            && self.entries.len() <= Self::ENTRIES_MAX
            && self.entries.windows(2).all(|w| w[0].seqno >= w[1].seqno)
    }
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log with branch A from 0, B from 10 and C from 20 (newest first: C, B, A).
    fn three_branches() -> FailoverLog {
        let mut log = FailoverLog::new(0xA, 0);
        log.push(0xB, 10);
        log.push(0xC, 20);
        log
    }

    fn at(uuid: VbUuid, start: Seqno, snap: (Seqno, Seqno)) -> StreamStart {
        StreamStart::new(uuid, start, snap.0, snap.1)
    }

    /// The wire form is 16 bytes per entry, newest first, and decodes back to the same log.
    #[test]
    fn wire_form_is_uuid_then_seqno_newest_first() {
        let log = three_branches();
        let mut out = Vec::new();
        log.encode(&mut out);
        assert_eq!(out.len(), 48);
        assert_eq!(&out[..16], &[0, 0, 0, 0, 0, 0, 0, 0xC, 0, 0, 0, 0, 0, 0, 0, 20]);
        assert_eq!(FailoverLog::decode(&out), Some(log));
    }

    /// Empty bodies, partial entries and logs whose seqnos grow towards the past are rejected.
    #[test]
    fn decode_rejects_malformed_logs() {
        assert_eq!(FailoverLog::decode(&[]), None);
        assert_eq!(FailoverLog::decode(&[0; 15]), None);
        assert_eq!(FailoverLog::decode(&[0; 17]), None);
        let mut out = Vec::new();
        FailoverLog::new(1, 5).encode(&mut out);
        FailoverLog::new(2, 9).encode(&mut out);
        assert_eq!(FailoverLog::decode(&out), None);
    }

    /// A new branch drops the entries it diverged from, and the log keeps at most 25 entries, dropping the oldest.
    #[test]
    fn push_prunes_diverged_entries_and_bounds_the_log() {
        let mut log = three_branches();
        log.push(0xD, 15);
        let uuids: Vec<_> = log.entries().iter().map(|e| e.uuid).collect();
        assert_eq!(uuids, [0xD, 0xB, 0xA]);
        for i in 0..40 {
            log.push(100 + i, 15 + i);
        }
        assert_eq!(log.entries().len(), FailoverLog::ENTRIES_MAX);
        assert_eq!(log.latest(), FailoverEntry { uuid: 139, seqno: 54 });
        assert!(log.is_well_formed());
    }

    /// Start 0 with uuid 0 never rolls back; with the strict flag an unknown uuid at 0 rolls back to 0.
    #[test]
    fn start_zero_rolls_back_only_when_strict() {
        let log = three_branches();
        assert_eq!(log.rollback_point(at(0, 0, (0, 0)), 30, 0), None);
        assert_eq!(log.rollback_point(at(0xEE, 0, (0, 0)), 30, 0), None);
        let strict = StreamStart { strict_uuid: true, ..at(0xEE, 0, (0, 0)) };
        assert_eq!(log.rollback_point(strict, 30, 0), Some(0));
        assert_eq!(log.rollback_point(StreamStart { uuid: 0, ..strict }, 30, 0), None);
        assert_eq!(log.rollback_point(StreamStart { uuid: 0xC, ..strict }, 30, 0), None);
    }

    /// A consumer behind the purge seqno must start again from 0, unless it opted out.
    #[test]
    fn purged_tombstones_force_rollback_to_zero() {
        let log = three_branches();
        assert_eq!(log.rollback_point(at(0xC, 25, (25, 25)), 30, 26), Some(0));
        assert_eq!(log.rollback_point(at(0xC, 25, (25, 25)), 30, 25), None);
        let opt_out = StreamStart { ignore_purged_tombstones: true, ..at(0xC, 25, (25, 25)) };
        assert_eq!(log.rollback_point(opt_out, 30, 26), None);
    }

    /// A uuid the producer never had means no common history.
    #[test]
    fn unknown_uuid_rolls_back_to_zero() {
        assert_eq!(three_branches().rollback_point(at(0xEE, 5, (5, 5)), 30, 0), Some(0));
    }

    /// A consumer on an older branch whose snapshot ends before the next branch point resumes where it is.
    #[test]
    fn lagging_consumer_resumes() {
        let log = three_branches();
        assert_eq!(log.rollback_point(at(0xB, 15, (12, 20)), 30, 0), None);
        assert_eq!(log.rollback_point(at(0xC, 30, (25, 30)), 30, 0), None);
        assert_eq!(log.rollback_point(at(0xA, 10, (10, 10)), 30, 0), None);
    }

    /// A consumer whose snapshot lies wholly after the branch point rolls back to the branch point.
    #[test]
    fn leading_consumer_rolls_back_to_the_branch_point() {
        let log = three_branches();
        assert_eq!(log.rollback_point(at(0xA, 15, (12, 15)), 30, 0), Some(10));
        assert_eq!(log.rollback_point(at(0xC, 40, (35, 40)), 30, 0), Some(30));
    }

    /// A partial snapshot straddling the branch point rolls back to the snapshot start, since deduplicated keys of
    /// that snapshot may be missing.
    #[test]
    fn straddling_snapshot_rolls_back_to_its_start() {
        let log = three_branches();
        assert_eq!(log.rollback_point(at(0xB, 18, (16, 24)), 30, 0), Some(16));
        // The worked example of discussion.md: branch 2222 at 3, consumer of 1111 in snapshot {1,4} at 3.
        let mut log = FailoverLog::new(1111, 0);
        log.push(2222, 3);
        assert_eq!(log.rollback_point(at(1111, 3, (1, 4)), 10, 0), Some(1));
    }

    /// A consumer with no item of its snapshot counts as at the snapshot start; one with all of them, as at its end.
    #[test]
    fn snapshot_edges_avoid_needless_rollbacks() {
        let log = three_branches();
        // Received the marker {10, 25} on branch B but no item: still at 10, which B shares.
        assert_eq!(log.rollback_point(at(0xB, 10, (10, 25)), 30, 0), None);
        // Has all of {15, 22} on branch B, which ended at 20: rolls back to 20 rather than to 15.
        assert_eq!(log.rollback_point(at(0xB, 22, (15, 22)), 30, 0), Some(20));
    }

    /// Invalid requests (start outside the snapshot) and inconsistent inputs still get an answer within bounds.
    #[test]
    fn rollback_point_is_total_and_bounded_exhaustively() {
        let mut logs = vec![three_branches(), FailoverLog::new(0xA, 0)];
        let mut odd = FailoverLog::new(0xA, 3);
        odd.push(0xB, 7);
        logs.push(odd);
        for log in &logs {
            for uuid in [0, 0xA, 0xB, 0xC, 0xEE] {
                for start in 0..12 {
                    for snap_start in 0..12 {
                        for snap_end in 0..12 {
                            for high in [0, 4, 9] {
                                for purge in [0, 5] {
                                    for flags in 0..4 {
                                        let req = StreamStart {
                                            strict_uuid: flags & 1 != 0,
                                            ignore_purged_tombstones: flags & 2 != 0,
                                            ..at(uuid, start, (snap_start, snap_end))
                                        };
                                        if let Some(to) = log.rollback_point(req, high, purge) {
                                            assert!(to <= start && to <= high, "{req:?} {high} {purge} -> {to}");
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
