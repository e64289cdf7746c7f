//! XDCR on this node: the cluster-wide model of remote clusters and replications (`model`, kept in the Raft
//! metadata), a manager that keeps one runner per unpaused replication (`runner`: this node's active vBuckets
//! of the source bucket, through the sans-IO `settee_xdcr::Replicator`), the target connections (`target`,
//! `writer`: SET_WITH_META / DEL_WITH_META, pipelined per target node), the per-node checkpoint files
//! (`checkpoints`) and the remote's REST calls (`remote`). REST handlers live in `rest::xdcr`.

pub mod checkpoints;
mod filter;
pub mod mapping;
pub mod migration;
pub mod model;
pub mod remote;
pub mod runner;
mod source;
mod target;
mod writer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use settee_cluster::MetaCommand;
use tokio::sync::watch;

use self::model::{Replication, XdcrModel};
use self::runner::ReplStatus;
use crate::node::Node;

/// How often the manager compares the model with the runners.
const MANAGE_EVERY: Duration = Duration::from_millis(250);
/// How long a stopping runner may take to save its checkpoints.
const STOP_WAIT: Duration = Duration::from_secs(5);

struct Running {
    spec: Replication,
    /// The remote cluster as the runner was started with it: an edit (a new address or password) restarts it.
    remote: model::RemoteCluster,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// XDCR's state on this node.
#[derive(Default)]
pub struct Xdcr {
    /// The model of a node without a cluster (tests that build a bare node); a cluster's lives in its metadata.
    local: Mutex<XdcrModel>,
    /// The status of every replication this node ran since it started, by id (kept across pauses).
    statuses: Mutex<HashMap<String, Arc<Mutex<ReplStatus>>>>,
}

impl Xdcr {
    /// The current model.
    pub fn model(&self, node: &Node) -> XdcrModel {
        match node.cluster() {
            Some(cluster) => XdcrModel::from_metadata(&cluster.metadata().xdcr),
            None => self.local.lock().clone(),
        }
    }

    /// The model only when it certainly is the cluster's: metadata applied (revision above 0) and readable. Files
    /// are deleted on its word, so a node whose metadata is not loaded yet must not read "no replications".
    fn authoritative_model(&self, node: &Node) -> Option<XdcrModel> {
        match node.cluster() {
            Some(cluster) => {
                let meta = cluster.metadata();
                (meta.rev > 0).then(|| XdcrModel::parse_metadata(&meta.xdcr)).flatten()
            }
            None => Some(self.local.lock().clone()),
        }
    }

    /// Replaces the model cluster-wide (through Raft when the node has a cluster).
    pub async fn save(&self, node: &Node, model: &XdcrModel) -> Result<(), String> {
        let Some(cluster) = node.cluster() else {
            *self.local.lock() = model.clone();
            return Ok(());
        };
        let value = serde_json::to_value(model).map_err(|e| e.to_string())?;
        cluster.propose(MetaCommand::SetXdcr(value)).await.map(drop).map_err(|e| e.to_string())
    }

    fn status(&self, id: &str) -> Arc<Mutex<ReplStatus>> {
        self.statuses.lock().entry(id.to_owned()).or_default().clone()
    }

    /// Every replication of the model with this node's status of it (default when it never ran here).
    pub fn statuses(&self, node: &Node) -> Vec<(Replication, ReplStatus)> {
        self.model(node)
            .replications
            .into_iter()
            .map(|r| {
                let shared = self.statuses.lock().get(&r.id).cloned();
                let st = shared.map(|s| s.lock().clone()).unwrap_or_default();
                (r, st)
            })
            .collect()
    }

    /// The `"type":"xdcr"` entries of `/pools/default/tasks`, one per replication.
    pub fn task_entries(&self, node: &Node) -> Vec<Value> {
        self.statuses(node)
            .into_iter()
            .map(|(r, st)| {
                // Paused once the runner has stopped (and saved its checkpoints), not when the pause was asked.
                let status = if st.running {
                    "running"
                } else if r.settings.pause_requested {
                    "paused"
                } else {
                    "notRunning"
                };
                let enc = r.id.replace('/', "%2F");
                let errors: Vec<Value> = st.errors.iter().map(|e| json!(e)).collect();
                json!({
                    "type": "xdcr",
                    "id": r.id,
                    "status": status,
                    "source": r.source_bucket,
                    "target": format!("/remoteClusters/{}/buckets/{}", r.remote_uuid, r.target_bucket),
                    "continuous": true,
                    "replicationType": "xmem",
                    "filterExpression": r.settings.filter_expression,
                    "pauseRequested": r.settings.pause_requested,
                    "recommendedRefreshPeriod": 10,
                    "cancelURI": format!("/controller/cancelXDCR/{enc}"),
                    "settingsURI": format!("/settings/replications/{enc}"),
                    "changesLeft": st.changes_left,
                    "docsChecked": st.stats.changes_read(),
                    "docsWritten": st.stats.docs_written(),
                    "docsFiltered": st.stats.docs_filtered,
                    "docsFailedCrSource": st.stats.docs_failed_cr(),
                    "numCheckpoints": st.stats.checkpoints,
                    "errors": errors,
                })
            })
            .collect()
    }
}

/// Keeps one runner per unpaused replication whose remote is known, until `stopped`; then stops them all (each
/// saves its checkpoints).
pub async fn manage(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut running: HashMap<String, Running> = HashMap::new();
    // The checkpoint keys of the last model seen; None before the first, so files of replications deleted while
    // this node was down go at start.
    let mut known: Option<Vec<String>> = None;
    let dir = node.config.data_dir.join("xdcr");
    let mut tick = tokio::time::interval(MANAGE_EVERY);
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            _ = tick.tick() => {}
        }
        let model = node.xdcr.model(&node);
        let wanted: HashMap<&str, &Replication> = model
            .replications
            .iter()
            .filter(|r| !r.settings.pause_requested && model.remote_by_uuid(&r.remote_uuid).is_some())
            .map(|r| (r.id.as_str(), r))
            .collect();
        let gone: Vec<String> = running
            .iter()
            .filter(|(id, r)| {
                let same_remote = || model.remote_by_uuid(&r.spec.remote_uuid) == Some(&r.remote);
                wanted.get(id.as_str()).is_none_or(|w| **w != r.spec || !same_remote())
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(r) = running.remove(&id) {
                stop(r).await;
            }
        }
        let Some(authoritative) = node.xdcr.authoritative_model(&node) else { continue };
        // The checkpoints of each replication's current stream: those of deleted replications, and of streams a
        // re-stream replaced, go.
        let keys: Vec<String> = authoritative.replications.iter().map(Replication::checkpoint_key).collect();
        forget_deleted_checkpoints(&node, &keys).await;
        if known.as_ref() != Some(&keys) {
            // Runners of deleted or re-streamed replications stopped above: their checkpoints and counts go now.
            node.xdcr.statuses.lock().retain(|id, _| authoritative.replication(id).is_some());
            let removed = checkpoints::CheckpointStore::remove_others(&dir, keys.iter().map(String::as_str));
            if removed > 0 {
                tracing::info!(removed, "xdcr: checkpoints of deleted replications or replaced streams removed");
            }
            known = Some(keys);
        }
        for (id, spec) in wanted {
            if running.contains_key(id) {
                continue;
            }
            let Some(remote) = model.remote_by_uuid(&spec.remote_uuid).cloned() else { continue };
            let (stop_tx, stop_rx) = watch::channel(false);
            let status = node.xdcr.status(id);
            let task = tokio::spawn(runner::run(node.clone(), spec.clone(), remote.clone(), status, stop_rx));
            tracing::info!(replication = %id, "xdcr replication started");
            running.insert(id.to_owned(), Running { spec: spec.clone(), remote, stop: stop_tx, task });
        }
    }
    for (_, r) in running {
        stop(r).await;
    }
}

/// Drops the cluster-wide checkpoints of replications the model no longer has (a recreated replication starts
/// from zero, as Couchbase's does) and of streams a re-stream replaced (`keys`: the current streams'). Checked
/// every pass: a runner stopping as its replication is deleted may record its last checkpoints after a first
/// removal.
async fn forget_deleted_checkpoints(node: &Node, keys: &[String]) {
    let Some(cluster) = node.cluster() else { return };
    let meta = cluster.metadata();
    for id in meta.xdcr_checkpoints.keys().filter(|id| !keys.contains(id)) {
        let cmd = MetaCommand::ForgetXdcrCheckpoints { replication: id.clone() };
        match cluster.propose(cmd).await {
            Ok(_) => tracing::info!(replication = %id, "xdcr: checkpoints of a deleted replication dropped"),
            Err(e) => {
                tracing::warn!(replication = %id, error = %e, "xdcr: cannot drop a deleted replication's checkpoints")
            }
        }
    }
}

async fn stop(mut r: Running) {
    let _ = r.stop.send(true);
    if tokio::time::timeout(STOP_WAIT, &mut r.task).await.is_err() {
        // Aborted, so it cannot save a checkpoint after a cancel removed it, or run beside its replacement.
        tracing::warn!(replication = %r.spec.id, "xdcr runner did not stop in time; aborting it");
        r.task.abort();
        let _ = r.task.await;
    }
}
