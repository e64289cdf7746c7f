//! `restore --auto-create-buckets`: a target bucket that does not exist is created from the settings its backup
//! saved (`bucket-config.json`: type, RAM quota, replicas, eviction policy, max TTL, minimum durability level), as
//! cbbackupmgr's flag of that name does, and the restore waits until every vBucket has an active copy.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::BackupError;
use crate::layout::read_json;
use crate::rest::{BucketMap, Rest};

/// How long a new bucket may take to get an active copy of every vBucket.
const READY_WAIT_MAX: Duration = Duration::from_secs(60);

/// Whether `bucket` exists on the cluster.
pub(crate) async fn exists(rest: &Rest, bucket: &str) -> Result<bool, BackupError> {
    let (status, body) = rest.get(&format!("/pools/default/buckets/{bucket}")).await?;
    match status {
        200 => Ok(true),
        404 => Ok(false),
        _ => Err(BackupError::Cluster(format!("bucket {bucket}: HTTP {status}: {}", String::from_utf8_lossy(&body)))),
    }
}

/// Creates `bucket` with the settings saved in `config_path` and waits until it serves every vBucket.
pub(crate) async fn create(rest: &Rest, bucket: &str, config_path: &Path) -> Result<(), BackupError> {
    let saved: serde_json::Value = read_json(config_path)?;
    let kind = match saved["bucketType"].as_str() {
        Some("ephemeral") => "ephemeral",
        _ => "couchbase",
    };
    let ram_mb = (saved["quota"]["rawRAM"].as_u64().unwrap_or(0) >> 20).max(100).to_string();
    let replicas = saved["replicaNumber"].as_u64().unwrap_or(0).to_string();
    let max_ttl = saved["maxTTL"].as_u64().unwrap_or(0).to_string();
    let mut form = vec![
        ("name", bucket.to_string()),
        ("bucketType", kind.to_string()),
        ("ramQuota", ram_mb),
        ("replicaNumber", replicas),
        ("maxTTL", max_ttl),
    ];
    if let Some(p) = saved["evictionPolicy"].as_str() {
        form.push(("evictionPolicy", p.to_string()));
    }
    // A restore resolves each document against what the bucket holds by the bucket's own rule: the recreated
    // bucket keeps the backed-up one's.
    if let Some(mode) = saved["conflictResolutionType"].as_str().filter(|m| *m == "lww") {
        form.push(("conflictResolutionType", mode.to_string()));
    }
    if let Some(level) = saved["durabilityMinLevel"].as_str().filter(|l| *l != "none") {
        form.push(("durabilityMinLevel", level.to_string()));
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, body) = rest.post_form("/pools/default/buckets", &pairs).await?;
    if !matches!(status, 200 | 202) {
        let why = String::from_utf8_lossy(&body);
        return Err(BackupError::Cluster(format!("creating bucket {bucket}: HTTP {status}: {why}")));
    }
    println!("Created bucket `{bucket}` ({kind}, from the backup's settings)");
    let started = Instant::now();
    loop {
        let (status, body) = rest.get(&format!("/pools/default/buckets/{bucket}")).await?;
        if status == 200 && every_vbucket_active(&body, rest) {
            return Ok(());
        }
        if started.elapsed() > READY_WAIT_MAX {
            return Err(BackupError::Cluster(format!(
                "bucket {bucket} not ready after {} s",
                READY_WAIT_MAX.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn every_vbucket_active(body: &[u8], rest: &Rest) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else { return false };
    BucketMap::of(&v, rest).is_ok_and(|m| m.actives.iter().all(Option::is_some))
}
