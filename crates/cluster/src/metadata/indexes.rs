//! Query index definitions kept with their bucket: every node sees the same definitions (a node indexes the
//! vBuckets it holds as active), and they survive restarts with the rest of the metadata.

use serde::{Deserialize, Serialize};

use super::{BucketMeta, ClusterMetadata, MetaError};

/// One key of a secondary index, in Couchbase's normalised text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexKeySpec {
    pub expr: String,
    /// `distinct` or `all` for an array key.
    #[serde(default)]
    pub array: Option<String>,
    #[serde(default)]
    pub desc: bool,
    #[serde(default)]
    pub include_missing: bool,
}

/// An index definition (`CREATE [PRIMARY] INDEX`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSpec {
    /// Unique in the cluster.
    pub id: String,
    pub name: String,
    pub scope: String,
    pub collection: String,
    pub is_primary: bool,
    #[serde(default)]
    pub keys: Vec<IndexKeySpec>,
    #[serde(default)]
    pub condition: Option<String>,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub num_replica: u32,
    /// Declared with `defer_build` and not built yet (BUILD INDEX clears it).
    #[serde(default)]
    pub deferred: bool,
}

impl ClusterMetadata {
    pub(super) fn create_index(&mut self, bucket: &str, spec: &IndexSpec) -> Result<(), MetaError> {
        let b = self.buckets.get_mut(bucket).ok_or_else(|| MetaError::UnknownBucket(bucket.into()))?;
        let exists =
            b.manifest.scope(&spec.scope).is_some_and(|s| s.collections.iter().any(|c| c.name == spec.collection));
        if !exists {
            return Err(MetaError::UnknownCollection(format!("{bucket}.{}.{}", spec.scope, spec.collection)));
        }
        if b.indexes.values().any(|i| i.scope == spec.scope && i.collection == spec.collection && i.name == spec.name) {
            return Err(MetaError::IndexExists(spec.name.clone()));
        }
        if b.indexes.contains_key(&spec.id) {
            return Err(MetaError::IndexExists(spec.id.clone()));
        }
        b.indexes.insert(spec.id.clone(), spec.clone());
        Ok(())
    }

    pub(super) fn drop_index(&mut self, bucket: &str, id: &str) -> Result<(), MetaError> {
        let b = self.buckets.get_mut(bucket).ok_or_else(|| MetaError::UnknownBucket(bucket.into()))?;
        b.indexes.remove(id).map(drop).ok_or_else(|| MetaError::UnknownIndex(id.into()))
    }

    pub(super) fn build_indexes(&mut self, bucket: &str, ids: &[String]) -> Result<(), MetaError> {
        let b = self.buckets.get_mut(bucket).ok_or_else(|| MetaError::UnknownBucket(bucket.into()))?;
        if let Some(missing) = ids.iter().find(|id| !b.indexes.contains_key(*id)) {
            return Err(MetaError::UnknownIndex(missing.clone()));
        }
        for id in ids {
            if let Some(i) = b.indexes.get_mut(id) {
                i.deferred = false;
            }
        }
        Ok(())
    }
}

/// Drops the indexes of collections the bucket's manifest no longer has (after a scope or collection drop).
pub(super) fn drop_orphaned_indexes(bucket: &mut BucketMeta) {
    let manifest = &bucket.manifest;
    bucket
        .indexes
        .retain(|_, i| manifest.scope(&i.scope).is_some_and(|s| s.collections.iter().any(|c| c.name == i.collection)));
}
