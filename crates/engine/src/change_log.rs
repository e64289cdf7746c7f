//! The per-vBucket change log that DCP producers read: the keys of recent mutations in seqno order, kept only while
//! some stream has a cursor on the vBucket, and trimmed to the slowest cursor.
//!
//! A cursor that falls behind the log's start (the log is bounded, so a stalled stream cannot hold memory) is
//! served by a backfill from the hash table (and the store) instead, as Couchbase drops slow cursors to disk.

use std::collections::VecDeque;

use settee_types::Seqno;

/// What a change-log entry records about its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogKind {
    /// A mutation or deletion, now in the hash table (unless a later entry replaced it).
    Mutation,
    /// A sync write waiting in the durability monitor.
    Prepare,
    /// The prepare at this seqno committed; the value is in the hash table at the entry's seqno.
    Commit { prepared: Seqno },
    /// The prepare at this seqno was aborted; nothing of it remains.
    Abort { prepared: Seqno },
}

/// Most entries one vBucket's log keeps; beyond this the oldest are dropped and slow cursors backfill.
pub(crate) const CHANGE_LOG_ENTRIES_MAX: usize = 65_536;

/// Identifies one stream's position in one vBucket's log.
pub type CursorId = u64;

#[derive(Default)]
pub(crate) struct ChangeLog {
    /// (seqno, encoded key, kind) of each change after `start`, in seqno order.
    entries: VecDeque<(Seqno, Box<[u8]>, LogKind)>,
    /// The log holds every mutation with a seqno above this one (and at most the high seqno).
    start: Seqno,
    /// Each open cursor and the last seqno it has read.
    cursors: Vec<(CursorId, Seqno)>,
    /// A reader has been told about entries it has not read yet; no need to tell it again.
    pub(crate) notified: bool,
}

impl ChangeLog {
    #[cfg(test)]
    pub(crate) fn is_recording(&self) -> bool {
        !self.cursors.is_empty()
    }

    /// Records a change; returns true when readers should be woken (first entry since they last read).
    pub(crate) fn record(&mut self, seqno: Seqno, key: &[u8], kind: LogKind) -> bool {
        if self.cursors.is_empty() {
            return false;
        }
        debug_assert!(self.entries.back().is_none_or(|(s, _, _)| *s < seqno), "change log seqnos must increase");
        self.entries.push_back((seqno, key.into(), kind));
        if self.entries.len() > CHANGE_LOG_ENTRIES_MAX {
            if let Some((dropped, _, _)) = self.entries.pop_front() {
                self.start = dropped;
            }
        }
        !std::mem::replace(&mut self.notified, true)
    }

    /// Opens a cursor; the log covers mutations from now on (`high_seqno` is the vBucket's current one).
    pub(crate) fn open_cursor(&mut self, id: CursorId, position: Seqno, high_seqno: Seqno) {
        if self.cursors.is_empty() {
            self.entries.clear();
            self.start = high_seqno;
        }
        self.cursors.push((id, position));
    }

    pub(crate) fn close_cursor(&mut self, id: CursorId) {
        self.cursors.retain(|(c, _)| *c != id);
        if self.cursors.is_empty() {
            self.entries.clear();
            self.entries.shrink_to(0);
        } else {
            self.trim();
        }
    }

    /// Whether the log alone can serve a reader positioned at `after` (it holds every mutation above it).
    pub(crate) fn covers(&self, after: Seqno) -> bool {
        after >= self.start
    }

    /// The entries above `after`, oldest first.
    pub(crate) fn entries_after(&self, after: Seqno) -> impl Iterator<Item = &(Seqno, Box<[u8]>, LogKind)> {
        let first = self.entries.partition_point(|(s, _, _)| *s <= after);
        self.entries.range(first..)
    }

    /// Moves a cursor and drops entries every cursor has read.
    pub(crate) fn advance(&mut self, id: CursorId, position: Seqno) {
        if let Some(c) = self.cursors.iter_mut().find(|(c, _)| *c == id) {
            c.1 = c.1.max(position);
        }
        self.notified = false;
        self.trim();
    }

    /// Forgets everything (the vBucket was reset or rolled back); cursors stay open.
    pub(crate) fn reset(&mut self, high_seqno: Seqno) {
        self.entries.clear();
        self.start = high_seqno;
        for c in &mut self.cursors {
            c.1 = c.1.min(high_seqno);
        }
    }

    fn trim(&mut self) {
        let Some(slowest) = self.cursors.iter().map(|(_, p)| *p).min() else { return };
        while self.entries.front().is_some_and(|(s, _, _)| *s <= slowest) {
            if let Some((s, _, _)) = self.entries.pop_front() {
                self.start = s;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_with_a_cursor_and_trims_to_the_slowest() {
        let mut log = ChangeLog::default();
        assert!(!log.record(1, b"a", LogKind::Mutation));
        assert_eq!(log.len(), 0);
        log.open_cursor(7, 1, 1);
        log.open_cursor(8, 1, 1);
        assert!(log.record(2, b"b", LogKind::Mutation), "first entry wakes readers");
        assert!(!log.record(3, b"c", LogKind::Prepare), "later entries do not, until they read");
        assert!(log.covers(1) && !log.covers(0));
        assert_eq!(log.entries_after(2).map(|(s, _, k)| (*s, *k)).collect::<Vec<_>>(), vec![(3, LogKind::Prepare)]);
        log.advance(7, 3);
        assert_eq!(log.len(), 2, "cursor 8 has read nothing yet");
        log.advance(8, 2);
        assert_eq!(log.len(), 1);
        assert!(!log.covers(1) && log.covers(2));
        log.close_cursor(8);
        assert_eq!(log.len(), 0, "the remaining cursor has read everything");
        log.close_cursor(7);
        assert!(!log.is_recording());
    }

    #[test]
    fn a_full_log_drops_its_oldest_entries() {
        let mut log = ChangeLog::default();
        log.open_cursor(1, 0, 0);
        for s in 1..=(CHANGE_LOG_ENTRIES_MAX as u64 + 10) {
            log.record(s, b"k", LogKind::Mutation);
        }
        assert_eq!(log.len(), CHANGE_LOG_ENTRIES_MAX);
        assert!(!log.covers(0), "the stalled cursor must backfill");
        assert!(log.covers(10));
    }
}
