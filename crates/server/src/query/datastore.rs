//! The query engine's view of this node: keyspaces are collections of the node's buckets, documents are read
//! and written through the engine (as KV requests are), and index scans read the node's `MemIndex`es.
//!
//! Every call blocks: the executor runs on the blocking pool. Index definitions change through the cluster
//! metadata; the calls that propose them wait on the runtime handle for the answer.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::{IndexKeySpec, IndexSpec, MetaCommand, MetaError, ProposeError};
use settee_engine::{DocKey, EngineError, StoreMode, StoreRequest, WriteOptions};
use settee_query::datastore::{
    BucketInfo, Consistency, CreateIndexRequest, Datastore, DocMeta, Document, Durability, Keyspace, KeyspaceName,
    Mutation, MutationKind, MutationOutcome, ScopeInfo,
};
use settee_query::index::{IndexDef, IndexEntry, IndexState, ScanRange};
use settee_query::value::Value;
use settee_query::{DmlReason, QueryError};
use settee_types::limits::NUM_VBUCKETS;
use settee_types::{vbucket_for_key, DurabilityLevel, VbId};

use super::indexes::{active_high_seqnos, BucketIndexes, IndexInstance, IndexRegistry};
use crate::auth::User;
use crate::node::{BucketHandle, Node};

/// The common flags Couchbase's query service stores documents with: JSON format (0x02 << 24) | 6.
pub const JSON_COMMON_FLAGS: u32 = 0x0200_0006;
/// How long a write waits out a temporary failure (warmup, memory, a sync write in progress) before failing.
const TEMP_FAIL_RETRY_MAX: Duration = Duration::from_secs(2);
/// How long a durable write waits for its level.
const DURABILITY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long CREATE INDEX waits for a new index to come online before answering anyway.
const CREATE_WAIT_MAX: Duration = Duration::from_secs(600);
/// Fetches retried after the item was read back from disk.
const FETCH_RETRIES_MAX: usize = 3;

/// The node as a query datastore, for one request's user.
pub struct NodeDatastore {
    pub node: Arc<Node>,
    pub registry: Arc<IndexRegistry>,
    pub user: Option<Arc<User>>,
    pub runtime: tokio::runtime::Handle,
}

impl NodeDatastore {
    /// The collection as this node holds it (only its own vBuckets), for peers' calls.
    pub fn local_keyspace(&self, name: &KeyspaceName) -> Result<BucketKeyspace, QueryError> {
        let handle = self
            .node
            .bucket(&name.bucket)
            .ok_or_else(|| QueryError::KeyspaceNotFound(format!("default:{}", name.bucket)))?;
        let cid = handle
            .manifest()
            .scope(&name.scope)
            .and_then(|s| s.collections.iter().find(|c| c.name == name.collection).map(|c| c.uid))
            .ok_or_else(|| QueryError::KeyspaceNotFound(name.display_path()))?;
        Ok(BucketKeyspace { name: name.clone(), handle, cid, indexes: self.registry.bucket(&name.bucket) })
    }

    fn visible(&self, bucket: &str) -> bool {
        match &self.user {
            None => true,
            Some(u) => {
                let a = u.bucket_access(bucket);
                let narrowed = || !u.scoped_grants(bucket).is_empty();
                u.is_admin()
                    || a.read
                    || a.write
                    || a.manage
                    || narrowed()
                    || super::auth::has_any_query_role(u, bucket)
            }
        }
    }

    fn propose(&self, cmd: MetaCommand) -> Result<(), ProposeError> {
        let Some(cluster) = self.node.cluster().cloned() else {
            return Err(ProposeError::Rejected(MetaError::UnknownBucket("no cluster".into())));
        };
        self.runtime.block_on(async move { cluster.propose(cmd).await.map(drop) })
    }

    fn index_specs(&self, bucket: &str) -> Vec<IndexSpec> {
        self.node
            .cluster()
            .and_then(|c| c.metadata().buckets.get(bucket).map(|b| b.indexes.values().cloned().collect()))
            .unwrap_or_default()
    }
}

fn propose_error(e: ProposeError) -> QueryError {
    match e {
        ProposeError::Rejected(MetaError::IndexExists(name)) => QueryError::IndexAlreadyExists(name),
        ProposeError::Rejected(MetaError::UnknownIndex(id)) => QueryError::IndexNotFound(id),
        ProposeError::Rejected(MetaError::UnknownBucket(b)) => QueryError::KeyspaceNotFound(format!("default:{b}")),
        ProposeError::Rejected(MetaError::UnknownCollection(c)) => QueryError::KeyspaceNotFound(format!("default:{c}")),
        e => QueryError::Datastore(format!("the cluster did not confirm the index change: {e}")),
    }
}

impl Datastore for NodeDatastore {
    fn keyspace(&self, name: &KeyspaceName) -> Result<Arc<dyn Keyspace>, QueryError> {
        let bucket_missing = || QueryError::KeyspaceNotFound(format!("default:{}", name.bucket));
        if !self.visible(&name.bucket) {
            return Err(bucket_missing());
        }
        let handle = self.node.bucket(&name.bucket).ok_or_else(bucket_missing)?;
        let manifest = handle.manifest();
        let scope = manifest
            .scope(&name.scope)
            .ok_or_else(|| QueryError::ScopeNotFound(format!("default:{}.{}", name.bucket, name.scope)))?;
        let cid = scope
            .collections
            .iter()
            .find(|c| c.name == name.collection)
            .map(|c| c.uid)
            .ok_or_else(|| QueryError::KeyspaceNotFound(name.display_path()))?;
        let local = BucketKeyspace { name: name.clone(), handle, cid, indexes: self.registry.bucket(&name.bucket) };
        Ok(super::routing::routed(local, &self.node, self.runtime.clone()))
    }

    fn buckets(&self) -> Vec<BucketInfo> {
        let mut out: Vec<BucketInfo> = self
            .node
            .buckets()
            .into_iter()
            .filter(|b| self.visible(&b.name()))
            .map(|b| BucketInfo {
                name: b.name(),
                scopes: b
                    .manifest()
                    .scopes
                    .iter()
                    .map(|s| ScopeInfo {
                        name: s.name.clone(),
                        collections: s.collections.iter().map(|c| c.name.clone()).collect(),
                    })
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn create_index(&self, request: CreateIndexRequest) -> Result<(), QueryError> {
        if !request.defer_build {
            // A deferred index holds nothing until BUILD INDEX, which checks the quota then.
            self.registry.check_memory("CreateIndex")?;
        }
        let def = request.def;
        let spec = IndexSpec {
            id: def.id.clone(),
            name: def.name.clone(),
            scope: def.keyspace.scope.clone(),
            collection: def.keyspace.collection.clone(),
            is_primary: def.is_primary,
            keys: def
                .keys
                .iter()
                .map(|k| IndexKeySpec {
                    expr: k.expr.clone(),
                    array: k.array.map(|a| {
                        if a == settee_query::ast::ArrayIndexKind::Distinct { "distinct" } else { "all" }.to_string()
                    }),
                    desc: k.desc,
                    include_missing: k.include_missing,
                })
                .collect(),
            condition: def.condition.clone(),
            partition: def.partition.clone(),
            num_replica: def.num_replica,
            deferred: request.defer_build,
        };
        self.propose(MetaCommand::CreateIndex { bucket: def.keyspace.bucket.clone(), index: spec })
            .map_err(propose_error)?;
        if request.defer_build {
            return Ok(());
        }
        // Couchbase answers a CREATE INDEX once the index is built, so the next query can use it: here and on
        // every other node that holds a part of it.
        let deadline = std::time::Instant::now() + CREATE_WAIT_MAX;
        while std::time::Instant::now() < deadline {
            let online = self
                .registry
                .bucket(&def.keyspace.bucket)
                .and_then(|b| b.instances.read().iter().find(|i| i.def.id == def.id).cloned())
                .is_some_and(|i| i.state() == IndexState::Online);
            if online && super::routing::online_on_peers(&self.node, &self.runtime, &def.keyspace.bucket, &def.id) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    fn drop_index(&self, keyspace: &KeyspaceName, name: &str) -> Result<(), QueryError> {
        let spec = self
            .index_specs(&keyspace.bucket)
            .into_iter()
            .find(|s| s.scope == keyspace.scope && s.collection == keyspace.collection && s.name == name)
            .ok_or_else(|| QueryError::IndexNotFound(name.to_string()))?;
        self.propose(MetaCommand::DropIndex { bucket: keyspace.bucket.clone(), id: spec.id }).map_err(propose_error)
    }

    fn build_indexes(&self, keyspace: &KeyspaceName, names: &[String]) -> Result<(), QueryError> {
        let specs = self.index_specs(&keyspace.bucket);
        let mut ids = Vec::new();
        for name in names {
            let spec = specs
                .iter()
                .find(|s| s.scope == keyspace.scope && s.collection == keyspace.collection && &s.name == name)
                .ok_or_else(|| QueryError::IndexNotFound(name.clone()))?;
            ids.push(spec.id.clone());
        }
        if ids.is_empty() {
            return Ok(());
        }
        self.registry.check_memory("BuildIndexes")?;
        self.propose(MetaCommand::BuildIndexes { bucket: keyspace.bucket.clone(), ids }).map_err(propose_error)
    }

    fn all_indexes(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)> {
        self.registry.all().into_iter().filter(|(ks, _, _)| self.visible(&ks.bucket)).collect()
    }
}

/// A collection of one of the node's buckets.
pub struct BucketKeyspace {
    pub(crate) name: KeyspaceName,
    pub(crate) handle: Arc<BucketHandle>,
    cid: u32,
    indexes: Option<Arc<BucketIndexes>>,
}

impl BucketKeyspace {
    /// The index definitions on this collection, with their state on this node.
    pub(crate) fn indexes_local(&self) -> Vec<(IndexDef, IndexState)> {
        self.indexes
            .as_ref()
            .map(|b| b.of_collection(self.cid).iter().map(|i| (i.def.clone(), i.state())).collect())
            .unwrap_or_default()
    }

    /// Whether the key's vBucket is active on this node.
    pub(crate) fn holds_key(&self, key: &str) -> bool {
        self.holds_vb(vbucket_for_key(key.as_bytes(), NUM_VBUCKETS).0)
    }

    pub(crate) fn holds_vb(&self, vb: u16) -> bool {
        self.handle.stream_info(VbId(vb)).is_ok_and(|i| i.state == settee_engine::VbState::Active)
    }

    /// Up to `limit` entries of this node's part of the index, only of `vbs`, after `after`; and the vBuckets
    /// of `vbs` it cannot answer for (not active here, or not read by the feeder yet).
    pub(crate) fn scan_vbs(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
        vbs: &[u16],
    ) -> Result<(Vec<IndexEntry>, Vec<u16>), QueryError> {
        let inst = self.instance(index)?;
        let (wanted, unavailable) = self.answerable(&inst, vbs);
        let mut out = Vec::new();
        let mut cursor = after.cloned();
        loop {
            let chunk = inst.mem.scan(range, cursor.as_ref(), limit);
            let done = chunk.len() < limit;
            cursor = chunk.last().cloned();
            out.extend(
                chunk.into_iter().filter(|e| wanted[usize::from(vbucket_for_key(e.doc_id.as_bytes(), NUM_VBUCKETS).0)]),
            );
            if done || out.len() >= limit {
                out.truncate(limit);
                return Ok((out, unavailable));
            }
        }
    }

    /// Which of `vbs` this node answers for (by vBucket number) and which it cannot answer for yet.
    fn answerable(&self, inst: &IndexInstance, vbs: &[u16]) -> (Vec<bool>, Vec<u16>) {
        let unavailable: Vec<u16> =
            vbs.iter().copied().filter(|&vb| !inst.is_ready(vb) || !self.holds_vb(vb)).collect();
        let mut wanted = vec![false; usize::from(NUM_VBUCKETS)];
        for &vb in vbs {
            if !unavailable.contains(&vb) {
                wanted[usize::from(vb)] = true;
            }
        }
        (wanted, unavailable)
    }

    /// The entries within `range` of this node's part of the index, only of `vbs`, and the vBuckets of `vbs` it
    /// cannot answer for.
    pub(crate) fn count_range_vbs(
        &self,
        index: &str,
        range: &ScanRange,
        vbs: &[u16],
    ) -> Result<(u64, Vec<u16>), QueryError> {
        let inst = self.instance(index)?;
        let (wanted, unavailable) = self.answerable(&inst, vbs);
        let n = count_in_chunks(&inst, range, |e| {
            wanted[usize::from(vbucket_for_key(e.doc_id.as_bytes(), NUM_VBUCKETS).0)]
        });
        Ok((n, unavailable))
    }

    /// The entries of `vbs` in this node's part of the index, and the vBuckets it cannot count.
    pub(crate) fn count_vbs(&self, index: &str, vbs: &[u16]) -> Result<(u64, Vec<u16>), QueryError> {
        let inst = self.instance(index)?;
        let unavailable: Vec<u16> =
            vbs.iter().copied().filter(|&vb| !inst.is_ready(vb) || !self.holds_vb(vb)).collect();
        // Only the vBuckets asked for: a vBucket that just left this node may still have entries here until the
        // feeder notices, and its new node counts it.
        Ok((inst.mem.len_in(vbs), unavailable))
    }

    /// Waits for this node's part of an index.
    pub(crate) fn wait_local(
        &self,
        index: &str,
        consistency: &Consistency,
        timeout: Duration,
    ) -> Result<(), QueryError> {
        let inst = self.instance(index)?;
        let targets: Vec<(u16, u64)> = match consistency {
            Consistency::NotBounded => return Ok(()),
            Consistency::RequestPlus => active_high_seqnos(&self.handle),
            Consistency::AtPlus(vector) => vector
                .iter()
                .filter(|(bucket, ..)| bucket.is_empty() || *bucket == self.name.bucket)
                .map(|(_, vb, seqno, _)| (*vb, *seqno))
                .filter(|(vb, _)| self.holds_vb(*vb))
                .collect(),
        };
        if inst.mem.wait_applied(&targets, timeout) {
            Ok(())
        } else {
            Err(QueryError::IndexScanTimeout)
        }
    }

    fn instance(&self, index: &str) -> Result<Arc<IndexInstance>, QueryError> {
        self.indexes
            .as_ref()
            .and_then(|b| b.find(self.cid, index))
            .ok_or_else(|| QueryError::IndexNotFound(index.to_string()))
    }

    /// Reads one document; `None` when it does not exist.
    pub(crate) fn get(&self, key: &Arc<str>) -> Result<Option<Document>, QueryError> {
        let vb = vbucket_for_key(key.as_bytes(), NUM_VBUCKETS);
        let dk = DocKey::new(self.cid, key.as_bytes());
        for _ in 0..=FETCH_RETRIES_MAX {
            // The body is copied out and parsed after the vBucket lock is released: parsing under it held up
            // every KV operation on the vBucket (a quarter of a scan's CPU went to parsing).
            let r = self.handle.get(vb, &dk, |view| {
                let (body, datatype) = view.body();
                let meta =
                    DocMeta { cas: view.cas, expiration: view.expiry, flags: view.flags, is_json: datatype.is_json() };
                (body.to_vec(), meta)
            });
            match r {
                Ok((body, meta)) => {
                    let value = if meta.is_json {
                        Value::from_json(&body).unwrap_or_else(|_| Value::Binary(Arc::from(body)))
                    } else {
                        Value::Binary(Arc::from(body))
                    };
                    return Ok(Some(Document { key: key.clone(), value, meta }));
                }
                Err(EngineError::NotFound) | Err(EngineError::NotMyVbucket) => return Ok(None),
                Err(EngineError::NeedFetch) => self.fetch_from_disk(vb, &dk)?,
                Err(EngineError::Locked) => return Ok(None),
                Err(e) => return Err(QueryError::Datastore(format!("cannot read {key}: {e}"))),
            }
        }
        Err(QueryError::Datastore(format!("cannot read {key}: it keeps leaving memory")))
    }

    fn fetch_from_disk(&self, vb: VbId, key: &DocKey<'_>) -> Result<(), QueryError> {
        let Some(p) = &self.handle.persistence else { return Ok(()) };
        let found =
            p.store.get(vb, key.encoded()).map_err(|e| QueryError::Datastore(format!("cannot read from disk: {e}")))?;
        self.handle.complete_fetch(vb, key.encoded(), found.map(|r| crate::persistence::snapshot_of(r, true)));
        Ok(())
    }

    pub(crate) fn write(&self, m: &Mutation) -> Result<MutationOutcome, QueryError> {
        let op = match m.kind {
            MutationKind::Insert => "INSERT",
            MutationKind::Upsert => "UPSERT",
            MutationKind::Replace { .. } => "UPDATE",
            MutationKind::Delete { .. } => "DELETE",
        };
        let fail = |reason| QueryError::Dml { op, key: m.key.to_string(), reason };
        let vb = vbucket_for_key(m.key.as_bytes(), NUM_VBUCKETS);
        let dk = DocKey::new(self.cid, m.key.as_bytes());
        let durability = match m.durability {
            Durability::None => None,
            Durability::Majority => Some(DurabilityLevel::Majority),
            Durability::MajorityAndPersistActive => Some(DurabilityLevel::MajorityAndPersistActive),
            Durability::PersistToMajority => Some(DurabilityLevel::PersistToMajority),
        };
        let body = if matches!(m.kind, MutationKind::Delete { .. }) {
            Vec::new()
        } else {
            m.value.to_json_string().into_bytes()
        };
        let started = std::time::Instant::now();
        loop {
            let r = match m.kind {
                MutationKind::Delete { cas } => {
                    let opts = WriteOptions { cas, durability, preserve_ttl: false };
                    self.handle.delete(vb, &dk, opts)
                }
                _ => {
                    let (mode, cas) = match m.kind {
                        MutationKind::Insert => (StoreMode::Add, 0),
                        MutationKind::Upsert => (StoreMode::Set, 0),
                        MutationKind::Replace { cas } => (StoreMode::Replace, cas),
                        MutationKind::Delete { .. } => unreachable!("handled above"),
                    };
                    let opts = WriteOptions { cas, durability, preserve_ttl: m.preserve_expiry };
                    let req = StoreRequest {
                        mode,
                        value: &body,
                        flags: m.flags.unwrap_or(JSON_COMMON_FLAGS),
                        expiry: m.expiration,
                        opts,
                    };
                    self.handle.store(vb, &dk, req)
                }
            };
            match r {
                Ok(result) => {
                    if result.sync_write {
                        self.wait_durable(vb, result.seqno)
                            .map_err(|e| fail(DmlReason::Other(format!("durable write failed: {e}"))))?;
                    }
                    return Ok(MutationOutcome { cas: result.cas });
                }
                Err(EngineError::Exists) if matches!(m.kind, MutationKind::Insert) => {
                    return Err(fail(DmlReason::DuplicateKey))
                }
                Err(EngineError::Exists | EngineError::CasMismatch) => return Err(fail(DmlReason::CasMismatch)),
                Err(EngineError::NotFound) => return Err(fail(DmlReason::KeyNotFound)),
                Err(EngineError::TempFail | EngineError::SyncWriteInProgress | EngineError::NeedFetch)
                    if started.elapsed() < TEMP_FAIL_RETRY_MAX =>
                {
                    if let (Err(EngineError::NeedFetch), true) = (&r, true) {
                        self.fetch_from_disk(vb, &dk)?;
                    } else {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                Err(e) => return Err(fail(DmlReason::Other(e.to_string()))),
            }
        }
    }

    /// Blocks until the prepare at `seqno` commits (or aborts it after the durability timeout).
    fn wait_durable(&self, vb: VbId, seqno: u64) -> Result<(), EngineError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.when_sync_write_completes(
            vb,
            seqno,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        match rx.recv_timeout(DURABILITY_TIMEOUT) {
            Ok(r) => r,
            Err(_) => {
                self.handle.abort_prepare(vb, seqno);
                Err(EngineError::SyncWriteAmbiguous)
            }
        }
    }
}

impl Keyspace for BucketKeyspace {
    fn name(&self) -> &KeyspaceName {
        &self.name
    }

    fn fetch(&self, keys: &[Arc<str>]) -> Result<Vec<Option<Document>>, QueryError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    fn count(&self) -> Result<u64, QueryError> {
        let primary = self
            .indexes
            .as_ref()
            .map(|b| b.of_collection(self.cid))
            .unwrap_or_default()
            .into_iter()
            .find(|i| i.def.is_primary && i.state() == IndexState::Online);
        match primary {
            Some(p) => Ok(p.mem.len() as u64),
            None => Err(QueryError::NoPrimaryIndex(self.name.display_path())),
        }
    }

    fn mutate(&self, m: &Mutation) -> Result<MutationOutcome, QueryError> {
        self.write(m)
    }

    fn indexes(&self) -> Vec<(IndexDef, IndexState)> {
        self.indexes_local()
    }

    fn scan(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<IndexEntry>, QueryError> {
        Ok(self.instance(index)?.mem.scan(range, after, limit))
    }

    fn count_range(&self, index: &str, range: &ScanRange) -> Result<u64, QueryError> {
        let inst = self.instance(index)?;
        Ok(count_in_chunks(&inst, range, |_| true))
    }

    fn wait_for(&self, index: &str, consistency: &Consistency, deadline_nanos: i64) -> Result<(), QueryError> {
        let now = settee_types::Clock::now_nanos(&settee_types::SystemClock) as i64;
        let timeout = Duration::from_nanos(deadline_nanos.saturating_sub(now).max(0) as u64);
        self.wait_local(index, consistency, timeout)
    }
}

/// Entries counted per hold of the index's lock: a count never holds the feeder off for longer than one chunk.
const COUNT_CHUNK: usize = 4096;

/// The entries within `range` that `counted` accepts, read a chunk at a time.
fn count_in_chunks(inst: &IndexInstance, range: &ScanRange, counted: impl Fn(&IndexEntry) -> bool) -> u64 {
    let mut n = 0u64;
    let mut cursor: Option<IndexEntry> = None;
    loop {
        let chunk = inst.mem.scan(range, cursor.as_ref(), COUNT_CHUNK);
        n += chunk.iter().filter(|e| counted(e)).count() as u64;
        if chunk.len() < COUNT_CHUNK {
            return n;
        }
        cursor = chunk.last().cloned();
    }
}
