//! The metadata changes the REST API makes. Each is validated locally (for ns_server's error texts), proposed to
//! the cluster, and applied on this node by a reconcile before the call returns. A node without a cluster (unit
//! tests of the REST layer) applies the change locally only.

use std::sync::Arc;

use settee_cluster::{MetaCommand, MetaError, ProposeError};
use settee_engine::{BucketConfig, Manifest, ManifestError};

use super::spec_of;
use crate::auth::{User, UserStore};
use crate::node::{random_hex32, BucketError, BucketHandle, Node};

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

/// A refused or failed bucket command, as the REST layer reports it.
fn bucket_error(e: ProposeError) -> ClusterOpError {
    match e {
        ProposeError::Rejected(MetaError::BucketExists(_)) => BucketError::Exists.into(),
        ProposeError::Rejected(MetaError::UnknownBucket(_)) => BucketError::NotFound.into(),
        ProposeError::Rejected(e) => BucketError::Invalid(e.to_string()).into(),
        e => unavailable(e),
    }
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
        cluster.propose(MetaCommand::CreateBucket(spec_of(&config))).await.map_err(bucket_error)?;
        match self.bucket(&config.name) {
            Some(_) => Ok(()),
            None => Err(ClusterOpError::Unavailable("the bucket was created but could not be opened here".into())),
        }
    }

    /// Deletes a bucket on every node.
    pub async fn propose_delete_bucket(&self, name: &str) -> Result<(), ClusterOpError> {
        let Some(cluster) = self.cluster() else { return self.delete_bucket(name).map_err(Into::into) };
        cluster.propose(MetaCommand::DeleteBucket(name.to_owned())).await.map(drop).map_err(bucket_error)
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
        cluster.propose(MetaCommand::UpdateBucket(spec_of(&config))).await.map(drop).map_err(bucket_error)
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
        match cluster.propose(MetaCommand::SetManifest { bucket: name, manifest }).await {
            Ok(_) => Ok(uid),
            Err(ProposeError::Rejected(MetaError::UnknownBucket(_))) => Err(BucketError::NotFound.into()),
            // Another node changed the manifest at the same moment: the caller may retry on the new one.
            Err(ProposeError::Rejected(e)) => Err(ClusterOpError::Unavailable(e.to_string())),
            Err(e) => Err(unavailable(e)),
        }
    }
}

/// The users as the metadata stores them: every user but the command line's administrator.
fn users_value(node: &Node, users: &[Arc<User>]) -> serde_json::Value {
    let users: Vec<&User> = users.iter().filter(|u| u.id != node.config.username).map(|u| &**u).collect();
    serde_json::to_value(users).unwrap_or_default()
}

impl Node {
    /// Changes the users on every node: `change` runs on a copy of the current users (off the async workers:
    /// deriving credentials is slow on purpose), the resulting list is proposed whole and then applied here.
    /// A refused change (`Err` from `change`) proposes nothing. Two nodes changing users at the same instant: the
    /// later proposal wins whole.
    pub async fn propose_user_change<R, E>(
        &self,
        change: impl FnOnce(&UserStore) -> Result<R, E> + Send + 'static,
    ) -> Result<Result<R, E>, ClusterOpError>
    where
        R: Send + 'static,
        E: Send + 'static,
    {
        let current: Vec<User> = self.users.list().iter().map(|u| (**u).clone()).collect();
        let groups: Vec<crate::auth::Group> = self.users.groups().iter().map(|g| (**g).clone()).collect();
        let clock = self.clock.clone();
        let (result, list) = tokio::task::spawn_blocking(move || {
            let scratch = UserStore::with_clock(clock);
            // The groups a change may name (and that give members their roles).
            scratch.set_groups(groups);
            // The ids were validated when these users were stored.
            let _ = scratch.restore(current);
            let result = change(&scratch);
            (result, scratch.list())
        })
        .await
        .map_err(|e| ClusterOpError::Unavailable(e.to_string()))?;
        if result.is_err() {
            return Ok(result);
        }
        match self.cluster() {
            None => {
                let _ = self.users.restore(list.iter().map(|u| (**u).clone()).collect());
            }
            Some(cluster) => {
                cluster.propose(MetaCommand::SetUsers(users_value(self, &list))).await.map_err(unavailable)?;
            }
        }
        Ok(result)
    }
}

impl Node {
    /// Gives the administrator `password` on every node: the salted credentials are derived off the async workers,
    /// proposed whole (`MetaCommand::SetAdmin`) and applied by each node's reconcile (`Node::apply_admin`, here
    /// before the call returns). The administrator keeps its name and roles. Without a cluster, applied here.
    pub async fn propose_admin_password(&self, password: &str) -> Result<(), ClusterOpError> {
        let (id, clock, password) = (self.config.username.clone(), self.clock.clone(), password.to_owned());
        let current = self.users.get(&id);
        let derived = tokio::task::spawn_blocking(move || {
            let scratch = UserStore::with_clock(clock);
            let (name, roles) = match &current {
                Some(admin) => (admin.name.clone(), admin.roles.clone()),
                None => ("Administrator".to_owned(), crate::auth::Role::parse_list("admin").unwrap_or_default()),
            };
            scratch.upsert(&id, &name, Some(&password), roles).map(|()| scratch.get(&id))
        })
        .await
        .map_err(|e| ClusterOpError::Unavailable(e.to_string()))?;
        let admin = match derived {
            Ok(Some(admin)) => (*admin).clone(),
            Ok(None) => return Err(ClusterOpError::Unavailable("the new credentials were not derived".to_owned())),
            Err(e) => return Err(ClusterOpError::Unavailable(e.to_string())),
        };
        match self.cluster() {
            None => {
                self.apply_admin(admin);
                Ok(())
            }
            Some(cluster) => {
                let value = serde_json::to_value(&admin).map_err(|e| ClusterOpError::Unavailable(e.to_string()))?;
                cluster.propose(MetaCommand::SetAdmin(value)).await.map(drop).map_err(unavailable)
            }
        }
    }

    /// Makes `admin` this node's administrator (the cluster's, from the metadata): the other users stay. Refused,
    /// with a log line, for a user that is not this node's administrator.
    pub(crate) fn apply_admin(&self, admin: User) {
        if admin.id != self.config.username {
            tracing::error!(
                user = %admin.id,
                "the cluster's administrator is not the one this node was started with; keeping this node's"
            );
            return;
        }
        let mut all: Vec<User> = self.users.list().iter().filter(|u| u.id != admin.id).map(|u| (**u).clone()).collect();
        all.push(admin);
        if let Err(e) = self.users.restore(all) {
            tracing::error!(error = %e, "cannot apply the cluster's administrator");
        }
    }

    /// Changes the user groups on every node: `change` edits a copy of the current groups; the result is proposed
    /// whole and applied by each node's reconcile (here before the call returns). A refused change proposes
    /// nothing.
    pub async fn propose_group_change<R, E>(
        &self,
        change: impl FnOnce(&mut Vec<crate::auth::Group>) -> Result<R, E>,
    ) -> Result<Result<R, E>, ClusterOpError> {
        let mut groups: Vec<crate::auth::Group> = self.users.groups().iter().map(|g| (**g).clone()).collect();
        let result = change(&mut groups);
        if result.is_err() {
            return Ok(result);
        }
        match self.cluster() {
            None => self.users.set_groups(groups),
            Some(cluster) => {
                let value = serde_json::to_value(&groups).map_err(|e| ClusterOpError::Unavailable(e.to_string()))?;
                cluster.propose(MetaCommand::SetGroups(value)).await.map_err(unavailable)?;
            }
        }
        Ok(result)
    }

    /// Makes `settings` the cluster's audit settings: proposed whole and applied on every node by its reconcile
    /// (here before the call returns); a node without a cluster applies them locally.
    pub async fn propose_audit_settings(&self, settings: &crate::audit::AuditSettings) -> Result<(), ClusterOpError> {
        let Some(cluster) = self.cluster() else {
            self.audit.apply(settings);
            return Ok(());
        };
        let value = serde_json::to_value(settings).map_err(|e| ClusterOpError::Unavailable(e.to_string()))?;
        cluster.propose(MetaCommand::SetAudit(value)).await.map(drop).map_err(unavailable)
    }

    /// Makes `settings` the cluster's security settings, as [`Node::propose_audit_settings`] does the audit ones.
    pub async fn propose_security_settings(
        &self,
        settings: crate::auth::SecuritySettings,
    ) -> Result<(), ClusterOpError> {
        let Some(cluster) = self.cluster() else {
            self.apply_security(settings);
            return Ok(());
        };
        cluster.propose(MetaCommand::SetSecurity(settings.to_metadata())).await.map(drop).map_err(unavailable)
    }
}
