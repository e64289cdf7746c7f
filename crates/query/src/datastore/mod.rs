//! What the query engine needs from the database, as traits: keyspaces to fetch, scan, count and mutate, and the
//! catalog (buckets, scopes, collections, index definitions) behind the `system:` keyspaces and DDL.
//!
//! The server implements these over its buckets (local vBuckets directly, remote ones through the cluster); tests
//! implement them over plain maps. Every call is synchronous: the executor runs on a blocking thread, and an
//! implementation that must wait on the network blocks that thread, never a reactor.

mod mem;

use std::sync::Arc;

use crate::index::{IndexDef, IndexEntry, IndexState, ScanRange};
use crate::value::Value;
use crate::QueryError;

pub use mem::MemDatastore;

/// A fully resolved keyspace: a collection of a bucket (`_default._default` for a bucket named alone).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyspaceName {
    pub bucket: String,
    pub scope: String,
    pub collection: String,
}

impl KeyspaceName {
    pub fn new(bucket: &str, scope: &str, collection: &str) -> KeyspaceName {
        KeyspaceName { bucket: bucket.into(), scope: scope.into(), collection: collection.into() }
    }

    /// Whether this is the bucket's default collection, which Couchbase names by the bucket alone.
    pub fn is_default_collection(&self) -> bool {
        self.scope == "_default" && self.collection == "_default"
    }

    /// `default:b` for a default collection, `default:b.s.c` otherwise: the form error messages use.
    pub fn display_path(&self) -> String {
        if self.is_default_collection() {
            format!("default:{}", self.bucket)
        } else {
            format!("default:{}.{}.{}", self.bucket, self.scope, self.collection)
        }
    }
}

impl std::fmt::Display for KeyspaceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.bucket, self.scope, self.collection)
    }
}

/// A document's metadata, as META() reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DocMeta {
    pub cas: u64,
    /// Absolute expiry in seconds since the epoch, 0 for none.
    pub expiration: u32,
    pub flags: u32,
    /// Whether the body is JSON (`"json"`) or not (`"base64"`).
    pub is_json: bool,
}

/// A fetched document.
#[derive(Clone, Debug)]
pub struct Document {
    pub key: Arc<str>,
    pub value: Value,
    pub meta: DocMeta,
}

/// The durability a DML statement's mutations ask for (`durability_level` in the request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    #[default]
    None,
    Majority,
    MajorityAndPersistActive,
    PersistToMajority,
}

/// What a DML statement does to one document.
#[derive(Clone, Debug)]
pub enum MutationKind {
    /// Fails with `DmlReason::DuplicateKey` when the key exists.
    Insert,
    Upsert,
    /// Replaces the document if its CAS is still `cas` (`DmlReason::CasMismatch` otherwise, `KeyNotFound` when
    /// it is gone).
    Replace {
        cas: u64,
    },
    Delete {
        cas: u64,
    },
}

/// One mutation.
#[derive(Clone, Debug)]
pub struct Mutation {
    pub kind: MutationKind,
    pub key: Arc<str>,
    /// The new body (ignored for deletes).
    pub value: Value,
    /// Absolute expiry in seconds since the epoch (0: none); ignored when `preserve_expiry`.
    pub expiration: u32,
    /// Keep the document's current expiry.
    pub preserve_expiry: bool,
    /// The flags to store; `None` for a document the statement creates or replaces whole (the datastore stores
    /// its JSON flags), `Some` to keep the flags an UPDATE read.
    pub flags: Option<u32>,
    pub durability: Durability,
}

/// What a successful mutation reports.
#[derive(Clone, Debug, Default)]
pub struct MutationOutcome {
    pub cas: u64,
}

/// A keyspace's own high seqnos per vBucket, for `request_plus`.
pub type SeqnoVector = Vec<(u16, u64)>;

/// Scan consistency for index scans.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Consistency {
    /// Read the index as it is.
    #[default]
    NotBounded,
    /// Wait until the index has applied every mutation the keyspace had when the request started.
    RequestPlus,
    /// Wait until the index has applied the given `(bucket, vBucket, seqno, vbuuid)` positions; an empty bucket
    /// name (a `scan_vector` given for the only keyspace) applies to every keyspace.
    AtPlus(Vec<(String, u16, u64, String)>),
}

/// A collection the query engine can read and change.
pub trait Keyspace: Send + Sync {
    fn name(&self) -> &KeyspaceName;

    /// Fetches documents by key, in order; a missing key (or a deleted document) gives `None`.
    fn fetch(&self, keys: &[Arc<str>]) -> Result<Vec<Option<Document>>, QueryError>;

    /// The number of live documents.
    fn count(&self) -> Result<u64, QueryError>;

    /// Applies one mutation.
    fn mutate(&self, m: &Mutation) -> Result<MutationOutcome, QueryError>;

    /// Index definitions on this keyspace (primary and secondary), with their states.
    fn indexes(&self) -> Vec<(IndexDef, IndexState)>;

    /// Reads up to `limit` entries of index `index` within `range`, in index order, starting after `after`
    /// (the last entry of the previous call) when given. Before the first call of a scan the caller waits for
    /// `consistency` with [`Keyspace::wait_for`].
    fn scan(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<IndexEntry>, QueryError>;

    /// The number of entries of index `index` within `range` (the caller waited for consistency, as for a scan).
    /// The default reads them in chunks; a datastore that can count without reading entries says so here.
    fn count_range(&self, index: &str, range: &ScanRange) -> Result<u64, QueryError> {
        const CHUNK: usize = 4096;
        let mut n = 0u64;
        let mut after: Option<IndexEntry> = None;
        loop {
            let chunk = self.scan(index, range, after.as_ref(), CHUNK)?;
            n += chunk.len() as u64;
            if chunk.len() < CHUNK {
                return Ok(n);
            }
            after = chunk.last().cloned();
        }
    }

    /// Waits until index `index` reflects `consistency` (up to `deadline_nanos` on the request's clock), or fails
    /// with `IndexScanTimeout`.
    fn wait_for(&self, index: &str, consistency: &Consistency, deadline_nanos: i64) -> Result<(), QueryError>;
}

/// A bucket, scope and collection listing for the `system:` keyspaces.
#[derive(Clone, Debug)]
pub struct BucketInfo {
    pub name: String,
    pub scopes: Vec<ScopeInfo>,
}

#[derive(Clone, Debug)]
pub struct ScopeInfo {
    pub name: String,
    pub collections: Vec<String>,
}

/// An index to create.
#[derive(Clone, Debug)]
pub struct CreateIndexRequest {
    pub def: IndexDef,
    /// `defer_build`: stay `deferred` until BUILD INDEX.
    pub defer_build: bool,
}

/// The database as the query engine sees it.
pub trait Datastore: Send + Sync {
    /// The keyspace of a collection, or `BucketNotFound`-style errors: `KeyspaceNotFound` for a missing bucket
    /// or collection, `ScopeNotFound` for a missing scope.
    fn keyspace(&self, name: &KeyspaceName) -> Result<Arc<dyn Keyspace>, QueryError>;

    /// Every bucket with its scopes and collections (only those the requester may see).
    fn buckets(&self) -> Vec<BucketInfo>;

    /// Creates an index; returns once it is online unless deferred (`IndexAlreadyExists` for a taken name).
    fn create_index(&self, request: CreateIndexRequest) -> Result<(), QueryError>;

    /// Drops the index named `name` on `keyspace` (`IndexNotFound` if none).
    fn drop_index(&self, keyspace: &KeyspaceName, name: &str) -> Result<(), QueryError>;

    /// Starts building deferred indexes; returns at once.
    fn build_indexes(&self, keyspace: &KeyspaceName, names: &[String]) -> Result<(), QueryError>;

    /// Every index definition of every keyspace (for `system:indexes`).
    fn all_indexes(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)>;
}
