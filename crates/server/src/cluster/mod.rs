//! The node's place in the cluster: the Raft-replicated metadata (`settee_cluster::MetadataStore`) is the source
//! of truth for nodes, buckets, collection manifests, vBucket maps and users; this module opens it, joins or forms
//! a cluster, and keeps the local node in step with it.
//!
//! - `Cluster`: the store (swapped when the node joins another cluster), this node's id, the peers' health.
//! - `reconcile`: makes the local buckets, vBucket states, replication feeds and users match the metadata.
//! - `ops`: the changes REST makes (buckets, manifests, users), proposed to Raft first and then
//!   applied locally by a reconcile, so every node applies the same change.
//! - `health`: peer probes, `status` in `/pools/default`, and auto-failover on the Raft leader.
//! - `failover`, `rebalance`: moving actives between nodes, through `peers` (other nodes' seqnos, holding
//!   actives for a takeover).
//!
//! The store lives in `<data-dir>/raft`. A node started without `--join` forms a one-node cluster on first start
//! (and creates the command line's bucket); with `--join` it asks that member's cluster to add it.

mod failover;
mod health;
mod holds;
mod ops;
mod peers;
mod rebalance;
mod reconcile;
pub(crate) mod rest_client;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parking_lot::RwLock;
use settee_cluster::{
    BucketSpec, ClusterMetadata, HttpTransport, Membership, MetaCommand, MetadataStore, NodeId, NodeInfo, ProposeError,
};
use settee_engine::{BucketConfig, BucketKind, EvictionPolicy};
use settee_types::{DurabilityLevel, VbId};
use tokio::sync::{watch, Notify};

pub use health::{monitor, Health};
pub use ops::ClusterOpError;
pub use rebalance::start_rebalance;

use crate::node::Node;

/// How long a restarted node waits for its own committed metadata to be applied again.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between attempts to confirm a restarted member's view with the cluster.
const CATCH_UP_RETRY: Duration = Duration::from_millis(500);
/// How long a vBucket held for a takeover may take to finish the durable writes it had prepared.
const TAKEOVER_SETTLE: Duration = Duration::from_secs(10);

pub struct Cluster {
    pub me: NodeId,
    dir: PathBuf,
    /// "host:mgmtport": where peers reach this node's Raft endpoints and REST API.
    pub addr: String,
    transport: Arc<HttpTransport>,
    store: RwLock<Arc<MetadataStore>>,
    /// Told when `store` is replaced (the node joined another cluster).
    swapped: Notify,
    reconciler: tokio::sync::Mutex<reconcile::Reconciler>,
    /// False until this node knows its metadata is current. A restarted member of a multi-node cluster holds every
    /// vBucket dead until then, so it never serves data that a failover moved elsewhere while it was down.
    current: AtomicBool,
    /// Active vBuckets held for a takeover (a rebalance step, or a graceful failover of this node), by bucket:
    /// pending here, so clients are refused while the copies that take over catch up with a history that no
    /// longer moves.
    held: parking_lot::Mutex<holds::Holds>,
    /// The rebalance this node orchestrates, if any.
    pub rebalance: parking_lot::Mutex<rebalance::Status>,
    /// True once `start` finished: a join request waits for it instead of racing the node's own first start.
    started: watch::Sender<bool>,
    pub health: Health,
}

impl Cluster {
    /// Opens this node's metadata store (creating its identity on first start). Nothing is proposed yet.
    pub async fn open(node: &Node) -> anyhow::Result<Arc<Cluster>> {
        let dir = node.config.data_dir.join("raft");
        let me = match MetadataStore::stored_node_id(&dir)? {
            Some(id) => id,
            None => new_node_id(),
        };
        let addr = my_info(node, me).mgmt_addr();
        let transport = Arc::new(HttpTransport::new(&node.config.username, &node.config.password));
        let store = MetadataStore::open(&dir, me, addr.clone(), transport.clone())
            .await
            .with_context(|| format!("cannot open the cluster metadata in {}", dir.display()))?;
        Ok(Arc::new(Cluster {
            me,
            dir,
            addr,
            transport,
            store: RwLock::new(store),
            swapped: Notify::new(),
            reconciler: tokio::sync::Mutex::new(reconcile::Reconciler::default()),
            current: AtomicBool::new(false),
            held: Default::default(),
            rebalance: Default::default(),
            started: watch::Sender::new(false),
            health: Health::default(),
        }))
    }

    pub fn store(&self) -> Arc<MetadataStore> {
        self.store.read().clone()
    }

    /// The metadata as applied on this node.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.store().current()
    }

    /// Whether `start` has finished (formed, joined or restored its cluster).
    pub fn has_started(&self) -> bool {
        *self.started.borrow()
    }

    pub fn is_current(&self) -> bool {
        self.current.load(Ordering::Acquire)
    }

    /// The vBuckets of `bucket` held for a takeover.
    pub fn held_vbuckets(&self, bucket: &str) -> std::collections::HashSet<u16> {
        self.held.lock().of(bucket)
    }

    /// Ends the holds of `bucket`'s vBuckets that `still_active` says the applied map no longer makes active here:
    /// a takeover (or graceful failover) that committed needs no release, so the held copy goes straight from
    /// pending to replica or dead and never serves again after the map moved on (a release that arrived before
    /// this node applied the new map would have made it active for a moment).
    pub(crate) fn end_moved_holds(&self, bucket: &str, still_active: impl Fn(u16) -> bool) {
        self.held.lock().end_moved(bucket, still_active);
    }

    /// Holds (`on`) or releases `vbs` of `bucket`, or when `bucket` is None every vBucket the map makes active here
    /// (hold; graceful failover) or every one held (release), and applies it at once. A hold returns once the held
    /// vBuckets finished their durable writes in flight (or after [`TAKEOVER_SETTLE`]). Returns the (bucket,
    /// vBucket) pairs it covered.
    pub async fn hold_actives(&self, node: &Node, bucket: Option<&str>, vbs: &[u16], on: bool) -> Vec<(String, u16)> {
        let meta = self.metadata();
        let covered: Vec<(String, u16)> = match bucket {
            Some(b) => vbs.iter().map(|vb| (b.to_owned(), *vb)).collect(),
            // Releasing everything covers whatever is held, even vBuckets the map no longer makes active here.
            None if !on => self.held.lock().all(),
            None => meta
                .buckets
                .iter()
                .flat_map(|(name, b)| b.map.actives_of(self.me).into_iter().map(move |vb| (name.clone(), vb)))
                .collect(),
        };
        {
            let mut held = self.held.lock();
            let now = std::time::Instant::now();
            for (b, vb) in &covered {
                if on {
                    held.hold(b, *vb, now);
                } else {
                    held.release(b, *vb);
                }
            }
        }
        self.reconcile(node, &meta).await;
        if on {
            // Durable writes already prepared finish here (a pending vBucket still commits them), so the copy that
            // takes over receives their outcome instead of their writers hearing "ambiguous".
            let deadline = tokio::time::Instant::now() + TAKEOVER_SETTLE;
            while tokio::time::Instant::now() < deadline
                && covered.iter().any(|(b, vb)| node.bucket(b).is_some_and(|h| h.sync_writes_in_flight(VbId(*vb))))
            {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        covered
    }

    /// Ends the holds whose lease ran out (their orchestrator is gone or its release was lost), so those vBuckets
    /// serve again; called once a second.
    pub(crate) async fn expire_holds(&self, node: &Node) {
        let expired = self.held.lock().expire(std::time::Instant::now());
        if !expired.is_empty() {
            let lease_secs = holds::HOLD_LEASE.as_secs();
            tracing::warn!(
                ?expired,
                lease_secs,
                "takeover holds expired without a commit or release; the vBuckets serve again"
            );
            self.reconcile(node, &self.metadata()).await;
        }
    }

    /// Brings the node into a cluster and its local state in line: forms a one-node cluster (first start without
    /// `join`), joins `join`'s cluster (first start with it), or restores what it had (restart).
    pub async fn start(self: &Arc<Self>, node: &Arc<Node>, join: Option<&str>) -> anyhow::Result<()> {
        let started = self.start_inner(node, join).await;
        self.started.send_replace(true);
        started
    }

    async fn start_inner(self: &Arc<Self>, node: &Arc<Node>, join: Option<&str>) -> anyhow::Result<()> {
        let store = self.store();
        if store.is_initialized().await {
            let meta = store.wait_restored(RESTORE_TIMEOUT).await.context("restoring the cluster metadata")?;
            let alone = meta.nodes.len() <= 1;
            self.current.store(alone, Ordering::Release);
            self.reconcile(node, &meta).await;
            if alone {
                // In the background: a restarted one-node cluster elects itself first (up to 2 s).
                let (me, node) = (self.clone(), node.clone());
                tokio::spawn(async move { me.refresh_my_info(&node).await });
            } else {
                tokio::spawn(self.clone().catch_up(node.clone()));
            }
            return Ok(());
        }
        match join {
            Some(seed) => self.join_via(node, seed).await?,
            None => {
                store.initialize_single().await.context("forming a one-node cluster")?;
                store.propose(MetaCommand::AddNode(my_info(node, self.me))).await.context("registering this node")?;
                self.current.store(true, Ordering::Release);
                if let Some(config) = node.default_bucket_config() {
                    let meta = store.propose(MetaCommand::CreateBucket(spec_of(&config))).await;
                    meta.context("creating the default bucket")?;
                }
            }
        }
        let meta = self.metadata();
        self.reconcile(node, &meta).await;
        Ok(())
    }

    /// Joins the cluster `seed` ("host:mgmtport") belongs to: Raft membership first, then this node's entry.
    async fn join_via(&self, node: &Node, seed: &str) -> anyhow::Result<()> {
        let store = self.store();
        store.join(seed).await.with_context(|| format!("joining the cluster of {seed}"))?;
        match store.propose(MetaCommand::AddNode(my_info(node, self.me))).await {
            Ok(_) | Err(ProposeError::Rejected(settee_cluster::MetaError::NodeExists(_))) => {}
            Err(e) => return Err(e).context("registering this node with the cluster"),
        }
        self.current.store(true, Ordering::Release);
        tracing::info!(%seed, me = self.me, "joined the cluster");
        Ok(())
    }

    /// Leaves the cluster this node forms or belongs to and joins `seed`'s instead (Couchbase's
    /// doJoinCluster): the node's own buckets are dropped with its old metadata.
    pub async fn rejoin(self: &Arc<Self>, node: &Arc<Node>, seed: &str) -> anyhow::Result<()> {
        let mut started = self.started.subscribe();
        tokio::time::timeout(RESTORE_TIMEOUT, started.wait_for(|s| *s))
            .await
            .context("this node is still starting")?
            .context("this node is stopping")?;
        let old = self.store();
        let meta = old.current();
        if meta.nodes.len() > 1 {
            anyhow::bail!("Node is already part of a cluster.");
        }
        old.shutdown().await;
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await?.context("removing old metadata")?;
        let fresh = MetadataStore::open(&self.dir, self.me, self.addr.clone(), self.transport.clone()).await?;
        *self.store.write() = fresh;
        self.reconciler.lock().await.forget_applied();
        self.swapped.notify_waiters();
        self.join_via(node, seed).await?;
        let meta = self.metadata();
        self.reconcile(node, &meta).await;
        Ok(())
    }

    /// A restarted member confirms its metadata with the cluster (a linearizable read through the leader) before
    /// it lets any vBucket be active.
    async fn catch_up(self: Arc<Self>, node: Arc<Node>) {
        loop {
            match self.store().read_linearizable().await {
                Ok(meta) => {
                    self.current.store(true, Ordering::Release);
                    tracing::info!(rev = meta.rev, "cluster metadata confirmed current");
                    self.reconcile(&node, &meta).await;
                    self.refresh_my_info(&node).await;
                    return;
                }
                Err(e) => tracing::info!(error = %e, "waiting for the cluster to confirm this node's metadata"),
            }
            tokio::time::sleep(CATCH_UP_RETRY).await;
        }
    }

    /// Records this node's current ports when they changed since it registered (a restart on other ports).
    async fn refresh_my_info(&self, node: &Node) {
        let meta = self.metadata();
        let Some(known) = meta.nodes.get(&self.me) else { return };
        let mine = NodeInfo { membership: known.membership, ..my_info(node, self.me) };
        if *known != mine {
            if let Err(e) = self.store().propose(MetaCommand::UpdateNode(mine)).await {
                tracing::warn!(error = %e, "cannot record this node's new address");
            }
        }
    }

    /// Applies every metadata change locally, in the background, until `stopped`; and, when a bucket finishes
    /// its warmup, whatever an apply deferred until then (the reconciler remembers; a warmup that ended before
    /// this subscribed is covered by the first pass).
    pub async fn follow(self: Arc<Self>, node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
        let mut warmups = node.warmups();
        loop {
            let mut changes = self.store().subscribe();
            let meta = changes.borrow_and_update().clone();
            self.reconcile_with(&node, &meta, false).await;
            tokio::select! {
                r = changes.changed() => {
                    if r.is_err() {
                        tokio::time::sleep(CATCH_UP_RETRY).await;
                    }
                }
                _ = warmups.changed() => {}
                _ = self.swapped.notified() => {}
                _ = stopped.changed() => {
                    self.reconciler.lock().await.stop_feeds();
                    return;
                }
            }
        }
    }

    /// Makes the local node match `meta` (idempotent; serialised), even if it was applied before.
    pub async fn reconcile(&self, node: &Node, meta: &ClusterMetadata) {
        self.reconcile_with(node, meta, true).await;
    }

    async fn reconcile_with(&self, node: &Node, meta: &ClusterMetadata, again: bool) {
        let mut reconciler = self.reconciler.lock().await;
        reconciler.apply(node, self, meta, again).await;
        node.publish_config();
    }

    /// Proposes `cmd` and applies the result locally before returning, so the caller sees its change here.
    pub async fn propose(&self, node: &Node, cmd: MetaCommand) -> Result<Arc<ClusterMetadata>, ProposeError> {
        let meta = self.store().propose(cmd).await?;
        let local = self.metadata();
        let newest = if local.rev >= meta.rev { local } else { meta };
        self.reconcile_with(node, &newest, false).await;
        Ok(newest)
    }

    /// The Raft endpoints of the current store (mounted behind admin authentication by the REST layer).
    pub fn raft_router(&self) -> axum::Router {
        settee_cluster::raft_router(self.store())
    }
}

/// A fresh node id: random, never 0, small enough for every JSON reader (53 bits).
fn new_node_id() -> NodeId {
    (rand::random::<u64>() >> 11).max(1)
}

/// The address peers and clients reach this node at: the bound host, or loopback when it binds every interface.
pub fn peer_host(node: &Node) -> String {
    match node.config.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".into(),
        "::" | "[::]" => "::1".into(),
        h => h.trim_start_matches('[').trim_end_matches(']').to_owned(),
    }
}

/// This node as the metadata records it.
pub fn my_info(node: &Node, me: NodeId) -> NodeInfo {
    NodeInfo {
        id: me,
        hostname: peer_host(node),
        kv_port: node.config.kv_port,
        mgmt_port: node.config.mgmt_port,
        query_port: node.config.query_port,
        membership: Membership::Active,
        services: vec!["kv".into(), "n1ql".into()],
    }
}

/// The metadata form of a bucket's settings.
pub fn spec_of(c: &BucketConfig) -> BucketSpec {
    BucketSpec {
        name: c.name.clone(),
        uuid: c.uuid.clone(),
        ephemeral: c.kind == BucketKind::Ephemeral,
        ram_quota_bytes: c.ram_quota_bytes,
        replicas: c.replicas,
        eviction: c.eviction.as_str().to_owned(),
        max_ttl: c.max_ttl,
        flush_enabled: c.flush_enabled,
        durability_min_level: c.durability_min_level.map(|l| l as u8),
    }
}

/// The engine form of a bucket's settings (an unknown eviction name, which no settee wrote, reads as the type's
/// default).
pub fn config_of(s: &BucketSpec) -> BucketConfig {
    let kind = if s.ephemeral { BucketKind::Ephemeral } else { BucketKind::Couchbase };
    BucketConfig {
        name: s.name.clone(),
        uuid: s.uuid.clone(),
        kind,
        ram_quota_bytes: s.ram_quota_bytes,
        replicas: s.replicas,
        eviction: EvictionPolicy::parse(&s.eviction).unwrap_or(EvictionPolicy::default_for(kind)),
        max_ttl: s.max_ttl,
        flush_enabled: s.flush_enabled,
        durability_min_level: s.durability_min_level.and_then(DurabilityLevel::from_wire),
    }
}
