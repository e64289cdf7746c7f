//! Node metadata survives a restart: buckets, collections and users come back; memory-only data does not.

use settee_server::auth::Role;
use settee_server::config::ServerConfig;
use settee_server::RunningNode;

use crate::helpers::{get, set};

async fn start(dir: &std::path::Path) -> RunningNode {
    settee_testkit::start_node_in(dir, |c| c.bucket_type = settee_server::config::BucketTypeArg::Ephemeral).await
}

/// A scope, a collection and a user created before a restart exist after it, the collection keeps its id, and a
/// document written to the memory-only bucket is gone.
#[tokio::test]
async fn buckets_collections_and_users_survive_a_restart() {
    let dir = settee_testkit::temp_dir("restart");
    let first = start(&dir).await;
    let bucket = first.node.bucket("default").unwrap();
    first.node.propose_manifest_change(&bucket, |m| m.create_scope("s").map(drop)).await.unwrap();
    first
        .node
        .propose_manifest_change(&bucket, |m| m.create_collection("s", "c", Some(30), false).map(drop))
        .await
        .unwrap();
    let roles = Role::parse_list("data_reader[default]").unwrap();
    let added = first.node.propose_user_change(move |u| u.upsert("reader", "Reader", Some("secret1"), roles));
    added.await.unwrap().unwrap();
    let mut c = settee_client::Connection::connect(
        first.kv_addr,
        "Administrator",
        "password",
        Some("default"),
        settee_testkit::SDK_FEATURES,
    )
    .await
    .unwrap();
    assert_eq!(set(&mut c, b"k", b"v", 0, 0).await.status, 0);
    let uid_before = bucket.manifest().uid;
    first.stop().await;

    let second = start(&dir).await;
    let bucket = second.node.bucket("default").expect("bucket restored");
    assert_eq!(bucket.manifest().uid, uid_before);
    assert_eq!(bucket.resolve_collection("s.c").unwrap().1, 8);
    assert!(second.node.users.credentials("reader").is_some_and(|c| c.verify_plain(b"secret1")));
    let mut c = settee_client::Connection::connect(
        second.kv_addr,
        "reader",
        "secret1",
        Some("default"),
        settee_testkit::SDK_FEATURES,
    )
    .await
    .unwrap();
    assert_eq!(get(&mut c, b"k").await.status, 0x01, "memory-only data does not survive");
    second.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A deleted default bucket is not recreated at the next start: only a first start creates it.
#[tokio::test]
async fn default_bucket_is_created_only_on_first_start() {
    let dir = settee_testkit::temp_dir("first-start");
    let first = start(&dir).await;
    first.node.propose_delete_bucket("default").await.unwrap();
    first.stop().await;
    let second = start(&dir).await;
    assert!(second.node.buckets().is_empty());
    second.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second node on the same data directory refuses to start while the first runs.
#[tokio::test]
async fn data_directory_is_locked() {
    let dir = settee_testkit::temp_dir("lock");
    let first = start(&dir).await;
    let mut config = ServerConfig::defaults();
    config.data_dir = dir.clone();
    (config.kv_port, config.mgmt_port, config.query_port) = (0, 0, 0);
    config.tls_off();
    let err = RunningNode::start(config).await.err().expect("second node refused");
    assert!(err.to_string().contains("in use by another settee process"), "{err}");
    first.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
