//! The target side of one replication: the remote bucket's map and one writer task per KV node, rebuilt whole
//! whenever the map is refreshed (each rebuild is a new *generation*, so replies of older writers are ignored).

use std::collections::HashMap;

use settee_client::{resolve, Auth, BootstrapOptions, Cluster, Connection};
use settee_mcbp::Feature;
use settee_xdcr::Write;
use tokio::sync::mpsc;

use super::model::RemoteCluster;
use super::writer::{self, ToWriter, WriterReport};

const FEATURES: &[Feature] = &[Feature::Collections, Feature::Xattr, Feature::Json, Feature::TcpNoDelay];

pub struct Target {
    remote: RemoteCluster,
    bucket: String,
    pub generation: u64,
    writers: Vec<mpsc::Sender<ToWriter>>,
    /// Nodes of the last map handed to the core (kept while disconnected: their writes in flight are lost).
    map_nodes: usize,
    /// The bootstrap connection, kept for GET_COLLECTION_ID.
    meta: Option<Connection>,
    /// Source collection path (`scope.collection`) → target collection id, or None when the target lacks it.
    collections: HashMap<String, Option<u32>>,
    /// Batches a writer may hold queued (its window bounds what the core sends it anyway).
    queue: usize,
}

/// A fresh map: target vBucket → node index, and the node count.
pub struct NewMap {
    pub vbuckets: Vec<u16>,
    pub nodes: usize,
    /// How many nodes the previous generation had (their writes in flight are lost).
    pub previous_nodes: usize,
}

impl Target {
    pub fn new(remote: RemoteCluster, bucket: String, queue: usize) -> Target {
        Target {
            remote,
            bucket,
            generation: 0,
            writers: Vec::new(),
            map_nodes: 0,
            meta: None,
            collections: HashMap::new(),
            queue,
        }
    }

    /// Bootstraps from the remote's KV nodes, opens one writer per node and returns the map.
    pub async fn refresh(&mut self, reports: &mpsc::Sender<WriterReport>) -> Result<NewMap, String> {
        let r = &self.remote;
        let seeds = super::remote::kv_seeds(r).await?;
        let tls = match &r.encryption {
            Some(t) => t.kv_client(&r.hostname).map_err(|e| format!("the remote's certificate: {e}"))?,
            None => None,
        };
        let auth = r.encryption.as_ref().map_or(Auth::Plain, |t| t.kv_auth());
        let options = BootstrapOptions {
            user: r.username.clone(),
            password: r.password.clone(),
            bucket: self.bucket.clone(),
            features: FEATURES.to_vec(),
            agent: "settee-xdcr".into(),
            tls: tls.clone(),
            auth,
        };
        let (cluster, meta) =
            Cluster::bootstrap(&seeds, options).await.map_err(|e| format!("bootstrap of the target bucket: {e}"))?;
        let config = cluster.config().clone();
        let previous_nodes = self.map_nodes;
        let generation = self.generation + 1;
        let mut writers = Vec::with_capacity(config.kv_nodes.len());
        for node in 0..config.kv_nodes.len() {
            // The node's TLS port from the bucket config's nodesExt when the reference demands encryption.
            let addr = config.dial_addr(node, tls.is_some()).map_err(|e| format!("target node: {e}"))?;
            let sock = resolve(addr).await.map_err(|e| format!("{addr}: {e}"))?;
            let (user, password) = (&r.username, &r.password);
            let conn = Connection::connect_as(sock, tls.as_ref(), auth, (user, password), Some(&self.bucket), FEATURES)
                .await
                .map_err(|e| format!("connecting to target node {addr}: {e}"))?;
            writers.push((node, conn));
        }
        // Only a complete set of connections replaces the old writers (dropping their senders ends them).
        self.generation = generation;
        self.writers.clear();
        for (node, conn) in writers {
            let (tx, rx) = mpsc::channel(self.queue);
            tokio::spawn(writer::run(conn, generation, node, rx, reports.clone()));
            self.writers.push(tx);
        }
        self.meta = Some(meta);
        self.collections.clear();
        let vbuckets = config.vbucket_map.iter().map(|&n| u16::try_from(n).unwrap_or(u16::MAX)).collect::<Vec<u16>>();
        self.map_nodes = config.kv_nodes.len();
        Ok(NewMap { vbuckets, nodes: self.map_nodes, previous_nodes })
    }

    pub fn connected(&self) -> bool {
        !self.writers.is_empty()
    }

    /// Hands a batch to node `node`'s writer; false when there is none or it stopped (the node is down).
    pub fn send(&self, node: usize, writes: Vec<Write>) -> bool {
        self.writers.get(node).is_some_and(|w| w.try_send(ToWriter::Batch(writes)).is_ok())
    }

    /// Asks node `node` for vBucket `vb`'s seqnos (OBSERVE_SEQNO) behind its writes; false as [`Self::send`].
    pub fn observe(&self, node: usize, vb: u16, probe: u64) -> bool {
        self.writers.get(node).is_some_and(|w| w.try_send(ToWriter::Observe { vb, probe }).is_ok())
    }

    /// Forgets the writers (a node went down): the next refresh opens them again.
    pub fn disconnect(&mut self) {
        self.writers.clear();
        self.meta = None;
    }

    /// The target's id for collection `path` (`scope.collection`); Ok(None) when the target has no such
    /// collection, Err when it cannot be asked now.
    pub async fn collection_id(&mut self, path: &str) -> Result<Option<u32>, String> {
        if path == "_default._default" {
            return Ok(Some(0));
        }
        if let Some(known) = self.collections.get(path) {
            return Ok(*known);
        }
        let conn = self.meta.as_mut().ok_or_else(|| "not connected".to_owned())?;
        let id = match Cluster::collection_id(conn, path).await {
            Ok(id) => Some(id),
            Err(settee_client::ClientError::Status { .. }) => None,
            Err(e) => {
                self.meta = None;
                return Err(e.to_string());
            }
        };
        self.collections.insert(path.to_owned(), id);
        Ok(id)
    }
}
