//! Crash-consistency of the log file: what was fsynced comes back, a torn last record is cut, damage before the
//! end is an error, and truncation and purge survive a reopen.

use openraft::{CommittedLeaderId, EntryPayload};

use super::*;
use crate::metadata::MetaCommand;

fn entry(index: u64) -> Entry {
    entry_naming(index, format!("b{index}"))
}

/// An entry whose size is set by `name`.
fn entry_naming(index: u64, name: String) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(MetaCommand::DeleteBucket(name).into()),
    }
}

fn frames(indexes: std::ops::Range<u64>) -> Vec<(u64, Vec<u8>)> {
    indexes.map(|i| (i, encode(&Record::Entry(entry(i))).expect("encode"))).collect()
}

fn reopen(dir: &Path) -> (LogFile, Option<LogId>, BTreeMap<u64, Entry>) {
    match LogFile::open(dir.join(LOG_FILE)) {
        Ok(opened) => opened,
        Err(e) => panic!("reopen: {e}"),
    }
}

/// Appended, fsynced entries come back after a reopen, in order.
#[test]
fn appended_entries_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..5)).expect("append");
    log.append(&frames(5..7)).expect("append");
    drop(log);
    let (_, purged, entries) = reopen(dir.path());
    assert_eq!(purged, None);
    assert_eq!(entries.keys().copied().collect::<Vec<_>>(), (0..7).collect::<Vec<_>>());
    assert_eq!(entries[&3], entry(3));
}

/// A crash in the middle of the last write leaves a partial record: reopening cuts it and keeps the rest.
#[test]
fn torn_last_record_is_cut_on_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..3)).expect("append");
    let full = log.len;
    log.file.set_len(full - 5).expect("tear");
    drop(log);
    let (log, _, entries) = reopen(dir.path());
    assert_eq!(entries.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(log.len, log.offsets[&1] + frames(1..2)[0].1.len() as u64);
    assert_eq!(fs::metadata(dir.path().join(LOG_FILE)).expect("stat").len(), log.len);
}

/// A flipped byte in a record that is not the last one is reported as corruption, never skipped.
#[test]
fn damaged_middle_record_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..3)).expect("append");
    drop(log);
    let path = dir.path().join(LOG_FILE);
    let mut bytes = fs::read(&path).expect("read");
    bytes[HEADER_BYTES + 2] ^= 0xff;
    fs::write(&path, bytes).expect("write");
    assert!(matches!(LogFile::open(path), Err(OpenError::Corrupt { .. })));
}

/// Truncation removes the entries from the given index on, durably.
#[test]
fn truncate_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..6)).expect("append");
    log.truncate(4).expect("truncate");
    log.append(&frames(4..5)).expect("append after truncate");
    drop(log);
    let (_, _, entries) = reopen(dir.path());
    assert_eq!(entries.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
}

/// A purge rewrites the file with its marker first; the kept entries and later appends come back.
#[test]
fn purge_marker_and_kept_entries_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..6)).expect("append");
    let kept: Vec<Entry> = (4..6).map(entry).collect();
    log.rewrite(entry(3).log_id, &kept).expect("purge");
    log.append(&frames(6..7)).expect("append after purge");
    drop(log);
    let (_, purged, entries) = reopen(dir.path());
    assert_eq!(purged, Some(entry(3).log_id));
    assert_eq!(entries.keys().copied().collect::<Vec<_>>(), vec![4, 5, 6]);
}

/// A gap between entries (a lost record in the middle) is corruption.
#[test]
fn gap_between_entries_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.append(&frames(0..2)).expect("append");
    log.append(&frames(3..4)).expect("append");
    drop(log);
    assert!(matches!(LogFile::open(dir.path().join(LOG_FILE)), Err(OpenError::Corrupt { .. })));
}

/// After a failed write the file refuses every later write.
#[test]
fn failed_write_poisons_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _, _) = reopen(dir.path());
    log.file = File::open(dir.path().join(LOG_FILE)).expect("read-only handle");
    assert!(log.append(&frames(0..1)).is_err());
    log.file = OpenOptions::new().append(true).open(dir.path().join(LOG_FILE)).expect("writable again");
    assert!(log.append(&frames(0..1)).is_err(), "poisoned");
}

/// Replication reads a byte-bounded prefix of the range it asks for: whole entries up to about
/// `APPEND_BYTES_TARGET`, never none, and successive reads cover the range in order.
#[tokio::test]
async fn replication_reads_are_bounded_by_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = LogStore::open(dir.path()).expect("open");
    // Each entry is about a tenth of the target, so a read of all 40 must be cut after 10 or 11.
    let big = |index: u64| entry_naming(index, "x".repeat(APPEND_BYTES_TARGET / 10));
    store.shared.mem.lock().entries.extend((0..40).map(|i| (i, big(i))));

    let mut start = 0;
    let mut reads = 0;
    while start < 40 {
        let got = store.limited_get_log_entries(start, 40).await.expect("read");
        assert!(!got.is_empty(), "a read returns at least one entry");
        let bytes: usize = got.iter().map(json_len).sum();
        assert!(bytes - json_len(got.last().expect("one")) < APPEND_BYTES_TARGET, "stops once over the target");
        assert_eq!(
            got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
            (start..start + got.len() as u64).collect::<Vec<_>>()
        );
        start += got.len() as u64;
        reads += 1;
    }
    assert!((4..=5).contains(&reads), "40 entries of a tenth of the target each take 4 reads, took {reads}");

    // One entry bigger than the target still goes out, alone.
    store.shared.mem.lock().entries.insert(40, entry_naming(40, "y".repeat(APPEND_BYTES_TARGET * 2)));
    let got = store.limited_get_log_entries(40, 41).await.expect("read");
    assert_eq!(got.len(), 1);
    // A small range is returned whole.
    assert_eq!(store.limited_get_log_entries(0, 3).await.expect("read").len(), 3);
}
