//! The writer process of the crash tests and the model its writes are checked against.
//!
//! The crash tests run this test binary again as a child (`child_entry`, selected by name, with the store
//! directory in an environment variable). The child writes a deterministic workload: every record is a pure
//! function of (vBucket, seqno), so the parent can check any record it finds after the kill, and knows exactly
//! what the store must hold for a given high seqno. After each sync the child prints `SYNCED h0 h1 h2 h3`, the
//! durable high seqno of each vBucket, so the parent knows what must survive a SIGKILL.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use settee_store::{FjallStore, Record, RecordMeta, VbStore};
use settee_types::VbId;

pub const VBS: [VbId; 4] = [VbId(0), VbId(1), VbId(513), VbId(1023)];
const KEYS_PER_VB: u64 = 200;
const BATCH_RECORDS: u64 = 50;
const ROUNDS_PER_SYNC: u64 = 3;
/// A bound on the child's loop; the parent kills it long before.
const ROUNDS_MAX: u64 = 1_000_000;
const DIR_ENV: &str = "SETTEE_STORE_WRITER_DIR";
const MODE_ENV: &str = "SETTEE_STORE_WRITER_MODE";

fn mix(vb: VbId, seqno: u64) -> u64 {
    let mut x = seqno.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(vb.0).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 29;
    x.wrapping_mul(0x94d0_49bb_1331_11eb) ^ (x >> 32)
}

/// The record seqno `seqno` writes in `vb`: one of 200 keys, a tombstone every 7th seqno, else a 200-byte value.
pub fn record_for(vb: VbId, seqno: u64) -> Record {
    let key = format!("key-{:03}", mix(vb, seqno) % KEYS_PER_VB).into_bytes();
    let deleted = seqno.is_multiple_of(7);
    let mut value = if deleted { Vec::new() } else { format!("{}:{seqno}:", vb.0).into_bytes().repeat(200) };
    value.truncate(200);
    let expiry = if deleted { 1_700_000_000 } else { 0 };
    let meta = RecordMeta { cas: (seqno << 16) | 1, seqno, rev: seqno, flags: 0, expiry, datatype: 1, deleted };
    Record::new(key, value, meta)
}

/// What a vBucket holds when its history is exactly seqnos `1..=high`: each key at its latest seqno.
fn model(vb: VbId, high: u64) -> BTreeMap<Vec<u8>, u64> {
    (1..=high).map(|seqno| (record_for(vb, seqno).key, seqno)).collect()
}

/// Asserts that every vBucket of the reopened store holds exactly the history up to its high seqno (batches are
/// atomic and the journal is a prefix, so nothing else is allowed), that the high seqno is at least the synced
/// one, and that every key reads back its model record. Returns the high seqnos.
pub fn check_store(s: &FjallStore, synced: &[u64; 4]) -> [u64; 4] {
    let mut highs = [0; 4];
    for (i, &vb) in VBS.iter().enumerate() {
        let high = s.high_seqno(vb).unwrap();
        assert!(high >= synced[i], "vb {}: high seqno {high} lost synced writes up to {}", vb.0, synced[i]);
        assert_eq!(high % BATCH_RECORDS, 0, "vb {}: high seqno {high} is not on a batch boundary", vb.0);
        let want = model(vb, high);
        let mut scanned = Vec::new();
        s.scan_seqnos(vb, 0, u64::MAX, &mut |r| scanned.push(r)).unwrap();
        let mut want_by_seqno: Vec<u64> = want.values().copied().collect();
        want_by_seqno.sort_unstable();
        assert_eq!(scanned.iter().map(|r| r.meta.seqno).collect::<Vec<_>>(), want_by_seqno, "vb {}", vb.0);
        for r in &scanned {
            assert_eq!(r, &record_for(vb, r.meta.seqno), "vb {}: wrong record at seqno {}", vb.0, r.meta.seqno);
        }
        for k in 0..KEYS_PER_VB {
            let key = format!("key-{k:03}").into_bytes();
            let got = s.get(vb, &key).unwrap();
            assert_eq!(got, want.get(&key).map(|&seqno| record_for(vb, seqno)), "vb {}: key-{k:03}", vb.0);
        }
        highs[i] = high;
    }
    highs
}

/// How the child behaves once it has written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write and sync forever, printing `SYNCED` after each sync.
    Forever,
    /// Write and sync a few rounds, then one more batch to the first vBucket without syncing, print `UNSYNCED`,
    /// and wait (blocked on stdin) to be killed.
    TornTail,
}

/// Not a test on its own: the body of the child writer process, which only runs when the crash tests set the
/// environment variable. Proves nothing by itself.
#[test]
fn child_entry() {
    let Some(dir) = std::env::var_os(DIR_ENV) else { return };
    let mode = if std::env::var_os(MODE_ENV).is_some_and(|m| m == "torn") { Mode::TornTail } else { Mode::Forever };
    let s = FjallStore::open(Path::new(&dir)).unwrap();
    let mut next: Vec<u64> = VBS.iter().map(|&vb| s.high_seqno(vb).unwrap() + 1).collect();
    let mut write_round = |s: &FjallStore, vbs: &[VbId]| {
        for (i, &vb) in vbs.iter().enumerate() {
            let batch: Vec<_> = (next[i]..next[i] + BATCH_RECORDS).map(|seqno| record_for(vb, seqno)).collect();
            s.write_batch(vb, &batch).unwrap();
            next[i] += BATCH_RECORDS;
        }
    };
    for round in 1..=ROUNDS_MAX {
        write_round(&s, &VBS);
        if round % ROUNDS_PER_SYNC == 0 {
            s.sync().unwrap();
            let highs: Vec<String> = VBS.iter().map(|&vb| s.high_seqno(vb).unwrap().to_string()).collect();
            println!("SYNCED {}", highs.join(" "));
            if mode == Mode::TornTail {
                write_round(&s, &VBS[..1]);
                println!("UNSYNCED {}", s.high_seqno(VBS[0]).unwrap());
                let _ = std::io::stdin().read(&mut [0u8; 1]);
                return;
            }
        }
    }
}

/// A running child writer; killed with SIGKILL when dropped, if it still runs.
pub struct Writer {
    child: Child,
    lines: Receiver<String>,
}

impl Writer {
    pub fn spawn(dir: &Path, mode: Mode) -> Writer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["writer::child_entry", "--exact", "--nocapture", "--test-threads", "1", "-q"])
            .env(DIR_ENV, dir)
            .env(MODE_ENV, if mode == Mode::TornTail { "torn" } else { "forever" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Writer { child, lines }
    }

    /// The rest of the next output line containing `marker`, waiting at most until `deadline`.
    pub fn next(&self, marker: &str, deadline: Instant) -> String {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|e| panic!("no {marker} line from writer: {e}"));
            if let Some((_, rest)) = line.split_once(marker) {
                return rest.trim().to_string();
            }
        }
    }

    /// The high seqnos of a `SYNCED` line.
    pub fn next_synced(&self, deadline: Instant) -> [u64; 4] {
        let rest = self.next("SYNCED ", deadline);
        let highs: Vec<u64> = rest.split(' ').map(|h| h.parse().unwrap()).collect();
        highs.try_into().unwrap()
    }

    /// SIGKILL, then reap the process so its lock on the store directory is gone.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}
