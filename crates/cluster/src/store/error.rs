//! The store's errors. They travel between nodes when a request is forwarded to the leader, so they are plain
//! serialisable data (openraft's own errors are turned into these at the edge).

use std::path::PathBuf;

use openraft::error::{ChangeMembershipError, CheckIsLeaderError, ClientWriteError, Fatal, RaftError};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use crate::metadata::MetaError;
use crate::transport::TransportError;
use crate::vbmap::NodeId;

/// Why the cluster could not carry out an operation (as opposed to refusing it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ConsensusError {
    /// The node asked is not the leader; `leader_addr` is where to ask instead, when known.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId>, leader_addr: Option<String> },
    #[error("no leader is known")]
    NoLeader,
    /// The deadline passed. For a proposal the outcome is unknown: the command may still be applied.
    #[error("timed out; the outcome is unknown")]
    Timeout,
    /// The request to the leader failed after it may have been delivered; the outcome is unknown.
    #[error("forwarding to the leader failed: {0}")]
    Forward(TransportError),
    /// Another membership change is still being committed.
    #[error("another membership change is in progress")]
    MembershipChangeInProgress,
    #[error("the metadata store is shutting down")]
    ShuttingDown,
    #[error("raft: {0}")]
    Raft(String),
    /// This node stopped applying the cluster metadata (see `MetadataStore::halted`).
    #[error("{0}")]
    Halted(String),
    /// A node asked to join reads an older metadata version than the cluster's members: the log may hold commands
    /// it cannot read.
    #[error(
        "the node reads cluster metadata version {node}, older than the cluster's {cluster}: run a settee at least \
         as new as the cluster's nodes"
    )]
    IncompatibleVersion { node: u32, cluster: u32 },
}

/// Why a proposal did not produce a new state.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ProposeError {
    /// The command was committed and refused by the state machine on every node; nothing changed.
    #[error(transparent)]
    Rejected(MetaError),
    #[error(transparent)]
    Consensus(ConsensusError),
}

impl From<ConsensusError> for ProposeError {
    fn from(e: ConsensusError) -> Self {
        ProposeError::Consensus(e)
    }
}

/// Why [`crate::MetadataStore::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path} belongs to node {found}, not {expected}")]
    WrongNode { path: PathBuf, found: NodeId, expected: NodeId },
    /// The committed log holds a command this node cannot read (see `MetadataStore::halted`).
    #[error("{0}")]
    Halted(String),
    #[error("raft: {0}")]
    Raft(String),
}

/// Errors the routing loop can retry or must return; implemented by both error types callers see.
pub(crate) trait RouteError: From<ConsensusError> {
    fn consensus(&self) -> Option<&ConsensusError>;
}

impl RouteError for ConsensusError {
    fn consensus(&self) -> Option<&ConsensusError> {
        Some(self)
    }
}

impl RouteError for ProposeError {
    fn consensus(&self) -> Option<&ConsensusError> {
        match self {
            ProposeError::Consensus(e) => Some(e),
            ProposeError::Rejected(_) => None,
        }
    }
}

pub(crate) fn from_fatal(e: &Fatal<NodeId>) -> ConsensusError {
    match e {
        Fatal::Stopped => ConsensusError::ShuttingDown,
        other => ConsensusError::Raft(other.to_string()),
    }
}

pub(crate) fn from_client_write(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ConsensusError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            ConsensusError::NotLeader { leader: f.leader_id, leader_addr: f.leader_node.map(|n| n.addr) }
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(ChangeMembershipError::InProgress(_))) => {
            ConsensusError::MembershipChangeInProgress
        }
        RaftError::APIError(other) => ConsensusError::Raft(other.to_string()),
        RaftError::Fatal(f) => from_fatal(&f),
    }
}

pub(crate) fn from_check_leader(e: RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>) -> ConsensusError {
    match e {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => {
            ConsensusError::NotLeader { leader: f.leader_id, leader_addr: f.leader_node.map(|n| n.addr) }
        }
        RaftError::APIError(other) => ConsensusError::Raft(other.to_string()),
        RaftError::Fatal(f) => from_fatal(&f),
    }
}
