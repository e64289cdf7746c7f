//! Torn journal tails: a writer is killed right after an unsynced batch, and the end of that batch is then cut off
//! (or overwritten with zeros, as a torn sector would be) in the newest journal file. fjall must recover to the
//! last complete batch: every synced record present, the torn batch gone entirely, and the store writable.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use settee_store::{FjallStore, VbStore};

use crate::writer::{check_store, deadline, record_for, Mode, Writer, VBS};

/// Bytes of the last batch that are cut off or zeroed.
const TORN_BYTES: u64 = 3;

enum Damage {
    Truncate,
    Zero,
}

/// The journal with the highest id: the one fjall was appending to.
fn newest_journal(dir: &Path) -> PathBuf {
    let journals = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path());
    let id = |p: &PathBuf| p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<u64>().ok());
    journals.filter(|p| p.extension().is_some_and(|x| x == "jnl")).max_by_key(|p| id(p)).unwrap()
}

/// Damages the last `TORN_BYTES` written bytes of the newest journal. fjall pre-sizes journals with zeros, so the
/// end of the written data is the last non-zero byte, which lies inside the last (unsynced) batch.
fn tear_journal_tail(dir: &Path, damage: &Damage) {
    let path = newest_journal(dir);
    let mut file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).expect("journal holds data") as u64 + 1;
    assert!(end > TORN_BYTES);
    match damage {
        Damage::Truncate => file.set_len(end - TORN_BYTES).unwrap(),
        Damage::Zero => {
            file.seek(SeekFrom::Start(end - TORN_BYTES)).unwrap();
            file.write_all(&[0; TORN_BYTES as usize]).unwrap();
        }
    }
    file.sync_all().unwrap();
}

fn recovers_to_the_last_complete_batch(damage: Damage) {
    let dir = tempfile::tempdir().unwrap();
    let writer = Writer::spawn(dir.path(), Mode::TornTail);
    let deadline = deadline();
    let synced = writer.next_synced(deadline);
    let unsynced_high: u64 = writer.next("UNSYNCED ", deadline).parse().unwrap();
    assert!(unsynced_high > synced[0]);
    writer.kill();
    tear_journal_tail(dir.path(), &damage);
    {
        let s = FjallStore::open(dir.path()).unwrap();
        let highs = check_store(&s, &synced);
        assert_eq!(highs, synced, "the torn batch must vanish whole");
        let next = record_for(VBS[0], synced[0] + 1);
        s.write_batch(VBS[0], &[next]).unwrap();
        s.sync().unwrap();
    }
    let s = FjallStore::open(dir.path()).unwrap();
    assert_eq!(s.high_seqno(VBS[0]).unwrap(), synced[0] + 1, "writes after recovery survive the next reopen");
}

/// A journal whose last batch lost its final bytes is recovered to the batch before it.
#[test]
fn truncated_journal_tail_is_recovered() {
    recovers_to_the_last_complete_batch(Damage::Truncate);
}

/// A journal whose last batch ends in zeros instead of its final bytes is recovered to the batch before it.
#[test]
fn zeroed_journal_tail_is_recovered() {
    recovers_to_the_last_complete_batch(Damage::Zero);
}
