use settee_types::{Cas, Seqno, VbUuid};

/// The per-vBucket state the engine persists beside its data, so that warmup restores the vBucket's identity and
/// history: written in the same atomic batch as the records it describes (`write_batch_with_state`), so after a
/// crash the persisted high seqno and the data agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VbStateRecord {
    pub vbuuid: VbUuid,
    pub high_seqno: Seqno,
    pub max_cas: Cas,
    /// Failover log, newest first: (vbuuid, seqno at which that uuid took over).
    pub failover: Vec<(VbUuid, Seqno)>,
    /// Every prepare at or below this seqno was completed (committed, or aborted): the engine commits prepares in
    /// seqno order, so warmup restores as pending only the prepare records above it (a prepare's record outlives
    /// its commit's once a later tombstone of the key is purged). 0 in states written before it existed.
    pub prepares_completed_to: Seqno,
}

impl VbStateRecord {
    /// The longest failover log the store accepts; Couchbase keeps at most 25 entries.
    pub const FAILOVER_ENTRIES_MAX: usize = 1000;
}

/// A state as it stands after its vBucket rolled back to `to`: nothing above `to` (an emptied failover log starts
/// again with one branch at 0, which no active knows, so the replica's next stream starts from zero).
pub(crate) fn roll_back(state: &mut VbStateRecord, to: Seqno) {
    state.high_seqno = state.high_seqno.min(to);
    state.prepares_completed_to = state.prepares_completed_to.min(to);
    state.failover.retain(|(_, seqno)| *seqno <= to);
    if state.failover.is_empty() {
        state.failover.push((state.vbuuid, 0));
    }
}

/// The precondition both stores apply before storing a state: a failover log the on-disk format can hold.
pub(crate) fn check_state(vb: settee_types::VbId, s: &VbStateRecord) -> Result<(), crate::StoreError> {
    if s.failover.len() > VbStateRecord::FAILOVER_ENTRIES_MAX {
        let reason = "failover log longer than FAILOVER_ENTRIES_MAX";
        return Err(crate::StoreError::Rejected { vb, seqno: s.high_seqno, reason });
    }
    Ok(())
}
