//! GSI index definitions in a backup, as cbbackupmgr keeps them (`--disable-gsi-indexes` leaves them out).
//!
//! A backup saves each bucket's indexes from `GET /indexStatus` (name, keyspace, the CREATE statement ns_server
//! shows, and whether the index was deferred) as `indexes.json` beside the bucket's other files. A restore runs the
//! statements through the query service: an index whose name already exists on its target keyspace is reported
//! as existing and left alone; a deferred index is created deferred again (its statement carries
//! `WITH {"defer_build":true}`), the others are built. An index with replicas keeps them: its statement carries
//! `"num_replica":N` (added from `numReplica` when the cluster's statement lacks it). `--map-data` moves an index
//! with its keyspace.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::BackupError;
use crate::rest::Rest;

/// The content of `indexes.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct IndexFile {
    pub indexes: Vec<IndexDef>,
}

/// One index definition.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct IndexDef {
    pub name: String,
    pub bucket: String,
    pub scope: String,
    pub collection: String,
    /// The CREATE statement, `WITH {"defer_build":true}` included for a deferred index and `"num_replica":N` for
    /// one with replicas.
    pub definition: String,
    /// The index was created deferred and not built yet when the backup ran.
    pub deferred: bool,
    /// The index's replicas (`numReplica`); absent from backups taken before it was saved.
    #[serde(default)]
    pub num_replica: u32,
}

/// What a restore did with the index definitions of one backup's bucket.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IndexCounts {
    pub created: u64,
    pub existed: u64,
}

/// The index definitions of `bucket`, from `GET /indexStatus` (a cluster's answer may list an index once per node:
/// one entry per keyspace and name is kept).
pub(crate) async fn fetch(rest: &Rest, bucket: &str) -> Result<IndexFile, BackupError> {
    let status = rest.get_json("/indexStatus").await?;
    let mut out = IndexFile::default();
    for ix in status["indexes"].as_array().into_iter().flatten() {
        if ix["bucket"].as_str() != Some(bucket) {
            continue;
        }
        let text = |field: &str| ix[field].as_str().map(str::to_string);
        let (Some(name), Some(definition)) = (text("index").or_else(|| text("indexName")), text("definition")) else {
            return Err(BackupError::Cluster(format!(
                "GET /indexStatus: an index of {bucket} without name or definition"
            )));
        };
        let num_replica = ix["numReplica"].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        let def = IndexDef {
            name,
            bucket: bucket.to_string(),
            scope: text("scope").unwrap_or_else(|| "_default".into()),
            collection: text("collection").unwrap_or_else(|| "_default".into()),
            deferred: ix["status"].as_str() == Some("Created") || definition.contains("\"defer_build\":true"),
            definition: with_num_replica(definition, num_replica),
            num_replica,
        };
        if !out.indexes.iter().any(|d| same_index(d, &def.bucket, &def.scope, &def.collection, &def.name)) {
            out.indexes.push(def);
        }
    }
    out.indexes.sort_by(|a, b| (&a.scope, &a.collection, &a.name).cmp(&(&b.scope, &b.collection, &b.name)));
    Ok(out)
}

/// `definition` naming `num_replica` replicas: as it is when it already names them or when there are none, else
/// with `"num_replica":N` added to its `WITH` object (or a new one). A cluster may show the statement without them
/// (settee before it showed them did) while `numReplica` says the index has some.
fn with_num_replica(definition: String, num_replica: u32) -> String {
    if num_replica == 0 || definition.contains("\"num_replica\"") {
        return definition;
    }
    let option = format!("\"num_replica\":{num_replica}");
    // ns_server's statements end with their WITH object; one that does not has none.
    match definition.rfind(" WITH {") {
        Some(at) if definition.trim_end().ends_with('}') => {
            let end = definition.trim_end().len() - 1;
            let inner = definition[at + " WITH {".len()..end].trim();
            let joined = if inner.is_empty() { option } else { format!("{inner}, {option}") };
            format!("{} WITH {{  {joined} }}", &definition[..at])
        }
        _ => format!("{definition} WITH {{  {option} }}"),
    }
}

fn same_index(d: &IndexDef, bucket: &str, scope: &str, collection: &str, name: &str) -> bool {
    d.bucket == bucket && d.scope == scope && d.collection == collection && d.name == name
}

/// Creates each index of `file` that its target keyspace (`target` maps `[bucket, scope, collection]`) lacks.
pub(crate) async fn restore(
    rest: &Rest,
    file: &IndexFile,
    target: impl Fn([&str; 3]) -> [String; 3],
    progress_lines: bool,
) -> Result<IndexCounts, BackupError> {
    if file.indexes.is_empty() {
        return Ok(IndexCounts::default());
    }
    let existing = existing_indexes(rest).await?;
    let query = query_endpoint(rest).await?;
    let mut counts = IndexCounts::default();
    for def in &file.indexes {
        let [b, s, c] = target([&def.bucket, &def.scope, &def.collection]);
        let label = format!("`{b}`.`{s}`.`{c}` index `{}`", def.name);
        if existing.contains(&(b.clone(), s.clone(), c.clone(), def.name.clone())) {
            counts.existed += 1;
            if progress_lines {
                println!("{label}: exists, left as it is");
            }
            continue;
        }
        let statement = retarget(def, [&b, &s, &c]).ok_or_else(|| {
            BackupError::Damaged(format!("{label}: statement `{}` does not name its keyspace", def.definition))
        })?;
        match run_statement(&query, &statement).await? {
            Ok(()) => counts.created += 1,
            // Created meanwhile by someone else: the same outcome as found existing.
            Err((4300, _)) => {
                counts.existed += 1;
                if progress_lines {
                    println!("{label}: exists, left as it is");
                }
                continue;
            }
            Err((code, msg)) => {
                return Err(BackupError::Cluster(format!("creating {label}: `{statement}`: {code} {msg}")));
            }
        }
        if progress_lines {
            let deferred = if def.deferred { " (deferred, as backed up)" } else { "" };
            let replicas =
                if def.num_replica > 0 { format!(" with {} replicas", def.num_replica) } else { String::new() };
            println!("{label}: created{replicas}{deferred}");
        }
    }
    Ok(counts)
}

/// Every index of the cluster as (bucket, scope, collection, name).
async fn existing_indexes(rest: &Rest) -> Result<BTreeSet<(String, String, String, String)>, BackupError> {
    let status = rest.get_json("/indexStatus").await?;
    let text = |v: &serde_json::Value, f: &str, d: &str| v[f].as_str().unwrap_or(d).to_string();
    Ok(status["indexes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ix| {
            let name = ix["index"].as_str().or(ix["indexName"].as_str()).unwrap_or_default().to_string();
            (text(ix, "bucket", ""), text(ix, "scope", "_default"), text(ix, "collection", "_default"), name)
        })
        .collect())
}

/// How ns_server's statements name a keyspace: the bucket alone for its default collection.
fn keyspace_text([b, s, c]: [&str; 3]) -> String {
    if s == "_default" && c == "_default" {
        format!("`{b}`")
    } else {
        format!("`{b}`.`{s}`.`{c}`")
    }
}

/// `def`'s statement on keyspace `to`; None when the statement does not start as ns_server writes it.
fn retarget(def: &IndexDef, to: [&str; 3]) -> Option<String> {
    let from = keyspace_text([&def.bucket, &def.scope, &def.collection]);
    let to = keyspace_text(to);
    ["CREATE INDEX", "CREATE PRIMARY INDEX"].iter().find_map(|verb| {
        let head = format!("{verb} `{}` ON {from}", def.name);
        let rest = def.definition.strip_prefix(&head)?;
        // The keyspace must end there (`b` must not match the start of `b`.`s`.`c`).
        if rest.starts_with('.') {
            return None;
        }
        Some(format!("{verb} `{}` ON {to}{rest}", def.name))
    })
}

/// The query service's address: the `n1ql` port of a node of `nodeServices` (its host as the cluster names it,
/// or the management host's when it names none).
async fn query_endpoint(rest: &Rest) -> Result<Rest, BackupError> {
    let services = rest.get_json("/pools/default/nodeServices").await?;
    let seed_host = rest.host.rsplit_once(':').map_or(rest.host.as_str(), |(h, _)| h).to_string();
    for node in services["nodesExt"].as_array().into_iter().flatten() {
        let Some(port) = node["services"]["n1ql"].as_u64() else { continue };
        let host = node["hostname"].as_str().filter(|h| !h.is_empty()).unwrap_or(&seed_host);
        let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
        return Ok(rest.at(&format!("{host}:{port}")));
    }
    Err(BackupError::Cluster("no node runs the query service: index definitions cannot be restored".into()))
}

/// Runs one statement; the inner error is the first (code, message) the query service answered.
async fn run_statement(query: &Rest, statement: &str) -> Result<Result<(), (u64, String)>, BackupError> {
    let (status, body) = query.post_form("/query/service", &[("statement", statement)]).await?;
    let answer: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        BackupError::Cluster(format!("query service: HTTP {status}: {e}: {}", String::from_utf8_lossy(&body)))
    })?;
    if answer["status"] == "success" {
        return Ok(Ok(()));
    }
    let first = &answer["errors"][0];
    Ok(Err((first["code"].as_u64().unwrap_or(0), first["msg"].as_str().unwrap_or("unknown error").to_string())))
}

#[cfg(test)]
mod tests {
    use super::{retarget, with_num_replica, IndexDef};

    fn def(keyspace: [&str; 3], definition: &str) -> IndexDef {
        IndexDef {
            name: "ix".into(),
            bucket: keyspace[0].into(),
            scope: keyspace[1].into(),
            collection: keyspace[2].into(),
            definition: definition.into(),
            deferred: false,
            num_replica: 0,
        }
    }

    /// Proves an index's replicas reach the statement a restore runs: added to the WITH object the cluster's
    /// statement has (or a new one) when it does not name them, the statement left alone when it does or when
    /// there are none.
    #[test]
    fn the_statement_keeps_the_replica_count() {
        let plain = "CREATE INDEX `ix` ON `b`(`x`) WHERE (`y` > 1)".to_string();
        assert_eq!(with_num_replica(plain.clone(), 0), plain);
        assert_eq!(with_num_replica(plain.clone(), 2), format!("{plain} WITH {{  \"num_replica\":2 }}"));
        let deferred = "CREATE PRIMARY INDEX `p` ON `b` WITH {  \"defer_build\":true }".to_string();
        assert_eq!(
            with_num_replica(deferred, 1),
            "CREATE PRIMARY INDEX `p` ON `b` WITH {  \"defer_build\":true, \"num_replica\":1 }"
        );
        let named = "CREATE PRIMARY INDEX `p` ON `b` WITH {  \"num_replica\":1 }".to_string();
        assert_eq!(with_num_replica(named.clone(), 1), named);
    }

    /// Proves `--map-data` moves an index statement to its new keyspace in both of ns_server's keyspace forms, keeps
    /// the rest of the statement (keys, WHERE, WITH), and refuses a statement that does not name its keyspace.
    #[test]
    fn retarget_rewrites_the_keyspace_when_the_data_is_mapped() {
        let d = def(["b", "_default", "_default"], "CREATE INDEX `ix` ON `b`(`x`) WHERE (`y` > 1)");
        assert_eq!(
            retarget(&d, ["c", "_default", "_default"]).unwrap(),
            "CREATE INDEX `ix` ON `c`(`x`) WHERE (`y` > 1)"
        );
        assert_eq!(retarget(&d, ["c", "s", "k"]).unwrap(), "CREATE INDEX `ix` ON `c`.`s`.`k`(`x`) WHERE (`y` > 1)");
        let p = def(["b", "s", "k"], "CREATE PRIMARY INDEX `ix` ON `b`.`s`.`k` WITH {  \"defer_build\":true }");
        assert_eq!(
            retarget(&p, ["b", "s", "z"]).unwrap(),
            "CREATE PRIMARY INDEX `ix` ON `b`.`s`.`z` WITH {  \"defer_build\":true }"
        );
        assert!(retarget(&def(["b", "s", "k"], "CREATE INDEX `ix` ON `b`(`x`)"), ["b", "s", "k"]).is_none());
        assert!(retarget(&def(["b", "_default", "_default"], "DROP INDEX x"), ["b", "_default", "_default"]).is_none());
    }
}
