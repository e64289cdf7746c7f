//! Index snapshots on disk, for the indexes of couchbase buckets: a node restarts with the entries its indexes
//! had and catches up from the saved seqnos instead of rebuilding every index from zero (Couchbase's
//! memory-optimized indexes persist snapshots the same way).
//!
//! Each index has one file, `<bucket dir>/indexes/<index id>.snap` (format: `settee_query::index::snapshot`),
//! replaced atomically (written beside, synced, renamed, directory synced): a crash leaves the old snapshot or the
//! new one, never a mix. Snapshots are written while the feeder keeps applying changes; on load a vBucket's
//! entries are kept only when the data service still holds everything the snapshot saw of it, on the same
//! history, and still holds every deletion after the replay point. Any other vBucket starts from zero.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use settee_engine::VbState;
use settee_query::index::{MemIndex, ScanRange, SnapshotReader, SnapshotWriter, VbPoint};
use settee_types::limits::NUM_VBUCKETS;
use settee_types::{vbucket_for_key, StreamStart, VbId};

use super::indexes::{BucketIndexes, IndexInstance};
use crate::node::BucketHandle;

/// Entries copied out of the index per lock acquisition while writing.
const WRITE_CHUNK: usize = 4096;

/// The directory of a couchbase bucket's index snapshots; `None` for an ephemeral bucket (its indexes stay in
/// memory only, as its data does).
pub(super) fn dir_of(bucket: &BucketHandle) -> Option<PathBuf> {
    bucket.persistence.as_ref().map(|p| p.dir.join("indexes"))
}

fn file_of(dir: &Path, id: &str) -> PathBuf {
    // Index ids are hex; anything else is spelled out byte by byte so no id can name a path outside the directory.
    let safe: String = if id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        id.to_string()
    } else {
        id.bytes().map(|b| format!("{b:02x}")).collect()
    };
    dir.join(format!("{safe}.snap"))
}

/// What a vBucket looks like now, for comparing with a snapshot's point.
fn vb_now(bucket: &BucketHandle, vb: u16) -> Option<settee_engine::VbStreamInfo> {
    bucket.stream_info(VbId(vb)).ok().filter(|i| i.state == VbState::Active)
}

/// Whether a snapshot's point for a vBucket can be used: the vBucket is active here, its history holds the
/// snapshot's `end` on the same branch (no rollback since), and no tombstone after the replay point was purged.
fn usable(point: &VbPoint, now: Option<&settee_engine::VbStreamInfo>) -> bool {
    let Some(info) = now.filter(|_| point.valid) else { return false };
    let at_end = StreamStart::new(point.uuid, point.end, point.end, point.end);
    point.start <= point.end
        && point.end <= info.high_seqno
        && (point.start >= info.purge_seqno)
        && info.failover.rollback_point(at_end, info.high_seqno, info.purge_seqno).is_none()
}

/// What loading found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Loaded {
    pub entries: u64,
    pub vbuckets: u16,
}

/// Loads the index's snapshot, if it has one, into `inst.mem` (which must still be empty and unfed). A damaged or
/// unusable snapshot is logged and leaves the index empty, to be built from zero.
pub(super) fn load(b: &BucketIndexes, inst: &IndexInstance) -> Loaded {
    let Some(dir) = &b.snapshot_dir else { return Loaded::default() };
    let path = file_of(dir, &inst.def.id);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Loaded::default(),
        Err(e) => {
            tracing::warn!(index = %inst.def.name, file = %path.display(), error = %e, "cannot open the index snapshot: building from zero");
            return Loaded::default();
        }
    };
    let started = std::time::Instant::now();
    // The snapshot on disk is the index's disk size from now on, not only once this node writes its next one.
    let size = file.metadata().map_or(0, |m| m.len());
    let reader = match SnapshotReader::open(file, &inst.def.id) {
        Ok(r) if r.primary() == inst.def.is_primary && r.vbuckets().len() == usize::from(NUM_VBUCKETS) => r,
        Ok(_) => {
            tracing::warn!(index = %inst.def.name, "the index snapshot does not match the index: building from zero");
            return Loaded::default();
        }
        Err(e) => {
            tracing::warn!(index = %inst.def.name, error = %e, "unreadable index snapshot: building from zero");
            return Loaded::default();
        }
    };
    let keep: Vec<bool> =
        reader.vbuckets().iter().enumerate().map(|(vb, p)| usable(p, vb_now(&b.bucket, vb as u16).as_ref())).collect();
    let applied: Vec<u64> = reader.vbuckets().iter().zip(&keep).map(|(p, &k)| if k { p.start } else { 0 }).collect();
    let staging = MemIndex::new(inst.def.is_primary, usize::from(NUM_VBUCKETS));
    let mut entries = 0u64;
    let read = reader.entries(|e| {
        let vb = vbucket_for_key(e.doc_id.as_bytes(), NUM_VBUCKETS).0;
        if keep[usize::from(vb)] {
            staging.load(vb, e);
            entries += 1;
        }
    });
    if let Err(e) = read {
        tracing::warn!(index = %inst.def.name, error = %e, "damaged index snapshot: building from zero");
        return Loaded::default();
    }
    staging.set_applied(&applied);
    inst.mem.replace_with(staging);
    inst.snapshot_bytes.store(size, Ordering::Release);
    let vbuckets = keep.iter().filter(|&&k| k).count() as u16;
    tracing::info!(
        bucket = %b.bucket.name(), index = %inst.def.name, entries, vbuckets,
        seconds = started.elapsed().as_secs_f64(), "index loaded from its snapshot"
    );
    Loaded { entries, vbuckets }
}

/// Writes the index's snapshot (replacing the previous one) and returns its size in bytes.
pub(super) fn write(b: &BucketIndexes, inst: &IndexInstance) -> io::Result<u64> {
    let Some(dir) = &b.snapshot_dir else { return Ok(0) };
    std::fs::create_dir_all(dir)?;
    let path = file_of(dir, &inst.def.id);
    let tmp = path.with_extension("snap.tmp");
    let point_now = |vb: u16, applied: u64| {
        let uuid = vb_now(&b.bucket, vb).map(|i| i.failover.latest().uuid);
        (applied, inst.is_ready(vb), uuid)
    };
    let before: Vec<_> =
        inst.mem.applied_all().into_iter().enumerate().map(|(vb, a)| point_now(vb as u16, a)).collect();
    let mut w =
        SnapshotWriter::new(BufWriter::new(File::create(&tmp)?), &inst.def.id, inst.def.is_primary, NUM_VBUCKETS)?;
    let all = ScanRange::all();
    let mut after = None;
    loop {
        let chunk = inst.mem.scan(&all, after.as_ref(), WRITE_CHUNK);
        for e in &chunk {
            w.entry(e)?;
        }
        match chunk.into_iter().last() {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    let points: Vec<VbPoint> = inst
        .mem
        .applied_all()
        .into_iter()
        .enumerate()
        .zip(&before)
        .map(|((vb, end), &(start, ready_before, uuid_before))| {
            let (_, ready_after, uuid_after) = point_now(vb as u16, end);
            let same_branch = uuid_before.is_some() && uuid_before == uuid_after;
            VbPoint {
                start,
                end,
                uuid: uuid_after.unwrap_or(0),
                valid: ready_before && ready_after && same_branch && start <= end,
            }
        })
        .collect();
    let mut out = w.finish(&points)?;
    out.flush()?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    let size = file.metadata()?.len();
    drop(file);
    std::fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    inst.snapshot_bytes.store(size, Ordering::Release);
    Ok(size)
}

/// Removes the snapshot of a dropped index.
pub(super) fn remove(dir: &Path, id: &str) {
    let path = file_of(dir, id);
    if let Err(e) = std::fs::remove_file(&path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(file = %path.display(), error = %e, "cannot remove a dropped index's snapshot");
        }
    }
}

/// Removes snapshots (and leftover temporary files) of indexes that no longer exist: dropped while this node was
/// down, or a temporary file a crash left behind.
pub(super) fn remove_orphans(dir: &Path, ids: &[String]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let wanted: Vec<PathBuf> = ids.iter().map(|id| file_of(dir, id)).collect();
    for e in entries.flatten() {
        let path = e.path();
        let is_snapshot = path.extension().is_some_and(|x| x == "snap");
        if !is_snapshot || !wanted.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_engine::VbStreamInfo;
    use settee_types::FailoverLog;

    /// An active vBucket at `high` on branch 2 (from seqno 50), after branch 1 (from 0), with `purge` purged.
    fn active(high: u64, purge: u64) -> VbStreamInfo {
        let mut failover = FailoverLog::new(1, 0);
        failover.push(2, 50);
        VbStreamInfo {
            state: VbState::Active,
            failover,
            high_seqno: high,
            purge_seqno: purge,
            snapshot: (0, 0),
            generation: 0,
        }
    }

    fn point(start: u64, end: u64, uuid: u64) -> VbPoint {
        VbPoint { start, end, uuid, valid: true }
    }

    #[test]
    fn a_snapshot_point_is_used_only_when_the_data_still_holds_what_it_saw() {
        // Proves the load rule: the vBucket is active, holds the snapshot's end on the same history (a branch that
        // started later is fine, one that started before the end is a rollback), and lost no tombstone after the
        // replay point; anything else starts the vBucket from zero.
        let now = active(100, 0);
        assert!(usable(&point(80, 90, 2), Some(&now)), "same branch, the data is further on");
        assert!(usable(&point(20, 40, 1), Some(&now)), "an older branch that ended after the snapshot's end");
        assert!(!usable(&point(40, 60, 1), Some(&now)), "branch 1 ended at 50: seqnos 51-60 were rolled back");
        assert!(!usable(&point(80, 120, 2), Some(&now)), "the snapshot saw changes the data lost in the crash");
        assert!(!usable(&point(80, 90, 9), Some(&now)), "a history the vBucket never had");
        assert!(!usable(&point(80, 90, 2), Some(&active(100, 85))), "tombstones after the replay point were purged");
        assert!(usable(&point(85, 90, 2), Some(&active(100, 85))), "purged up to the replay point only");
        assert!(!usable(&VbPoint { valid: false, ..point(80, 90, 2) }, Some(&now)), "not ready while written");
        assert!(!usable(&point(80, 90, 2), None), "not active here");
        assert!(!usable(&point(95, 90, 2), Some(&now)), "start after end is damage");
    }
}
