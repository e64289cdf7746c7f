//! What travels over the simulated network.

use std::sync::Arc;

use settee_cluster::peer::{HoldReply, SeqnoReport};
use settee_cluster::{ClusterMetadata, MetaCommand};
use settee_engine::EngineError;

/// A client's request to a node: one key of the simulated bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientOp {
    Get,
    /// A durable upsert of `value` at `level`; with a CAS (non-zero) it replaces only that version.
    Set {
        value: u64,
        cas: u64,
        level: settee_types::DurabilityLevel,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A read: the value (None: not found) and its CAS.
    Value {
        value: Option<u64>,
        cas: u64,
    },
    Stored,
    /// The write may or may not have happened (SYNC_WRITE_AMBIGUOUS).
    Ambiguous,
    /// Refused, not applied.
    Refused(EngineError),
}

#[derive(Debug)]
pub enum Msg {
    /// A consumer opens a replication connection to a producer (DCP_OPEN and its controls, as one message).
    DcpOpen {
        conn: u64,
    },
    /// One DCP frame on a replication connection, either way.
    Dcp {
        conn: u64,
        frame: Vec<u8>,
    },
    Request {
        id: u64,
        key: usize,
        vb: u16,
        op: ClientOp,
    },
    Reply {
        id: u64,
        reply: Reply,
    },
    /// A node tells the control plane it is alive, with what it holds: (vb, is active, high seqno).
    Heartbeat {
        seqnos: Vec<(u16, bool, u64)>,
    },
    /// The control plane's metadata, pushed to a node.
    Meta(Arc<ClusterMetadata>),
    /// A node asks the leader to apply a metadata command.
    Propose(MetaCommand),
    /// The leader applied it: the metadata it left (what the server's `propose` returns).
    Proposed(Arc<ClusterMetadata>),
    /// The leader asks a node for its seqno report (`/settee/node/seqnos`).
    SeqnosAsk {
        id: u64,
    },
    Seqnos {
        id: u64,
        report: SeqnoReport,
    },
    /// The leader asks a node to hold (or release) active vBuckets for a takeover (`/settee/node/drain`); `all`:
    /// every active the node's map gives it (hold), or everything held (release); `until_chains`: the chain each
    /// replica move commits (its hold lasts until the node applies it).
    HoldAsk {
        id: u64,
        hold: bool,
        vbs: Vec<u16>,
        all: bool,
        until_chains: std::collections::BTreeMap<u16, Vec<Option<settee_cluster::NodeId>>>,
    },
    Held {
        id: u64,
        reply: HoldReply,
    },
}
