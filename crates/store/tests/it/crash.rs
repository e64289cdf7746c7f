//! Crash consistency: a writer process is killed with SIGKILL at an arbitrary point of its write stream, several
//! times over the same store. After each kill the reopened store holds every synced record, and exactly the
//! history up to its high seqno: no partial batch, no wrong value.

use settee_store::FjallStore;

use crate::writer::{check_store, deadline, Mode, Writer};

/// Each round kills the writer after a different number of syncs (it keeps writing unsynced batches meanwhile),
/// reopens the store in this process and checks it against the model; the next round's writer continues from
/// the recovered high seqnos.
#[test]
fn sigkill_loses_no_synced_write_and_returns_no_wrong_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut synced = [0u64; 4];
    for (round, syncs_before_kill) in [3, 1, 5, 2].into_iter().enumerate() {
        let writer = Writer::spawn(dir.path(), Mode::Forever);
        let deadline = deadline();
        for _ in 0..syncs_before_kill {
            synced = writer.next_synced(deadline);
        }
        writer.kill();
        let s = FjallStore::open(dir.path()).unwrap();
        let highs = check_store(&s, &synced);
        eprintln!("round {round}: synced {synced:?}, recovered {highs:?}");
        synced = highs;
    }
}
