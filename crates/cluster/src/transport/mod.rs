//! How metadata stores reach each other: the [`RaftTransport`] trait (Raft's three RPCs plus the requests a
//! follower forwards to the leader), the HTTP implementation and the axum router that receives it.
//!
//! Every call returns `Result<Result<T, E>, TransportError>`: the outer result says whether the request reached
//! the peer and its answer came back, the inner one is the peer's typed answer. Node addresses are "host:mgmtport".

mod http;
mod peer_tls;
mod router;

use std::future::Future;
use std::io::Cursor;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use serde::{Deserialize, Serialize};

pub use http::{basic_authorization, HttpTransport};
pub use peer_tls::{PeerConnector, PeerStream, PeerTls, TlsSwitch};
pub use router::raft_router;

use crate::metadata::{ClusterMetadata, LogCommand, MetaCommand, MetaError};
use crate::store::{ConsensusError, ProposeError};
use crate::vbmap::NodeId;

openraft::declare_raft_types!(
    /// openraft's type configuration for the metadata store: commands in (as the log holds them, readable or not:
    /// [`LogCommand`]), responses out, u64 node ids, nodes known by their "host:mgmtport" address, snapshots as
    /// in-memory bytes (the metadata is small).
    pub TypeConfig:
        D = LogCommand,
        R = MetaResponse,
        NodeId = u64,
        Node = BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

/// What applying one log entry produced; the leader hands it back to the proposer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MetaResponse {
    /// The state right after the command was applied.
    Applied(Arc<ClusterMetadata>),
    Rejected(MetaError),
    /// A blank or membership entry: no command was applied.
    NotACommand,
}

/// openraft's messages for this type configuration, named so transports can be written without openraft generics.
pub mod rpc {
    use super::TypeConfig;
    use crate::vbmap::NodeId;

    pub type AppendEntriesRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
    pub type AppendEntriesResponse = openraft::raft::AppendEntriesResponse<NodeId>;
    pub type VoteRequest = openraft::raft::VoteRequest<NodeId>;
    pub type VoteResponse = openraft::raft::VoteResponse<NodeId>;
    pub type InstallSnapshotRequest = openraft::raft::InstallSnapshotRequest<TypeConfig>;
    pub type InstallSnapshotResponse = openraft::raft::InstallSnapshotResponse<NodeId>;
    pub type InstallSnapshotError = openraft::error::InstallSnapshotError;
    /// A remote Raft node's refusal.
    pub type RaftError<E = openraft::error::Infallible> = openraft::error::RaftError<NodeId, E>;
}

use rpc::*;

/// A command the leader committed, as returned to a follower that forwarded it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Proposed {
    /// The Raft log index of the command: the follower waits until it has applied this far.
    pub log_index: u64,
    pub state: Arc<ClusterMetadata>,
}

/// A node to add to the Raft group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRequest {
    pub id: NodeId,
    pub addr: String,
    /// The metadata version the node reads (absent from a settee older than the field: 1). A node older than the
    /// cluster's version is refused: the log may hold commands it cannot read.
    #[serde(default = "crate::metadata::compat::unmarked_version")]
    pub meta_version: u32,
}

/// Why a call did not come back with the peer's answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum TransportError {
    /// No connection could be made: the request was not sent, so retrying it elsewhere is safe.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("timed out")]
    Timeout,
    /// The exchange broke after the request may have been delivered.
    #[error("i/o: {0}")]
    Io(String),
    #[error("HTTP {code}: {body}")]
    Status { code: u16, body: String },
    #[error("undecodable reply: {0}")]
    Decode(String),
}

impl TransportError {
    /// True when the peer certainly did not receive the request.
    pub fn request_not_sent(&self) -> bool {
        matches!(self, TransportError::Connect { .. })
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// Outer: did the call complete; inner: the peer's answer.
pub type Reply<T, E> = Result<Result<T, E>, TransportError>;

/// Sends Raft RPCs and forwarded requests to the node at `addr`. Implementations must honour `timeout` (the
/// whole exchange) and may be called concurrently.
pub trait RaftTransport: Send + Sync + 'static {
    fn append_entries<'a>(
        &'a self,
        addr: &'a str,
        req: AppendEntriesRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<AppendEntriesResponse, RaftError>>;

    fn vote<'a>(
        &'a self,
        addr: &'a str,
        req: VoteRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<VoteResponse, RaftError>>;

    fn install_snapshot<'a>(
        &'a self,
        addr: &'a str,
        req: InstallSnapshotRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<InstallSnapshotResponse, RaftError<InstallSnapshotError>>>;

    /// Asks the node at `addr`, believed to be the leader, to propose `cmd`.
    fn forward_propose<'a>(
        &'a self,
        addr: &'a str,
        cmd: MetaCommand,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Proposed, ProposeError>>;

    fn forward_add_member<'a>(
        &'a self,
        addr: &'a str,
        req: MemberRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>>;

    fn forward_remove_member<'a>(
        &'a self,
        addr: &'a str,
        id: NodeId,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>>;

    /// Asks the leader for a read index: the log index a linearizable read must wait for (None: empty log).
    fn forward_read_index<'a>(
        &'a self,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Option<u64>, ConsensusError>>;
}

/// The HTTP paths of the Raft endpoints, shared by the client and the router.
pub(crate) mod path {
    pub const APPEND: &str = "/settee/raft/append";
    pub const VOTE: &str = "/settee/raft/vote";
    pub const SNAPSHOT: &str = "/settee/raft/snapshot";
    pub const PROPOSE: &str = "/settee/raft/propose";
    pub const ADD_MEMBER: &str = "/settee/raft/members/add";
    pub const REMOVE_MEMBER: &str = "/settee/raft/members/remove";
    pub const READ_INDEX: &str = "/settee/raft/read-index";
}
