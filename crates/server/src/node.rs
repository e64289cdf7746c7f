//! The node: its buckets, users, ports and the cluster-config revision. Shared by the KV and REST services.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use settee_engine::{Bucket, BucketConfig, BucketKind, EvictionPolicy};
use settee_types::{Clock, SystemClock};

use crate::auth::{Role, UserStore};
use crate::config::{BucketTypeArg, ServerConfig};
use crate::persistence::Persistence;

/// Version reported to clients and tools, which gate features on it (PROTOCOL.md §11.1): the Couchbase release
/// whose KV behaviour settee implements.
pub const COUCHBASE_VERSION: &str = "7.6.2-0000-enterprise";
/// Most buckets a node holds, as Couchbase's default limit.
pub const BUCKETS_MAX: usize = 30;
/// The smallest bucket quota Couchbase accepts through REST, in MiB.
pub const BUCKET_RAM_MB_MIN: u64 = 100;

/// A bucket as the node holds it: the engine bucket plus whether it has been deleted (connections bound to a
/// deleted bucket are closed).
pub struct BucketHandle {
    pub bucket: Arc<Bucket>,
    /// The flusher, fetcher and warmup of a Couchbase bucket; None for ephemeral buckets.
    pub persistence: Option<Arc<Persistence>>,
    /// Wakes this bucket's DCP producer connections when their vBuckets change.
    pub dcp_hub: Arc<crate::dcp::DcpHub>,
    /// Latency by opcode of the KV commands run on this bucket (GET_CMD_TIMER, `kv_cmd_duration_seconds`).
    pub timings: crate::timings::Timings,
    deleted: AtomicBool,
}

impl BucketHandle {
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
}

impl std::ops::Deref for BucketHandle {
    type Target = Bucket;
    fn deref(&self) -> &Bucket {
        &self.bucket
    }
}

/// Why a bucket could not be created or deleted; the REST layer shapes these as Couchbase's errors.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BucketError {
    #[error("Bucket with given name already exists")]
    Exists,
    #[error("Requested resource not found.")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
}

/// A client certificate that maps to no user ([`Node::certificate_user`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertificateRefused;

pub struct Node {
    pub config: ServerConfig,
    pub clock: Arc<dyn Clock>,
    pub users: UserStore,
    /// Per-user connection and rate limits (`auth::limits`), enforced while the cluster's `enforceLimits` is on.
    pub limits: crate::auth::Limits,
    /// 32 hex digits identifying this node.
    pub uuid: String,
    buckets: RwLock<BTreeMap<String, Arc<BucketHandle>>>,
    /// The cluster-config revision: grows with every change clients should learn about.
    rev: AtomicU64,
    /// Open KV connections.
    pub kv_connections: AtomicU64,
    /// KV connections served since the node started, on the plain port and on the TLS one (`/metrics`
    /// `settee_kv_connections_accepted_total{transport}`: how an operator, or a test, sees what a client such as
    /// another cluster's XDCR used).
    pub kv_accepted: [AtomicU64; 2],
    /// What KV connections may hold in their read buffers for frames still arriving (`--kv-read-buffer-mb`).
    pub read_budget: Arc<crate::kv::read_budget::ReadBudget>,
    /// When the node started, for uptime statistics.
    pub started: std::time::Instant,
    /// The config revision clients were last told about: KV connections that agreed to cluster-map notifications
    /// push a notification when it changes.
    config_published: tokio::sync::watch::Sender<u64>,
    /// What this node holds of its cluster (the driver that changes the node holds the node, not the other way
    /// round); unset only for nodes built without services (unit tests).
    cluster: std::sync::OnceLock<Arc<crate::cluster::ClusterHandle>>,
    /// The node's TLS certificates and the acceptor of its TLS ports.
    pub tls: Arc<crate::tls::NodeTls>,
    /// Which connections to the other nodes run over TLS (node-to-node encryption), recomputed by the reconcile.
    pub peer_links: Arc<crate::cluster::peer_links::PeerLinks>,
    /// The replication connections this node serves as a producer, by transport.
    pub replication_producers: Arc<crate::dcp::ReplicationProducers>,
    /// The query service: prepared statements, indexes, the request log.
    pub query: Arc<crate::query::QueryService>,
    /// The audit log (off until `/settings/audit` turns it on).
    pub audit: Arc<crate::audit::Audit>,
    /// The cluster's security settings as last applied (`security()`; replaced whole by `apply_security`).
    security: RwLock<Arc<crate::auth::SecuritySettings>>,
    /// XDCR: the remote clusters and replications, and the runners of this node.
    pub xdcr: crate::xdcr::Xdcr,
    /// Counts the buckets whose warmup finished: the cluster applies the map again then, since what it leaves
    /// alone while a bucket warms up (dropping copies the map no longer gives this node) waits for that.
    warmups: tokio::sync::watch::Sender<u64>,
    /// Latency of the commands run outside any bucket, and the slow-operation log.
    pub timings: crate::timings::NodeTimings,
    /// The executable this process started from (re-executed by a restart), read at start: a binary replaced
    /// in place since (an upgrade) is what a restart then runs.
    pub executable: Option<std::path::PathBuf>,
    /// Set by `POST /settee/node/restart`: the node stops cleanly and re-executes itself with the same arguments.
    pub restart: tokio::sync::watch::Sender<Option<RestartRequest>>,
    /// Whether something acts on `restart`: the `settee` binary's main loop does; a node embedded in a test or
    /// another program does not, and refuses the request instead of answering 202 for nothing.
    pub restartable: std::sync::atomic::AtomicBool,
    /// Every bucket's statistics sampled once a second, at Couchbase's zoom levels (`stats_sampler`).
    pub stats_history: parking_lot::Mutex<crate::stats_history::History>,
    /// The token `<data-dir>/localtoken` holds (`auth::local_token`), written at start by `service`; unset in a
    /// node built without services, which then refuses every `@localtoken` login.
    pub local_token: std::sync::OnceLock<crate::auth::LocalToken>,
    /// The cluster's node-to-node secret (`auth::peer_secret`): None in a cluster formed by an older settee (and in
    /// a node built without services), whose nodes call each other with the administrator's password.
    peer_secret: RwLock<Option<Arc<str>>>,
}

impl Node {
    pub fn new(config: ServerConfig) -> anyhow::Result<Arc<Node>> {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let users = UserStore::with_clock(clock.clone());
        users.upsert(
            &config.username,
            "Administrator",
            Some(&config.password),
            vec![Role::parse_list("admin")?[0].clone()],
        )?;
        let read_budget_bytes = usize::try_from(config.kv_read_buffer_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let read_budget = Arc::new(crate::kv::read_budget::ReadBudget::new(read_budget_bytes));
        let tls = Arc::new(crate::tls::NodeTls::open(&config)?);
        let timings = crate::timings::NodeTimings::new(config.slow_op_threshold_ms);
        let audit = Arc::new(crate::audit::Audit::new(config.data_dir.join("logs"), &config.host, clock.clone())?);
        let peer_links = Arc::new(crate::cluster::peer_links::PeerLinks::new(config.peer_source().ok().flatten()));
        let node = Arc::new(Node {
            tls,
            peer_links,
            replication_producers: Arc::default(),
            timings,
            uuid: random_hex32(clock.now_nanos() ^ 0x5e77ee),
            config,
            limits: crate::auth::Limits::new(clock.clone()),
            clock,
            users,
            buckets: RwLock::new(BTreeMap::new()),
            rev: AtomicU64::new(1),
            kv_connections: AtomicU64::new(0),
            kv_accepted: Default::default(),
            read_budget,
            started: std::time::Instant::now(),
            cluster: std::sync::OnceLock::new(),
            query: Arc::default(),
            audit,
            security: RwLock::default(),
            xdcr: crate::xdcr::Xdcr::default(),
            config_published: tokio::sync::watch::Sender::new(1),
            warmups: tokio::sync::watch::Sender::new(0),
            stats_history: Default::default(),
            executable: std::env::current_exe().ok(),
            restart: tokio::sync::watch::Sender::new(None),
            restartable: std::sync::atomic::AtomicBool::new(false),
            local_token: std::sync::OnceLock::new(),
            peer_secret: RwLock::new(None),
        });
        node.query.indexes.set_memory_quota(node.config.index_memory_quota_mb.saturating_mul(1 << 20));
        Ok(node)
    }

    /// The credentials this node's calls to its peers carry (REST, Raft, DCP replication): the administrator's
    /// user name with the cluster's node-to-node secret, or with the command line's password where there is none.
    pub fn peer_credentials(&self) -> (String, String) {
        let password = match &*self.peer_secret.read() {
            Some(secret) => secret.to_string(),
            None => self.config.password.clone(),
        };
        (self.config.username.clone(), password)
    }

    /// Whether `candidate` is the cluster's node-to-node secret (compared in constant time); false without one.
    pub fn is_peer_secret(&self, candidate: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.peer_secret.read().as_ref().is_some_and(|secret| bool::from(secret.as_bytes().ct_eq(candidate)))
    }

    /// Whether this node has a node-to-node secret (see `peer_secret`).
    pub fn has_peer_secret(&self) -> bool {
        self.peer_secret.read().is_some()
    }

    /// The node-to-node secret, to hand to a joining node.
    pub fn peer_secret(&self) -> Option<String> {
        self.peer_secret.read().as_ref().map(|s| s.to_string())
    }

    /// Makes `secret` the node-to-node secret this node accepts and sends (already stored on disk by the caller).
    pub fn set_peer_secret(&self, secret: Option<&str>) {
        *self.peer_secret.write() = secret.map(Arc::from);
    }

    /// The cluster's security settings (`/settings/security`, `/settings/clientCertAuth`) this node applies.
    pub fn security(&self) -> Arc<crate::auth::SecuritySettings> {
        self.security.read().clone()
    }

    /// Applies new security settings: the SASL rules at the next attempt, the TLS rules at the next handshake
    /// (connections already open keep theirs).
    pub fn apply_security(&self, settings: crate::auth::SecuritySettings) {
        self.tls.apply_settings(&settings);
        *self.security.write() = Arc::new(settings);
    }

    /// Who a TLS connection's client certificate (its `names`) authenticates: None when it gave none or the
    /// cluster's settings ignore certificates, else the user the settings' rules map it to; a certificate that maps
    /// to no user is refused (`Err`), as ns_server and kv_engine refuse it rather than treat it as absent.
    pub fn certificate_user(
        &self,
        names: Option<&crate::auth::CertNames>,
    ) -> Result<Option<Arc<crate::auth::User>>, CertificateRefused> {
        let settings = self.security();
        let Some(names) = names.filter(|_| settings.client_cert_auth.enabled()) else { return Ok(None) };
        settings.client_cert_auth.user_for(names, |id| self.users.get(id)).map(Some).ok_or(CertificateRefused)
    }

    pub fn cluster(&self) -> Option<&Arc<crate::cluster::ClusterHandle>> {
        self.cluster.get()
    }

    pub(crate) fn set_cluster(&self, cluster: Arc<crate::cluster::ClusterHandle>) {
        let _ = self.cluster.set(cluster);
    }

    /// The bucket the command line asks for on a new cluster, if any.
    pub fn default_bucket_config(&self) -> Option<BucketConfig> {
        if self.config.bucket.is_empty() {
            return None;
        }
        let kind = match self.config.bucket_type {
            BucketTypeArg::Couchbase => BucketKind::Couchbase,
            BucketTypeArg::Ephemeral => BucketKind::Ephemeral,
        };
        let eviction = EvictionPolicy::default_for(kind);
        Some(BucketConfig {
            name: self.config.bucket.clone(),
            uuid: random_hex32(self.clock.now_nanos() ^ fold(self.config.bucket.as_bytes())),
            kind,
            ram_quota_bytes: self.config.bucket_ram_mb * 1024 * 1024,
            replicas: self.config.replicas,
            eviction,
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
            conflict_resolution: Default::default(),
        })
    }

    /// The config revision clients see: the cluster metadata's, so every node reports the same one.
    pub fn rev(&self) -> u64 {
        match self.cluster() {
            Some(c) => c.metadata().rev,
            None => self.rev.load(Ordering::Acquire),
        }
    }
    /// Marks a change clients must see (bucket set, manifest, settings).
    pub fn bump_rev(&self) -> u64 {
        let rev = self.rev.fetch_add(1, Ordering::AcqRel) + 1;
        self.publish_config();
        rev
    }

    /// Tells the connections that push cluster-map notifications that the config changed (once the local node
    /// reflects it).
    pub fn publish_config(&self) {
        let rev = self.rev();
        self.config_published.send_if_modified(|r| std::mem::replace(r, rev) != rev);
    }

    /// Changes each time a bucket finishes its warmup.
    pub fn warmups(&self) -> tokio::sync::watch::Receiver<u64> {
        self.warmups.subscribe()
    }

    /// Changes of the published config revision.
    pub fn config_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.config_published.subscribe()
    }

    pub fn bucket(&self, name: &str) -> Option<Arc<BucketHandle>> {
        self.buckets.read().get(name).cloned()
    }
    pub fn buckets(&self) -> Vec<Arc<BucketHandle>> {
        self.buckets.read().values().cloned().collect()
    }

    /// Creates a bucket; a missing uuid is generated. Every vBucket is active (a node on its own).
    pub fn create_bucket(&self, config: BucketConfig) -> Result<Arc<BucketHandle>, BucketError> {
        self.create_bucket_in(config, false)
    }

    /// Creates a bucket whose vBuckets a cluster map is about to place: every vBucket starts dead, so nothing is
    /// served or streamed (an empty active would tell its replicas to roll back) before the map's states apply.
    pub fn create_bucket_for_map(&self, config: BucketConfig) -> Result<Arc<BucketHandle>, BucketError> {
        self.create_bucket_in(config, true)
    }

    fn create_bucket_in(&self, mut config: BucketConfig, dead: bool) -> Result<Arc<BucketHandle>, BucketError> {
        let mut buckets = self.buckets.write();
        check_new_bucket(&buckets, &config)?;
        if config.uuid.is_empty() {
            config.uuid = random_hex32(self.clock.now_nanos() ^ fold(config.name.as_bytes()));
        }
        let bucket = Arc::new(Bucket::new(config.clone(), self.clock.clone()));
        if dead {
            for vb in 0..bucket.num_vbuckets() {
                bucket.set_vbucket_state(settee_types::VbId(vb), settee_engine::VbState::Dead, 0);
            }
        }
        let persistence = match config.kind {
            BucketKind::Couchbase => {
                let dir = self.config.data_dir.join("buckets").join(&config.uuid);
                let warmups = self.warmups.clone();
                let warmed = move || {
                    warmups.send_modify(|n| *n += 1);
                };
                Some(
                    Persistence::start(bucket.clone(), &dir, warmed)
                        .map_err(|e| BucketError::Invalid(e.to_string()))?,
                )
            }
            BucketKind::Ephemeral => None,
        };
        let dcp_hub = Arc::new(crate::dcp::DcpHub::default());
        let hub = dcp_hub.clone();
        bucket.set_change_notifier(Arc::new(move |vb| hub.wake(vb)));
        let timings = crate::timings::Timings::new();
        let handle = Arc::new(BucketHandle { bucket, persistence, dcp_hub, timings, deleted: AtomicBool::new(false) });
        buckets.insert(config.name.clone(), handle.clone());
        drop(buckets);
        self.bump_rev();
        tracing::info!(bucket = %config.name, kind = ?config.kind, "bucket created");
        Ok(handle)
    }

    /// Compacts a persistent bucket on the blocking pool (nothing to do for an ephemeral one).
    pub async fn compact_bucket(&self, b: &Arc<BucketHandle>) -> anyhow::Result<u64> {
        let Some(p) = b.persistence.clone() else { return Ok(0) };
        let (bucket, age) = (b.bucket.clone(), self.config.metadata_purge_age_secs);
        let purged = tokio::task::spawn_blocking(move || p.compact(&bucket, age)).await??;
        Ok(purged)
    }

    /// Stops every bucket's persistence after flushing what is dirty (clean shutdown).
    pub fn stop_buckets(&self) {
        for b in self.buckets() {
            if let Some(p) = &b.persistence {
                p.stop();
            }
        }
    }

    pub fn delete_bucket(&self, name: &str) -> Result<(), BucketError> {
        let handle = self.buckets.write().remove(name).ok_or(BucketError::NotFound)?;
        handle.deleted.store(true, Ordering::Release);
        if let Some(p) = &handle.persistence {
            p.stop();
            if let Err(e) = std::fs::remove_dir_all(&p.dir) {
                tracing::warn!(bucket = %name, error = %e, "cannot remove the deleted bucket's files");
            }
        }
        self.bump_rev();
        tracing::info!(bucket = %name, "bucket deleted");
        Ok(())
    }
}

impl Node {
    /// The checks ns_server makes before creating a bucket here, with its texts (the cluster path runs them before
    /// proposing, the local creation again under the lock).
    pub(crate) fn check_new_bucket(&self, config: &BucketConfig) -> Result<(), BucketError> {
        check_new_bucket(&self.buckets.read(), config)
    }
}

fn check_new_bucket(buckets: &BTreeMap<String, Arc<BucketHandle>>, config: &BucketConfig) -> Result<(), BucketError> {
    validate_bucket_name(&config.name)?;
    // The REST API enforces Couchbase's 100 MiB floor; the command line may go lower (tests of eviction).
    if config.ram_quota_bytes < 1024 * 1024 {
        return Err(BucketError::Invalid("RAM quota cannot be less than 1 MiB".into()));
    }
    if config.replicas > 3 {
        return Err(BucketError::Invalid("Replica number larger than 3 is not supported.".into()));
    }
    if buckets.keys().any(|n| n.eq_ignore_ascii_case(&config.name)) {
        return Err(BucketError::Exists);
    }
    if buckets.len() >= BUCKETS_MAX {
        return Err(BucketError::Invalid(format!("Cannot create more than {BUCKETS_MAX} buckets")));
    }
    Ok(())
}

/// Couchbase's bucket naming rule: 1-100 characters of letters, digits, `.`, `%`, `_`, `-`, not starting with `.`.
fn validate_bucket_name(name: &str) -> Result<(), BucketError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'%' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(BucketError::Invalid("Bucket name can only contain characters in range A-Z, a-z, 0-9 as well as underscore, period, dash & percent. Consult the documentation.".into()))
    }
}

fn fold(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3))
}

/// 32 hex digits from the OS random source, mixed with `salt`.
pub fn random_hex32(salt: u64) -> String {
    let a: u64 = rand::random::<u64>() ^ salt;
    let b: u64 = rand::random();
    format!("{a:016x}{b:016x}")
}

/// A restart asked for over REST: re-execute `binary` with this process's arguments once the node has stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartRequest {
    pub binary: std::path::PathBuf,
}
