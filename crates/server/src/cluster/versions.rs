//! This node's metadata version in the cluster's metadata (`settee_cluster::metadata::compat`): recorded again
//! when a view of the metadata may lack it, so that the cluster's version rises to what every member reads once
//! the last node of a rolling upgrade runs the new binary.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::metadata::compat::{announce_needed, Announce};
use settee_cluster::{ClusterMetadata, MetaCommand, NodeInfo};

use super::ClusterDriver;

/// The least time between two records made because this node's own entry is wrong in its view: while a settee
/// of an older version leads, it drops the field from every command it appends, so the record may not hold.
pub(super) const STALE_ENTRY_PACE: Duration = Duration::from_secs(30);

impl ClusterDriver {
    /// Records this node's metadata version again (an `UpdateNode` of its own entry) when its view went from
    /// `before` to `after` in a way that says some view may lack it; in the background.
    pub(super) fn announce_version(self: &Arc<Self>, before: &ClusterMetadata, after: &ClusterMetadata) {
        if !self.handle.is_current() {
            return;
        }
        let mine = super::meta_version();
        let Some(why) = announce_needed(before, after, self.me(), mine) else { return };
        let now = self.now();
        {
            let mut last = self.last_announce.lock();
            let paced = last.is_some_and(|at| now.saturating_sub(at) < STALE_ENTRY_PACE);
            if why == Announce::OwnEntryStale && paced {
                return;
            }
            *last = Some(now);
        }
        let Some(known) = after.nodes.get(&self.me()) else { return };
        let entry = NodeInfo { meta_version: mine, ..known.clone() };
        let me = self.clone();
        tokio::spawn(async move {
            tracing::info!(version = mine, reason = ?why, "recording this node's metadata version");
            if let Err(e) = me.handle.store().propose(MetaCommand::UpdateNode(entry)).await {
                tracing::warn!(error = %e, "cannot record this node's metadata version");
            }
        });
    }
}
