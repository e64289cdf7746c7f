//! What a store does with requests from its peers: Raft RPCs go to openraft; forwarded operations run here only
//! if this node leads (otherwise `NotLeader` with the leader's address, and the sender follows it). These are the
//! entry points of [`crate::raft_router`] and of any other [`crate::RaftTransport`] receiver.

use crate::metadata::MetaCommand;
use crate::transport::rpc::*;
use crate::transport::{MemberRequest, Proposed};
use crate::vbmap::NodeId;

use super::{ConsensusError, MetadataStore, ProposeError, PROPOSE_TIMEOUT};

impl MetadataStore {
    pub async fn handle_append_entries(&self, req: AppendEntriesRequest) -> Result<AppendEntriesResponse, RaftError> {
        self.raft.append_entries(req).await
    }

    pub async fn handle_vote(&self, req: VoteRequest) -> Result<VoteResponse, RaftError> {
        self.raft.vote(req).await
    }

    pub async fn handle_install_snapshot(
        &self,
        req: InstallSnapshotRequest,
    ) -> Result<InstallSnapshotResponse, RaftError<InstallSnapshotError>> {
        self.raft.install_snapshot(req).await
    }

    /// Proposes a command forwarded by a follower, if this node leads.
    pub async fn handle_propose(&self, cmd: MetaCommand) -> Result<Proposed, ProposeError> {
        match tokio::time::timeout(PROPOSE_TIMEOUT, self.propose_local(cmd)).await {
            Ok(result) => result,
            Err(_) => Err(ConsensusError::Timeout.into()),
        }
    }

    pub async fn handle_add_member(&self, req: MemberRequest) -> Result<(), ConsensusError> {
        self.add_member_local(&req).await
    }

    pub async fn handle_remove_member(&self, id: NodeId) -> Result<(), ConsensusError> {
        self.remove_member_local(id).await
    }

    pub async fn handle_read_index(&self) -> Result<Option<u64>, ConsensusError> {
        self.read_index_local().await
    }
}
