//! What the node and its services hold of the cluster: [`ClusterHandle`], the metadata store and this node's view
//! of it (identity, whether its metadata is current, the peers' health, the rebalance it orchestrates), plus a
//! mailbox to the [`super::ClusterDriver`], which does everything that changes the node (proposals applied
//! locally, failovers, takeover holds, joining, rebalances).
//!
//! The handle never calls into the node: the driver owns the node and the handle, so the node can hold the handle
//! without an ownership (or import) loop. A request is answered once the driver has done it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use settee_cluster::control::graceful_failover::GracefulFailoverError;
use settee_cluster::control::{HealthTable, NodeHealth};
use settee_cluster::peer::HoldRequest;
use settee_cluster::{ClusterMetadata, ConsensusError, MetaCommand, MetadataStore, NodeId, ProposeError};
use settee_types::Clock;
use tokio::sync::{mpsc, oneshot, watch};

/// Requests the driver may have queued; a handler waits (back-pressure) when the queue is full.
pub(super) const REQUESTS_MAX: usize = 64;

/// What a proposal answers: the metadata after it (applied locally), or why it did not happen.
pub type Proposal = Result<Arc<ClusterMetadata>, ProposeError>;

/// A request to the driver, with where to send its answer.
pub(super) enum Request {
    /// Propose `cmd` and apply the result locally.
    Propose {
        cmd: MetaCommand,
        reply: oneshot::Sender<Proposal>,
    },
    /// Hard failover of `node`, then its lost replicas rebuilt.
    Failover {
        node: NodeId,
        reply: oneshot::Sender<Proposal>,
    },
    GracefulFailover {
        node: NodeId,
        reply: oneshot::Sender<Result<(), GracefulFailoverError>>,
    },
    /// Hold or release active vBuckets here; answers the (bucket, vBucket) pairs covered.
    Hold {
        request: HoldRequest,
        reply: oneshot::Sender<Vec<(String, u16)>>,
    },
    /// Leave this node's own cluster and join `seed`'s, registering in server group `group` (uuid; None: the
    /// default group).
    Rejoin {
        seed: String,
        group: Option<String>,
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
    /// Start a rebalance ejecting `ejected`; answers once it started (or why it cannot).
    StartRebalance {
        ejected: Vec<NodeId>,
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
}

/// What `/pools/default/tasks` and `/pools/default/rebalanceProgress` report.
#[derive(Clone, Debug, Default)]
pub struct RebalanceStatus {
    pub running: bool,
    /// vBucket moves done and planned in the current (or last) rebalance.
    pub done: usize,
    pub total: usize,
    pub stop_requested: bool,
    pub last_error: Option<String>,
}

/// The peers' health as this node's probes see it.
pub struct Health {
    table: Mutex<HealthTable>,
    clock: Arc<dyn Clock>,
}

impl Health {
    pub(super) fn new(clock: Arc<dyn Clock>) -> Health {
        Health { table: Mutex::new(HealthTable::default()), clock }
    }

    /// Couchbase's node `status` of `id` as `me` reports it.
    pub fn status(&self, id: NodeId, me: NodeId) -> NodeHealth {
        self.table.lock().status(id, me, self.clock.monotonic())
    }

    /// The table, for the driver's probes and decisions.
    pub(super) fn table(&self) -> parking_lot::MutexGuard<'_, HealthTable> {
        self.table.lock()
    }
}

pub struct ClusterHandle {
    pub me: NodeId,
    /// "host:mgmtport": where peers reach this node's Raft endpoints and REST API.
    pub addr: String,
    store: RwLock<Arc<MetadataStore>>,
    /// False until this node knows its metadata is current. A restarted member of a multi-node cluster holds every
    /// vBucket dead until then, so it never serves data that a failover moved elsewhere while it was down.
    current: AtomicBool,
    /// The metadata revision the local vBucket states reflect (the reconciler's last apply), for seqno reports.
    applied_rev: AtomicU64,
    /// True once the driver's `start` finished: a join request waits for it instead of racing the first start.
    started: watch::Sender<bool>,
    pub health: Health,
    /// The rebalance this node orchestrates, if any.
    pub rebalance: Mutex<RebalanceStatus>,
    requests: mpsc::Sender<Request>,
}

impl ClusterHandle {
    pub(super) fn new(
        me: NodeId,
        addr: String,
        store: Arc<MetadataStore>,
        clock: Arc<dyn Clock>,
    ) -> (ClusterHandle, mpsc::Receiver<Request>) {
        let (requests, inbox) = mpsc::channel(REQUESTS_MAX);
        let handle = ClusterHandle {
            me,
            addr,
            store: RwLock::new(store),
            current: AtomicBool::new(false),
            applied_rev: AtomicU64::new(0),
            started: watch::Sender::new(false),
            health: Health::new(clock),
            rebalance: Mutex::default(),
            requests,
        };
        (handle, inbox)
    }

    pub fn store(&self) -> Arc<MetadataStore> {
        self.store.read().clone()
    }

    pub(super) fn replace_store(&self, store: Arc<MetadataStore>) {
        *self.store.write() = store;
    }

    /// The metadata as applied on this node.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.store().current()
    }

    /// Whether the driver's `start` has finished (formed, joined or restored its cluster).
    pub fn has_started(&self) -> bool {
        *self.started.borrow()
    }

    pub(super) fn set_started(&self) {
        self.started.send_replace(true);
    }

    pub(super) fn started(&self) -> watch::Receiver<bool> {
        self.started.subscribe()
    }

    pub fn is_current(&self) -> bool {
        self.current.load(Ordering::Acquire)
    }

    pub(super) fn set_current(&self, current: bool) {
        self.current.store(current, Ordering::Release);
    }

    /// The metadata revision this node's vBucket states reflect: every change up to it has been applied here. A
    /// seqno report reads it before the seqnos (see `SeqnoReport::rev`).
    pub fn applied_rev(&self) -> u64 {
        self.applied_rev.load(Ordering::Acquire)
    }

    pub(super) fn set_applied_rev(&self, rev: u64) {
        self.applied_rev.store(rev, Ordering::Release);
    }

    /// The Raft endpoints of the current store (mounted behind admin authentication by the REST layer).
    pub fn raft_router(&self) -> axum::Router {
        settee_cluster::raft_router(self.store())
    }

    /// Proposes `cmd` and returns once the result is applied on this node, so the caller sees its change here.
    pub async fn propose(&self, cmd: MetaCommand) -> Proposal {
        let stopping = || ProposeError::Consensus(ConsensusError::ShuttingDown);
        self.ask(|reply| Request::Propose { cmd, reply }).await.unwrap_or_else(|| Err(stopping()))
    }

    /// Hard failover of `node`, then the replicas it held rebuilt on the surviving nodes.
    pub async fn failover(&self, node: NodeId) -> Proposal {
        let stopping = || ProposeError::Consensus(ConsensusError::ShuttingDown);
        self.ask(|reply| Request::Failover { node, reply }).await.unwrap_or_else(|| Err(stopping()))
    }

    /// Graceful failover of the live node `node` (see `settee_cluster::control::graceful_failover`).
    pub async fn graceful_failover(&self, node: NodeId) -> Result<(), GracefulFailoverError> {
        let stopping = || GracefulFailoverError::FailoverFailed("this node is stopping".into());
        self.ask(|reply| Request::GracefulFailover { node, reply }).await.unwrap_or_else(|| Err(stopping()))
    }

    /// Holds or releases active vBuckets here as `request` says; returns the (bucket, vBucket) pairs it covered
    /// once they are applied (and, for a hold, once their durable writes in flight finished).
    pub async fn hold(&self, request: HoldRequest) -> Vec<(String, u16)> {
        self.ask(|reply| Request::Hold { request, reply }).await.unwrap_or_default()
    }

    /// Leaves the cluster this node forms and joins `seed`'s (Couchbase's doJoinCluster).
    pub async fn rejoin(&self, seed: String, group: Option<String>) -> anyhow::Result<()> {
        let asked = self.ask(|reply| Request::Rejoin { seed, group, reply }).await;
        asked.unwrap_or_else(|| Err(anyhow::anyhow!("this node is stopping")))
    }

    /// Starts a rebalance in the background; refuses while one runs, or when a node that stays is unreachable.
    pub async fn start_rebalance(&self, ejected: Vec<NodeId>) -> anyhow::Result<()> {
        let asked = self.ask(|reply| Request::StartRebalance { ejected, reply }).await;
        asked.unwrap_or_else(|| Err(anyhow::anyhow!("this node is stopping")))
    }

    /// Sends a request and waits for its answer; None when the driver is gone (the node is stopping).
    async fn ask<T>(&self, request: impl FnOnce(oneshot::Sender<T>) -> Request) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.requests.send(request(reply)).await.ok()?;
        answer.await.ok()
    }
}
