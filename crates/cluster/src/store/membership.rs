//! Raft group membership: forming a one-node cluster, adding a node (as a learner first, then as a voter once it
//! has caught up, so a slow newcomer never stalls commits), removing one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use tokio::time::Instant;

use super::error::{from_client_write, from_fatal};
use super::{ConsensusError, LeaderCall, MetadataStore};
use crate::transport::{BoxFuture, MemberRequest, RaftTransport, Reply};
use crate::vbmap::NodeId;

/// How long adding a node may take, the new node's catch-up included.
const MEMBER_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between attempts while another membership change commits.
const CHANGE_BACKOFF: Duration = Duration::from_millis(100);

impl MetadataStore {
    /// Makes this node a one-node cluster and its leader: the first node of a new cluster. Does nothing if the
    /// store already belongs to a cluster.
    pub async fn initialize_single(&self) -> Result<(), ConsensusError> {
        if self.raft.is_initialized().await.map_err(|e| from_fatal(&e))? {
            return Ok(());
        }
        let members = BTreeMap::from([(self.id, BasicNode::new(&self.addr))]);
        match self.raft.initialize(members).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(ConsensusError::Raft(e.to_string())),
        }
    }

    /// Adds node `id`, reachable at `addr`, as a voting member. Runs on the leader (forwarded if needed); returns
    /// once the node caught up and the new membership committed. Idempotent.
    pub async fn add_member(&self, id: NodeId, addr: String) -> Result<(), ConsensusError> {
        let deadline = Instant::now() + MEMBER_TIMEOUT;
        let req = MemberRequest { id, addr, meta_version: crate::metadata::META_VERSION };
        self.call_leader(&AddMember(req), deadline, None).await
    }

    /// Asks the cluster that the node at `seed_addr` belongs to to add this node: the way a new node joins. The
    /// seed forwards or redirects to its leader. This node must already answer Raft requests at its address.
    pub async fn join(&self, seed_addr: &str) -> Result<(), ConsensusError> {
        let deadline = Instant::now() + MEMBER_TIMEOUT;
        let me = MemberRequest { id: self.id, addr: self.addr.clone(), meta_version: self.meta_version };
        self.call_leader(&AddMember(me), deadline, Some(seed_addr.to_string())).await
    }

    /// Removes node `id` from the Raft group (voter or learner). Removing a node that is not a member succeeds.
    pub async fn remove_member(&self, id: NodeId) -> Result<(), ConsensusError> {
        let deadline = Instant::now() + MEMBER_TIMEOUT;
        self.call_leader(&RemoveMember(id), deadline, None).await
    }

    pub(super) async fn add_member_local(&self, req: &MemberRequest) -> Result<(), ConsensusError> {
        let deadline = Instant::now() + MEMBER_TIMEOUT;
        let (voters, _) = self.membership();
        if voters.get(&req.id).is_some_and(|addr| *addr == req.addr) {
            return Ok(());
        }
        let cluster = self.current().meta_version();
        if req.meta_version < cluster {
            tracing::warn!(node = req.id, addr = %req.addr, version = req.meta_version, cluster, "refusing a node \
                older than the cluster");
            return Err(ConsensusError::IncompatibleVersion { node: req.meta_version, cluster });
        }
        let added = self.raft.add_learner(req.id, BasicNode::new(&req.addr), false).await.map_err(from_client_write)?;
        let (id, index) = (req.id, added.log_id.index);
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(remaining))
            .metrics(
                move |m| {
                    let matched = m.replication.as_ref().and_then(|r| r.get(&id).copied().flatten());
                    matched.is_some_and(|log_id| log_id.index >= index)
                },
                "new member caught up",
            )
            .await
            .map_err(|_| ConsensusError::Timeout)?;
        self.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), deadline).await
    }

    pub(super) async fn remove_member_local(&self, id: NodeId) -> Result<(), ConsensusError> {
        let deadline = Instant::now() + MEMBER_TIMEOUT;
        let (voters, learners) = self.membership();
        let change = if voters.contains_key(&id) {
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else if learners.contains(&id) {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        } else {
            return Ok(());
        };
        self.change_membership(change, deadline).await
    }

    /// Commits `change`, waiting out a change already in progress until `deadline`. `retain: false`: a removed
    /// voter leaves the group instead of staying as a learner.
    async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, BasicNode>,
        deadline: Instant,
    ) -> Result<(), ConsensusError> {
        loop {
            match self.raft.change_membership(change.clone(), false).await.map_err(from_client_write) {
                Ok(_) => return Ok(()),
                Err(ConsensusError::MembershipChangeInProgress) if Instant::now() + CHANGE_BACKOFF < deadline => {
                    tokio::time::sleep(CHANGE_BACKOFF).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// (voters with their addresses, learners) of the membership this node knows.
    fn membership(&self) -> (BTreeMap<NodeId, String>, BTreeSet<NodeId>) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        let voters = membership
            .voter_ids()
            .map(|id| (id, membership.get_node(&id).map(|n| n.addr.clone()).unwrap_or_default()))
            .collect();
        (voters, membership.learner_ids().collect())
    }
}

pub(super) struct AddMember(pub(super) MemberRequest);

impl LeaderCall for AddMember {
    type Ok = ();
    type Err = ConsensusError;
    fn local<'a>(&'a self, store: &'a MetadataStore) -> BoxFuture<'a, Result<(), ConsensusError>> {
        Box::pin(store.add_member_local(&self.0))
    }
    fn remote<'a>(
        &'a self,
        transport: &'a dyn RaftTransport,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>> {
        transport.forward_add_member(addr, self.0.clone(), timeout)
    }
}

struct RemoveMember(NodeId);

impl LeaderCall for RemoveMember {
    type Ok = ();
    type Err = ConsensusError;
    fn local<'a>(&'a self, store: &'a MetadataStore) -> BoxFuture<'a, Result<(), ConsensusError>> {
        Box::pin(store.remove_member_local(self.0))
    }
    fn remote<'a>(
        &'a self,
        transport: &'a dyn RaftTransport,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<(), ConsensusError>> {
        transport.forward_remove_member(addr, self.0, timeout)
    }
}
