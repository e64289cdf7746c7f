//! Counters of one replication's core (Couchbase's XDCR stat names in comments).

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Changes read from the source (`docs_received_from_dcp`).
    pub changes_read: u64,
    /// Writes the target accepted (`docs_written`).
    pub docs_written: u64,
    /// Writes the target refused by conflict resolution (`docs_failed_cr_source`).
    pub docs_failed_cr: u64,
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
    /// The last error status a target returned, if any.
    pub last_error: Option<u16>,
}
