//! The replicated state machine for openraft's `RaftStateMachine`: applies committed commands to the
//! [`ClusterMetadata`] and publishes every new state on a watch channel.
//!
//! Applying does not touch the disk: the state is rebuilt at start from `snapshot.json` (the last snapshot, written
//! atomically) plus the committed log entries after it. Snapshots are taken every ~1,000 entries and whole-state.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::durable_file::{read_json, write_atomic};
use super::error::OpenError;
use crate::metadata::ClusterMetadata;
use crate::transport::{MetaResponse, TypeConfig};
use crate::vbmap::NodeId;

const SNAPSHOT_FILE: &str = "snapshot.json";

type Entry = openraft::Entry<TypeConfig>;
type LogId = openraft::LogId<NodeId>;
type Meta = SnapshotMeta<NodeId, BasicNode>;
type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// The snapshot file: the metadata as of `meta.last_log_id`.
#[derive(Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: Meta,
    state: Arc<ClusterMetadata>,
}

impl StoredSnapshot {
    // openraft's StorageError is large, and its traits fix it as the error type.
    #[allow(clippy::result_large_err)]
    fn to_snapshot(&self) -> StorageResult<Snapshot<TypeConfig>> {
        let bytes = serde_json::to_vec(&*self.state)
            .map_err(|e| StorageIOError::read_snapshot(Some(self.meta.signature()), &e))?;
        Ok(Snapshot { meta: self.meta.clone(), snapshot: Box::new(Cursor::new(bytes)) })
    }
}

/// The latest snapshot, shared with snapshot builders (which run in their own tasks).
#[derive(Clone)]
struct SnapshotSlot {
    dir: PathBuf,
    /// Held by the blocking writer only, so two snapshots never race on the file.
    file: Arc<Mutex<()>>,
    current: Arc<Mutex<Option<StoredSnapshot>>>,
}

impl SnapshotSlot {
    /// Stores `snap` unless a snapshot at least as recent is already there.
    async fn store(&self, snap: StoredSnapshot) -> StorageResult<()> {
        let sig = snap.meta.signature();
        let bytes = serde_json::to_vec(&snap).map_err(|e| StorageIOError::write_snapshot(Some(sig.clone()), &e))?;
        let slot = self.clone();
        tokio::task::spawn_blocking(move || {
            let _writer = slot.file.lock();
            if slot.current.lock().as_ref().is_some_and(|cur| cur.meta.last_log_id >= snap.meta.last_log_id) {
                return Ok(());
            }
            write_atomic(&slot.dir.join(SNAPSHOT_FILE), &bytes)?;
            *slot.current.lock() = Some(snap);
            Ok(())
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .map_err(|e: std::io::Error| StorageIOError::write_snapshot(Some(sig), &e).into())
    }
}

pub(crate) struct StateMachine {
    last_applied: Option<LogId>,
    last_membership: StoredMembership<NodeId, BasicNode>,
    state: Arc<ClusterMetadata>,
    snapshot: SnapshotSlot,
    publish: watch::Sender<Arc<ClusterMetadata>>,
    /// Makes snapshot ids unique when two are built at the same log id.
    snapshots_built: u64,
}

impl StateMachine {
    /// Restores the last snapshot from `dir` (blocking: call from a blocking thread).
    pub(crate) fn open(dir: &Path) -> Result<(StateMachine, watch::Receiver<Arc<ClusterMetadata>>), OpenError> {
        let stored: Option<StoredSnapshot> = read_json(&dir.join(SNAPSHOT_FILE))?;
        let (last_applied, last_membership, state) = match &stored {
            Some(s) => (s.meta.last_log_id, s.meta.last_membership.clone(), s.state.clone()),
            None => (None, StoredMembership::default(), Arc::new(ClusterMetadata::default())),
        };
        let (publish, applied) = watch::channel(state.clone());
        let snapshot =
            SnapshotSlot { dir: dir.into(), file: Arc::new(Mutex::new(())), current: Arc::new(Mutex::new(stored)) };
        let sm = StateMachine { last_applied, last_membership, state, snapshot, publish, snapshots_built: 0 };
        Ok((sm, applied))
    }

    fn apply_one(&mut self, entry: Entry) -> MetaResponse {
        self.last_applied = Some(entry.log_id);
        match entry.payload {
            EntryPayload::Blank => MetaResponse::NotACommand,
            EntryPayload::Membership(membership) => {
                self.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                MetaResponse::NotACommand
            }
            EntryPayload::Normal(cmd) => {
                // Applied to a copy so a refused command cannot leave a half-changed state behind.
                let mut next = (*self.state).clone();
                match next.apply(&cmd) {
                    Ok(()) => {
                        self.state = Arc::new(next);
                        MetaResponse::Applied(self.state.clone())
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, index = entry.log_id.index, "metadata command refused");
                        MetaResponse::Rejected(e)
                    }
                }
            }
        }
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership<NodeId, BasicNode>)> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<MetaResponse>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let rev = self.state.rev;
        let responses = entries.into_iter().map(|entry| self.apply_one(entry)).collect();
        if self.state.rev != rev {
            self.publish.send_replace(self.state.clone());
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        self.snapshots_built += 1;
        SnapshotBuilder {
            last_applied: self.last_applied,
            last_membership: self.last_membership.clone(),
            state: self.state.clone(),
            slot: self.snapshot.clone(),
            seq: self.snapshots_built,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Box<Cursor<Vec<u8>>>) -> StorageResult<()> {
        let state: ClusterMetadata = serde_json::from_slice(snapshot.get_ref())
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let state = Arc::new(state);
        self.snapshot.store(StoredSnapshot { meta: meta.clone(), state: state.clone() }).await?;
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        self.state = state;
        self.publish.send_replace(self.state.clone());
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let current = self.snapshot.current.lock().clone();
        match current {
            Some(stored) => stored.to_snapshot().map(Some),
            None => Ok(None),
        }
    }
}

/// A frozen copy of the state at the moment openraft asked for a snapshot.
pub(crate) struct SnapshotBuilder {
    last_applied: Option<LogId>,
    last_membership: StoredMembership<NodeId, BasicNode>,
    state: Arc<ClusterMetadata>,
    slot: SnapshotSlot,
    seq: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let snapshot_id = match self.last_applied {
            Some(id) => format!("{}-{}-{}", id.leader_id, id.index, self.seq),
            None => format!("empty-{}", self.seq),
        };
        let meta = Meta { last_log_id: self.last_applied, last_membership: self.last_membership.clone(), snapshot_id };
        let stored = StoredSnapshot { meta, state: self.state.clone() };
        self.slot.store(stored.clone()).await?;
        stored.to_snapshot()
    }
}
