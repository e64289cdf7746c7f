//! `settee backup info [--json]`: the repositories of an archive, their backups with type, size and document
//! counts, and every file whose size or CRC32C does not match what its backup recorded (or that is missing).
//!
//! The JSON uses cbbackupmgr's `info --json` names where settee has the same thing (`name`, `size`, `count`,
//! `repos`, `backups`, `date`, `type`, `complete`, `source`, `buckets[].items/mutations/tombstones`; `items` counts
//! both), plus `damaged` and per bucket `uuid`, `vbuckets_read_whole` and `indexes` (index definitions saved, null when
//! left out).

use std::path::Path;

use serde::Serialize;

use crate::cli::InfoArgs;
use crate::error::BackupError;
use crate::layout::{list_backups, BackupMeta, REPO_META};

#[derive(Serialize)]
struct ArchiveInfo {
    name: String,
    size: u64,
    count: usize,
    repos: Vec<RepoInfo>,
}

#[derive(Serialize)]
struct RepoInfo {
    name: String,
    count: usize,
    size: u64,
    backups: Vec<BackupInfo>,
}

#[derive(Serialize)]
struct BackupInfo {
    date: String,
    #[serde(rename = "type")]
    kind: String,
    complete: bool,
    source: String,
    size: u64,
    items: u64,
    mutations: u64,
    tombstones: u64,
    buckets: Vec<BucketInfo>,
    /// Users and groups saved (`--enable-users`); null when left out.
    users: Option<u64>,
    groups: Option<u64>,
    /// Files that are missing or whose size or checksum does not match.
    damaged: Vec<String>,
}

#[derive(Serialize)]
struct BucketInfo {
    name: String,
    uuid: String,
    size: u64,
    items: u64,
    mutations: u64,
    tombstones: u64,
    vbuckets_read_whole: usize,
    /// Index definitions saved; null when the backup left them out.
    indexes: Option<u64>,
}

pub(crate) fn run(a: &InfoArgs) -> Result<(), BackupError> {
    let mut repos = Vec::new();
    let mut names: Vec<String> = match &a.repo {
        Some(r) => {
            crate::repo::open(&a.archive, r)?;
            vec![r.clone()]
        }
        None => std::fs::read_dir(&a.archive)
            .map_err(BackupError::file(&a.archive))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join(REPO_META).exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    };
    names.sort();
    for name in names {
        repos.push(repo_info(&a.archive.join(&name), name)?);
    }
    let (size, count) = (repos.iter().map(|r| r.size).sum(), repos.len());
    let info = ArchiveInfo { name: a.archive.display().to_string(), size, count, repos };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&info).map_err(|e| BackupError::Usage(e.to_string()))?);
    } else {
        print_table(&info);
    }
    if info.repos.iter().flat_map(|r| &r.backups).any(|b| !b.damaged.is_empty()) {
        return Err(BackupError::Damaged("some backups have damaged files (listed above)".into()));
    }
    Ok(())
}

fn repo_info(dir: &Path, name: String) -> Result<RepoInfo, BackupError> {
    let mut backups = Vec::new();
    for (date, meta) in list_backups(dir)? {
        let Some(meta) = meta else {
            backups.push(BackupInfo {
                date,
                kind: "INCOMPLETE".into(),
                complete: false,
                source: String::new(),
                size: 0,
                items: 0,
                mutations: 0,
                tombstones: 0,
                buckets: Vec::new(),
                users: None,
                groups: None,
                damaged: Vec::new(),
            });
            continue;
        };
        let damaged = verify(&dir.join(&date), &meta);
        let buckets: Vec<BucketInfo> = meta
            .buckets
            .iter()
            .map(|b| BucketInfo {
                name: b.name.clone(),
                uuid: b.uuid.clone(),
                size: b.files.iter().map(|f| f.bytes).sum(),
                items: b.mutations + b.deletions,
                mutations: b.mutations,
                tombstones: b.deletions,
                vbuckets_read_whole: b.full_vbuckets.len(),
                indexes: b.indexes,
            })
            .collect();
        backups.push(BackupInfo {
            date,
            kind: meta.kind.clone(),
            complete: true,
            source: meta.cluster.clone(),
            size: buckets.iter().map(|b| b.size).sum::<u64>() + meta.files.iter().map(|f| f.bytes).sum::<u64>(),
            items: buckets.iter().map(|b| b.items).sum(),
            mutations: buckets.iter().map(|b| b.mutations).sum(),
            tombstones: buckets.iter().map(|b| b.tombstones).sum(),
            buckets,
            users: meta.users,
            groups: meta.groups,
            damaged,
        });
    }
    Ok(RepoInfo { name, count: backups.len(), size: backups.iter().map(|b| b.size).sum(), backups })
}

/// Every file of the backup that is missing or whose size or CRC32C differs from its record, as messages.
pub(crate) fn verify(backup_dir: &Path, meta: &BackupMeta) -> Vec<String> {
    let mut damaged = Vec::new();
    let cluster_files = meta.files.iter().map(|f| (String::new(), f));
    let bucket_files = meta.buckets.iter().flat_map(|b| b.files.iter().map(|f| (format!("{}/", b.dir), f)));
    for (dir, f) in cluster_files.chain(bucket_files) {
        let rel = format!("{dir}{}", f.path);
        match std::fs::read(backup_dir.join(&rel)) {
            Err(e) => damaged.push(format!("{rel}: {e}")),
            Ok(bytes) if bytes.len() as u64 != f.bytes => {
                damaged.push(format!("{rel}: {} bytes, {} expected", bytes.len(), f.bytes))
            }
            Ok(bytes) if crc32c::crc32c(&bytes) != f.crc32c => damaged.push(format!("{rel}: checksum mismatch")),
            Ok(_) => {}
        }
    }
    damaged
}

fn print_table(info: &ArchiveInfo) {
    println!("Archive: {}", info.name);
    for r in &info.repos {
        println!("  Repo: {} ({} backups, {} bytes)", r.name, r.count, r.size);
        println!("    {:<32} {:<10} {:>12} {:>10} {:>10}", "Backup", "Type", "Size", "Mutations", "Tombstones");
        for b in &r.backups {
            println!("    {:<32} {:<10} {:>12} {:>10} {:>10}", b.date, b.kind, b.size, b.mutations, b.tombstones);
            if let (Some(u), Some(g)) = (b.users, b.groups) {
                println!("      users: {u}, groups: {g}");
            }
            for k in &b.buckets {
                let ix = k.indexes.map_or("not backed up".to_string(), |n| n.to_string());
                println!("      bucket {}: {} items, index definitions: {ix}", k.name, k.items);
            }
            for d in &b.damaged {
                println!("      DAMAGED {d}");
            }
        }
    }
}
