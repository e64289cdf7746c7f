//! The thin async driver of one replication on this node: feeds the `settee_xdcr::Replicator` core with the
//! changes of the source bucket's vBuckets active here, the writers' replies and the clock, and carries out its
//! commands (open a cursor, send a batch, save checkpoints, refresh the target map). Each node replicates its own
//! active vBuckets, so a replication scales with the source cluster and follows rebalance and failover: a vBucket
//! that stops being active here is dropped, one that becomes active is read from this node's checkpoint.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use settee_cluster::MetaCommand;
use settee_engine::{Manifest, VbState};
use settee_types::{limits::NUM_VBUCKETS, VbId};
use settee_xdcr::{Change, Command, Event, Replicator, Settings, Stats};
use tokio::sync::{mpsc, watch};

use super::checkpoints::CheckpointStore;
use super::filter::{DocInput, Filters};
use super::migration::MigrationRules;
use super::model::{RemoteCluster, Replication};
use super::source::{self, VbRead};
use super::target::Target;
use super::writer::WriterReport;
use crate::node::{BucketHandle, Node};

const TICK: Duration = Duration::from_millis(100);
/// Active vBuckets are looked for, counts published and a failed map refresh retried this often.
const SCAN_EVERY: Duration = Duration::from_secs(1);
/// Bytes of keys and values read from one vBucket per read, and from all of them per round.
const VB_READ_BYTES: usize = 256 << 10;
const ROUND_READ_BYTES: usize = 2 << 20;
/// Replies the writers may queue for the runner (each node's window bounds them anyway).
const REPORTS_MAX: usize = 65_536;
/// The longest wait between two failed map refreshes (the target unreachable or refusing).
const REFRESH_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Errors kept for the task list.
const ERRORS_KEPT: usize = 10;

/// What the task list and the stats show of one replication on this node.
#[derive(Clone, Debug, Default)]
pub struct ReplStatus {
    pub running: bool,
    pub stats: Stats,
    /// Source seqnos not yet on the target, over this node's active vBuckets (Couchbase's `changesLeft`).
    pub changes_left: u64,
    /// Recent errors, oldest first.
    pub errors: Vec<String>,
    /// The mean time from a write's send to its reply over the last second with replies, in milliseconds
    /// (goxdcr's `wtavg_docs_latency`).
    pub docs_latency_ms: f64,
    /// Writes the core holds (queued, in flight, waiting to retry or for a map) and their bytes of keys and values
    /// (goxdcr's `docs_rep_queue`, `size_rep_queue`); bounded by `Settings::pending_max` / `pending_bytes_max`.
    pub queue_docs: u64,
    pub queue_bytes: u64,
}

impl ReplStatus {
    fn error(&mut self, e: String) {
        if self.errors.len() >= ERRORS_KEPT {
            self.errors.remove(0);
        }
        self.errors.push(e);
    }
}

/// The source bucket's collection names by id, rebuilt only when the manifest changes: the runner reads the
/// manifest once per batch and looks each change's collection up here.
#[derive(Default)]
struct SourceNames {
    uid: Option<u64>,
    names: HashMap<u32, (String, String)>,
}

impl SourceNames {
    fn refresh(&mut self, manifest: &Manifest) {
        if self.uid == Some(manifest.uid) {
            return;
        }
        self.names = manifest
            .scopes
            .iter()
            .flat_map(|s| s.collections.iter().map(move |c| (c.uid, (s.name.clone(), c.name.clone()))))
            .collect();
        self.uid = Some(manifest.uid);
    }

    /// `(scope, collection)` of collection `id`; None for a dropped one.
    fn get(&self, id: u32) -> Option<&(String, String)> {
        self.names.get(&id)
    }
}

struct Runner {
    node: Arc<Node>,
    bucket: Arc<BucketHandle>,
    spec: Replication,
    core: Replicator,
    store: CheckpointStore,
    target: Target,
    /// Source vBucket → (cursor, position read up to).
    reading: BTreeMap<u16, (u64, u64)>,
    /// vBuckets with more to read than the last read took.
    behind: BTreeSet<u16>,
    reports: mpsc::Sender<WriterReport>,
    need_map: bool,
    /// Failed map refreshes in a row, and when the next may be tried.
    refresh_failures: u32,
    refresh_after: Duration,
    status: Arc<Mutex<ReplStatus>>,
    /// Stats counted before this run (the core starts at zero each run).
    base: Stats,
    /// The replication's filters (`filterExpression` compiled once) and, in migration mode, its rules.
    filters: Filters,
    migration: Option<MigrationRules>,
    /// Changes the filters left out this run.
    filtered: u64,
    source_names: SourceNames,
    /// Replies since the last publication and their summed latency.
    replies: u64,
    latency_sum: Duration,
}

fn now(node: &Node) -> Duration {
    node.clock.monotonic()
}

/// Runs replication `spec` to `remote` until `stop` turns true; saves checkpoints before returning.
pub async fn run(
    node: Arc<Node>,
    spec: Replication,
    remote: RemoteCluster,
    status: Arc<Mutex<ReplStatus>>,
    mut stop: watch::Receiver<bool>,
) {
    let bucket = loop {
        if let Some(b) = node.bucket(&spec.source_bucket) {
            break b;
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(SCAN_EVERY) => {}
        }
    };
    let (mut r, mut replies) = Runner::new(node, bucket, spec, remote, status);
    r.serve(&mut replies, &mut stop).await;
    r.core.checkpoint_now(now(&r.node));
    r.execute().await;
    for (&vb, &(cursor, _)) in &r.reading {
        r.bucket.close_cursor(VbId(vb), cursor);
    }
    r.publish();
    // What the core held is dropped with it (read again from the checkpoints next run), as goxdcr clears its
    // queue statistics for a paused replication.
    let mut st = r.status.lock();
    (st.running, st.queue_docs, st.queue_bytes) = (false, 0, 0);
}

impl Runner {
    fn new(
        node: Arc<Node>,
        bucket: Arc<BucketHandle>,
        spec: Replication,
        remote: RemoteCluster,
        status: Arc<Mutex<ReplStatus>>,
    ) -> (Runner, mpsc::Receiver<WriterReport>) {
        let dir = node.config.data_dir.join("xdcr");
        let store = CheckpointStore::open(&dir, &spec.checkpoint_key());
        let settings = Settings {
            batch_count: spec.settings.worker_batch_size as usize,
            checkpoint_interval: Duration::from_secs(spec.settings.checkpoint_interval),
            ..Settings::default()
        };
        let window = settings.inflight_per_node_max;
        let core = Replicator::new(settings, store.checkpoints(), now(&node));
        let (reports, replies) = mpsc::channel(REPORTS_MAX);
        let target = Target::new(remote, spec.target_bucket.clone(), window);
        let base = {
            let mut st = status.lock();
            st.running = true;
            st.stats
        };
        let filters = Filters::new(&spec.settings, &spec.id);
        let migration = spec
            .settings
            .collections_migration_mode
            .then(|| MigrationRules::compile(&spec.settings.col_mapping_rules, &spec.id));
        let r = Runner {
            filters,
            migration,
            source_names: SourceNames::default(),
            replies: 0,
            latency_sum: Duration::ZERO,
            filtered: 0,
            node,
            bucket,
            spec,
            core,
            store,
            target,
            reading: BTreeMap::new(),
            behind: BTreeSet::new(),
            reports,
            need_map: true,
            refresh_failures: 0,
            refresh_after: Duration::ZERO,
            status,
            base,
        };
        (r, replies)
    }

    /// The event loop: replies, source wake-ups and the tick, until `stop`.
    async fn serve(&mut self, replies: &mut mpsc::Receiver<WriterReport>, stop: &mut watch::Receiver<bool>) {
        let waker = self.bucket.dcp_hub.subscribe();
        for vb in 0..NUM_VBUCKETS {
            waker.interested.insert(VbId(vb));
        }
        let mut tick = tokio::time::interval(TICK);
        let mut last_scan: Option<Duration> = None;
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                report = replies.recv() => {
                    let Some(report) = report else { return };
                    self.on_report(report);
                    while let Ok(more) = replies.try_recv() {
                        self.on_report(more);
                    }
                }
                _ = waker.notify.notified() => {
                    let vbs: Vec<u16> = waker.pending.take().into_iter().map(|v| v.0).collect();
                    self.read(vbs).await;
                }
                _ = tick.tick() => {
                    let t = now(&self.node);
                    self.handle(Event::Tick);
                    let vbs: Vec<u16> = if last_scan.is_none_or(|s| t.saturating_sub(s) >= SCAN_EVERY) {
                        last_scan = Some(t);
                        if self.need_map {
                            self.refresh_map().await;
                        }
                        self.scan_actives();
                        self.publish();
                        // Once a second every vBucket, in case a wake-up was missed.
                        self.reading.keys().copied().collect()
                    } else {
                        self.behind.iter().copied().collect()
                    };
                    self.read(vbs).await;
                }
            }
            self.execute().await;
        }
    }

    fn handle(&mut self, event: Event) {
        let vb = match &event {
            Event::Snapshot { vb, .. } | Event::Change { vb, .. } | Event::SnapshotDone { vb } => Some(*vb),
            _ => None,
        };
        if let Err(e) = self.core.handle(now(&self.node), event) {
            tracing::warn!(replication = %self.spec.id, error = %e, "xdcr: reading restarts from the checkpoint");
            if let Some(vb) = vb {
                self.stop_vb(vb);
            }
        }
    }

    fn stop_vb(&mut self, vb: u16) {
        self.behind.remove(&vb);
        if let Some((cursor, _)) = self.reading.remove(&vb) {
            self.bucket.close_cursor(VbId(vb), cursor);
        }
        let _ = self.core.handle(now(&self.node), Event::VbStopped { vb });
    }

    fn on_report(&mut self, report: WriterReport) {
        match report {
            WriterReport::Reply { generation, node, id, outcome, latency } if generation == self.target.generation => {
                self.replies += 1;
                self.latency_sum += latency;
                self.handle(Event::Reply { node, id, outcome });
            }
            WriterReport::Observed { generation, vb, probe, answer } if generation == self.target.generation => {
                self.handle(match answer {
                    Some((vbuuid, persisted, current)) => Event::Observed { vb, probe, vbuuid, persisted, current },
                    None => Event::ObserveRefused { vb, probe },
                });
            }
            WriterReport::Down { generation, node } if generation == self.target.generation => {
                tracing::info!(replication = %self.spec.id, node, "xdcr: a target node connection broke");
                self.status.lock().error(format!("connection to target node {node} broke"));
                self.target.disconnect();
                self.handle(Event::NodeDown { node });
            }
            _ => {}
        }
    }

    /// Starts reading the vBuckets that became active here and stops those that no longer are.
    fn scan_actives(&mut self) {
        if self.bucket.is_warming_up() || self.bucket.is_deleted() {
            return;
        }
        let key = self.spec.checkpoint_key();
        for vb in 0..NUM_VBUCKETS {
            // The state alone each scan; the failover log is copied only for a vBucket that starts.
            let active = self.bucket.vbucket(VbId(vb)).is_some_and(|v| v.state() == VbState::Active);
            let reading = self.reading.contains_key(&vb);
            if active && !reading {
                let Some(i) = self.bucket.stream_info(VbId(vb)).ok().filter(|i| i.state == VbState::Active) else {
                    continue;
                };
                let (failover, high_seqno, purge_seqno) = (i.failover, i.high_seqno, i.purge_seqno);
                // The cluster's record of it (its last owner's, if it moved here) beside this node's file: the core
                // keeps the one further on, and checks it against the failover log as the vBucket starts.
                let recorded = self
                    .node
                    .cluster()
                    .and_then(|c| c.metadata().xdcr_checkpoints.get(&key).and_then(|m| m.get(&vb).copied()));
                if let Some((vbuuid, seqno)) = recorded {
                    self.core.offer_checkpoint(settee_xdcr::Checkpoint { vb, vbuuid, seqno });
                }
                self.handle(Event::VbStarted { vb, failover, high_seqno, purge_seqno });
            } else if !active && reading {
                self.stop_vb(vb);
            }
        }
    }

    /// Asks the target for its map, unless a failed attempt's backoff (1 s doubling to 30 s) has not elapsed.
    async fn refresh_map(&mut self) {
        let t = now(&self.node);
        if t < self.refresh_after {
            return;
        }
        match self.target.refresh(&self.reports).await {
            Ok(map) => {
                self.need_map = false;
                self.refresh_failures = 0;
                // Connected again: the errors that led here are over, as goxdcr clears a replication's errors once
                // its pipeline runs again (the task list shows no stale error for a replication that recovered).
                self.status.lock().errors.clear();
                for node in 0..map.previous_nodes {
                    let _ = self.core.handle(now(&self.node), Event::NodeDown { node });
                }
                self.handle(Event::Map { vbuckets: map.vbuckets, nodes: map.nodes });
            }
            Err(e) => {
                self.refresh_failures = self.refresh_failures.saturating_add(1);
                let backoff = (SCAN_EVERY * (1 << self.refresh_failures.min(5))).min(REFRESH_BACKOFF_MAX);
                self.refresh_after = t + backoff;
                tracing::warn!(replication = %self.spec.id, error = %e, retry_in = ?backoff, "xdcr: target map refresh failed");
                self.status.lock().error(e);
            }
        }
    }

    /// Reads what is new in `vbs` (those being read) while the core accepts more and the target is connected: one
    /// trip to the blocking pool per round, at most `ROUND_READ_BYTES` of changes. A vBucket whose read stopped
    /// at its byte budget is remembered as behind and read again at the next tick.
    async fn read(&mut self, vbs: Vec<u16>) {
        if !self.target.connected() || !self.core.accepting() {
            // Not now (back-pressure, or no target): the next tick tries these again, not only the next scan.
            self.behind.extend(vbs.into_iter().filter(|vb| self.reading.contains_key(vb)));
            return;
        }
        let wanted: Vec<(u16, u64, u64)> = vbs
            .iter()
            .filter_map(|vb| self.reading.get(vb).map(|&(cursor, position)| (*vb, cursor, position)))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let b = self.bucket.clone();
        let reads = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let mut budget = ROUND_READ_BYTES;
            for (vb, cursor, position) in wanted {
                if budget == 0 {
                    out.push((vb, None));
                    continue;
                }
                let read = source::read(&b, vb, cursor, position, VB_READ_BYTES.min(budget));
                if let VbRead::Read { pieces, .. } = &read {
                    let bytes: usize = pieces.iter().flat_map(|p| &p.changes).map(|c| c.bytes()).sum();
                    budget = budget.saturating_sub(bytes);
                }
                out.push((vb, Some(read)));
            }
            out
        })
        .await
        .unwrap_or_default();
        for (vb, read) in reads {
            match read {
                None => {
                    self.behind.insert(vb);
                }
                Some(VbRead::Lost) => self.stop_vb(vb),
                Some(VbRead::Failed) => {
                    self.behind.insert(vb);
                }
                Some(VbRead::Read { pieces, position: next }) => {
                    let full =
                        pieces.iter().flat_map(|p| &p.changes).map(|c| c.bytes()).sum::<usize>() >= VB_READ_BYTES;
                    if !self.deliver(vb, pieces).await {
                        // The target cannot map collections now: read again from the same position later.
                        self.behind.insert(vb);
                        continue;
                    }
                    if let Some(slot) = self.reading.get_mut(&vb) {
                        slot.1 = next;
                    }
                    if full {
                        self.behind.insert(vb);
                    } else {
                        self.behind.remove(&vb);
                    }
                }
            }
        }
    }

    /// Maps each change's collection to the target's (one copy per target collection in migration mode) and hands
    /// the pieces to the core; false (nothing handed) when the target cannot be asked.
    async fn deliver(&mut self, vb: u16, pieces: Vec<source::Piece>) -> bool {
        self.source_names.refresh(&self.bucket.manifest());
        let mut mapped = Vec::with_capacity(pieces.len());
        for p in pieces {
            let mut changes = Vec::with_capacity(p.changes.len());
            for c in p.changes {
                let reads_doc = self.filters.needs_document(&c)
                    || (c.collection == 0 && self.migration.as_ref().is_some_and(|m| m.needs_document(&c)));
                let doc = reads_doc.then(|| DocInput::of(&c));
                if !self.filters.passes(&c, doc.as_ref()) {
                    self.filtered += 1;
                    continue; // Left out: the core never sees it, and its snapshot still ends where it did.
                }
                let Some((scope, collection)) = self.source_names.get(c.collection) else {
                    continue; // A dropped collection's change.
                };
                let paths = self.target_paths(&c, scope, collection, doc.as_ref());
                let mut ids: Vec<u32> = Vec::with_capacity(paths.len());
                for path in paths {
                    match self.target.collection_id(&path).await {
                        Ok(Some(id)) if !ids.contains(&id) => ids.push(id),
                        Ok(_) => {} // The target has no such collection (or it was named twice).
                        Err(_) => {
                            self.need_map = true;
                            return false;
                        }
                    }
                }
                // Copies of one change follow each other with its seqno: the core counts each as a write.
                if let Some((&last, others)) = ids.split_last() {
                    for &id in others {
                        changes.push(Change { collection: id, ..c.clone() });
                    }
                    changes.push(Change { collection: last, ..c });
                }
            }
            mapped.push((p.start, p.end, changes));
        }
        for (start, end, changes) in mapped {
            self.handle(Event::Snapshot { vb, start, end });
            for change in changes {
                self.handle(Event::Change { vb, change });
            }
            self.handle(Event::SnapshotDone { vb });
            if !self.reading.contains_key(&vb) {
                break; // The core refused a change: the vBucket restarts from its checkpoint.
            }
        }
        true
    }

    /// The target collections (`scope.collection`) of a change of source collection `scope.collection`: the same
    /// name (implicit mapping), the explicit rules' choice, or in migration mode the rules the document matches
    /// (the default collection only); empty when it is not replicated.
    fn target_paths(&self, c: &Change, scope: &str, collection: &str, doc: Option<&DocInput>) -> Vec<String> {
        let s = &self.spec.settings;
        if let Some(migration) = &self.migration {
            if c.collection != 0 {
                return Vec::new(); // Migration mode replicates the default collection only.
            }
            return migration.targets(c, doc).into_iter().map(str::to_owned).collect();
        }
        if s.collections_explicit_mapping {
            return s.col_mapping_rules.target(scope, collection).into_iter().collect();
        }
        vec![format!("{scope}.{collection}")]
    }

    /// Carries out the core's commands until it has none left.
    async fn execute(&mut self) {
        loop {
            let cmds = self.core.take_commands();
            if cmds.is_empty() {
                return;
            }
            for cmd in cmds {
                match cmd {
                    Command::Read { vb, from } => {
                        if let Some((old, _)) = self.reading.remove(&vb) {
                            self.bucket.close_cursor(VbId(vb), old);
                        }
                        match self.bucket.open_cursor(VbId(vb), from) {
                            Ok(cursor) => {
                                self.reading.insert(vb, (cursor, from));
                            }
                            Err(_) => {
                                let _ = self.core.handle(now(&self.node), Event::VbStopped { vb });
                            }
                        }
                    }
                    Command::Send { node, writes } => {
                        if !self.target.send(node, writes) {
                            self.target.disconnect();
                            self.handle(Event::NodeDown { node });
                        }
                    }
                    Command::SaveCheckpoints(saved) => {
                        if let Err(e) = self.store.save(&saved) {
                            tracing::error!(replication = %self.spec.id, error = %e, "xdcr: saving checkpoints failed");
                        }
                        self.share_checkpoints(&saved);
                    }
                    Command::Observe { node, vb, probe } => {
                        if !self.target.observe(node, vb, probe) {
                            self.target.disconnect();
                            self.handle(Event::NodeDown { node });
                        }
                    }
                    Command::RefreshMap => {
                        self.need_map = true;
                    }
                }
            }
        }
    }

    /// Records `saved` in the cluster metadata too, in the background (a failed proposal is logged: this node's file
    /// still has them, and the next save carries them again only if they move).
    fn share_checkpoints(&self, saved: &[settee_xdcr::Checkpoint]) {
        let Some(cluster) = self.node.cluster().cloned() else { return };
        let vbuckets = saved.iter().map(|c| (c.vb, (c.vbuuid, c.seqno))).collect();
        let cmd = MetaCommand::SaveXdcrCheckpoints { replication: self.spec.checkpoint_key(), vbuckets };
        let id = self.spec.id.clone();
        tokio::spawn(async move {
            if let Err(e) = cluster.propose(cmd).await {
                tracing::warn!(replication = %id, error = %e, "xdcr: checkpoints not recorded cluster-wide");
            }
        });
    }

    /// Copies the core's counts, the changes left and the latency of the replies since the last call into the status
    /// the REST layer reads.
    fn publish(&mut self) {
        let mut left = 0u64;
        for &vb in self.reading.keys() {
            if let (Some(v), Some(through)) = (self.bucket.vbucket(VbId(vb)), self.core.through(vb)) {
                left += v.high_seqno().saturating_sub(through);
            }
        }
        let s = self.core.stats();
        let b = self.base;
        let latency_ms = (self.replies > 0).then(|| self.latency_sum.as_secs_f64() * 1000.0 / self.replies as f64);
        (self.replies, self.latency_sum) = (0, Duration::ZERO);
        let mut st = self.status.lock();
        st.changes_left = left;
        if let Some(ms) = latency_ms {
            st.docs_latency_ms = ms;
        }
        st.queue_docs = self.core.held() as u64;
        st.queue_bytes = self.core.held_bytes() as u64;
        st.stats = b.plus(&Stats { docs_filtered: self.filtered, ..s });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the collection names are read from the manifest once per manifest uid: a collection created later
    /// is found after the manifest changed, and a lookup between changes does not need the manifest.
    #[test]
    fn source_names_are_rebuilt_only_when_the_manifest_changes() {
        let mut m = Manifest::default();
        let mut names = SourceNames::default();
        names.refresh(&m);
        assert_eq!(names.get(0), Some(&("_default".to_owned(), "_default".to_owned())));
        m.create_scope("inventory").unwrap();
        m.create_collection("inventory", "hotels", None, false).unwrap();
        let id = m.scopes.iter().flat_map(|s| &s.collections).find(|c| c.name == "hotels").unwrap().uid;
        assert_eq!(names.get(id), None, "not refreshed yet");
        names.refresh(&m);
        assert_eq!(names.get(id), Some(&("inventory".to_owned(), "hotels".to_owned())));
        let before = names.uid;
        names.refresh(&m);
        assert_eq!(names.uid, before);
    }
}
