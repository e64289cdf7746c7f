//! [`MetadataStore`]: the cluster metadata replicated by Raft (openraft 0.9, storage-v2), behind an API that does
//! not expose openraft. Any node can propose; a follower forwards to the leader through the [`RaftTransport`].
//!
//! On disk, in the store's directory: `identity.json` (the node id the directory belongs to), `raft-log`,
//! `vote.json`, `committed.json` (see `log_store`) and `snapshot.json` (see `state_machine`).
//!
//! Forwarding: an operation only the leader can perform (propose, membership change, read index) is run locally
//! when this node leads, otherwise sent to the leader's address taken from the Raft membership. A node that turns
//! out not to lead answers `NotLeader` with the leader's address when it knows it, and the caller follows it (one
//! hop per attempt). A request that certainly was not delivered (no connection) is retried after a short pause;
//! one that may have been delivered is not retried, since the command might then apply twice. Every operation has a
//! deadline and a bounded number of attempts.

mod durable_file;
mod error;
mod inbound;
mod log_store;
mod membership;
mod network;
mod state_machine;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, Raft, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

pub use error::{ConsensusError, OpenError, ProposeError};

use crate::metadata::{ClusterMetadata, LogCommand, MetaCommand, MetaError, META_VERSION};
use crate::transport::{BoxFuture, MetaResponse, Proposed, RaftTransport, Reply, TransportError, TypeConfig};
use crate::vbmap::NodeId;
use durable_file::read_json;
pub use durable_file::write_atomic;
use error::{from_check_leader, from_client_write, RouteError};
use log_store::LogStore;
use network::Network;
use state_machine::StateMachine;

const IDENTITY_FILE: &str = "identity.json";
/// How long a proposal may take, forwarding and commit included.
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before retrying when no leader answers (an election takes 1 to 2 s).
const ROUTE_BACKOFF: Duration = Duration::from_millis(100);
const ROUTE_ATTEMPTS_MAX: usize = 300;

/// Tunables of a store; the defaults suit a production cluster on a LAN.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// A snapshot is taken after this many log entries since the last one (it bounds the log and restart replay).
    pub snapshot_every_entries: u64,
    /// Entries kept in the log behind a snapshot, so a briefly lagging follower catches up without a snapshot.
    pub entries_kept_after_snapshot: u64,
    /// The highest metadata version this node reads and proposes (`compat::META_VERSION`; lower only to test
    /// what a node of an older settee does in a mixed cluster).
    pub meta_version: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { snapshot_every_entries: 1000, entries_kept_after_snapshot: 100, meta_version: META_VERSION }
    }
}

/// Raft timing for a LAN or loopback: heartbeats every 250 ms, elections after 1 to 2 s of silence. openraft
/// bounds an append (heartbeats included) by the heartbeat interval, which covers the follower's fsync; a snapshot
/// chunk gets longer, as its last one writes and fsyncs the snapshot on the receiver.
fn raft_config(options: &StoreOptions) -> Result<Config, OpenError> {
    Config {
        cluster_name: "settee".into(),
        heartbeat_interval: 250,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every_entries),
        max_in_snapshot_log_to_keep: options.entries_kept_after_snapshot,
        max_payload_entries: 64,
        snapshot_max_chunk_size: 256 << 10,
        install_snapshot_timeout: 5_000,
        ..Config::default()
    }
    .validate()
    .map_err(|e| OpenError::Raft(e.to_string()))
}

#[derive(Serialize, Deserialize)]
struct Identity {
    node_id: NodeId,
}

/// One node's replica of the cluster metadata.
pub struct MetadataStore {
    id: NodeId,
    addr: String,
    raft: Raft<TypeConfig>,
    transport: Arc<dyn RaftTransport>,
    applied: watch::Receiver<Arc<ClusterMetadata>>,
    /// Why this node stopped applying the log (a command it cannot read), once it has.
    halted: watch::Receiver<Option<String>>,
    /// The highest metadata version this node reads and proposes.
    meta_version: u32,
    /// The committed log index found on disk at open: the state is restored once it has applied this far.
    committed_at_open: Option<u64>,
}

impl MetadataStore {
    /// Opens (or creates) the store in `dir` for node `me`, reachable by its peers at `my_addr` ("host:mgmtport"),
    /// restoring the log, vote and last snapshot. A new store belongs to no cluster until
    /// [`initialize_single`](Self::initialize_single) or until a member adds it.
    pub async fn open(
        dir: &Path,
        me: NodeId,
        my_addr: String,
        transport: Arc<dyn RaftTransport>,
    ) -> Result<Arc<MetadataStore>, OpenError> {
        Self::open_with(dir, me, my_addr, transport, StoreOptions::default()).await
    }

    /// [`open`](Self::open) with explicit tunables.
    pub async fn open_with(
        dir: &Path,
        me: NodeId,
        my_addr: String,
        transport: Arc<dyn RaftTransport>,
        options: StoreOptions,
    ) -> Result<Arc<MetadataStore>, OpenError> {
        let dir = dir.to_path_buf();
        let meta_version = options.meta_version;
        let (log, (sm, published)) = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|source| OpenError::Io { path: dir.clone(), source })?;
            check_identity(&dir, me)?;
            Ok::<_, OpenError>((LogStore::open(&dir)?, StateMachine::open(&dir, meta_version)?))
        })
        .await
        .map_err(|e| OpenError::Raft(e.to_string()))??;
        let committed_at_open = log.committed_index();
        // openraft applies what is committed while it starts: a command this node cannot read stops it there.
        let raft = Raft::new(me, Arc::new(raft_config(&options)?), Network::new(transport.clone()), log, sm)
            .await
            .map_err(|e| match published.halted.borrow().clone() {
                Some(why) => OpenError::Halted(why),
                None => OpenError::Raft(e.to_string()),
            })?;
        Ok(Arc::new(MetadataStore {
            id: me,
            addr: my_addr,
            raft,
            transport,
            applied: published.applied,
            halted: published.halted,
            meta_version,
            committed_at_open,
        }))
    }

    /// The node id a store directory belongs to, if one was ever opened there: a restarted node keeps its id.
    pub fn stored_node_id(dir: &Path) -> Result<Option<NodeId>, OpenError> {
        Ok(read_json::<Identity>(&dir.join(IDENTITY_FILE))?.map(|i| i.node_id))
    }

    /// Waits until the state this node had committed before it stopped is applied again (no leader needed): what
    /// a restarted node must see before it serves.
    /// A node that stops at a command it cannot read gets [`ConsensusError::Halted`] at once.
    pub async fn wait_restored(&self, timeout: Duration) -> Result<Arc<ClusterMetadata>, ConsensusError> {
        let mut halted = self.halted.clone();
        tokio::select! {
            applied = self.wait_applied(self.committed_at_open, Instant::now() + timeout) => applied?,
            Ok(why) = halted.wait_for(Option::is_some) => {
                return Err(ConsensusError::Halted(why.clone().unwrap_or_default()));
            }
        }
        Ok(self.current())
    }

    /// Why this node stopped applying the cluster metadata (a committed command it cannot read: see
    /// `compat`), once it has: the node can no longer follow the cluster and should stop serving.
    pub fn halted(&self) -> watch::Receiver<Option<String>> {
        self.halted.clone()
    }

    /// The highest metadata version this node reads and proposes.
    pub fn meta_version(&self) -> u32 {
        self.meta_version
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The state as applied on this node (possibly behind the leader; see [`read_linearizable`](Self::read_linearizable)).
    pub fn current(&self) -> Arc<ClusterMetadata> {
        self.applied.borrow().clone()
    }

    /// Sees every state this node applies (intermediate states may be skipped, the latest never is).
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterMetadata>> {
        self.applied.clone()
    }

    /// The leader as this node last heard of it.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this store belongs to a cluster (it was initialised, or a member added it).
    pub async fn is_initialized(&self) -> bool {
        self.raft.is_initialized().await.unwrap_or(false)
    }

    /// Whether this node believes it leads; a hint for routing and reporting, not a linearizable check.
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.id)
    }

    /// Every node of the Raft group (voters and learners) with its address.
    pub fn members(&self) -> BTreeMap<NodeId, String> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.membership_config.nodes().map(|(id, node)| (*id, node.addr.clone())).collect()
    }

    /// Proposes `cmd` (through the leader) and returns the state right after it applied. When it returns, this
    /// node has applied the command too (unless its deadline passed first). A refused command comes back as
    /// [`ProposeError::Rejected`] and changed nothing; a timeout or broken forward leaves the outcome unknown.
    pub async fn propose(&self, cmd: MetaCommand) -> Result<Arc<ClusterMetadata>, ProposeError> {
        self.check_readable(&cmd)?;
        let deadline = Instant::now() + PROPOSE_TIMEOUT;
        let proposed = self.call_leader(&Propose(cmd), deadline, None).await?;
        if let Err(e) = self.wait_applied(Some(proposed.log_index), deadline).await {
            tracing::debug!(error = %e, index = proposed.log_index, "proposal committed but not yet applied here");
        }
        Ok(proposed.state)
    }

    /// Proposes `cmd` only if this node leads now, as a quorum confirms, and never through another node: for a
    /// decision this node took from what it alone saw (auto-failover from its health table). A leader cut off from
    /// its followers cannot confirm and gets an error instead of a proposal that a forward would commit after the
    /// partition heals, from a view that no longer holds; a follower gets `NotLeader` at once.
    pub async fn propose_as_leader(&self, cmd: MetaCommand) -> Result<Arc<ClusterMetadata>, ProposeError> {
        self.check_readable(&cmd)?;
        if !self.is_leader() {
            return Err(ConsensusError::NotLeader { leader: self.leader(), leader_addr: None }.into());
        }
        match tokio::time::timeout(READ_TIMEOUT, self.read_index_local()).await {
            Ok(confirmed) => confirmed?,
            Err(_) => return Err(ConsensusError::Timeout.into()),
        };
        let proposed = match tokio::time::timeout(PROPOSE_TIMEOUT, self.propose_local(cmd)).await {
            Ok(proposed) => proposed?,
            Err(_) => return Err(ConsensusError::Timeout.into()),
        };
        Ok(proposed.state)
    }

    /// The state as of now cluster-wide: asks the leader for its commit index (confirming its leadership with a
    /// quorum) and waits until this node has applied that far.
    pub async fn read_linearizable(&self) -> Result<Arc<ClusterMetadata>, ConsensusError> {
        let deadline = Instant::now() + READ_TIMEOUT;
        let index = self.call_leader(&ReadIndex, deadline, None).await?;
        self.wait_applied(index, deadline).await?;
        Ok(self.current())
    }

    /// Waits until this node has applied revision `rev` or later; None if `timeout` passes first.
    pub async fn wait_for_rev(&self, rev: u64, timeout: Duration) -> Option<Arc<ClusterMetadata>> {
        let mut applied = self.applied.clone();
        let waited =
            tokio::time::timeout(timeout, async { applied.wait_for(|m| m.rev >= rev).await.map(|m| m.clone()) });
        waited.await.ok()?.ok()
    }

    /// Stops Raft on this node; the store answers no more requests (its router returns errors).
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft did not stop cleanly");
        }
    }

    /// Refuses a command newer than this node reads: it must never reach the log through this node, proposed here
    /// or forwarded to it (a settee of that version could not even parse it, and refuses a forwarded one).
    fn check_readable(&self, cmd: &MetaCommand) -> Result<(), ProposeError> {
        if cmd.since() <= self.meta_version {
            return Ok(());
        }
        let (command, needs, reads) = (cmd.name(), cmd.since(), self.meta_version);
        Err(ProposeError::Rejected(MetaError::CommandTooNew { command, needs, reads }))
    }

    async fn propose_local(&self, cmd: MetaCommand) -> Result<Proposed, ProposeError> {
        self.check_readable(&cmd)?;
        let written = self.raft.client_write(LogCommand::Known(cmd)).await.map_err(from_client_write)?;
        match written.data {
            MetaResponse::Applied(state) => Ok(Proposed { log_index: written.log_id.index, state }),
            MetaResponse::Rejected(e) => Err(ProposeError::Rejected(e)),
            MetaResponse::NotACommand => Err(ConsensusError::Raft("a command applied as no command".into()).into()),
        }
    }

    async fn read_index_local(&self) -> Result<Option<u64>, ConsensusError> {
        let (read_log_id, _) = self.raft.get_read_log_id().await.map_err(from_check_leader)?;
        Ok(read_log_id.map(|id| id.index))
    }

    async fn wait_applied(&self, index: Option<u64>, deadline: Instant) -> Result<(), ConsensusError> {
        let Some(index) = index else { return Ok(()) };
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(remaining))
            .applied_index_at_least(Some(index), "applied locally")
            .await
            .map(|_| ())
            .map_err(|_| ConsensusError::Timeout)
    }

    /// Where the leader is, waiting until `deadline` for one to be known with its address. A node that just
    /// joined hears of the leader (its first append) before it has applied the membership that holds the leader's
    /// address: that is a wait, not a missing leader (a join used to fail there with "no leader is known").
    async fn leader_addr(&self, deadline: Instant) -> Result<String, ConsensusError> {
        let mut metrics = self.raft.metrics();
        let me = self.id;
        let routable = move |m: &openraft::RaftMetrics<NodeId, openraft::BasicNode>| {
            m.current_leader.is_some_and(|l| l == me || m.membership_config.membership().get_node(&l).is_some())
        };
        let found = tokio::time::timeout_at(deadline, async {
            let m = metrics.wait_for(routable).await.ok()?;
            let leader = m.current_leader?;
            if leader == self.id {
                // This node leads: run here, whatever address the membership recorded for it (a one-node
                // cluster may restart on other ports).
                return Some(self.addr.clone());
            }
            m.membership_config.membership().get_node(&leader).map(|n| n.addr.clone())
        });
        found.await.ok().flatten().ok_or(ConsensusError::NoLeader)
    }

    /// Runs `call` on the leader: here if this node leads, otherwise at the leader's address, following
    /// `NotLeader` redirects. `seed` is a first address to try, and the one to go back to while this node knows
    /// no leader: a node not yet in the cluster hears of none until it is added, so its own view has no route.
    async fn call_leader<C: LeaderCall>(
        &self,
        call: &C,
        deadline: Instant,
        seed: Option<String>,
    ) -> Result<C::Ok, C::Err> {
        let mut redirect = seed.clone();
        let mut last: C::Err = ConsensusError::NoLeader.into();
        for _ in 0..ROUTE_ATTEMPTS_MAX {
            let addr = match (redirect.take(), &seed) {
                (Some(addr), _) => addr,
                (None, Some(seed)) if self.raft.metrics().borrow().current_leader.is_none() => seed.clone(),
                (None, _) => self.leader_addr(deadline).await?,
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ConsensusError::Timeout.into());
            }
            let result = if addr == self.addr {
                tokio::time::timeout(remaining, call.local(self)).await.unwrap_or(Err(ConsensusError::Timeout.into()))
            } else {
                match call.remote(&*self.transport, &addr, remaining).await {
                    Ok(answer) => answer,
                    Err(TransportError::Timeout) => Err(ConsensusError::Timeout.into()),
                    Err(e) => Err(ConsensusError::Forward(e).into()),
                }
            };
            let err = match result {
                Ok(answer) => return Ok(answer),
                Err(err) => err,
            };
            match err.consensus() {
                Some(ConsensusError::NotLeader { leader_addr: Some(next), .. }) if *next != addr => {
                    redirect = Some(next.clone());
                }
                // No leader known there (an election is running, as right after a cluster is initialised), or a
                // membership change still committing: the request did not run; ask again after a pause.
                Some(
                    ConsensusError::NoLeader
                    | ConsensusError::NotLeader { .. }
                    | ConsensusError::MembershipChangeInProgress,
                ) => {
                    tokio::time::sleep(ROUTE_BACKOFF.min(remaining)).await;
                }
                Some(ConsensusError::Forward(t)) if t.request_not_sent() => {
                    tokio::time::sleep(ROUTE_BACKOFF.min(remaining)).await;
                }
                _ => return Err(err),
            }
            last = err;
        }
        Err(last)
    }
}

fn check_identity(dir: &Path, me: NodeId) -> Result<(), OpenError> {
    let path = dir.join(IDENTITY_FILE);
    match read_json::<Identity>(&path)? {
        Some(identity) if identity.node_id != me => {
            Err(OpenError::WrongNode { path, found: identity.node_id, expected: me })
        }
        Some(_) => Ok(()),
        None => {
            let bytes = serde_json::to_vec(&Identity { node_id: me }).expect("a struct of one integer serialises");
            write_atomic(&path, &bytes).map_err(|source| OpenError::Io { path, source })
        }
    }
}

/// An operation only the leader performs, runnable here or at the leader's address.
trait LeaderCall: Sync {
    type Ok: Send;
    type Err: RouteError + Send;
    fn local<'a>(&'a self, store: &'a MetadataStore) -> BoxFuture<'a, Result<Self::Ok, Self::Err>>;
    fn remote<'a>(
        &'a self,
        transport: &'a dyn RaftTransport,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Self::Ok, Self::Err>>;
}

struct Propose(MetaCommand);

impl LeaderCall for Propose {
    type Ok = Proposed;
    type Err = ProposeError;
    fn local<'a>(&'a self, store: &'a MetadataStore) -> BoxFuture<'a, Result<Proposed, ProposeError>> {
        Box::pin(store.propose_local(self.0.clone()))
    }
    fn remote<'a>(
        &'a self,
        transport: &'a dyn RaftTransport,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Proposed, ProposeError>> {
        transport.forward_propose(addr, self.0.clone(), timeout)
    }
}

struct ReadIndex;

impl LeaderCall for ReadIndex {
    type Ok = Option<u64>;
    type Err = ConsensusError;
    fn local<'a>(&'a self, store: &'a MetadataStore) -> BoxFuture<'a, Result<Option<u64>, ConsensusError>> {
        Box::pin(store.read_index_local())
    }
    fn remote<'a>(
        &'a self,
        transport: &'a dyn RaftTransport,
        addr: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Reply<Option<u64>, ConsensusError>> {
        transport.forward_read_index(addr, timeout)
    }
}
