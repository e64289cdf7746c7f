//! Starting and stopping a node: bind every port, run the services and background tasks, stop on a signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::ClusterDriver;
use crate::config::ServerConfig;
use crate::node::Node;

/// How often the expiry pager walks the buckets.
const EXPIRY_PAGER_INTERVAL: Duration = Duration::from_secs(60);
/// How long an ephemeral bucket's tombstones are kept before the pager purges them (Couchbase's ephemeral metadata
/// purge age); persistent buckets use `--metadata-purge-age-secs`.
const TOMBSTONE_PURGE_AGE_SECS: u32 = 24 * 60 * 60;

/// A node whose services are running; dropping it does not stop it, `stop` does.
pub struct RunningNode {
    pub node: Arc<Node>,
    pub kv_addr: SocketAddr,
    pub mgmt_addr: SocketAddr,
    pub query_addr: SocketAddr,
    /// The TLS ports' addresses; None for a port turned off (0).
    pub kv_tls_addr: Option<SocketAddr>,
    pub mgmt_tls_addr: Option<SocketAddr>,
    pub query_tls_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Held for the node's lifetime: an exclusive lock on `<data-dir>/LOCK`.
    _data_dir_lock: std::fs::File,
}

impl RunningNode {
    /// Binds the ports of `config` (port 0 picks a free one) and starts every service.
    pub async fn start(config: ServerConfig) -> anyhow::Result<RunningNode> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
        let data_dir_lock = lock_data_dir(&config.data_dir)?;
        let bind = |port: u16| {
            let host = config.host.clone();
            async move {
                TcpListener::bind((host.as_str(), port))
                    .await
                    .with_context(|| format!("cannot listen on {host}:{port}"))
            }
        };
        let kv = bind(config.kv_port).await?;
        let mgmt = bind(config.mgmt_port).await?;
        let query = bind(config.query_port).await?;
        // A TLS port of 0 is off (Couchbase's TLS ports cannot be turned off, but settee's tests run many nodes).
        let bind_tls = |port: u16| {
            let bound = (port != 0).then(|| bind(port));
            async move {
                match bound {
                    Some(b) => b.await.map(Some),
                    None => Ok(None),
                }
            }
        };
        let kv_tls = bind_tls(config.kv_tls_port).await?;
        let mgmt_tls = bind_tls(config.mgmt_tls_port).await?;
        let query_tls = bind_tls(config.query_tls_port).await?;
        let (kv_addr, mgmt_addr, query_addr) = (kv.local_addr()?, mgmt.local_addr()?, query.local_addr()?);
        let addr = |l: &Option<TcpListener>| l.as_ref().map(TcpListener::local_addr).transpose();
        let (kv_tls_addr, mgmt_tls_addr, query_tls_addr) = (addr(&kv_tls)?, addr(&mgmt_tls)?, addr(&query_tls)?);
        let mut config = config;
        config.kv_port = kv_addr.port();
        config.mgmt_port = mgmt_addr.port();
        config.query_port = query_addr.port();
        config.kv_tls_port = kv_tls_addr.map_or(0, |a| a.port());
        config.mgmt_tls_port = mgmt_tls_addr.map_or(0, |a| a.port());
        config.query_tls_port = query_tls_addr.map_or(0, |a| a.port());
        let node = Node::new(config)?;
        let token = crate::auth::LocalToken::create(&node.config.data_dir)
            .with_context(|| format!("cannot write the local token in {}", node.config.data_dir.display()))?;
        let _ = node.local_token.set(token);
        // The cluster's seeded generator (node ids, vBucket uuids); a simulation seeds its own.
        let cluster = ClusterDriver::open(&node, StdRng::from_entropy()).await?;

        let (stop, stopped) = watch::channel(false);
        let on_stop = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.changed().await;
        };
        // The driver answers the cluster requests of REST handlers from the start (a join waits for the start).
        let mut tasks = vec![tokio::spawn(cluster.clone().serve(stopped.clone()))];
        // The management port first: peers reach this node's Raft endpoints there while it joins.
        let (n, rx) = (node.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = crate::rest::serve_mgmt(n, mgmt, on_stop(rx)).await {
                tracing::error!(error = %e, "management service failed");
            }
        }));
        if let Some(listener) = mgmt_tls {
            let (n, rx) = (node.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = crate::rest::serve_mgmt_tls(n, listener, on_stop(rx)).await {
                    tracing::error!(error = %e, "management tls service failed");
                }
            }));
        }
        let join = node.config.join.clone();
        if let Err(e) = cluster.start(join.as_deref()).await {
            let _ = stop.send(true);
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
            }
            cluster.handle().store().shutdown().await;
            return Err(e);
        }
        tasks.push(tokio::spawn(crate::kv::listener::serve_kv(node.clone(), kv, kv_tls, stopped.clone())));
        let (n, rx) = (node.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = crate::rest::serve_query(n, query, on_stop(rx)).await {
                tracing::error!(error = %e, "query service failed");
            }
        }));
        if let Some(listener) = query_tls {
            let (n, rx) = (node.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = crate::rest::serve_query_tls(n, listener, on_stop(rx)).await {
                    tracing::error!(error = %e, "query tls service failed");
                }
            }));
        }
        tasks.push(tokio::spawn(cluster.clone().follow(stopped.clone())));
        tasks.push(tokio::spawn(cluster.monitor(stopped.clone())));
        tasks.push(tokio::spawn(item_pager(node.clone(), stopped.clone())));
        tasks.push(tokio::spawn(compactor(node.clone(), stopped.clone())));
        tasks.push(tokio::spawn(crate::stats_sampler::run(node.clone(), stopped.clone())));
        tasks.push(tokio::spawn(crate::xdcr::manage(node.clone(), stopped.clone())));
        tasks.push(tokio::spawn(expiry_pager(node.clone(), stopped)));
        tracing::info!(%kv_addr, %mgmt_addr, %query_addr, ?kv_tls_addr, ?mgmt_tls_addr, ?query_tls_addr, "settee node ready");
        Ok(RunningNode {
            node,
            kv_addr,
            mgmt_addr,
            query_addr,
            kv_tls_addr,
            mgmt_tls_addr,
            query_tls_addr,
            stop,
            tasks,
            _data_dir_lock: data_dir_lock,
        })
    }

    /// Stops accepting, closes connections and waits for the services to end.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        if let Some(c) = self.node.cluster() {
            c.store().shutdown().await;
        }
        let node = self.node.clone();
        let _ = tokio::task::spawn_blocking(move || {
            // The index snapshots first: the buckets' final flush then covers every seqno they reflect.
            node.query.indexes.shutdown();
            node.stop_buckets()
        })
        .await;
    }
}

/// Two nodes sharing a data directory would overwrite each other's files: refuse to start instead.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            anyhow::bail!("data directory {} is in use by another settee process", dir.display())
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

async fn expiry_pager(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EXPIRY_PAGER_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        for b in node.buckets() {
            let age =
                if b.persistence.is_some() { node.config.metadata_purge_age_secs } else { TOMBSTONE_PURGE_AGE_SECS };
            let n = b.run_expiry_pager(age);
            if n > 0 {
                tracing::debug!(bucket = %b.name(), expired = n, "expiry pager");
            }
        }
    }
}

/// How often every persistent bucket is compacted (tombstone purge and space reclaim).
const COMPACTION_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// Compacts every persistent bucket periodically, off the async workers.
async fn compactor(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(COMPACTION_INTERVAL);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        for b in node.buckets() {
            if let Err(e) = node.compact_bucket(&b).await {
                tracing::error!(bucket = %b.name(), error = %e, "compaction failed");
            }
        }
    }
}

/// How often the item pager checks memory against the high watermark.
const ITEM_PAGER_INTERVAL: Duration = Duration::from_millis(250);

/// Ejects values (or items) of persistent buckets past their high watermark, off the async workers.
async fn item_pager(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(ITEM_PAGER_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        for b in node.buckets() {
            if b.persistence.is_none() || !b.over_high_watermark() {
                continue;
            }
            let bucket = b.bucket.clone();
            match tokio::task::spawn_blocking(move || bucket.run_item_pager()).await {
                Ok(n) => tracing::debug!(bucket = %b.name(), ejected = n, "item pager"),
                Err(e) => tracing::error!(error = %e, "item pager task failed"),
            }
        }
    }
}

/// Runs a node until SIGTERM or SIGINT.
pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    // Handlers go in before the ports open, so a signal sent as soon as the node looks ready still stops it cleanly.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let running = RunningNode::start(config).await?;
    let mut restart = running.node.restart.subscribe();
    running.node.restartable.store(true, std::sync::atomic::Ordering::Release);
    let restart = tokio::select! {
        _ = term.recv() => {
            tracing::info!("SIGTERM: stopping");
            None
        }
        _ = int.recv() => {
            tracing::info!("SIGINT: stopping");
            None
        }
        r = restart.wait_for(Option::is_some) => r.ok().and_then(|r| r.clone()),
        why = metadata_halted(&running.node) => {
            // Serving on with a map that no longer follows the cluster's could take writes for vBuckets moved away.
            tracing::error!("stopping: {why}");
            running.stop().await;
            return Err(anyhow::anyhow!("stopped: {why}"));
        }
    };
    running.stop().await;
    tracing::info!("stopped");
    match restart {
        Some(r) => Err(reexec(&r.binary)),
        None => Ok(()),
    }
}

/// Resolves once this node's metadata store stops applying the cluster's log (a command this settee cannot read,
/// see `settee_cluster::metadata::compat`), with why; follows the store across a rejoin, which replaces it.
async fn metadata_halted(node: &Arc<Node>) -> String {
    let Some(cluster) = node.cluster().cloned() else { return std::future::pending().await };
    loop {
        let mut halted = cluster.store().halted();
        if let Ok(why) = halted.wait_for(Option::is_some).await {
            return why.clone().unwrap_or_default();
        }
        // The store was replaced (the node joined another cluster): watch the new one.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Replaces this process with `binary`, given this process's arguments (a rolling restart or upgrade). Returns
/// only if that fails. Every descriptor settee opened is close-on-exec, so the new process binds the same ports
/// and locks the same data directory afresh; stdout and stderr carry on.
fn reexec(binary: &std::path::Path) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    tracing::warn!(binary = %binary.display(), "restarting: re-executing the node");
    let error = std::process::Command::new(binary).args(std::env::args_os().skip(1)).exec();
    anyhow::anyhow!("cannot re-execute {}: {error}", binary.display())
}
