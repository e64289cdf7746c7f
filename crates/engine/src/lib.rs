//! The KV engine: buckets split into vBuckets, each an in-memory hash table of items guarded by its own mutex, and
//! every KV semantic the protocol promises (CAS, expiry, locks, counters, append/prepend, sub-document operations,
//! collections, durability: sync writes as prepares committed by the replicas' acknowledgements).
//!
//! The engine is synchronous and knows nothing of sockets or async runtimes: the server calls it from any thread and
//! it returns values. A vBucket lock is held for microseconds and never across I/O. Time comes from a
//! [`settee_types::Clock`]. It must not depend on tokio, the server or the network.
//!
//! Key types: [`Bucket`] (one per bucket, owns 1024 [`VBucket`]s and the collections [`Manifest`]),
//! [`EngineError`] (every failure, with its wire status).

// Time from a `Clock`, randomness from a seeded `Rng` (see clippy.toml): a violation fails `cargo clippy`.
#![deny(clippy::disallowed_methods)]

mod abort_log;
mod arena;
mod bucket;
mod change_log;
mod checkpoint;
mod conflict;
mod durability_monitor;
mod error;
mod eviction;
mod expiry;
mod hlc;
mod item;
mod manifest;
mod ops;
mod persistence;
mod replication;
mod rollback;
mod stats;
mod sync_record;
mod sync_write;
mod table;
mod vbucket;

pub use bucket::{Bucket, BucketConfig, BucketKind, BucketSummary, EvictionPolicy, ItemCounts, VbCounts};
pub use change_log::CursorId;
pub use conflict::{incoming_wins, ConflictMode, VersionMeta};
pub use error::EngineError;
pub use eviction::{Watermark, HIGH_WATERMARK_DEFAULT, LOW_WATERMARK_DEFAULT};
pub use expiry::absolute_expiry;
pub use item::{DocKey, ItemView};
pub use manifest::{Collection, Manifest, ManifestError, Scope, COLLECTIONS_MAX, SCOPES_MAX};
pub use ops::{
    ArithmeticOp, ArithmeticRequest, ArithmeticResult, DocFlags, GetMeta, LookupResult, MetaWrite, MetaWriteKind,
    MutateInOptions, MutationResult, StoreMode, StoreRequest, SubdocMutationResult, WriteOptions,
};
pub use persistence::{DirtyBatch, ItemSnapshot, Refused};
pub use replication::{ChangeKind, DcpChange, DcpRead, DcpSnapshot, ReplicaApply, VbStreamInfo};
pub use stats::BucketStats;
pub use sync_record::{is_sync_write_key, SyncRecord, SyncWarmup};
pub use vbucket::{ChangeNotifier, ObservedSeqnos, PersistWaiter, VBucket, VbState};

#[cfg(test)]
mod persistence_tests;
#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod sync_write_tests;
