//! `settee backup merge --start B --end B`: folds a range of backups into one, named after the last, as
//! cbbackupmgr's merge does, so old incremental backups can be dropped without losing the changes they hold.
//!
//! Per bucket (name and uuid) and per vBucket, the records of every backup in the range are read oldest first and
//! the newest version of each document kept (deletions included: a backup before the range may still hold the
//! document); the merged file is in seqno order. Each vBucket's resume position is the last backup's, so the next
//! incremental backup continues from it. The scopes and collections are the union of the range's (a collection
//! dropped meanwhile still names its records), the index definitions the newest backup of the range that saved
//! them. Every file is checked first; a damaged one stops the merge.
//!
//! The merged backup is built beside the others under a name starting with `.` (never listed as a backup), then
//! the merged backups are removed and it is renamed into place. A crash before the removal leaves the originals
//! (and a `.merge-*` directory to delete); a crash after it leaves the complete merged backup under its `.merge-*`
//! name, which `info` does not list: rename it to the name after `.merge-` by hand.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use crate::error::BackupError;
use crate::layout::{
    check_name, list_backups, read_json, sync_files, write_file_atomically, write_json, BackupMeta, BucketBackup,
    FileMeta, BACKUP_META, INDEXES_FILE, USERS_FILE,
};
use crate::record::{Record, RecordReader, RecordWriter};

pub(crate) fn run(archive: &Path, repo_name: &str, start: &str, end: &str) -> Result<(), BackupError> {
    check_name("backup", start)?;
    check_name("backup", end)?;
    let repo = crate::repo::open(archive, repo_name)?;
    let all: Vec<BackupMeta> = list_backups(&repo)?.into_iter().filter_map(|(_, m)| m).collect();
    let pos = |n: &str| all.iter().position(|b| b.name == n);
    let (Some(from), Some(to)) = (pos(start), pos(end)) else {
        return Err(BackupError::Usage(format!("--start `{start}` and --end `{end}` must name complete backups")));
    };
    if from >= to {
        return Err(BackupError::Usage("--start must name an older backup than --end".into()));
    }
    let range = &all[from..=to];
    for b in range {
        if let Some(d) = crate::info::verify(&repo.join(&b.name), b).first() {
            return Err(BackupError::Damaged(format!("backup {}: {d}; nothing merged", b.name)));
        }
    }
    let staging = repo.join(format!(".merge-{end}"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(BackupError::file(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(BackupError::file(&staging))?;
    let mut buckets: Vec<(String, String)> = Vec::new();
    for b in range.iter().flat_map(|b| &b.buckets) {
        if !buckets.contains(&(b.name.clone(), b.uuid.clone())) {
            buckets.push((b.name.clone(), b.uuid.clone()));
        }
    }
    let mut merged = Vec::new();
    for (name, uuid) in &buckets {
        let parts: Vec<(&str, &BucketBackup)> = range
            .iter()
            .flat_map(|b| b.buckets.iter().filter(|x| &x.name == name && &x.uuid == uuid).map(|x| (b.name.as_str(), x)))
            .collect();
        merged.push(merge_bucket(&repo, &staging, &parts)?);
    }
    // The users of the newest backup of the range that saved them.
    let (mut files, mut users, mut groups) = (Vec::new(), None, None);
    if let Some(b) = range.iter().rev().find(|b| b.users.is_some()) {
        let bytes = std::fs::read(repo.join(&b.name).join(USERS_FILE))?;
        write_file_atomically(&staging.join(USERS_FILE), &bytes)?;
        files.push(entry(USERS_FILE, &bytes));
        (users, groups) = (b.users, b.groups);
    }
    let meta = BackupMeta {
        version: range[0].version,
        name: end.to_string(),
        cluster: range[range.len() - 1].cluster.clone(),
        kind: range[0].kind.clone(),
        buckets: merged,
        files,
        users,
        groups,
    };
    write_json(&staging.join(BACKUP_META), &meta)?;
    for b in range {
        let dir = repo.join(&b.name);
        std::fs::remove_dir_all(&dir).map_err(BackupError::file(&dir))?;
    }
    std::fs::rename(&staging, repo.join(end)).map_err(BackupError::file(repo.join(end)))?;
    println!("Merged {} backups from `{start}` to `{end}` into `{end}`", range.len());
    Ok(())
}

/// Merges one bucket's parts (oldest first) into `staging/<bucket>-<uuid>`.
fn merge_bucket(repo: &Path, staging: &Path, parts: &[(&str, &BucketBackup)]) -> Result<BucketBackup, BackupError> {
    let (last_name, last) = parts[parts.len() - 1];
    let dir = staging.join(&last.dir);
    std::fs::create_dir_all(dir.join("data")).map_err(BackupError::file(&dir))?;
    let config = std::fs::read(repo.join(last_name).join(&last.dir).join("bucket-config.json"))?;
    write_file_atomically(&dir.join("bucket-config.json"), &config)?;
    let scopes = union_of_scopes(repo, parts)?;
    let scopes = serde_json::to_vec_pretty(&scopes).map_err(|e| BackupError::Usage(e.to_string()))?;
    write_file_atomically(&dir.join("scopes.json"), &scopes)?;
    let mut files = vec![entry("bucket-config.json", &config), entry("scopes.json", &scopes)];
    // The index definitions of the newest part that saved them.
    let with_indexes = parts.iter().rev().find(|(_, p)| p.indexes.is_some() && has_file(p, INDEXES_FILE));
    if let Some((name, part)) = with_indexes {
        let bytes = std::fs::read(repo.join(name).join(&part.dir).join(INDEXES_FILE))?;
        write_file_atomically(&dir.join(INDEXES_FILE), &bytes)?;
        files.push(entry(INDEXES_FILE, &bytes));
    }
    let mut vb_files: BTreeMap<&str, Vec<(&str, &BucketBackup)>> = BTreeMap::new();
    for &(name, part) in parts {
        for f in part.files.iter().filter(|f| f.path.starts_with("data/")) {
            vb_files.entry(f.path.as_str()).or_default().push((name, part));
        }
    }
    let (mut mutations, mut deletions) = (0, 0);
    let mut written = Vec::new();
    for (rel, sources) in vb_files {
        let mut latest: HashMap<(u32, Vec<u8>), Record> = HashMap::new();
        for (name, part) in sources {
            let path = repo.join(name).join(&part.dir).join(rel);
            let file = File::open(&path).map_err(BackupError::file(&path))?;
            let mut r = RecordReader::new(BufReader::new(file), path.display().to_string())?;
            while let Some(rec) = r.next_record()? {
                latest.insert((rec.collection, rec.key.clone()), rec);
            }
        }
        let mut records: Vec<Record> = latest.into_values().collect();
        records.sort_by_key(|r| r.seqno);
        let path = dir.join(rel);
        let f = File::create(&path).map_err(BackupError::file(&path))?;
        let mut w = RecordWriter::new(BufWriter::new(f))?;
        for rec in &records {
            w.write(rec)?;
            if rec.kind == crate::record::RecordKind::Mutation {
                mutations += 1;
            } else {
                deletions += 1;
            }
        }
        let (bytes, count, crc) = (w.bytes, w.records, w.crc);
        w.finish()?.into_inner().map_err(|e| BackupError::file(&path)(e.into_error()))?;
        written.push(path);
        files.push(FileMeta { path: rel.to_string(), bytes, crc32c: crc, records: count });
    }
    sync_files(&written)?;
    let mut full: Vec<u16> = parts.iter().flat_map(|(_, p)| p.full_vbuckets.iter().copied()).collect();
    full.sort_unstable();
    full.dedup();
    Ok(BucketBackup {
        name: last.name.clone(),
        uuid: last.uuid.clone(),
        dir: last.dir.clone(),
        vbuckets: last.vbuckets.clone(),
        full_vbuckets: full,
        files,
        mutations,
        deletions,
        indexes: with_indexes.and_then(|(_, p)| p.indexes),
    })
}

fn has_file(part: &BucketBackup, rel: &str) -> bool {
    part.files.iter().any(|f| f.path == rel)
}

fn entry(rel: &str, bytes: &[u8]) -> FileMeta {
    FileMeta { path: rel.to_string(), bytes: bytes.len() as u64, crc32c: crc32c::crc32c(bytes), records: 0 }
}

/// The last part's scopes.json with every collection an earlier part names (by uid) that it lacks.
fn union_of_scopes(repo: &Path, parts: &[(&str, &BucketBackup)]) -> Result<serde_json::Value, BackupError> {
    let read = |(name, part): &(&str, &BucketBackup)| -> Result<serde_json::Value, BackupError> {
        read_json(&repo.join(name).join(&part.dir).join("scopes.json"))
    };
    let mut out = read(&parts[parts.len() - 1])?;
    for p in parts.iter().rev().skip(1) {
        out = crate::backup::union_of_scopes(out, &read(p)?);
    }
    Ok(out)
}
