//! `MemDatastore`: a datastore held in maps, always consistent, for the crate's tests and the statement corpus.
//! Its indexes are real `MemIndex`es kept up to date by every mutation (secondary ones through their `KeyPlan`);
//! stored and listed but not maintained.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{
    BucketInfo, CreateIndexRequest, Datastore, DocMeta, Document, Keyspace, KeyspaceName, Mutation, MutationKind,
    MutationOutcome, ScopeInfo,
};
use crate::datastore::Consistency;
use crate::index::{Change, IndexDef, IndexEntry, IndexState, MemIndex, ScanRange};
use crate::value::Value;
use crate::{DmlReason, QueryError};

struct Collection {
    docs: BTreeMap<Arc<str>, (Value, DocMeta)>,
    indexes: Vec<(IndexDef, IndexState, Arc<MemIndex>)>,
    /// The compiled keys of each secondary index, by index name.
    plans: std::collections::HashMap<String, Arc<crate::index::KeyPlan>>,
    seqno: u64,
}

#[derive(Default)]
struct State {
    collections: BTreeMap<KeyspaceName, Collection>,
    cas: u64,
}

/// An in-memory datastore.
#[derive(Default)]
pub struct MemDatastore {
    state: Arc<Mutex<State>>,
}

impl MemDatastore {
    pub fn new() -> MemDatastore {
        MemDatastore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an empty collection (and so its bucket and scope).
    pub fn add_collection(&self, name: &KeyspaceName) {
        self.lock().collections.entry(name.clone()).or_insert_with(|| Collection {
            docs: BTreeMap::new(),
            indexes: Vec::new(),
            plans: Default::default(),
            seqno: 0,
        });
    }

    /// Stores a document as it is, outside any statement.
    pub fn put(&self, name: &KeyspaceName, key: &str, value: Value) {
        self.add_collection(name);
        let ks = MemKeyspace { name: name.clone(), state: self.state.clone() };
        let m = Mutation {
            kind: MutationKind::Upsert,
            key: Arc::from(key),
            value,
            expiration: 0,
            preserve_expiry: false,
            flags: None,
            durability: Default::default(),
        };
        // Upserts into an existing collection cannot fail.
        let _ = ks.mutate(&m);
    }
}

impl Datastore for MemDatastore {
    fn keyspace(&self, name: &KeyspaceName) -> Result<Arc<dyn Keyspace>, QueryError> {
        let state = self.lock();
        if state.collections.contains_key(name) {
            return Ok(Arc::new(MemKeyspace { name: name.clone(), state: self.state.clone() }));
        }
        if !state.collections.keys().any(|k| k.bucket == name.bucket) {
            return Err(QueryError::KeyspaceNotFound(format!("default:{}", name.bucket)));
        }
        if !state.collections.keys().any(|k| k.bucket == name.bucket && k.scope == name.scope) {
            return Err(QueryError::ScopeNotFound(format!("default:{}.{}", name.bucket, name.scope)));
        }
        Err(QueryError::KeyspaceNotFound(name.display_path()))
    }

    fn buckets(&self) -> Vec<BucketInfo> {
        let state = self.lock();
        let mut out: Vec<BucketInfo> = Vec::new();
        for k in state.collections.keys() {
            if out.last().is_none_or(|b| b.name != k.bucket) {
                out.push(BucketInfo { name: k.bucket.clone(), scopes: Vec::new() });
            }
            let b = out.last_mut().expect("pushed above");
            if b.scopes.last().is_none_or(|s| s.name != k.scope) {
                b.scopes.push(ScopeInfo { name: k.scope.clone(), collections: Vec::new() });
            }
            b.scopes.last_mut().expect("pushed above").collections.push(k.collection.clone());
        }
        out
    }

    fn create_index(&self, request: CreateIndexRequest) -> Result<(), QueryError> {
        let mut state = self.lock();
        let Some(coll) = state.collections.get_mut(&request.def.keyspace) else {
            return Err(QueryError::KeyspaceNotFound(request.def.keyspace.display_path()));
        };
        if coll.indexes.iter().any(|(d, _, _)| d.name == request.def.name) {
            return Err(QueryError::IndexAlreadyExists(request.def.name));
        }
        let index = Arc::new(MemIndex::new(request.def.is_primary, 1));
        let state_now = if request.defer_build { IndexState::Deferred } else { IndexState::Online };
        if !request.def.is_primary {
            let plan = crate::index::KeyPlan::compile(&request.def)?;
            coll.plans.insert(request.def.name.clone(), Arc::new(plan));
        }
        if !request.defer_build {
            build(coll, &request.def, &index);
        }
        coll.indexes.push((request.def, state_now, index));
        Ok(())
    }

    fn drop_index(&self, keyspace: &KeyspaceName, name: &str) -> Result<(), QueryError> {
        let mut state = self.lock();
        let coll =
            state.collections.get_mut(keyspace).ok_or_else(|| QueryError::KeyspaceNotFound(keyspace.display_path()))?;
        let before = coll.indexes.len();
        coll.indexes.retain(|(d, _, _)| d.name != name);
        coll.plans.remove(name);
        if coll.indexes.len() == before {
            return Err(QueryError::IndexNotFound(name.to_string()));
        }
        Ok(())
    }

    fn build_indexes(&self, keyspace: &KeyspaceName, names: &[String]) -> Result<(), QueryError> {
        let mut state = self.lock();
        let coll =
            state.collections.get_mut(keyspace).ok_or_else(|| QueryError::KeyspaceNotFound(keyspace.display_path()))?;
        for name in names {
            let Some((def, st, index)) = coll.indexes.iter_mut().find(|(d, _, _)| &d.name == name) else {
                return Err(QueryError::IndexNotFound(name.clone()));
            };
            if *st == IndexState::Deferred {
                let (def, index) = (def.clone(), index.clone());
                *st = IndexState::Online;
                build(coll, &def, &index);
            }
        }
        Ok(())
    }

    fn all_indexes(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)> {
        let state = self.lock();
        state
            .collections
            .iter()
            .flat_map(|(k, c)| c.indexes.iter().map(move |(d, s, _)| (k.clone(), d.clone(), *s)))
            .collect()
    }
}

struct MemKeyspace {
    name: KeyspaceName,
    state: Arc<Mutex<State>>,
}

impl MemKeyspace {
    fn with<R>(&self, f: impl FnOnce(&mut Collection, &mut u64) -> R) -> Result<R, QueryError> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let state = &mut *guard;
        let coll = state
            .collections
            .get_mut(&self.name)
            .ok_or_else(|| QueryError::KeyspaceNotFound(self.name.display_path()))?;
        Ok(f(coll, &mut state.cas))
    }
}

impl Keyspace for MemKeyspace {
    fn name(&self) -> &KeyspaceName {
        &self.name
    }

    fn fetch(&self, keys: &[Arc<str>]) -> Result<Vec<Option<Document>>, QueryError> {
        self.with(|c, _| {
            keys.iter()
                .map(|k| c.docs.get(k).map(|(v, m)| Document { key: k.clone(), value: v.clone(), meta: m.clone() }))
                .collect()
        })
    }

    fn count(&self) -> Result<u64, QueryError> {
        self.with(|c, _| c.docs.len() as u64)
    }

    fn mutate(&self, m: &Mutation) -> Result<MutationOutcome, QueryError> {
        let op = match m.kind {
            MutationKind::Insert => "INSERT",
            MutationKind::Upsert => "UPSERT",
            MutationKind::Replace { .. } => "UPDATE",
            MutationKind::Delete { .. } => "DELETE",
        };
        let fail = |reason| QueryError::Dml { op, key: m.key.to_string(), reason };
        self.with(|c, cas| {
            let existing = c.docs.get(&m.key).map(|(_, meta)| meta.clone());
            match (&m.kind, &existing) {
                (MutationKind::Insert, Some(_)) => return Err(fail(DmlReason::DuplicateKey)),
                (MutationKind::Replace { .. } | MutationKind::Delete { .. }, None) => {
                    return Err(fail(DmlReason::KeyNotFound))
                }
                (MutationKind::Replace { cas: want } | MutationKind::Delete { cas: want }, Some(meta))
                    if *want != 0 && *want != meta.cas =>
                {
                    return Err(fail(DmlReason::CasMismatch))
                }
                _ => {}
            }
            *cas += 1;
            c.seqno += 1;
            let deleted = matches!(m.kind, MutationKind::Delete { .. });
            if deleted {
                c.docs.remove(&m.key);
            } else {
                let expiration = if m.preserve_expiry { existing.map_or(0, |e| e.expiration) } else { m.expiration };
                let meta = DocMeta { cas: *cas, expiration, flags: 0, is_json: true };
                c.docs.insert(m.key.clone(), (m.value.clone(), meta));
            }
            for (def, state, index) in &c.indexes {
                if *state == IndexState::Online {
                    let change = change_for(c, def, &m.key);
                    index.apply(0, c.seqno, [change]);
                }
            }
            Ok(MutationOutcome { cas: *cas })
        })?
    }

    fn indexes(&self) -> Vec<(IndexDef, IndexState)> {
        self.with(|c, _| c.indexes.iter().map(|(d, s, _)| (d.clone(), *s)).collect()).unwrap_or_default()
    }

    fn scan(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<IndexEntry>, QueryError> {
        let found = self.with(|c, _| c.indexes.iter().find(|(d, _, _)| d.name == index).map(|(_, _, i)| i.clone()))?;
        match found {
            Some(i) => Ok(i.scan(range, after, limit)),
            None => Err(QueryError::IndexNotFound(index.to_string())),
        }
    }

    fn count_range(&self, index: &str, range: &ScanRange) -> Result<u64, QueryError> {
        let found = self.with(|c, _| c.indexes.iter().find(|(d, _, _)| d.name == index).map(|(_, _, i)| i.clone()))?;
        match found {
            Some(i) => Ok(i.scan(range, None, usize::MAX).len() as u64),
            None => Err(QueryError::IndexNotFound(index.to_string())),
        }
    }

    fn wait_for(&self, _index: &str, _consistency: &Consistency, _deadline_nanos: i64) -> Result<(), QueryError> {
        // Every mutation updates the indexes before it returns.
        Ok(())
    }
}

/// What index `def` holds for document `key` as the collection has it now.
fn change_for(c: &Collection, def: &IndexDef, key: &Arc<str>) -> Change {
    let Some((value, meta)) = c.docs.get(key) else { return Change::Delete { doc_id: key.clone() } };
    if def.is_primary {
        return Change::Set { doc_id: key.clone(), keys: vec![vec![]] };
    }
    let keys = c.plans.get(&def.name).and_then(|p| p.entries(key, value, meta).ok()).unwrap_or_default();
    Change::Set { doc_id: key.clone(), keys }
}

/// Fills an index from every document of the collection.
fn build(c: &Collection, def: &IndexDef, index: &MemIndex) {
    let changes: Vec<Change> = c.docs.keys().map(|k| change_for(c, def, k)).collect();
    index.apply(0, c.seqno, changes);
}
