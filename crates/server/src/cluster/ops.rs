//! The metadata changes the REST API makes. Each is validated locally (for ns_server's error texts), proposed to
//! the cluster, and applied on this node by a reconcile before the call returns. A node without a cluster (unit
//! tests of the REST layer) applies the change locally only.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::{MetaCommand, MetaError, ProposeError};
use settee_engine::{BucketConfig, Manifest, ManifestError};
use tokio::sync::watch;

use super::spec_of;
use crate::node::{random_hex32, BucketError, BucketHandle, Node};

/// How often local user changes are looked for and proposed.
const USERS_SYNC_INTERVAL: Duration = Duration::from_millis(100);

/// Why a cluster-wide change failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterOpError {
    #[error(transparent)]
    Bucket(#[from] BucketError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The cluster could not commit the change (no quorum, timeout); it may or may not have happened.
    #[error("the cluster did not confirm the change: {0}")]
    Unavailable(String),
}

fn unavailable(e: ProposeError) -> ClusterOpError {
    ClusterOpError::Unavailable(e.to_string())
}

impl Node {
    /// Creates a bucket on every node.
    pub async fn propose_create_bucket(&self, mut config: BucketConfig) -> Result<(), ClusterOpError> {
        let Some(cluster) = self.cluster() else {
            return self.create_bucket(config).map(drop).map_err(Into::into);
        };
        self.check_new_bucket(&config)?;
        if config.uuid.is_empty() {
            config.uuid = random_hex32(self.clock.now_nanos());
        }
        match cluster.propose(self, MetaCommand::CreateBucket(spec_of(&config))).await {
            Ok(_) => {}
            Err(ProposeError::Rejected(MetaError::BucketExists(_))) => return Err(BucketError::Exists.into()),
            Err(ProposeError::Rejected(e)) => return Err(BucketError::Invalid(e.to_string()).into()),
            Err(e) => return Err(unavailable(e)),
        }
        match self.bucket(&config.name) {
            Some(_) => Ok(()),
            None => Err(ClusterOpError::Unavailable("the bucket was created but could not be opened here".into())),
        }
    }

    /// Deletes a bucket on every node.
    pub async fn propose_delete_bucket(&self, name: &str) -> Result<(), ClusterOpError> {
        let Some(cluster) = self.cluster() else { return self.delete_bucket(name).map_err(Into::into) };
        match cluster.propose(self, MetaCommand::DeleteBucket(name.to_owned())).await {
            Ok(_) => Ok(()),
            Err(ProposeError::Rejected(MetaError::UnknownBucket(_))) => Err(BucketError::NotFound.into()),
            Err(ProposeError::Rejected(e)) => Err(BucketError::Invalid(e.to_string()).into()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Changes a bucket's settings on every node (name, uuid and type never change).
    pub async fn propose_update_bucket(
        &self,
        bucket: &BucketHandle,
        edit: impl FnOnce(&mut BucketConfig),
    ) -> Result<(), ClusterOpError> {
        let mut config = bucket.config();
        let (name, uuid, kind) = (config.name.clone(), config.uuid.clone(), config.kind);
        edit(&mut config);
        (config.name, config.uuid, config.kind) = (name, uuid, kind);
        let Some(cluster) = self.cluster() else {
            bucket.update_config(|c| *c = config);
            self.bump_rev();
            return Ok(());
        };
        match cluster.propose(self, MetaCommand::UpdateBucket(spec_of(&config))).await {
            Ok(_) => Ok(()),
            Err(ProposeError::Rejected(MetaError::UnknownBucket(_))) => Err(BucketError::NotFound.into()),
            Err(ProposeError::Rejected(e)) => Err(BucketError::Invalid(e.to_string()).into()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Applies one collections change on every node; returns the new manifest uid.
    pub async fn propose_manifest_change(
        &self,
        bucket: &BucketHandle,
        change: impl FnOnce(&mut Manifest) -> Result<(), ManifestError>,
    ) -> Result<u64, ClusterOpError> {
        let Some(cluster) = self.cluster() else {
            let ((), uid) = bucket.edit_manifest(change)?;
            self.bump_rev();
            return Ok(uid);
        };
        let name = bucket.name();
        let current = cluster.metadata().buckets.get(&name).map(|b| b.manifest.clone());
        let mut manifest = current.unwrap_or_else(|| (*bucket.manifest()).clone());
        change(&mut manifest)?;
        let uid = manifest.uid;
        match cluster.propose(self, MetaCommand::SetManifest { bucket: name, manifest }).await {
            Ok(_) => Ok(uid),
            Err(ProposeError::Rejected(MetaError::UnknownBucket(_))) => Err(BucketError::NotFound.into()),
            // Another node changed the manifest at the same moment: the caller may retry on the new one.
            Err(ProposeError::Rejected(e)) => Err(ClusterOpError::Unavailable(e.to_string())),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The checks ns_server makes before creating a bucket, with its texts.
    fn check_new_bucket(&self, config: &BucketConfig) -> Result<(), BucketError> {
        crate::node::validate_bucket_name(&config.name)?;
        if config.replicas > 3 {
            return Err(BucketError::Invalid("Replica number larger than 3 is not supported.".into()));
        }
        let buckets = self.buckets();
        if buckets.iter().any(|b| b.name().eq_ignore_ascii_case(&config.name)) {
            return Err(BucketError::Exists);
        }
        if buckets.len() >= crate::node::BUCKETS_MAX {
            return Err(BucketError::Invalid(format!("Cannot create more than {} buckets", crate::node::BUCKETS_MAX)));
        }
        Ok(())
    }
}

/// The users as the metadata stores them: every user but the command line's administrator.
fn users_value(node: &Node) -> serde_json::Value {
    let users: Vec<_> =
        node.users.list().iter().filter(|u| u.id != node.config.username).map(|u| (**u).clone()).collect();
    serde_json::to_value(users).unwrap_or_default()
}

/// Proposes the local user list whenever it changes here and differs from the cluster's (REST user changes land
/// in the local store first). Two nodes changing users at the same instant: the later proposal wins whole.
pub async fn sync_users(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let Some(cluster) = node.cluster().cloned() else { return };
    let mut seen = node.users.generation();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(USERS_SYNC_INTERVAL) => {}
            _ = stopped.changed() => return,
        }
        let generation = node.users.generation();
        if generation == seen {
            continue;
        }
        let local = users_value(&node);
        if local == cluster.metadata().users {
            seen = generation;
            continue;
        }
        match cluster.store().propose(MetaCommand::SetUsers(local)).await {
            Ok(_) => seen = generation,
            Err(e) => tracing::warn!(error = %e, "cannot share a user change with the cluster; will retry"),
        }
    }
}
