//! The core's inputs and outputs.

use settee_types::FailoverLog;

use crate::change::{Change, Write};

/// How the target answered one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// KEY_EEXISTS from conflict resolution: the target keeps its version (the same one, or a newer one).
    LostConflict,
    /// TMPFAIL / ENOMEM / busy: retried after a backoff.
    TempFail,
    /// The node does not hold the target vBucket: the map is refreshed and the write routed again.
    NotMyVbucket,
    /// Any other status: retried after a backoff, counted as an error.
    Failed(u16),
}

/// Where the replication of one source vBucket stands: every change at or below `seqno` of history `vbuuid` is on
/// the target's disk (acknowledged, then confirmed persisted on the same target history by OBSERVE_SEQNO).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub vb: u16,
    pub vbuuid: u64,
    pub seqno: u64,
}

#[derive(Clone, Debug)]
pub enum Event {
    /// The source vBucket is active on this node (the replication started, or the vBucket arrived): read it from
    /// the checkpoint, if its history still contains it.
    VbStarted {
        vb: u16,
        failover: FailoverLog,
        high_seqno: u64,
        purge_seqno: u64,
    },
    /// The source vBucket is no longer active here: stop reading it (its node-to-be resumes from the checkpoint).
    VbStopped {
        vb: u16,
    },
    /// The next changes of `vb` lie in `start..=end`.
    Snapshot {
        vb: u16,
        start: u64,
        end: u64,
    },
    Change {
        vb: u16,
        change: Change,
    },
    /// Every change of the current snapshot of `vb` was delivered.
    SnapshotDone {
        vb: u16,
    },
    /// The target bucket's map: target vBucket → node index (`nodes` nodes).
    Map {
        vbuckets: Vec<u16>,
        nodes: usize,
    },
    Reply {
        node: usize,
        id: u64,
        outcome: Outcome,
    },
    /// The connection to a target node broke: its writes in flight are routed again once a new map arrives.
    NodeDown {
        node: usize,
    },
    /// Time passed: due retries go out, persistence is asked about, checkpoints are saved when their interval
    /// elapsed.
    Tick,
    /// The target's answer to [`Command::Observe`] `probe` (OBSERVE_SEQNO) for vBucket `vb`: its history, the seqno
    /// its disk holds and its latest seqno.
    Observed {
        vb: u16,
        probe: u64,
        vbuuid: u64,
        persisted: u64,
        current: u64,
    },
    /// The target refused OBSERVE_SEQNO `probe` for `vb` (a server that does not serve it, or denies it to the
    /// replication's user): that vBucket falls back to counting acknowledged writes as persisted.
    ObserveRefused {
        vb: u16,
        probe: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read source vBucket `vb` from after `from`.
    Read {
        vb: u16,
        from: u64,
    },
    Send {
        node: usize,
        writes: Vec<Write>,
    },
    SaveCheckpoints(Vec<Checkpoint>),
    RefreshMap,
    /// Ask target node `node` for vBucket `vb`'s persisted and current seqnos (OBSERVE_SEQNO); the answer comes
    /// back as [`Event::Observed`] with the same `probe`. An answer that never comes is asked again next interval.
    Observe {
        node: usize,
        vb: u16,
        probe: u64,
    },
}
