//! Index snapshots on a real node and a real disk: a couchbase bucket's indexes come back after a restart from
//! their snapshots and catch up from the saved seqnos, with the same answers as before.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use settee_server::config::{BucketTypeArg, ServerConfig};
use settee_server::RunningNode;
use settee_testkit::{start_node_in, temp_dir};

use crate::query::{get_at, query_at};

fn persistent(c: &mut ServerConfig) {
    c.bucket_type = BucketTypeArg::Couchbase;
    // Only the snapshots an index coming online and the shutdown write: the test knows what each one holds.
    c.index_snapshot_secs = 3600;
}

/// Runs a statement with `request_plus` and returns its results, failing the test on an error.
async fn run(node: &RunningNode, statement: &str) -> Value {
    let body = json!({"statement": statement, "scan_consistency": "request_plus"}).to_string();
    let (status, answer) = query_at(node.query_addr, &body).await;
    assert_eq!((status, &answer["status"]), (200, &json!("success")), "{statement}: {answer}");
    answer["results"].clone()
}

/// The statistics of index `name` of the default bucket, once it is online.
async fn stats(node: &RunningNode, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = get_at(node.query_addr, &format!("/api/v1/stats/default/{name}")).await;
        let s = &body[format!("default:{name}")];
        if status == 200 && s["index_state"] == "online" {
            return s.clone();
        }
        assert!(Instant::now() < deadline, "index {name} not online: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the statements the test checks answer on `node`.
async fn answers(node: &RunningNode) -> Vec<Value> {
    vec![
        run(node, "SELECT COUNT(*) AS n FROM default WHERE grp = 3").await,
        run(node, "SELECT RAW META().id FROM default WHERE grp = 7 ORDER BY META().id").await,
        run(node, "SELECT RAW META().id FROM default WHERE n BETWEEN 100 AND 120 ORDER BY META().id").await,
        run(node, "SELECT COUNT(*) AS n FROM default USE INDEX (`#primary`) WHERE META().id LIKE 'k1%'").await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_come_back_from_their_snapshots_after_a_restart() {
    // Proves a restart neither loses index entries nor rebuilds the indexes from zero: after a clean restart the
    // indexes answer exactly as before, and they applied only the changes made after their snapshot (the updates and
    // deletions between the build and the shutdown), not the 3000 documents again.
    let dir = temp_dir("index-snapshots");
    let node = start_node_in(&dir, persistent).await;
    run(&node, "UPSERT INTO default (KEY 'k' || TO_STRING(i), VALUE {'n': i, 'grp': i % 10}) SELECT i FROM ARRAY_RANGE(0, 3000) AS i").await;
    run(&node, "CREATE PRIMARY INDEX ON default").await;
    run(&node, "CREATE INDEX ix_grp ON default(grp, n)").await;
    assert_eq!(stats(&node, "ix_grp").await["items_count"], 3000);
    // Changes after the indexes were built (and their first snapshots written).
    run(&node, "UPDATE default SET grp = 7 WHERE grp = 3 AND n < 1000").await;
    run(&node, "DELETE FROM default WHERE grp = 5 AND n >= 2000").await;
    let before = answers(&node).await;
    assert_eq!(before[0], json!([{"n": 200}]), "the update moved 100 documents out of group 3");
    node.stop().await;

    let node = start_node_in(&dir, persistent).await;
    let s = stats(&node, "ix_grp").await;
    assert_eq!(answers(&node).await, before, "the indexes answer as before the restart");
    let indexed = s["num_docs_indexed"].as_u64().unwrap();
    assert!(indexed < 3000, "ix_grp was rebuilt from zero after the restart ({indexed} changes applied): {s}");
    assert_eq!(s["items_count"], 2900, "{s}");
    assert!(s["disk_size"].as_u64().unwrap() > 0, "{s}");

    // The restored indexes keep following changes.
    run(&node, "DELETE FROM default WHERE grp = 3").await;
    assert_eq!(run(&node, "SELECT COUNT(*) AS n FROM default WHERE grp = 3").await, json!([{"n": 0}]));
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_rebuilt_from_the_data() {
    // Proves a snapshot that fails its checksum is not trusted: the index is rebuilt from the documents and answers
    // correctly.
    let dir = temp_dir("index-snapshot-damage");
    let node = start_node_in(&dir, persistent).await;
    run(&node, "UPSERT INTO default (KEY 'k' || TO_STRING(i), VALUE {'n': i, 'grp': i % 10}) SELECT i FROM ARRAY_RANGE(0, 500) AS i").await;
    run(&node, "CREATE INDEX ix_grp ON default(grp, n)").await;
    let before = run(&node, "SELECT RAW META().id FROM default WHERE grp = 7 ORDER BY META().id").await;
    node.stop().await;
    let snapshots: Vec<_> = walk(&dir).into_iter().filter(|p| p.extension().is_some_and(|x| x == "snap")).collect();
    assert_eq!(snapshots.len(), 1, "one index, one snapshot: {snapshots:?}");
    let mut bytes = std::fs::read(&snapshots[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&snapshots[0], bytes).unwrap();

    let node = start_node_in(&dir, persistent).await;
    let s = stats(&node, "ix_grp").await;
    assert_eq!(run(&node, "SELECT RAW META().id FROM default WHERE grp = 7 ORDER BY META().id").await, before);
    assert!(s["num_docs_indexed"].as_u64().unwrap() >= 500, "the index was rebuilt from the documents: {s}");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_creation_stops_at_the_index_memory_quota() {
    // Proves the node's index memory quota: an index that fills it is kept and maintained, the next CREATE INDEX
    // (and a deferred index's BUILD) fails with a clear error, and the statistics show the memory against the quota.
    let dir = temp_dir("index-quota");
    let node = start_node_in(&dir, |c| {
        c.bucket_type = BucketTypeArg::Ephemeral;
        c.index_memory_quota_mb = 1;
    })
    .await;
    run(&node, "UPSERT INTO default (KEY 'k' || TO_STRING(i), VALUE {'name': REPEAT('n', 64) || TO_STRING(i)}) SELECT i FROM ARRAY_RANGE(0, 20000) AS i").await;
    run(&node, "CREATE INDEX ix_name ON default(name)").await;
    run(&node, "CREATE INDEX ix_later ON default(name, META().id) WITH {'defer_build': true}").await;
    let body = json!({"statement": "CREATE INDEX ix_more ON default(LOWER(name))"}).to_string();
    let (_, answer) = query_at(node.query_addr, &body).await;
    assert_eq!(answer["errors"][0]["code"], 5000, "{answer}");
    let msg = answer["errors"][0]["msg"].as_str().unwrap();
    assert!(msg.contains("index memory quota is exhausted"), "{msg}");
    let body = json!({"statement": "BUILD INDEX ON default(ix_later)"}).to_string();
    let (_, answer) = query_at(node.query_addr, &body).await;
    assert_eq!(answer["errors"][0]["code"], 5000, "{answer}");
    let (_, all) = get_at(node.query_addr, "/api/v1/stats").await;
    let indexer = &all["indexer"];
    assert!(indexer["memory_used"].as_u64().unwrap() >= indexer["memory_quota"].as_u64().unwrap(), "{all}");
    assert_eq!(indexer["memory_quota"], 1 << 20);
    assert_eq!(all["default:ix_name"]["items_count"], 20000, "{all}");
    // ns_server's /indexStatus lists both, the deferred one as created and not built.
    let (status, listing) = get_at(node.mgmt_addr, "/indexStatus").await;
    assert_eq!(status, 200, "{listing}");
    let by_name = |n: &str| listing["indexes"].as_array().unwrap().iter().find(|i| i["index"] == n).cloned().unwrap();
    let (built, later) = (by_name("ix_name"), by_name("ix_later"));
    assert_eq!((&built["status"], &built["progress"]), (&json!("Ready"), &json!(100)), "{listing}");
    assert_eq!(built["definition"], "CREATE INDEX `ix_name` ON `default`(`name`)", "{listing}");
    assert_eq!((&later["status"], &later["progress"]), (&json!("Created"), &json!(0)), "{listing}");
    // The index over quota is still maintained.
    run(&node, "DELETE FROM default WHERE name LIKE 'nnnn%1'").await;
    assert_eq!(run(&node, "SELECT COUNT(*) AS n FROM default WHERE name LIKE 'nnnn%1'").await, json!([{"n": 0}]));
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
