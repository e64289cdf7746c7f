//! `settee backup restore`: writes the documents of a range of backups (`--start` to `--end`, oldest first) back
//! through the KV service with SET_WITH_META / DEL_WITH_META, so CAS, revision, flags, expiry and xattrs are kept.
//! Conflict resolution on the server keeps a newer version already in the cluster (counted as skipped) unless
//! `--force-updates`. Every file is checked against its CRC32C before anything is written: a damaged backup is
//! refused, never half-restored. Missing scopes and collections are created first; `--map-data` renames buckets,
//! scopes or collections.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::Instant;

use settee_client::{vbucket_of, Connection, WithMetaWrite};
use settee_mcbp::{Feature, WithMetaExtras};
use settee_types::Status;
use tokio::sync::mpsc;

use crate::cli::RestoreArgs;
use crate::error::BackupError;
use crate::indexes::{IndexCounts, IndexFile};
use crate::layout::{list_backups, read_json, BackupMeta, BucketBackup, INDEXES_FILE, USERS_FILE};
use crate::record::{Record, RecordKind, RecordReader};
use crate::rest::{BucketMap, Rest};

/// Requests in flight per node connection.
const WINDOW: usize = 512;
/// Records queued per node before the file reader waits (back-pressure).
const QUEUE: usize = 4096;
/// TMPFAIL is retried every 5 ms for up to a minute (a bucket warming up, memory full while the pager works).
const TMPFAIL_RETRIES_MAX: u32 = 12_000;
/// A node that answers nothing for this long fails the restore.
const REPLY_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// Counts of one restore.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    written: u64,
    /// Refused by conflict resolution: the cluster holds a newer version.
    skipped: u64,
}

pub(crate) async fn run(a: &RestoreArgs) -> Result<(), BackupError> {
    let repo = crate::repo::open(&a.repo.archive, &a.repo.repo)?;
    let rest = Rest::new(&a.cluster.cluster, &a.cluster.username, &a.cluster.password)?;
    let backups = select(&repo, a.start.as_deref(), a.end.as_deref())?;
    for b in &backups {
        let damaged = crate::info::verify(&repo.join(&b.name), b);
        if let Some(first) = damaged.first() {
            return Err(BackupError::Damaged(format!("backup {}: {first}; nothing restored", b.name)));
        }
    }
    let mapping = Mapping::parse(&a.map_data)?;
    if a.overwrite_users && !a.enable_users {
        return Err(BackupError::Usage("--overwrite-users needs --enable-users".into()));
    }
    if a.enable_users {
        restore_users(&rest, &repo, &backups, a.overwrite_users).await?;
    }
    let started = Instant::now();
    let mut total = Counts::default();
    for b in &backups {
        for bucket in &b.buckets {
            let c = restore_bucket(&rest, &repo.join(&b.name), bucket, &mapping, a).await?;
            if !a.no_progress_bar {
                println!(
                    "backup {} bucket {}: {} written, {} skipped (newer in cluster)",
                    b.name, bucket.name, c.written, c.skipped
                );
            }
            total.written += c.written;
            total.skipped += c.skipped;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let docs = total.written + total.skipped;
    let ix = if a.disable_gsi_indexes {
        IndexCounts::default()
    } else {
        restore_indexes(&rest, &repo, &backups, &mapping, !a.no_progress_bar).await?
    };
    println!(
        "Restore completed: {} backup(s), {} documents written, {} skipped, in {secs:.2} s ({:.0} docs/s); \
         {} indexes created, {} existed",
        backups.len(),
        total.written,
        total.skipped,
        docs as f64 / secs.max(1e-9),
        ix.created,
        ix.existed,
    );
    Ok(())
}

/// Installs the users and groups of the newest backup of the range that saved them.
async fn restore_users(rest: &Rest, repo: &Path, backups: &[BackupMeta], overwrite: bool) -> Result<(), BackupError> {
    let Some(b) = backups.iter().rev().find(|b| b.users.is_some()) else {
        println!("Users: none restored (no backup of the range was taken with --enable-users)");
        return Ok(());
    };
    let path = repo.join(&b.name).join(USERS_FILE);
    let doc = std::fs::read(&path).map_err(BackupError::file(&path))?;
    let r = crate::users::restore(rest, &doc, overwrite).await?;
    println!(
        "Users: {} created, {} replaced, {} existing left as they are{}; {} groups created (from backup {})",
        r.created.len(),
        r.replaced.len(),
        r.skipped.len(),
        if r.skipped.is_empty() { String::new() } else { format!(" ({})", r.skipped.join(", ")) },
        r.groups_created,
        b.name
    );
    Ok(())
}

/// Creates the index definitions of each bucket from the newest backup of the range that saved them, once its
/// documents are all written (so a built index is built once, over them all).
async fn restore_indexes(
    rest: &Rest,
    repo: &Path,
    backups: &[BackupMeta],
    mapping: &Mapping,
    progress_lines: bool,
) -> Result<IndexCounts, BackupError> {
    let mut done: Vec<&str> = Vec::new();
    let mut total = IndexCounts::default();
    for b in backups.iter().rev() {
        for bucket in &b.buckets {
            if done.contains(&bucket.name.as_str()) || bucket.indexes.is_none() {
                continue;
            }
            done.push(&bucket.name);
            let file: IndexFile = read_json(&repo.join(&b.name).join(&bucket.dir).join(INDEXES_FILE))?;
            let c = crate::indexes::restore(rest, &file, |p| mapping.target(p), progress_lines).await?;
            total.created += c.created;
            total.existed += c.existed;
        }
    }
    Ok(total)
}

/// The complete backups from `start` to `end` (inclusive), oldest first.
fn select(repo: &Path, start: Option<&str>, end: Option<&str>) -> Result<Vec<BackupMeta>, BackupError> {
    let all: Vec<BackupMeta> = list_backups(repo)?.into_iter().filter_map(|(_, m)| m).collect();
    let find = |name: &str| {
        all.iter()
            .position(|b| b.name == name)
            .ok_or_else(|| BackupError::Usage(format!("no complete backup `{name}` in the repository")))
    };
    let from = start.map(find).transpose()?.unwrap_or(0);
    let to = end.map(find).transpose()?.unwrap_or(all.len().saturating_sub(1));
    if all.is_empty() || from > to {
        return Err(BackupError::Usage("no backups to restore in that range".into()));
    }
    Ok(all[from..=to].to_vec())
}

/// `--map-data`: `src=dst` pairs at bucket, scope or collection depth.
#[derive(Debug, Default)]
struct Mapping(Vec<(Vec<String>, Vec<String>)>);

impl Mapping {
    fn parse(pairs: &[String]) -> Result<Mapping, BackupError> {
        let mut out = Vec::new();
        for p in pairs {
            let (src, dst) =
                p.split_once('=').ok_or_else(|| BackupError::Usage(format!("--map-data `{p}`: use src=dst")))?;
            let split = |s: &str| s.split('.').map(str::to_string).collect::<Vec<_>>();
            let (src, dst) = (split(src), split(dst));
            if src.len() != dst.len() || src.len() > 3 || src.iter().chain(&dst).any(String::is_empty) {
                return Err(BackupError::Usage(format!("--map-data `{p}`: both sides must name the same depth")));
            }
            out.push((src, dst));
        }
        Ok(Mapping(out))
    }

    /// Where `[bucket, scope, collection]` goes: the most specific rule that matches wins.
    fn target(&self, path: [&str; 3]) -> [String; 3] {
        let mut best: Option<&(Vec<String>, Vec<String>)> = None;
        for rule in &self.0 {
            let matches = rule.0.iter().zip(path).all(|(a, b)| a == b);
            if matches && best.is_none_or(|b| b.0.len() < rule.0.len()) {
                best = Some(rule);
            }
        }
        let mut out = path.map(str::to_string);
        if let Some((src, dst)) = best {
            out[..src.len()].clone_from_slice(dst);
        }
        out
    }
}

/// The scopes and collections of a backup: collection uid → (scope, collection, maxTTL).
fn collections_of(scopes: &serde_json::Value) -> BTreeMap<u32, (String, String, i64)> {
    let mut out = BTreeMap::new();
    for s in scopes["scopes"].as_array().into_iter().flatten() {
        let scope = s["name"].as_str().unwrap_or_default();
        for c in s["collections"].as_array().into_iter().flatten() {
            let uid = c["uid"].as_str().and_then(|u| u32::from_str_radix(u, 16).ok());
            if let Some(uid) = uid {
                let ttl = c["maxTTL"].as_i64().unwrap_or(0);
                out.insert(uid, (scope.to_string(), c["name"].as_str().unwrap_or_default().to_string(), ttl));
            }
        }
    }
    out
}

/// Creates the missing scopes and collections of the target bucket; returns the target's collection ids by
/// (scope, collection).
async fn ensure_collections(
    rest: &Rest,
    bucket: &str,
    wanted: &[(String, String, i64)],
) -> Result<HashMap<(String, String), u32>, BackupError> {
    let path = format!("/pools/default/buckets/{bucket}/scopes");
    let have = collections_of(&rest.get_json(&path).await?);
    let exists = |s: &str, c: Option<&str>| have.values().any(|(hs, hc, _)| hs == s && c.is_none_or(|c| c == hc));
    for (scope, coll, ttl) in wanted {
        if !exists(scope, None) {
            let (status, body) = rest.post_form(&path, &[("name", scope)]).await?;
            if status != 200 && !exists(scope, None) {
                return Err(BackupError::Cluster(format!(
                    "creating scope {scope}: HTTP {status} {}",
                    String::from_utf8_lossy(&body)
                )));
            }
        }
        if !exists(scope, Some(coll)) {
            let ttl = ttl.to_string();
            let form = [("name", coll.as_str()), ("maxTTL", ttl.as_str())];
            let (status, body) = rest.post_form(&format!("{path}/{scope}/collections"), &form).await?;
            if status != 200 {
                return Err(BackupError::Cluster(format!(
                    "creating collection {scope}.{coll}: HTTP {status} {}",
                    String::from_utf8_lossy(&body)
                )));
            }
        }
    }
    let now = collections_of(&rest.get_json(&path).await?);
    Ok(now.into_iter().map(|(uid, (s, c, _))| ((s, c), uid)).collect())
}

async fn restore_bucket(
    rest: &Rest,
    backup_dir: &Path,
    b: &BucketBackup,
    mapping: &Mapping,
    a: &RestoreArgs,
) -> Result<Counts, BackupError> {
    let force = a.force_updates;
    let dir = backup_dir.join(&b.dir);
    let source: serde_json::Value = read_json(&dir.join("scopes.json"))?;
    let source = collections_of(&source);
    let mut per_target: BTreeMap<String, Vec<(u32, String, String, i64)>> = BTreeMap::new();
    for (uid, (scope, coll, ttl)) in &source {
        let [tb, ts, tc] = mapping.target([&b.name, scope, coll]);
        per_target.entry(tb).or_default().push((*uid, ts, tc, *ttl));
    }
    for target in per_target.keys() {
        if a.auto_create_buckets && !crate::create_bucket::exists(rest, target).await? {
            crate::create_bucket::create(rest, target, &dir.join("bucket-config.json")).await?;
        }
    }
    let mut cid_map: HashMap<u32, (String, u32)> = HashMap::new();
    for (target, list) in &per_target {
        let wanted: Vec<_> = list.iter().map(|(_, s, c, t)| (s.clone(), c.clone(), *t)).collect();
        let ids = ensure_collections(rest, target, &wanted).await?;
        for (uid, s, c, _) in list {
            let cid = *ids
                .get(&(s.clone(), c.clone()))
                .ok_or_else(|| BackupError::Cluster(format!("{target}: collection {s}.{c} missing")))?;
            cid_map.insert(*uid, (target.clone(), cid));
        }
    }
    let mut counts = Counts::default();
    for target in per_target.keys() {
        let writers = Writers::start(rest, target, force).await?;
        let sent = feed(&dir, b, &cid_map, target, &writers).await?;
        let c = writers.finish().await?;
        debug_assert_eq!(c.written + c.skipped, sent);
        counts.written += c.written;
        counts.skipped += c.skipped;
    }
    Ok(counts)
}

/// Reads the bucket's data files and hands the records of collections restored into `target` to the writers.
///
/// A file may hold several versions of a document (a stream sends one per snapshot it was changed in): only the
/// last is sent, so a write retried after TMPFAIL can never land after, and undo, a newer version of its key
/// (with `--force-updates` nothing else would stop it). The versions of one backup are all written before the next
/// backup's start (its writers finish first).
async fn feed(
    dir: &Path,
    b: &BucketBackup,
    cid_map: &HashMap<u32, (String, u32)>,
    target: &str,
    writers: &Writers,
) -> Result<u64, BackupError> {
    let (mut sent, mut unknown) = (0u64, 0u64);
    for f in b.files.iter().filter(|f| f.path.starts_with("data/")) {
        let path = dir.join(&f.path);
        let file = File::open(&path).map_err(BackupError::file(&path))?;
        let mut reader = RecordReader::new(BufReader::with_capacity(1 << 20, file), path.display().to_string())?;
        let mut all = Vec::new();
        while let Some(rec) = reader.next_record()? {
            all.push(rec);
        }
        for mut rec in latest_versions(all) {
            let Some((tb, cid)) = cid_map.get(&rec.collection) else {
                unknown += 1;
                continue;
            };
            if tb != target {
                continue;
            }
            rec.collection = *cid;
            writers.send(rec).await?;
            sent += 1;
        }
    }
    if unknown > 0 {
        eprintln!("warning: {unknown} documents of collections scopes.json does not name were not restored");
    }
    Ok(sent)
}

/// The last version of each document among `records` (in file order, so ascending seqno), in seqno order.
fn latest_versions(records: Vec<Record>) -> Vec<Record> {
    let mut latest: HashMap<(u32, Vec<u8>), Record> = HashMap::new();
    for rec in records {
        latest.insert((rec.collection, rec.key.clone()), rec);
    }
    let mut out: Vec<Record> = latest.into_values().collect();
    out.sort_by_key(|r| r.seqno);
    out
}

/// One writer task per KV node of the target bucket, each with its own pipelined connection.
struct Writers {
    nodes: Vec<mpsc::Sender<Record>>,
    map: Vec<usize>,
    tasks: Vec<tokio::task::JoinHandle<Result<Counts, BackupError>>>,
}

impl Writers {
    async fn start(rest: &Rest, bucket: &str, force: bool) -> Result<Writers, BackupError> {
        let config = rest
            .get_json(&format!("/pools/default/buckets/{bucket}"))
            .await
            .map_err(|e| BackupError::Cluster(format!("target bucket `{bucket}` (create it before restoring): {e}")))?;
        let BucketMap { nodes: servers, actives } = BucketMap::of(&config, rest)?;
        let map: Vec<usize> = actives
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| BackupError::Cluster(format!("bucket `{bucket}`: a vBucket has no active copy")))?;
        let mut nodes = Vec::new();
        let mut tasks = Vec::new();
        for addr in servers {
            let (tx, rx) = mpsc::channel(QUEUE);
            let conn = Connection::connect(
                addr,
                &rest.username,
                &rest.password,
                Some(bucket),
                &[Feature::Collections, Feature::Xattr, Feature::Json],
            )
            .await?;
            nodes.push(tx);
            tasks.push(tokio::spawn(write_node(conn, rx, force)));
        }
        Ok(Writers { nodes, map, tasks })
    }

    async fn send(&self, mut rec: Record) -> Result<(), BackupError> {
        let vb = vbucket_of(&rec.key, self.map.len() as u16);
        rec.vbucket = vb;
        let node = self.map[usize::from(vb)];
        self.nodes[node].send(rec).await.map_err(|_| BackupError::Cluster("a node writer stopped".into()))
    }

    async fn finish(self) -> Result<Counts, BackupError> {
        drop(self.nodes);
        let mut total = Counts::default();
        for t in self.tasks {
            let c = t.await.map_err(|e| BackupError::Cluster(format!("writer failed: {e}")))??;
            total.written += c.written;
            total.skipped += c.skipped;
        }
        Ok(total)
    }
}

/// Writes the records it receives with at most [`WINDOW`] in flight; TMPFAIL is retried, KEY_EEXISTS (the cluster
/// holds a newer version) counted as skipped, anything else fails the restore.
async fn write_node(mut conn: Connection, mut rx: mpsc::Receiver<Record>, force: bool) -> Result<Counts, BackupError> {
    let mut inflight: HashMap<u32, (Record, u32)> = HashMap::new();
    let mut counts = Counts::default();
    let mut open = true;
    let mut retry: Vec<(Record, u32)> = Vec::new();
    loop {
        while inflight.len() < WINDOW {
            let (rec, tries) = match retry.pop() {
                Some(r) => r,
                None if !open => break,
                None => {
                    let next = if inflight.is_empty() {
                        rx.recv().await
                    } else {
                        match rx.try_recv() {
                            Ok(r) => Some(r),
                            Err(mpsc::error::TryRecvError::Empty) => break,
                            Err(mpsc::error::TryRecvError::Disconnected) => None,
                        }
                    };
                    match next {
                        Some(r) => (r, 0),
                        None => {
                            open = false;
                            break;
                        }
                    }
                }
            };
            let opaque = queue(&mut conn, &rec, force);
            inflight.insert(opaque, (rec, tries));
        }
        if inflight.is_empty() {
            if !open && retry.is_empty() {
                return Ok(counts);
            }
            continue;
        }
        conn.flush().await?;
        let resp = tokio::time::timeout(REPLY_WAIT_MAX, conn.read_response())
            .await
            .map_err(|_| BackupError::Cluster(format!("no reply for {} s", REPLY_WAIT_MAX.as_secs())))??;
        let Some((rec, tries)) = inflight.remove(&resp.opaque) else { continue };
        match Status::from_code(resp.status) {
            Some(Status::Success) => counts.written += 1,
            Some(Status::KeyEexists) if !force => counts.skipped += 1,
            Some(Status::Etmpfail) if tries < TMPFAIL_RETRIES_MAX => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                retry.push((rec, tries + 1));
            }
            _ => {
                return Err(BackupError::Cluster(format!(
                    "writing `{}` (vBucket {}): status 0x{:04x}",
                    String::from_utf8_lossy(&rec.key),
                    rec.vbucket,
                    resp.status
                )))
            }
        }
    }
}

/// Queues the SET_WITH_META or DEL_WITH_META of `rec`; returns its opaque. Values go plain, as stored: the
/// backup's DCP connection did not negotiate Snappy.
fn queue(conn: &mut Connection, rec: &Record, force: bool) -> u32 {
    let options = if force { WithMetaExtras::SKIP_CONFLICT_RESOLUTION } else { 0 };
    let (flags, expiry, rev, cas) = (rec.flags, rec.expiry, rec.rev, rec.cas);
    conn.queue_with_meta(&WithMetaWrite {
        vbucket: rec.vbucket,
        collection: rec.collection,
        key: &rec.key,
        delete: rec.kind != RecordKind::Mutation,
        extras: WithMetaExtras { flags, expiry, rev, cas, options, ext_meta_len: 0 },
        datatype: rec.datatype,
        value: &rec.value,
    })
}

#[cfg(test)]
mod tests {
    use super::{latest_versions, Mapping};
    use crate::record::{Record, RecordKind};

    fn rec(collection: u32, key: &str, seqno: u64, kind: RecordKind) -> Record {
        let key = key.as_bytes().to_vec();
        let (datatype, vbucket, cas, rev, flags, expiry) = (0, 0, seqno, seqno, 0, 0);
        Record { kind, datatype, vbucket, collection, seqno, cas, rev, flags, expiry, key, value: Vec::new() }
    }

    /// Proves restore sends one version per document and file, the newest (a later deletion included), so a
    /// retried older write cannot land after a newer one; the same key in two collections stays two documents.
    #[test]
    fn only_the_newest_version_is_sent_when_a_file_holds_several() {
        let m = RecordKind::Mutation;
        let records = vec![rec(0, "a", 1, m), rec(0, "b", 2, m), rec(8, "a", 3, m), rec(0, "a", 4, m)];
        let mut with_delete = records.clone();
        with_delete.push(rec(0, "b", 5, RecordKind::Deletion));
        let seqnos = |v: Vec<Record>| v.iter().map(|r| r.seqno).collect::<Vec<_>>();
        assert_eq!(seqnos(latest_versions(records)), [2, 3, 4]);
        assert_eq!(seqnos(latest_versions(with_delete)), [3, 4, 5]);
    }

    /// Proves `--map-data` renames at the depth it names and the most specific rule wins, leaving other paths alone.
    #[test]
    fn map_data_uses_the_most_specific_rule_when_several_match() {
        let m = Mapping::parse(&["b=c".into(), "b.s.x=c.t.y".into()]).unwrap();
        assert_eq!(m.target(["b", "s", "x"]), ["c", "t", "y"]);
        assert_eq!(m.target(["b", "s", "z"]), ["c", "s", "z"]);
        assert_eq!(m.target(["other", "s", "x"]), ["other", "s", "x"]);
        assert!(Mapping::parse(&["b.s=c".into()]).is_err(), "depths must match");
        assert!(Mapping::parse(&["b".into()]).is_err(), "src=dst required");
    }
}
