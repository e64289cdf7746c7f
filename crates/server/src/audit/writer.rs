//! The audit writer: one thread per node that takes events from the bounded queue, writes them as JSON lines to
//! `<dir>/audit.log`, and rotates the file by size and age. Rotated files are renamed
//! `<host>-<YYYY-MM-DDTHH-MM-SS>-audit.log` (the moment the file was opened, UTC), as Couchbase's audit daemon
//! names them. Runs off the request paths: nothing waits for it; a disk error is logged and the events of that
//! batch are counted as dropped.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use settee_types::Clock;

use super::{Counters, Record};

/// Where and how the writer writes; replaced whole when the settings change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WriterConfig {
    pub(super) enabled: bool,
    pub(super) dir: PathBuf,
    pub(super) rotate_size: u64,
    pub(super) rotate_interval_secs: u64,
}

pub(super) const FILE_NAME: &str = "audit.log";
/// How often an idle writer looks at the clock and the settings.
const TICK: Duration = Duration::from_millis(200);
/// The file's write buffer: a batch goes to the disk in few large writes.
const WRITE_BUFFER_BYTES: usize = 1 << 20;
/// Events written between two flushes at most.
const BATCH_MAX: usize = 4096;

struct OpenFile {
    out: BufWriter<File>,
    bytes: u64,
    opened_nanos: u64,
    dir: PathBuf,
}

pub(super) struct Writer {
    pub(super) config: Arc<Mutex<WriterConfig>>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) host: String,
    pub(super) counters: Arc<Counters>,
    file: Option<OpenFile>,
}

impl Writer {
    pub(super) fn new(
        config: Arc<Mutex<WriterConfig>>,
        clock: Arc<dyn Clock>,
        host: String,
        counters: Arc<Counters>,
    ) -> Writer {
        Writer { config, clock, host, counters, file: None }
    }

    /// Runs until every sender is gone, then flushes and returns.
    pub(super) fn run(mut self, queue: Receiver<Record>) {
        loop {
            let first = match queue.recv_timeout(TICK) {
                Ok(record) => Some(record),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let config = self.config.lock().clone();
            let batch: Vec<Record> = first.into_iter().chain(queue.try_iter().take(BATCH_MAX)).collect();
            self.write_batch(&config, &batch);
        }
        self.close();
    }

    /// Writes `batch` (possibly empty: a tick) under `config`, rotating first when the file is due.
    pub(super) fn write_batch(&mut self, config: &WriterConfig, batch: &[Record]) {
        if self.file.as_ref().is_some_and(|f| f.dir != config.dir) || (!config.enabled && batch.is_empty()) {
            self.close();
        }
        if self.due(config) {
            self.rotate();
        }
        if batch.is_empty() {
            return;
        }
        if let Err(e) = self.append(config, batch) {
            self.counters.dropped.fetch_add(batch.len() as u64, Ordering::Relaxed);
            tracing::error!(dir = %config.dir.display(), error = %e, events = batch.len(), "cannot write audit events");
            self.file = None;
        }
    }

    fn append(&mut self, config: &WriterConfig, batch: &[Record]) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(self.open(&config.dir)?);
        }
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        let mut line = Vec::with_capacity(512);
        for record in batch {
            line.clear();
            record.write_line(&mut line);
            line.push(b'\n');
            file.out.write_all(&line)?;
            file.bytes += line.len() as u64;
        }
        file.out.flush()?;
        self.counters.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
        if self.due(config) {
            self.rotate();
        }
        Ok(())
    }

    /// Whether the open file reached the size limit or the age limit.
    fn due(&self, config: &WriterConfig) -> bool {
        let Some(file) = &self.file else { return false };
        let age_secs = self.clock.now_nanos().saturating_sub(file.opened_nanos) / 1_000_000_000;
        (config.rotate_size > 0 && file.bytes >= config.rotate_size)
            || (file.bytes > 0 && age_secs >= config.rotate_interval_secs)
    }

    /// Opens `<dir>/audit.log`; one left by an earlier run (non-empty) is rotated first, so each file's age counts
    /// from its own opening.
    fn open(&mut self, dir: &Path) -> std::io::Result<OpenFile> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            let opened = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(self.clock.now_nanos(), |d| d.as_nanos() as u64);
            self.rename_rotated(dir, opened)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(OpenFile {
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            bytes: 0,
            opened_nanos: self.clock.now_nanos(),
            dir: dir.to_owned(),
        })
    }

    fn rotate(&mut self) {
        let Some(mut file) = self.file.take() else { return };
        let _ = file.out.flush();
        drop(file.out);
        match self.rename_rotated(&file.dir, file.opened_nanos) {
            Ok(to) => {
                self.counters.rotations.fetch_add(1, Ordering::Relaxed);
                tracing::info!(file = %to.display(), bytes = file.bytes, "audit log rotated");
            }
            Err(e) => tracing::error!(dir = %file.dir.display(), error = %e, "cannot rotate the audit log"),
        }
    }

    /// Renames `<dir>/audit.log` to its rotated name; a name already taken (two rotations in one second) gets a
    /// counter, so no rotated file is ever overwritten.
    fn rename_rotated(&self, dir: &Path, opened_nanos: u64) -> std::io::Result<PathBuf> {
        let stamp = super::time::file_stamp(opened_nanos);
        let mut to = dir.join(format!("{}-{stamp}-audit.log", self.host));
        let mut n = 1;
        while to.exists() {
            to = dir.join(format!("{}-{stamp}-{n}-audit.log", self.host));
            n += 1;
        }
        std::fs::rename(dir.join(FILE_NAME), &to)?;
        Ok(to)
    }

    fn close(&mut self) {
        if let Some(mut file) = self.file.take() {
            let _ = file.out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use settee_types::ManualClock;

    use super::*;

    fn writer(dir: &Path, clock: Arc<ManualClock>) -> (Writer, WriterConfig) {
        let config = WriterConfig { enabled: true, dir: dir.to_owned(), rotate_size: 0, rotate_interval_secs: 900 };
        let w = Writer::new(Arc::new(Mutex::new(config.clone())), clock, "node1".into(), Arc::default());
        (w, config)
    }

    fn record(id: u32) -> Record {
        Record {
            id,
            timestamp_nanos: 0,
            user: None,
            remote: None,
            local: None,
            fields: super::super::Fields::Map(serde_json::Map::new()),
        }
    }

    fn rotated(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != FILE_NAME)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn file_rotates_once_older_than_the_interval() {
        // Proves rotation by time with a manual clock: nothing before the interval, one rotated file named with the
        // host and the opening time after it, and later events in a fresh audit.log.
        let dir = tempdir("time");
        let clock = Arc::new(ManualClock::new(1_700_000_000));
        let (mut w, config) = writer(&dir, clock.clone());
        w.write_batch(&config, &[record(8201)]);
        clock.advance_secs(899);
        w.write_batch(&config, &[]);
        assert!(rotated(&dir).is_empty());
        clock.advance_secs(1);
        w.write_batch(&config, &[]);
        assert_eq!(rotated(&dir), vec!["node1-2023-11-14T22-13-20-audit.log".to_owned()]);
        w.write_batch(&config, &[record(8203)]);
        let current = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(current.contains("\"id\":8203") && !current.contains("8201"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn file_rotates_by_size_without_overwriting_rotated_files() {
        // Proves rotation by size, and that rotations within one second keep every file (a counter is added).
        let dir = tempdir("size");
        let clock = Arc::new(ManualClock::new(1_700_000_000));
        let (mut w, mut config) = writer(&dir, clock);
        config.rotate_size = 10;
        for id in [8201, 8202, 8203] {
            w.write_batch(&config, &[record(id)]);
        }
        let names = rotated(&dir);
        assert_eq!(names.len(), 3, "{names:?}");
        let all: String = names.iter().map(|n| std::fs::read_to_string(dir.join(n)).unwrap()).collect();
        for id in [8201, 8202, 8203] {
            assert!(all.contains(&format!("\"id\":{id}")), "event {id} kept");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempdir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("settee-audit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }
}
