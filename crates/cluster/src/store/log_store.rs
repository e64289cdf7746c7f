//! The Raft log on disk, for openraft's `RaftLogStorage`.
//!
//! `raft-log` is an append-only file of records, each `[payload length: u32 LE][CRC32C of payload: u32 LE][payload:
//! JSON]`, the payload being a log entry or, first in the file, the id of the last purged entry. An append is
//! written and fsynced before openraft is told it is durable. Truncation cuts the file at the first removed record;
//! a purge rewrites the file (temporary file, fsync, rename) without the purged entries. `vote.json` and
//! `committed.json` are replaced atomically. Everything in the file is also held in memory: the metadata log is
//! small and snapshots keep it short.
//!
//! File I/O runs on tokio's blocking pool so an fsync never stalls the reactor. Two locks, never held together:
//! `mem` (short, readable from any task) and `file` (held only by blocking I/O). A failed write or fsync poisons the
//! file: every later write fails, and openraft stops the node (the log's durable content is no longer known).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::durable_file::{read_json, sync_parent, write_atomic};
use super::error::OpenError;
use crate::transport::TypeConfig;
use crate::vbmap::NodeId;

const LOG_FILE: &str = "raft-log";
const VOTE_FILE: &str = "vote.json";
const COMMITTED_FILE: &str = "committed.json";
const HEADER_BYTES: usize = 8;
/// A record longer than this is refused on write and treated as corruption on read.
const RECORD_BYTES_MAX: usize = 64 << 20;
/// Replication reads at most about this many bytes of entries for one append (always at least one entry).
/// openraft gives an append one heartbeat interval; a rebalance logs a whole vBucket map (tens of KiB) per step, and
/// 64 of them (`max_payload_entries`) took longer than that on a loaded machine, so a new member never caught up.
pub(crate) const APPEND_BYTES_TARGET: usize = 256 << 10;

type Entry = openraft::Entry<TypeConfig>;
type LogId = openraft::LogId<NodeId>;
type Vote = openraft::Vote<NodeId>;
type StorageResult<T> = Result<T, StorageError<NodeId>>;

#[derive(Serialize, Deserialize)]
enum Record {
    Purged(LogId),
    Entry(Entry),
}

/// Cheap to clone: the clone is also the log reader handed to replication tasks.
#[derive(Clone)]
pub(crate) struct LogStore {
    shared: Arc<Shared>,
}

struct Shared {
    dir: PathBuf,
    mem: Mutex<Mem>,
    file: Mutex<LogFile>,
}

struct Mem {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

struct LogFile {
    path: PathBuf,
    file: File,
    len: u64,
    /// Byte offset of every entry's record, by log index.
    offsets: BTreeMap<u64, u64>,
    poisoned: bool,
}

impl LogStore {
    /// Restores the log, vote and committed id from `dir` (blocking: call from a blocking thread).
    pub(crate) fn open(dir: &Path) -> Result<LogStore, OpenError> {
        let vote = read_json(&dir.join(VOTE_FILE))?;
        let committed = read_json(&dir.join(COMMITTED_FILE))?;
        let (file, last_purged, entries) = LogFile::open(dir.join(LOG_FILE))?;
        let mem = Mem { entries, last_purged, vote, committed };
        Ok(LogStore { shared: Arc::new(Shared { dir: dir.into(), mem: Mutex::new(mem), file: Mutex::new(file) }) })
    }

    /// Runs blocking file work with the file lock held, off the reactor.
    async fn with_file<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Path, &mut LogFile) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || work(&shared.dir, &mut shared.file.lock()))
            .await
            .map_err(io::Error::other)?
    }

    /// The log index known committed when the store was opened (re-applied at start without a leader).
    pub(crate) fn committed_index(&self) -> Option<u64> {
        self.shared.mem.lock().committed.map(|id| id.index)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry>> {
        Ok(self.shared.mem.lock().entries.range(range).map(|(_, e)| e.clone()).collect())
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> StorageResult<Vec<Entry>> {
        let mem = self.shared.mem.lock();
        let mut range = mem.entries.range(start..end).map(|(_, e)| e).peekable();
        let mut entries = Vec::new();
        let mut bytes = 0;
        // Only an entry with another after it is measured: the common one-entry append costs no extra encoding.
        while let Some(entry) = range.next() {
            entries.push(entry.clone());
            if range.peek().is_none() {
                break;
            }
            bytes += json_len(entry);
            if bytes >= APPEND_BYTES_TARGET {
                break;
            }
        }
        Ok(entries)
    }
}

/// The length of `value` as JSON, without building the text.
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing a log entry cannot fail: it was serialized when it was appended.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let mem = self.shared.mem.lock();
        let last_log_id = mem.entries.values().next_back().map(|e| e.log_id).or(mem.last_purged);
        Ok(LogState { last_purged_log_id: mem.last_purged, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        let bytes = serde_json::to_vec(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.with_file(move |dir, _| write_atomic(&dir.join(VOTE_FILE), &bytes))
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.shared.mem.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        Ok(self.shared.mem.lock().vote)
    }

    /// Saved so that a restart re-applies committed entries at once instead of waiting for a leader.
    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        let bytes = serde_json::to_vec(&committed).map_err(|e| StorageIOError::write(&e))?;
        self.with_file(move |dir, _| write_atomic(&dir.join(COMMITTED_FILE), &bytes))
            .await
            .map_err(|e| StorageIOError::write(&e))?;
        self.shared.mem.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        Ok(self.shared.mem.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let mut frames = Vec::with_capacity(entries.len());
        for entry in &entries {
            let frame = encode(&Record::Entry(entry.clone())).map_err(|e| StorageIOError::write_logs(&e))?;
            frames.push((entry.log_id.index, frame));
        }
        let written = self.with_file(move |_, file| file.append(&frames)).await;
        if let Err(e) = written {
            callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(StorageIOError::write_logs(&e).into());
        }
        let mut mem = self.shared.mem.lock();
        for entry in entries {
            mem.entries.insert(entry.log_id.index, entry);
        }
        drop(mem);
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> StorageResult<()> {
        let index = log_id.index;
        self.with_file(move |_, file| file.truncate(index)).await.map_err(|e| StorageIOError::write_logs(&e))?;
        self.shared.mem.lock().entries.split_off(&index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> StorageResult<()> {
        let kept: Vec<Entry> = {
            let mem = self.shared.mem.lock();
            mem.entries.range(log_id.index + 1..).map(|(_, e)| e.clone()).collect()
        };
        self.with_file(move |_, file| file.rewrite(log_id, &kept)).await.map_err(|e| StorageIOError::write_logs(&e))?;
        let mut mem = self.shared.mem.lock();
        mem.entries = mem.entries.split_off(&(log_id.index + 1));
        mem.last_purged = Some(log_id);
        Ok(())
    }
}

fn encode(record: &Record) -> io::Result<Vec<u8>> {
    let payload = serde_json::to_vec(record).map_err(io::Error::other)?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| *len as usize <= RECORD_BYTES_MAX)
        .ok_or_else(|| io::Error::other(format!("log record of {} bytes is over the limit", payload.len())))?;
    let mut frame = Vec::with_capacity(HEADER_BYTES + payload.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// One record read back from the file, or why reading stopped.
enum Decoded {
    Record {
        record: Record,
        next: usize,
    },
    /// The file ends inside this record: a write that was never acknowledged.
    TornTail,
    Corrupt(String),
}

fn decode(bytes: &[u8], at: usize) -> Decoded {
    let Some(header) = bytes.get(at..at + HEADER_BYTES) else {
        return Decoded::TornTail;
    };
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len > RECORD_BYTES_MAX {
        return Decoded::Corrupt(format!("record at {at} claims {len} bytes"));
    }
    let end = at + HEADER_BYTES + len;
    let Some(payload) = bytes.get(at + HEADER_BYTES..end) else {
        return Decoded::TornTail;
    };
    if crc32c::crc32c(payload) != crc {
        // Only the last record can be half-written; a bad checksum before it is damage, not a crash.
        return if end == bytes.len() { Decoded::TornTail } else { Decoded::Corrupt(format!("bad checksum at {at}")) };
    }
    match serde_json::from_slice(payload) {
        Ok(record) => Decoded::Record { record, next: end },
        Err(e) => Decoded::Corrupt(format!("record at {at}: {e}")),
    }
}

/// A reopened log file: the file, the last purged log id, and the entries after it.
type Recovered = (LogFile, Option<LogId>, BTreeMap<u64, Entry>);

impl LogFile {
    /// Reads every record back, cuts a torn tail, and checks the entries are consecutive.
    fn open(path: PathBuf) -> Result<Recovered, OpenError> {
        let io_err = |source| OpenError::Io { path: path.clone(), source };
        let corrupt = |reason: String| OpenError::Corrupt { path: path.clone(), reason };
        let _ = fs::remove_file(path.with_extension("tmp"));
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err(e)),
        };
        let mut last_purged = None;
        let mut entries: BTreeMap<u64, Entry> = BTreeMap::new();
        let mut offsets = BTreeMap::new();
        let mut at = 0;
        while at < bytes.len() {
            match decode(&bytes, at) {
                Decoded::Record { record: Record::Purged(id), next } if at == 0 => {
                    last_purged = Some(id);
                    at = next;
                }
                Decoded::Record { record: Record::Purged(_), .. } => {
                    return Err(corrupt(format!("purge marker at {at} is not first")));
                }
                Decoded::Record { record: Record::Entry(entry), next } => {
                    let index = entry.log_id.index;
                    let expected = entries.keys().next_back().map(|i| i + 1).or(last_purged.map(|p| p.index + 1));
                    if expected.is_some_and(|e| e != index) {
                        return Err(corrupt(format!("entry {index} at {at} follows {expected:?}")));
                    }
                    offsets.insert(index, at as u64);
                    entries.insert(index, entry);
                    at = next;
                }
                Decoded::TornTail => {
                    tracing::warn!(path = %path.display(), at, "cutting a torn record at the end of the raft log");
                    break;
                }
                Decoded::Corrupt(reason) => return Err(corrupt(reason)),
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io_err)?;
        if (at as u64) < bytes.len() as u64 {
            file.set_len(at as u64).and_then(|()| file.sync_all()).map_err(io_err)?;
        }
        sync_parent(&path).map_err(io_err)?;
        let log = LogFile { path, file, len: at as u64, offsets, poisoned: false };
        Ok((log, last_purged, entries))
    }

    fn check(&self) -> io::Result<()> {
        if self.poisoned {
            return Err(io::Error::other("the raft log is poisoned by an earlier failed write"));
        }
        Ok(())
    }

    /// Runs `op`; a failure poisons the file because its durable content is unknown afterwards.
    fn guarded<T>(&mut self, op: impl FnOnce(&mut LogFile) -> io::Result<T>) -> io::Result<T> {
        self.check()?;
        let result = op(self);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn append(&mut self, frames: &[(u64, Vec<u8>)]) -> io::Result<()> {
        self.guarded(|log| {
            let mut buf = Vec::with_capacity(frames.iter().map(|(_, f)| f.len()).sum());
            let mut offset = log.len;
            let mut offsets = Vec::with_capacity(frames.len());
            for (index, frame) in frames {
                offsets.push((*index, offset));
                offset += frame.len() as u64;
                buf.extend_from_slice(frame);
            }
            log.file.write_all(&buf)?;
            log.file.sync_data()?;
            log.len = offset;
            log.offsets.extend(offsets);
            Ok(())
        })
    }

    /// Removes the entries from `index` on.
    fn truncate(&mut self, index: u64) -> io::Result<()> {
        let Some((_, &cut)) = self.offsets.range(index..).next() else {
            return Ok(());
        };
        self.guarded(|log| {
            log.file.set_len(cut)?;
            log.file.sync_all()?;
            log.len = cut;
            log.offsets.split_off(&index);
            Ok(())
        })
    }

    /// Replaces the file by one holding the purge marker and `kept`.
    fn rewrite(&mut self, purged: LogId, kept: &[Entry]) -> io::Result<()> {
        self.guarded(|log| {
            let mut buf = encode(&Record::Purged(purged))?;
            let mut offsets = BTreeMap::new();
            for entry in kept {
                offsets.insert(entry.log_id.index, buf.len() as u64);
                buf.extend_from_slice(&encode(&Record::Entry(entry.clone()))?);
            }
            write_atomic(&log.path, &buf)?;
            log.file = OpenOptions::new().append(true).open(&log.path)?;
            log.len = buf.len() as u64;
            log.offsets = offsets;
            Ok(())
        })
    }
}

#[cfg(test)]
#[path = "log_store_tests.rs"]
mod tests;
