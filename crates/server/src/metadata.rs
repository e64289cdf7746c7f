//! The node's metadata on disk: bucket definitions, their collection manifests and the users, in
//! `<data-dir>/metadata.json`, so that a restarted node comes back with the buckets, collections and users it had
//! (memory-only buckets come back empty, as Couchbase ephemeral buckets do).
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) by a background task whenever the
//! config revision or the user store changes, and once more at shutdown.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use settee_engine::{BucketConfig, BucketKind, EvictionPolicy, Manifest};
use settee_types::DurabilityLevel;
use tokio::sync::watch;

use crate::auth::User;
use crate::node::Node;

const FILE_NAME: &str = "metadata.json";
const FORMAT_VERSION: u32 = 1;
/// How often the saver looks for changes; a change is on disk at most this long after it was made.
const SAVE_POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Serialize, Deserialize)]
struct MetadataFile {
    version: u32,
    buckets: Vec<SavedBucket>,
    users: Vec<User>,
}

#[derive(Serialize, Deserialize)]
struct SavedBucket {
    name: String,
    uuid: String,
    ephemeral: bool,
    ram_quota_bytes: u64,
    replicas: u8,
    eviction: String,
    max_ttl: u32,
    flush_enabled: bool,
    durability_min_level: Option<u8>,
    manifest: Manifest,
}

impl SavedBucket {
    fn config(&self) -> anyhow::Result<BucketConfig> {
        Ok(BucketConfig {
            name: self.name.clone(),
            uuid: self.uuid.clone(),
            kind: if self.ephemeral { BucketKind::Ephemeral } else { BucketKind::Couchbase },
            ram_quota_bytes: self.ram_quota_bytes,
            replicas: self.replicas,
            eviction: EvictionPolicy::parse(&self.eviction)
                .ok_or_else(|| anyhow::anyhow!("bucket {}: unknown eviction policy {}", self.name, self.eviction))?,
            max_ttl: self.max_ttl,
            flush_enabled: self.flush_enabled,
            durability_min_level: self.durability_min_level.and_then(DurabilityLevel::from_wire),
        })
    }
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Restores buckets, manifests and users saved by an earlier run. A missing file is a first start; an unreadable
/// one is an error (starting empty would silently drop the user's buckets).
pub fn load(node: &Node) -> anyhow::Result<bool> {
    let file = path(&node.config.data_dir);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", file.display())),
    };
    let saved: MetadataFile =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not valid metadata: {e}", file.display()))?;
    if saved.version != FORMAT_VERSION {
        anyhow::bail!("{} has format version {}, this build reads {FORMAT_VERSION}", file.display(), saved.version);
    }
    for b in &saved.buckets {
        let handle = node.create_bucket(b.config()?).map_err(|e| anyhow::anyhow!("bucket {}: {e}", b.name))?;
        handle.restore_manifest(b.manifest.clone());
    }
    let admin = node.users.get(&node.config.username);
    let mut users: Vec<User> = saved.users.into_iter().filter(|u| u.id != node.config.username).collect();
    // The command line's administrator always wins: its password is whatever the operator passed this time.
    users.extend(admin.map(|a| (*a).clone()));
    node.users.restore(users).map_err(|e| anyhow::anyhow!("cannot restore users: {e}"))?;
    node.bump_rev();
    tracing::info!(file = %file.display(), buckets = saved.buckets.len(), "metadata restored");
    Ok(true)
}

/// Writes the metadata file atomically.
pub fn save(node: &Node) -> std::io::Result<()> {
    let buckets = node
        .buckets()
        .iter()
        .map(|b| {
            let c = b.config();
            SavedBucket {
                name: c.name,
                uuid: c.uuid,
                ephemeral: c.kind == BucketKind::Ephemeral,
                ram_quota_bytes: c.ram_quota_bytes,
                replicas: c.replicas,
                eviction: c.eviction.as_str().to_owned(),
                max_ttl: c.max_ttl,
                flush_enabled: c.flush_enabled,
                durability_min_level: c.durability_min_level.map(|l| l as u8),
                manifest: (*b.manifest()).clone(),
            }
        })
        .collect();
    let users = node.users.list().iter().map(|u| (**u).clone()).collect();
    let file = MetadataFile { version: FORMAT_VERSION, buckets, users };
    let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
    let dir = &node.config.data_dir;
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path(dir))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Saves whenever the config revision or the user store changes, and once more when the node stops.
pub async fn saver(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut saved_at = (0, u64::MAX);
    loop {
        let now = (node.rev(), node.users.generation());
        if now != saved_at {
            let n = node.clone();
            match tokio::task::spawn_blocking(move || save(&n)).await {
                Ok(Ok(())) => saved_at = now,
                Ok(Err(e)) => tracing::error!(error = %e, "cannot save node metadata; will retry"),
                Err(e) => tracing::error!(error = %e, "metadata save task failed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(SAVE_POLL_INTERVAL) => {}
            _ = stopped.changed() => {
                if (node.rev(), node.users.generation()) != saved_at {
                    if let Err(e) = save(&node) {
                        tracing::error!(error = %e, "cannot save node metadata at shutdown");
                    }
                }
                return;
            }
        }
    }
}
