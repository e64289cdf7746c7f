//! `settee backup backup`: one backup of every bucket (or those `--include-data` names) into a new directory of the
//! repository, incremental from the repository's last complete backup of the same bucket (same uuid).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli::BackupArgs;
use crate::dcp_reader::{read_node, NodeRead, VbOutcome, VbTask};
use crate::error::BackupError;
use crate::layout::{
    check_name, list_backups, sync_files, write_file_atomically, write_json, BackupMeta, BucketBackup, FileMeta,
    VbPosition, BACKUP_META, FORMAT_VERSION, INDEXES_FILE, USERS_FILE,
};
use crate::rest::{BucketMap, Rest};

pub(crate) async fn run(a: &BackupArgs) -> Result<(), BackupError> {
    let repo = crate::repo::open(&a.repo.archive, &a.repo.repo)?;
    let rest = Rest::new(&a.cluster.cluster, &a.cluster.username, &a.cluster.password)?;
    let history: Vec<BackupMeta> = list_backups(&repo)?.into_iter().filter_map(|(_, m)| m).collect();
    let listed = rest.get_json("/pools/default/buckets").await?;
    let mut buckets: Vec<serde_json::Value> = listed.as_array().cloned().unwrap_or_default();
    if !a.include_data.is_empty() {
        buckets.retain(|b| b["name"].as_str().is_some_and(|n| a.include_data.iter().any(|i| i == n)));
    }
    let name = crate::time::backup_name_now();
    let dir = repo.join(&name);
    std::fs::create_dir_all(&dir).map_err(BackupError::file(&dir))?;
    let started = Instant::now();
    let mut metas = Vec::new();
    for b in &buckets {
        let bucket = b["name"].as_str().unwrap_or_default().to_string();
        // The latest backup of this bucket (same uuid: a recreated bucket starts over), not merely the latest backup:
        // one taken with --include-data may have left it out.
        let prev =
            history.iter().rev().find_map(|p| p.buckets.iter().find(|x| x.name == bucket && b["uuid"] == x.uuid));
        metas.push(back_up_bucket(&rest, &dir, &bucket, prev, a).await?);
    }
    let any_incremental = metas.iter().any(|m| m.full_vbuckets.len() < m.vbuckets.len());
    let (mut files, mut users, mut groups) = (Vec::new(), None, None);
    if a.enable_users {
        let (doc, u, g) = crate::users::fetch(&rest).await?;
        files.push(save(&dir, USERS_FILE, &doc)?);
        (users, groups) = (Some(u), Some(g));
        if !a.no_progress_bar {
            println!("{u} users and {g} groups backed up");
        }
    }
    let meta = BackupMeta {
        version: FORMAT_VERSION,
        name: name.clone(),
        cluster: a.cluster.cluster.clone(),
        kind: if any_incremental { "INCR" } else { "FULL" }.into(),
        buckets: metas,
        files,
        users,
        groups,
    };
    // The backup's directory (and its buckets' directories in it) must be durable before it is listed as done.
    sync_files(&[dir.clone()])?;
    write_json(&dir.join(BACKUP_META), &meta)?;
    let docs: u64 = meta.buckets.iter().map(|b| b.mutations + b.deletions).sum();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "Backup `{name}` ({}) completed: {} bucket(s), {docs} documents in {secs:.2} s ({:.0} docs/s)",
        meta.kind,
        meta.buckets.len(),
        docs as f64 / secs.max(1e-9)
    );
    Ok(())
}

async fn back_up_bucket(
    rest: &Rest,
    backup_dir: &Path,
    bucket: &str,
    prev: Option<&BucketBackup>,
    a: &BackupArgs,
) -> Result<BucketBackup, BackupError> {
    let progress_lines = !a.no_progress_bar;
    check_name("bucket", bucket)?;
    let config = rest.get_json(&format!("/pools/default/buckets/{bucket}")).await?;
    let uuid = config["uuid"].as_str().unwrap_or_default().to_string();
    let dir_name = format!("{bucket}-{uuid}");
    let dir = backup_dir.join(&dir_name);
    std::fs::create_dir_all(dir.join("data")).map_err(BackupError::file(&dir))?;
    let scopes_path = format!("/pools/default/buckets/{bucket}/scopes");
    let scopes_before = rest.get_json(&scopes_path).await?;
    let nodes = tasks_by_node(&BucketMap::of(&config, rest)?, prev)?;
    let progress = Arc::new(AtomicU64::new(0));
    let mut reads = tokio::task::JoinSet::new();
    for (addr, tasks) in nodes {
        let r = NodeRead {
            addr,
            username: rest.username.clone(),
            password: rest.password.clone(),
            bucket: bucket.to_string(),
            dir: dir.clone(),
            progress: progress.clone(),
        };
        reads.spawn(async move { read_node(&r, tasks).await });
    }
    let ticker = progress_lines.then(|| spawn_progress(bucket.to_string(), progress.clone()));
    let mut outcomes: Vec<VbOutcome> = Vec::new();
    while let Some(joined) = reads.join_next().await {
        let read = joined.map_err(|e| BackupError::Dcp(format!("a node's reader failed: {e}")))?;
        outcomes.extend(read?);
    }
    if let Some(t) = ticker {
        t.abort();
    }
    let written: Vec<PathBuf> = outcomes.iter().filter_map(|o| o.file.as_ref()).map(|f| dir.join(&f.path)).collect();
    tokio::task::spawn_blocking(move || sync_files(&written))
        .await
        .map_err(|e| BackupError::Usage(format!("syncing the data files failed: {e}")))??;
    // Collections created while the streams ran name documents too; ones dropped meanwhile are kept from before.
    let scopes = union_of_scopes(rest.get_json(&scopes_path).await?, &scopes_before);
    let mut files = vec![save(&dir, "bucket-config.json", &config)?, save(&dir, "scopes.json", &scopes)?];
    let mut indexes = None;
    if !a.disable_gsi_indexes {
        let defs = crate::indexes::fetch(rest, bucket).await?;
        indexes = Some(defs.indexes.len() as u64);
        let value = serde_json::to_value(&defs).map_err(|e| BackupError::Usage(e.to_string()))?;
        files.push(save(&dir, INDEXES_FILE, &value)?);
    }
    outcomes.sort_by_key(|o| o.vb);
    let mut meta = BucketBackup {
        name: bucket.to_string(),
        uuid,
        dir: dir_name,
        vbuckets: BTreeMap::new(),
        full_vbuckets: Vec::new(),
        files: Vec::new(),
        mutations: 0,
        deletions: 0,
        indexes,
    };
    for o in outcomes {
        meta.vbuckets.insert(o.vb, o.position);
        if o.full {
            meta.full_vbuckets.push(o.vb);
        }
        files.extend(o.file);
        meta.mutations += o.mutations;
        meta.deletions += o.deletions;
    }
    meta.files = files;
    if progress_lines {
        let ix = indexes.map_or(String::new(), |n| format!(", {n} index definitions"));
        println!("bucket {bucket}: {} mutations, {} deletions{ix} backed up", meta.mutations, meta.deletions);
    }
    Ok(meta)
}

/// `newer`'s scopes with every collection `older` names (by uid) that `newer` lacks.
pub(crate) fn union_of_scopes(mut newer: serde_json::Value, older: &serde_json::Value) -> serde_json::Value {
    for scope in older["scopes"].as_array().into_iter().flatten() {
        let Some(scopes) = newer["scopes"].as_array_mut() else { break };
        let i = match scopes.iter().position(|s| s["name"] == scope["name"]) {
            Some(i) => i,
            None => {
                scopes.push(serde_json::json!({ "name": scope["name"], "uid": scope["uid"], "collections": [] }));
                scopes.len() - 1
            }
        };
        let Some(list) = scopes[i]["collections"].as_array_mut() else { continue };
        for coll in scope["collections"].as_array().into_iter().flatten() {
            if !list.iter().any(|c| c["uid"] == coll["uid"]) {
                list.push(coll.clone());
            }
        }
    }
    newer
}

/// Writes a JSON file of the bucket's directory and returns its entry.
fn save(dir: &Path, rel: &str, value: &serde_json::Value) -> Result<FileMeta, BackupError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| BackupError::Usage(e.to_string()))?;
    write_file_atomically(&dir.join(rel), &bytes)?;
    Ok(FileMeta { path: rel.to_string(), bytes: bytes.len() as u64, crc32c: crc32c::crc32c(&bytes), records: 0 })
}

/// Groups the bucket's vBuckets by the node holding each active copy (`vBucketServerMap`), each with where the
/// previous backup left it.
fn tasks_by_node(
    map: &BucketMap,
    prev: Option<&BucketBackup>,
) -> Result<BTreeMap<SocketAddr, Vec<VbTask>>, BackupError> {
    let mut out: BTreeMap<SocketAddr, Vec<VbTask>> = BTreeMap::new();
    for (vb, active) in (0..=u16::MAX).zip(&map.actives) {
        let addr = active.and_then(|i| map.nodes.get(i)).ok_or_else(|| {
            BackupError::Cluster(format!("vBucket {vb} has no active copy: the cluster must be healthy to back up"))
        })?;
        let from: Option<VbPosition> = prev.and_then(|p| p.vbuckets.get(&vb).copied());
        out.entry(*addr).or_default().push(VbTask { vb, from });
    }
    Ok(out)
}

/// Prints a progress line every second: documents read and the rate.
fn spawn_progress(bucket: String, progress: Arc<AtomicU64>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let n = progress.load(Ordering::Relaxed);
            let rate = n as f64 / started.elapsed().as_secs_f64();
            println!("bucket {bucket}: {n} documents read ({rate:.0} docs/s)");
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Proves the scopes saved with a backup name every collection seen before or after the streams ran: one created
    /// meanwhile (only in the newer answer) and one dropped meanwhile (only in the older) are both kept, once.
    #[test]
    fn union_of_scopes_keeps_collections_when_created_or_dropped_during_the_backup() {
        let before = json!({"scopes": [{"name": "s", "uid": "8", "collections": [
            {"name": "dropped", "uid": "9"}, {"name": "kept", "uid": "a"}]}]});
        let after = json!({"scopes": [{"name": "s", "uid": "8", "collections": [
            {"name": "kept", "uid": "a"}, {"name": "created", "uid": "b"}]}, {"name": "t", "uid": "c", "collections": []}]});
        let u = super::union_of_scopes(after, &before);
        let names: Vec<&str> =
            u["scopes"][0]["collections"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["kept", "created", "dropped"]);
        assert_eq!(u["scopes"].as_array().unwrap().len(), 2);
    }
}
