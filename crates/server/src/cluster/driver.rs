//! [`ClusterDriver`]: the thin async runtime around the control plane. It owns the node and its
//! [`ClusterHandle`], opens the metadata store, forms, joins or restores the cluster, applies every metadata change
//! locally (the reconcile), answers the handle's requests, and runs the control-plane state machines
//! (`settee_cluster::control`) by carrying out their commands and feeding the answers back.
//!
//! Time comes from the node's `Clock` (its monotonic reading), randomness from the driver's seeded `Rng`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::RngCore;
use settee_cluster::control::Holds;
use settee_cluster::metadata::CommandForms;
use settee_cluster::{
    ClusterMetadata, HttpTransport, Membership, MetaCommand, MetadataStore, NodeId, NodeInfo, ProposeError,
    StoreOptions,
};
use settee_types::Clock;
use tokio::sync::{mpsc, watch, Notify};

use super::handle::{ClusterHandle, Proposal, Request};
use super::reconcile::Reconciler;
use super::spec_of;
use crate::node::Node;

/// How long a restarted node waits for its own committed metadata to be applied again.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between attempts to confirm a restarted member's view with the cluster.
const CATCH_UP_RETRY: Duration = Duration::from_millis(500);
/// How long a joining node waits for its seed to hand over the cluster's CA.
const CLUSTER_CA_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ClusterDriver {
    pub(super) node: Arc<Node>,
    pub(super) handle: Arc<ClusterHandle>,
    dir: PathBuf,
    pub(super) transport: Arc<HttpTransport>,
    /// Told when the handle's store is replaced (the node joined another cluster).
    swapped: Notify,
    reconciler: tokio::sync::Mutex<Reconciler>,
    /// Active vBuckets held here for a takeover (a rebalance step, or a graceful failover of this node), by bucket:
    /// pending here, so clients are refused while the copies that take over catch up with a history that no
    /// longer moves.
    pub(super) held: parking_lot::Mutex<Holds>,
    rng: parking_lot::Mutex<StdRng>,
    pub(super) clock: Arc<dyn Clock>,
    /// Where this node's connections to its peers come from (`--bind-peer-connections`), checked at open.
    peer_source: Option<IpAddr>,
    /// The handle's requests, until `serve` takes them.
    inbox: parking_lot::Mutex<Option<mpsc::Receiver<Request>>>,
    /// When this node last recorded its metadata version (`versions`).
    pub(super) last_announce: parking_lot::Mutex<Option<Duration>>,
}

impl ClusterDriver {
    /// Opens this node's metadata store (creating its identity on first start, from `rng`) and gives the node its
    /// handle. Nothing is proposed yet.
    pub async fn open(node: &Arc<Node>, mut rng: StdRng) -> anyhow::Result<Arc<ClusterDriver>> {
        let dir = node.config.data_dir.join("raft");
        let stored = MetadataStore::stored_node_id(&dir)?;
        open_peer_secret(node, stored.is_none())?;
        let me = match stored {
            Some(id) => id,
            None => new_node_id(&mut rng),
        };
        let addr = my_info(node, me).mgmt_addr();
        let peer_source = node.config.peer_source()?;
        let (user, password) = node.peer_credentials();
        let transport = Arc::new(HttpTransport::with_source(&user, &password, peer_source));
        let store = MetadataStore::open_with(&dir, me, addr.clone(), transport.clone(), store_options())
            .await
            .with_context(|| format!("cannot open the cluster metadata in {}", dir.display()))?;
        let (handle, inbox) = ClusterHandle::new(me, addr, store, node.clock.clone());
        let handle = Arc::new(handle);
        node.set_cluster(handle.clone());
        Ok(Arc::new(ClusterDriver {
            node: node.clone(),
            handle,
            dir,
            transport,
            swapped: Notify::new(),
            reconciler: tokio::sync::Mutex::new(Reconciler::default()),
            held: Default::default(),
            rng: parking_lot::Mutex::new(rng),
            clock: node.clock.clone(),
            inbox: parking_lot::Mutex::new(Some(inbox)),
            peer_source,
            last_announce: parking_lot::Mutex::new(None),
        }))
    }

    pub fn handle(&self) -> &Arc<ClusterHandle> {
        &self.handle
    }

    pub(super) fn me(&self) -> NodeId {
        self.handle.me
    }

    pub(super) fn metadata(&self) -> Arc<ClusterMetadata> {
        self.handle.metadata()
    }

    pub(super) fn now(&self) -> Duration {
        self.clock.monotonic()
    }

    /// A random u64 from the driver's seeded generator.
    pub(super) fn random(&self) -> u64 {
        self.rng.lock().next_u64()
    }

    /// The credentials node-to-node calls carry (`Node::peer_credentials`).
    pub(super) fn credentials(&self) -> (String, String) {
        self.node.peer_credentials()
    }

    /// The source address of this node's connections to its peers, if it binds one.
    pub(super) fn peer_source(&self) -> Option<IpAddr> {
        self.peer_source
    }

    /// Answers the handle's requests until `stopped`, each in its own task (a graceful failover waits up to a
    /// minute; the others must not wait behind it).
    pub async fn serve(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let Some(mut inbox) = self.inbox.lock().take() else { return };
        loop {
            tokio::select! {
                request = inbox.recv() => match request {
                    Some(request) => {
                        tokio::spawn(self.clone().answer(request));
                    }
                    None => return,
                },
                _ = stopped.changed() => return,
            }
        }
    }

    async fn answer(self: Arc<Self>, request: Request) {
        // A requester that gave up (its connection closed) no longer waits for the answer: dropping it is fine.
        match request {
            Request::Propose { cmd, reply } => drop(reply.send(self.propose(cmd).await)),
            Request::Failover { node, reply } => drop(reply.send(self.failover(node).await)),
            Request::GracefulFailover { node, reply } => drop(reply.send(self.graceful_failover(node).await)),
            Request::Hold { request, reply } => drop(reply.send(self.hold_actives(&request).await)),
            Request::Rejoin { seed, group, reply } => drop(reply.send(self.rejoin(&seed, group).await)),
            Request::StartRebalance { ejected, reply } => drop(reply.send(self.clone().start_rebalance(ejected))),
        }
    }

    /// Brings the node into a cluster and its local state in line: forms a one-node cluster (first start without
    /// `join`), joins `join`'s cluster (first start with it), or restores what it had (restart).
    pub async fn start(self: &Arc<Self>, join: Option<&str>) -> anyhow::Result<()> {
        let started = self.start_inner(join).await;
        self.handle.set_started();
        started
    }

    async fn start_inner(self: &Arc<Self>, join: Option<&str>) -> anyhow::Result<()> {
        let store = self.handle.store();
        if store.is_initialized().await {
            let meta = store.wait_restored(RESTORE_TIMEOUT).await.context("restoring the cluster metadata")?;
            let alone = meta.nodes.len() <= 1;
            self.handle.set_current(alone);
            self.reconcile(&meta).await;
            if alone {
                // In the background: a restarted one-node cluster elects itself first (up to 2 s).
                let me = self.clone();
                tokio::spawn(async move { me.refresh_my_info().await });
            } else {
                // A memory-only bucket's copies did not survive the restart: before anything here is active, the
                // cluster promotes their replicas (auto-reprovision).
                let lost: Vec<(String, String)> = meta
                    .buckets
                    .values()
                    .filter(|b| b.spec.ephemeral)
                    .map(|b| (b.spec.name.clone(), b.spec.uuid.clone()))
                    .collect();
                tokio::spawn(self.clone().catch_up(lost));
            }
            return Ok(());
        }
        match join {
            Some(seed) => self.join_via(seed, None).await?,
            None => {
                store.initialize_single().await.context("forming a one-node cluster")?;
                let me = my_info(&self.node, self.me());
                store.propose(MetaCommand::AddNode(me)).await.context("registering this node")?;
                self.handle.set_current(true);
                if let Some(config) = self.node.default_bucket_config() {
                    let meta = store.propose(MetaCommand::CreateBucket(spec_of(&config))).await;
                    meta.context("creating the default bucket")?;
                }
            }
        }
        self.reconcile(&self.metadata()).await;
        Ok(())
    }

    /// Joins the cluster `seed` ("host:mgmtport") belongs to: Raft membership first, then this node's entry, in
    /// server group `group` (uuid) when given, else the default group.
    async fn join_via(&self, seed: &str, group: Option<String>) -> anyhow::Result<()> {
        self.adopt_peer_secret(seed).await?;
        let store = self.handle.store();
        store.join(seed).await.with_context(|| format!("joining the cluster of {seed}"))?;
        let me = my_info(&self.node, self.me());
        // In the forms every member reads: a cluster with an older member gets `AddNode` then `MoveToServerGroup`.
        let cluster = store.read_linearizable().await.context("reading the cluster's metadata")?;
        for cmd in CommandForms::of(&cluster).register(me, group) {
            match store.propose(cmd).await {
                Ok(_) | Err(ProposeError::Rejected(settee_cluster::MetaError::NodeExists(_))) => {}
                Err(e) => return Err(e).context("registering this node with the cluster"),
            }
        }
        self.handle.set_current(true);
        tracing::info!(%seed, me = self.me(), "joined the cluster");
        self.adopt_cluster_ca(seed).await;
        Ok(())
    }

    /// Takes the cluster's node-to-node secret from `seed` (asked with the administrator's own credentials, which
    /// the seed checks), before anything of the cluster calls this node with it. A seed without one (a cluster formed
    /// by an older settee) makes this node drop its own, so that both call each other with the administrator's
    /// password.
    async fn adopt_peer_secret(&self, seed: &str) -> anyhow::Result<()> {
        use settee_cluster::peer::PeerSecretRequest;
        let config = &self.node.config;
        let credentials = Some((config.username.as_str(), config.password.as_str()));
        let reply =
            super::peers::call(seed, &self.node.peer_links, credentials, &PeerSecretRequest, CLUSTER_CA_TIMEOUT)
                .await
                .with_context(|| format!("cannot get the cluster's node-to-node secret from {seed}"))?;
        let dir = config.data_dir.clone();
        let secret = reply.secret.clone();
        tokio::task::spawn_blocking(move || crate::auth::peer_secret::store(&dir, secret.as_deref()))
            .await?
            .context("cannot store the cluster's node-to-node secret")?;
        self.node.set_peer_secret(reply.secret.as_deref());
        let (user, password) = self.node.peer_credentials();
        self.transport.set_credentials(&user, &password);
        crate::query::routing::peers(&self.node).set_credentials(&user, &password);
        Ok(())
    }

    /// Takes the cluster's CA from `seed` and signs this node a certificate with it, so that one CA covers every
    /// node's TLS ports. A failure is logged and leaves the node its own CA (clients must then trust that too).
    async fn adopt_cluster_ca(&self, seed: &str) {
        use settee_cluster::peer::{ClusterCaReply, ClusterCaRequest};
        let credentials = self.credentials();
        match super::peers::call(
            seed,
            &self.node.peer_links,
            Some((credentials.0.as_str(), credentials.1.as_str())),
            &ClusterCaRequest,
            CLUSTER_CA_TIMEOUT,
        )
        .await
        {
            Ok(ClusterCaReply { ca: Some(ca) }) => {
                let tls = self.node.tls.clone();
                match tokio::task::spawn_blocking(move || tls.adopt_cluster_ca(&ca)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(%seed, error = %e, "cannot adopt the cluster's CA; keeping this node's own")
                    }
                    Err(e) => tracing::warn!(%seed, error = %e, "adopting the cluster's CA failed"),
                }
            }
            Ok(ClusterCaReply { ca: None }) => {
                tracing::info!(%seed, "the cluster uses supplied certificates; this node keeps its own")
            }
            Err(e) => tracing::warn!(%seed, error = %e, "cannot fetch the cluster's CA; keeping this node's own"),
        }
    }

    /// Leaves the cluster this node forms or belongs to and joins `seed`'s instead (Couchbase's
    /// doJoinCluster): the node's own buckets are dropped with its old metadata.
    pub(super) async fn rejoin(&self, seed: &str, group: Option<String>) -> anyhow::Result<()> {
        let mut started = self.handle.started();
        tokio::time::timeout(RESTORE_TIMEOUT, started.wait_for(|s| *s))
            .await
            .context("this node is still starting")?
            .context("this node is stopping")?;
        let old = self.handle.store();
        // A node rebalanced out of its cluster keeps that cluster's metadata, without itself among the nodes: it
        // belongs to no cluster any more and may join one, as an ejected Couchbase node may be added back.
        let current = old.current();
        if current.nodes.len() > 1 && current.nodes.contains_key(&self.me()) {
            anyhow::bail!("Node is already part of a cluster.");
        }
        old.shutdown().await;
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await?.context("removing old metadata")?;
        let (me, addr) = (self.me(), self.handle.addr.clone());
        let fresh = MetadataStore::open_with(&self.dir, me, addr, self.transport.clone(), store_options()).await?;
        self.handle.replace_store(fresh);
        {
            let mut reconciler = self.reconciler.lock().await;
            reconciler.forget_applied();
            self.handle.set_applied_rev(0);
        }
        self.swapped.notify_waiters();
        self.join_via(seed, group).await?;
        self.reconcile(&self.metadata()).await;
        Ok(())
    }

    /// A restarted member confirms its metadata with the cluster (a linearizable read through the leader) before
    /// it lets any vBucket be active; the memory-only buckets it held (`lost`: name and uuid) are reprovisioned
    /// first, and the persistent buckets' actives that replicas are ahead of are handed over to them (`takeback`).
    async fn catch_up(self: Arc<Self>, lost: Vec<(String, String)>) {
        let began = self.now();
        loop {
            let confirmed = match self.handle.store().read_linearizable().await {
                Ok(meta) => match self.reprovision(meta, &lost).await {
                    Ok(meta) => {
                        let give_up = self.now().saturating_sub(began) >= super::takeback::SILENT_REPLICA_WAIT;
                        self.take_back(meta, give_up).await.map_err(anyhow::Error::from)
                    }
                    Err(e) => Err(e.into()),
                },
                Err(e) => Err(ProposeError::Consensus(e).into()),
            };
            match confirmed {
                Ok(meta) => {
                    self.handle.set_current(true);
                    tracing::info!(rev = meta.rev, "cluster metadata confirmed current");
                    self.reconcile(&meta).await;
                    self.refresh_my_info().await;
                    return;
                }
                Err(e) => tracing::info!(error = %e, "waiting for the cluster to confirm this node's metadata"),
            }
            tokio::time::sleep(CATCH_UP_RETRY).await;
        }
    }

    /// Takes this node out of the chains of each memory-only bucket of `lost` that `meta` still places on it
    /// (Couchbase's auto-reprovision): its copies came back empty, and an empty active would serve nothing and
    /// roll its replicas back to nothing. Returns the metadata to apply.
    async fn reprovision(
        &self,
        mut meta: Arc<ClusterMetadata>,
        lost: &[(String, String)],
    ) -> Result<Arc<ClusterMetadata>, ProposeError> {
        let me = self.me();
        for (name, uuid) in lost {
            let Some(b) = meta.buckets.get(name).filter(|b| b.spec.uuid == *uuid) else { continue };
            if settee_cluster::vbmap::reprovision(&b.map, me) == b.map {
                continue;
            }
            let actives = b.map.actives_of(me).len();
            meta = self.handle.store().propose(MetaCommand::Reprovision { bucket: name.clone(), node: me }).await?;
            tracing::warn!(
                bucket = %name,
                actives,
                "memory-only bucket restarted empty: its replicas elsewhere were promoted (auto-reprovision); \
                 rebalance to give this node copies again"
            );
        }
        Ok(meta)
    }

    /// Records this node's current ports when they changed since it registered (a restart on other ports).
    async fn refresh_my_info(&self) {
        let meta = self.metadata();
        let Some(known) = meta.nodes.get(&self.me()) else { return };
        let mine = NodeInfo {
            membership: known.membership,
            node_encryption: known.node_encryption,
            ..my_info(&self.node, self.me())
        };
        if *known != mine {
            if let Err(e) = self.handle.store().propose(MetaCommand::UpdateNode(mine)).await {
                tracing::warn!(error = %e, "cannot record this node's new address");
            }
        }
    }

    /// Applies every metadata change locally, in the background, until `stopped`; and, when a bucket finishes
    /// its warmup, whatever an apply deferred until then (the reconciler remembers; a warmup that ended before
    /// this subscribed is covered by the first pass).
    pub async fn follow(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let mut warmups = self.node.warmups();
        let mut seen = self.metadata();
        let mut pace = tokio::time::interval(super::versions::STALE_ENTRY_PACE);
        loop {
            let mut changes = self.handle.store().subscribe();
            let meta = changes.borrow_and_update().clone();
            self.reconcile_with(&meta, false).await;
            self.announce_version(&seen, &meta);
            seen = meta;
            tokio::select! {
                _ = pace.tick() => {}
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
    pub(super) async fn reconcile(&self, meta: &ClusterMetadata) {
        self.reconcile_with(meta, true).await;
    }

    async fn reconcile_with(&self, meta: &ClusterMetadata, again: bool) {
        let mut reconciler = self.reconciler.lock().await;
        reconciler.apply(self, meta, again).await;
        self.handle.set_applied_rev(reconciler.applied_rev());
        self.node.publish_config();
    }

    /// Proposes `cmd` and applies the result locally before returning, so the caller sees its change here.
    pub(super) async fn propose(&self, cmd: MetaCommand) -> Proposal {
        let meta = self.handle.store().propose(cmd).await?;
        self.applied_here(meta).await
    }

    /// [`ClusterDriver::propose`] only while this node leads with a quorum behind it, never forwarded (see
    /// `MetadataStore::propose_as_leader`): for decisions taken from this node's own view.
    pub(super) async fn propose_as_leader(&self, cmd: MetaCommand) -> Proposal {
        let meta = self.handle.store().propose_as_leader(cmd).await?;
        self.applied_here(meta).await
    }

    /// The newer of `meta` and the local state, reconciled here.
    async fn applied_here(&self, meta: Arc<ClusterMetadata>) -> Proposal {
        let local = self.metadata();
        let newest = if local.rev >= meta.rev { local } else { meta };
        self.reconcile_with(&newest, false).await;
        Ok(newest)
    }
}

/// A fresh node id: random, never 0, small enough for every JSON reader (53 bits).
fn new_node_id(rng: &mut StdRng) -> NodeId {
    (rng.next_u64() >> 11).max(1)
}

/// The address peers and clients reach this node at: the bound host, or loopback when it binds every interface.
fn peer_host(node: &Node) -> String {
    match node.config.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".into(),
        "::" | "[::]" => "::1".into(),
        h => h.trim_start_matches('[').trim_end_matches(']').to_owned(),
    }
}

/// This node as the metadata records it.
fn my_info(node: &Node, me: NodeId) -> NodeInfo {
    NodeInfo {
        id: me,
        hostname: peer_host(node),
        kv_port: node.config.kv_port,
        mgmt_port: node.config.mgmt_port,
        query_port: node.config.query_port,
        membership: Membership::Active,
        services: vec!["kv".into(), "n1ql".into()],
        tls_ports: settee_cluster::TlsPorts {
            kv: node.config.kv_tls_port,
            mgmt: node.config.mgmt_tls_port,
            query: node.config.query_tls_port,
        },
        node_encryption: false,
        tls_ca: node.tls.ca_pem(),
        meta_version: super::meta_version(),
    }
}

/// The store's options: the defaults, reading the metadata version this node announces.
fn store_options() -> StoreOptions {
    StoreOptions { meta_version: super::meta_version(), ..StoreOptions::default() }
}

/// Loads this node's node-to-node secret, or makes one when the node forms a new cluster (`fresh`: no metadata
/// yet). A node with metadata but no secret belongs to a cluster formed by an older settee and stays without.
fn open_peer_secret(node: &Node, fresh: bool) -> anyhow::Result<()> {
    use crate::auth::peer_secret;
    let dir = &node.config.data_dir;
    let secret = match peer_secret::load(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        Some(secret) => Some(secret),
        None if fresh => {
            let secret = peer_secret::generate();
            peer_secret::store(dir, Some(&secret))
                .with_context(|| format!("cannot write the cluster secret in {}", dir.display()))?;
            Some(secret)
        }
        None => None,
    };
    node.set_peer_secret(secret.as_deref());
    Ok(())
}
