//! Indexes: their definitions (what `CREATE INDEX` declares and `system:indexes` shows), scan ranges, and the
//! in-memory index structure fed from the data service's change stream.
//!
//! An index maps index keys (a list of values, compared by collation) to document ids. A primary index has no
//! keys of its own: its one key is the document id, so a primary scan is an ordered scan of a collection's ids.
//! Each index remembers, per vBucket, the highest seqno it has applied; scan consistency waits on those.

mod keys;
mod mem_index;
mod snapshot;

pub use keys::{key_display, DocFilter, KeyPlan};
pub use mem_index::{Change, MemIndex};
pub use snapshot::{SnapshotError, SnapshotReader, SnapshotWriter, VbPoint};

use std::sync::Arc;

use crate::datastore::KeyspaceName;
use crate::value::Value;

/// The state of an index, as `system:indexes` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexState {
    /// Declared with `defer_build`, waiting for BUILD INDEX.
    Deferred,
    /// Being built from the existing documents.
    Building,
    /// Up to date and usable.
    Online,
}

impl IndexState {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Deferred => "deferred",
            IndexState::Building => "building",
            IndexState::Online => "online",
        }
    }
}

/// One key of a secondary index, kept as its normalised text (the form `system:indexes` shows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexKeyDef {
    /// The key expression in normalised text (``(`a`.`b`)``, ``array (`v`.`x`) for `v` in `arr` end``).
    pub expr: String,
    /// `DISTINCT` or `ALL` for an array key.
    pub array: Option<crate::ast::ArrayIndexKind>,
    pub desc: bool,
    pub include_missing: bool,
}

/// An index definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    /// Unique among all indexes of the cluster.
    pub id: String,
    pub name: String,
    pub keyspace: KeyspaceName,
    pub is_primary: bool,
    /// Empty for a primary index.
    pub keys: Vec<IndexKeyDef>,
    /// A partial index's WHERE, in normalised text.
    pub condition: Option<String>,
    /// `HASH(...)` of a partitioned index.
    pub partition: Option<String>,
    pub num_replica: u32,
}

/// One index entry: the index keys and the document they came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexEntry {
    /// For a primary index, the document id as a string value.
    pub key: Vec<Value>,
    pub doc_id: Arc<str>,
}

/// A bound of a span.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Unbounded,
    Included(Vec<Value>),
    Excluded(Vec<Value>),
}

/// One contiguous range of index keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub low: Bound,
    pub high: Bound,
}

impl Span {
    pub fn all() -> Span {
        Span { low: Bound::Unbounded, high: Bound::Unbounded }
    }

    /// Exactly the entries whose key starts with `key`.
    pub fn exact(key: Vec<Value>) -> Span {
        Span { low: Bound::Included(key.clone()), high: Bound::Included(key) }
    }
}

/// What to read of an index: the union of its spans, in index order (or in reverse).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScanRange {
    pub spans: Vec<Span>,
    /// Read from the highest entry down (ORDER BY ... DESC, MAX): the spans last to first, each from its high end.
    pub reverse: bool,
}

impl ScanRange {
    pub fn all() -> ScanRange {
        ScanRange { spans: vec![Span::all()], reverse: false }
    }

    pub fn new(spans: Vec<Span>) -> ScanRange {
        ScanRange { spans, reverse: false }
    }
}
