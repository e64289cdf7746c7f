//! Counters of one replication's core (Couchbase's XDCR stat names in comments).

use crate::change::{Change, ChangeKind};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Changes read from the source (`docs_received_from_dcp`).
    pub changes_read: u64,
    /// Of those, mutations, deletions and expirations (`set_`, `deletion_`, `expiry_received_from_dcp`).
    pub set_read: u64,
    pub deletions_read: u64,
    pub expirations_read: u64,
    /// Writes the target accepted (`docs_written`).
    pub docs_written: u64,
    /// Of those, mutations, deletions and expirations (`set_`, `deletion_`, `expiry_docs_written`).
    pub set_written: u64,
    pub deletions_written: u64,
    pub expirations_written: u64,
    /// Bytes of the with-meta requests the target accepted: header, extras, key and value (`data_replicated`).
    pub data_replicated: u64,
    /// Writes the target refused by conflict resolution (`docs_failed_cr_source`).
    pub docs_failed_cr: u64,
    /// Of those, mutations, deletions and expirations (`set_`, `deletion_`, `expiry_failed_cr_source`).
    pub set_failed_cr: u64,
    pub deletions_failed_cr: u64,
    pub expirations_failed_cr: u64,
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

/// The three counters of one split (mutations, deletions, expirations).
fn split(kind: ChangeKind, set: &mut u64, deletions: &mut u64, expirations: &mut u64) {
    match kind {
        ChangeKind::Mutation => *set += 1,
        ChangeKind::Deletion => *deletions += 1,
        ChangeKind::Expiration => *expirations += 1,
    }
}

impl Stats {
    pub(crate) fn read(&mut self, c: &Change) {
        self.changes_read += 1;
        split(c.kind, &mut self.set_read, &mut self.deletions_read, &mut self.expirations_read);
    }

    pub(crate) fn written(&mut self, c: &Change) {
        self.docs_written += 1;
        self.data_replicated += c.request_bytes() as u64;
        split(c.kind, &mut self.set_written, &mut self.deletions_written, &mut self.expirations_written);
    }

    pub(crate) fn lost_conflict(&mut self, c: &Change) {
        self.docs_failed_cr += 1;
        split(c.kind, &mut self.set_failed_cr, &mut self.deletions_failed_cr, &mut self.expirations_failed_cr);
    }

    /// These counts after `later`'s (a runner's totals over its runs); the last error is the later one's if any.
    pub fn plus(&self, later: &Stats) -> Stats {
        Stats {
            changes_read: self.changes_read + later.changes_read,
            set_read: self.set_read + later.set_read,
            deletions_read: self.deletions_read + later.deletions_read,
            expirations_read: self.expirations_read + later.expirations_read,
            docs_written: self.docs_written + later.docs_written,
            set_written: self.set_written + later.set_written,
            deletions_written: self.deletions_written + later.deletions_written,
            expirations_written: self.expirations_written + later.expirations_written,
            data_replicated: self.data_replicated + later.data_replicated,
            docs_failed_cr: self.docs_failed_cr + later.docs_failed_cr,
            set_failed_cr: self.set_failed_cr + later.set_failed_cr,
            deletions_failed_cr: self.deletions_failed_cr + later.deletions_failed_cr,
            expirations_failed_cr: self.expirations_failed_cr + later.expirations_failed_cr,
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
