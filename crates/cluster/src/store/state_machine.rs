//! The replicated state machine for openraft's `RaftStateMachine`: applies committed commands to the
//! [`ClusterMetadata`] and publishes every new state on a watch channel.
//!
//! Applying does not touch the disk: the state is rebuilt at start from `snapshot.json` (the last snapshot, written
//! atomically) plus the committed log entries after it. Snapshots are taken every ~1,000 entries and whole-state.
//!
//! A committed command this node cannot read (a newer settee proposed it: [`LogCommand::Unreadable`], or one newer
//! than the metadata version the node was told to read) stops the state machine there: applying around it would
//! leave this node's state different from every other node's. The reason is published on the `halted` channel
//! and logged, and `apply` fails with a storage error, on which openraft stops this node's Raft (it answers no
//! more Raft requests; the other nodes carry on without it). Restarted with the same binary, the node stops at the
//! same entry again; restarted on a binary that reads it, it carries on from there.

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
use crate::metadata::{ClusterMetadata, LogCommand};
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
    /// The highest metadata version this node applies (`MetaCommand::since`).
    reads_up_to: u32,
    /// Why this node stopped applying the log, once it has.
    halted: watch::Sender<Option<String>>,
}

/// What the state machine publishes: the applied state, and why it stopped applying, if it did.
pub(crate) struct Published {
    pub(crate) applied: watch::Receiver<Arc<ClusterMetadata>>,
    pub(crate) halted: watch::Receiver<Option<String>>,
}

impl StateMachine {
    /// Restores the last snapshot from `dir` (blocking: call from a blocking thread), for a node that reads
    /// metadata versions up to `reads_up_to`.
    pub(crate) fn open(dir: &Path, reads_up_to: u32) -> Result<(StateMachine, Published), OpenError> {
        let stored: Option<StoredSnapshot> = read_json(&dir.join(SNAPSHOT_FILE))?;
        let (last_applied, last_membership, state) = match &stored {
            Some(s) => (s.meta.last_log_id, s.meta.last_membership.clone(), s.state.clone()),
            None => (None, StoredMembership::default(), Arc::new(ClusterMetadata::default())),
        };
        let (publish, applied) = watch::channel(state.clone());
        let snapshot =
            SnapshotSlot { dir: dir.into(), file: Arc::new(Mutex::new(())), current: Arc::new(Mutex::new(stored)) };
        let (halted, halted_rx) = watch::channel(None);
        let sm = StateMachine {
            last_applied,
            last_membership,
            state,
            snapshot,
            publish,
            snapshots_built: 0,
            reads_up_to,
            halted,
        };
        Ok((sm, Published { applied, halted: halted_rx }))
    }

    /// Applies one entry, or says why this node cannot (and must stop: see the module's doc).
    fn apply_one(&mut self, entry: Entry) -> Result<MetaResponse, String> {
        let index = entry.log_id.index;
        let response = match entry.payload {
            EntryPayload::Blank => MetaResponse::NotACommand,
            EntryPayload::Membership(membership) => {
                self.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                MetaResponse::NotACommand
            }
            EntryPayload::Normal(cmd) => {
                let cmd = self.readable(cmd, index)?;
                // Applied to a copy so a refused command cannot leave a half-changed state behind.
                let mut next = (*self.state).clone();
                match next.apply(&cmd) {
                    Ok(()) => {
                        self.state = Arc::new(next);
                        MetaResponse::Applied(self.state.clone())
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, index, "metadata command refused");
                        MetaResponse::Rejected(e)
                    }
                }
            }
        };
        self.last_applied = Some(entry.log_id);
        Ok(response)
    }

    /// The command of `cmd`, at log index `index`, or why it cannot be applied here.
    fn readable(&self, cmd: LogCommand, index: u64) -> Result<crate::metadata::MetaCommand, String> {
        let reads = self.reads_up_to;
        let why = match cmd {
            LogCommand::Known(known) if known.since() <= reads => return Ok(known),
            LogCommand::Known(known) => format!(
                "metadata command {} at log index {index} needs metadata version {}; this node reads up to {reads}",
                known.name(),
                known.since()
            ),
            LogCommand::Unreadable { name, reason, .. } => {
                // serde lists every variant it knows after this: noise in a log line.
                let reason = reason.split(", expected").next().unwrap_or_default();
                format!(
                    "metadata command {name} at log index {index} is unknown to this settee (metadata version \
                     {reads}: {reason}); a newer settee proposed it"
                )
            }
        };
        Err(format!(
            "{why}. This node stops applying the cluster metadata: restart it on a settee at least as new as \
            the cluster's other nodes"
        ))
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
        let mut responses = Vec::new();
        let mut stopped = None;
        for entry in entries {
            let log_id = entry.log_id;
            match self.apply_one(entry) {
                Ok(response) => responses.push(response),
                Err(why) => {
                    stopped = Some((log_id, why));
                    break;
                }
            }
        }
        if self.state.rev != rev {
            self.publish.send_replace(self.state.clone());
        }
        match stopped {
            None => Ok(responses),
            Some((log_id, why)) => {
                tracing::error!(index = log_id.index, "{why}");
                self.halted.send_replace(Some(why.clone()));
                Err(StorageIOError::apply(log_id, &std::io::Error::other(why)).into())
            }
        }
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
        let state: ClusterMetadata = match serde_json::from_slice(snapshot.get_ref()) {
            Ok(state) => state,
            Err(e) => {
                let why = format!(
                    "the cluster metadata snapshot {} cannot be read by this settee (metadata version {}): {e}. This \
                     node stops applying the cluster metadata: restart it on a settee at least as new as the \
                     cluster's other nodes",
                    meta.snapshot_id, self.reads_up_to
                );
                tracing::error!("{why}");
                self.halted.send_replace(Some(why));
                return Err(StorageIOError::read_snapshot(Some(meta.signature()), &e).into());
            }
        };
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
