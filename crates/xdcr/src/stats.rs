//! Counters of one replication's core (Couchbase's XDCR stat names in comments).

use crate::change::{Change, ChangeKind};

/// Counts by the kind of change: goxdcr splits each of its document counters into `set_`, `deletion_` and
/// `expiry_` ones, and the unsplit counter is their total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByKind {
    pub sets: u64,
    pub deletions: u64,
    pub expirations: u64,
}

impl ByKind {
    fn count(&mut self, kind: ChangeKind) {
        match kind {
            ChangeKind::Mutation => self.sets += 1,
            ChangeKind::Deletion => self.deletions += 1,
            ChangeKind::Expiration => self.expirations += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.sets + self.deletions + self.expirations
    }

    fn plus(&self, later: &ByKind) -> ByKind {
        ByKind {
            sets: self.sets + later.sets,
            deletions: self.deletions + later.deletions,
            expirations: self.expirations + later.expirations,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Changes read from the source (`docs_received_from_dcp`; `set_`, `deletion_`, `expiry_received_from_dcp`).
    pub read: ByKind,
    /// Writes the target accepted (`docs_written`; `set_`, `deletion_`, `expiry_docs_written`).
    pub written: ByKind,
    /// Bytes of the with-meta requests the target accepted: header, extras, key and value (`data_replicated`).
    pub data_replicated: u64,
    /// Writes the target refused by conflict resolution (`docs_failed_cr_source`; `set_`, `deletion_`,
    /// `expiry_failed_cr_source`).
    pub failed_cr: ByKind,
    /// Writes sent again after TMPFAIL or an error.
    pub retries: u64,
    /// Writes answered with an error other than TMPFAIL, NOT_MY_VBUCKET or a lost conflict.
    pub errors: u64,
    /// Writes routed again after NOT_MY_VBUCKET or a node down.
    pub rerouted: u64,
    /// Changes not sent because the replication's filter left them out (`docs_filtered`; counted by the driver,
    /// which filters before the core sees a change).
    pub docs_filtered: u64,
    /// Checkpoints saved (`num_checkpoints`).
    pub checkpoints: u64,
    /// vBuckets read again from their confirmed position because the target may have lost writes it had
    /// acknowledged (its history changed, or its connection broke, before they were persisted).
    pub rewinds: u64,
    /// Confirmations the target refused to answer (OBSERVE_SEQNO not served or denied), where acknowledged writes
    /// were counted as persisted.
    pub unconfirmed: u64,
    /// The last error status a target returned, if any.
    pub last_error: Option<u16>,
}

impl Stats {
    /// Changes read from the source (`docs_received_from_dcp`, `docs_checked`).
    pub fn changes_read(&self) -> u64 {
        self.read.total()
    }

    /// Writes the target accepted (`docs_written`).
    pub fn docs_written(&self) -> u64 {
        self.written.total()
    }

    /// Writes refused by conflict resolution (`docs_failed_cr_source`).
    pub fn docs_failed_cr(&self) -> u64 {
        self.failed_cr.total()
    }

    pub(crate) fn count_read(&mut self, c: &Change) {
        self.read.count(c.kind);
    }

    pub(crate) fn count_written(&mut self, c: &Change) {
        self.written.count(c.kind);
        self.data_replicated += c.request_bytes() as u64;
    }

    pub(crate) fn count_lost_conflict(&mut self, c: &Change) {
        self.failed_cr.count(c.kind);
    }

    /// These counts after `later`'s (a runner's totals over its runs); the last error is the later one's if any.
    pub fn plus(&self, later: &Stats) -> Stats {
        Stats {
            read: self.read.plus(&later.read),
            written: self.written.plus(&later.written),
            data_replicated: self.data_replicated + later.data_replicated,
            failed_cr: self.failed_cr.plus(&later.failed_cr),
            retries: self.retries + later.retries,
            errors: self.errors + later.errors,
            rerouted: self.rerouted + later.rerouted,
            docs_filtered: self.docs_filtered + later.docs_filtered,
            checkpoints: self.checkpoints + later.checkpoints,
            rewinds: self.rewinds + later.rewinds,
            unconfirmed: self.unconfirmed + later.unconfirmed,
            last_error: later.last_error.or(self.last_error),
        }
    }
}
