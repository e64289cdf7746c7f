//! The checkpoints of a replication on this node: one JSON file per replication under `<data dir>/xdcr/`, a map of
//! source vBucket → (vbuuid, seqno), replaced whole by rename so a crash leaves the old file or the new one.
//!
//! The runner also records what it saves in the cluster metadata (`MetaCommand::SaveXdcrCheckpoints`), and each
//! vBucket that starts being read resumes from the newer of this file and that record: checkpoints are
//! cluster-wide, as Couchbase keeps them in metakv, so a vBucket moved by a rebalance or a failover is not read
//! again from zero on its new node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use settee_xdcr::Checkpoint;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    /// Source vBucket → [vbuuid, seqno].
    vbuckets: BTreeMap<u16, (u64, u64)>,
}

/// The checkpoint file of one replication.
#[derive(Debug)]
pub struct CheckpointStore {
    path: PathBuf,
    current: BTreeMap<u16, (u64, u64)>,
}

impl CheckpointStore {
    /// The file of replication `id` under `dir`; its name is the id with every byte outside `[A-Za-z0-9_-]` hex
    /// escaped, so any id maps to one safe file name.
    pub fn path_for(dir: &Path, id: &str) -> PathBuf {
        let mut name = String::new();
        for b in id.bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                name.push(char::from(b));
            } else {
                name.push_str(&format!("%{b:02x}"));
            }
        }
        dir.join(format!("{name}.ckpt.json"))
    }

    /// Opens the file (a missing or unreadable one starts empty: the replication reads from zero, which is safe).
    pub fn open(dir: &Path, id: &str) -> CheckpointStore {
        let path = Self::path_for(dir, id);
        let current = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(f) => f.vbuckets,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unreadable XDCR checkpoints; starting from zero");
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        CheckpointStore { path, current }
    }

    pub fn checkpoints(&self) -> Vec<Checkpoint> {
        self.current.iter().map(|(&vb, &(vbuuid, seqno))| Checkpoint { vb, vbuuid, seqno }).collect()
    }

    /// Records `saved` and writes the file (tmp + fsync + rename + directory fsync).
    pub fn save(&mut self, saved: &[Checkpoint]) -> std::io::Result<()> {
        for c in saved {
            self.current.insert(c.vb, (c.vbuuid, c.seqno));
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let bytes = serde_json::to_vec(&File { vbuckets: self.current.clone() }).map_err(std::io::Error::other)?;
        settee_cluster::write_atomic(&self.path, &bytes)
    }

    /// Removes the checkpoint files under `dir` of every replication not in `keep` (deleted ones, also those
    /// deleted while this node was down); returns how many went.
    pub fn remove_others<'a>(dir: &Path, keep: impl IntoIterator<Item = &'a str>) -> usize {
        let kept: std::collections::HashSet<PathBuf> = keep.into_iter().map(|id| Self::path_for(dir, id)).collect();
        let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let ours = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".ckpt.json"));
            if ours && !kept.contains(&path) && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves saved checkpoints are read back by a new store (a restart), merged per vBucket, that an id with
    /// slashes maps to a file inside the directory, and that only the files of replications still kept stay.
    #[test]
    fn checkpoints_read_back_when_opened_again_and_go_with_their_replication() {
        let dir = std::env::temp_dir().join(format!("settee-xdcr-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let id = "abc/src/dst";
        assert!(CheckpointStore::path_for(&dir, id).starts_with(&dir));
        let mut s = CheckpointStore::open(&dir, id);
        assert!(s.checkpoints().is_empty());
        s.save(&[Checkpoint { vb: 1, vbuuid: 5, seqno: 10 }]).unwrap();
        s.save(&[Checkpoint { vb: 2, vbuuid: 6, seqno: 3 }, Checkpoint { vb: 1, vbuuid: 5, seqno: 12 }]).unwrap();
        let again = CheckpointStore::open(&dir, id);
        assert_eq!(
            again.checkpoints(),
            vec![Checkpoint { vb: 1, vbuuid: 5, seqno: 12 }, Checkpoint { vb: 2, vbuuid: 6, seqno: 3 }]
        );
        let mut other = CheckpointStore::open(&dir, "other");
        other.save(&[Checkpoint { vb: 0, vbuuid: 1, seqno: 1 }]).unwrap();
        assert_eq!(CheckpointStore::remove_others(&dir, ["other"]), 1);
        assert!(CheckpointStore::open(&dir, id).checkpoints().is_empty());
        assert_eq!(CheckpointStore::open(&dir, "other").checkpoints().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
