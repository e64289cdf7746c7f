//! Bootstrap: cluster configs, bucket selection, NOT_MY_VBUCKET.

use serde_json::Value;
use settee_client::Connection;
use settee_testkit::{TestNode, ADMIN, PASSWORD};

use crate::helpers::req;

/// The bucket config has what the SDKs require: nodes beside nodesExt, kv and mgmt ports, thisNode, a hex
/// manifest uid, 1024 rows of numReplicas+1 entries, and a rev that grows when the manifest changes.
#[tokio::test]
async fn bucket_config_has_what_the_sdks_require() {
    let node = TestNode::start_with(|c| c.replicas = 1).await;
    let mut c = node.connect().await;
    let r = c.call(0xb5, &[], &[], &[], 0, 0).await.unwrap();
    assert_eq!((r.status, r.datatype), (0, 1));
    let v: Value = serde_json::from_slice(&r.value).unwrap();
    assert_eq!(v["name"], "default");
    assert_eq!(v["nodeLocator"], "vbucket");
    assert_eq!(v["collectionsManifestUid"], "0");
    let ext = &v["nodesExt"][0];
    assert_eq!(ext["services"]["kv"], node.kv_addr().port());
    assert_eq!(ext["services"]["mgmt"], node.running.mgmt_addr.port());
    assert_eq!(ext["thisNode"], true);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1);
    let map = v["vBucketServerMap"]["vBucketMap"].as_array().unwrap();
    assert_eq!(map.len(), 1024);
    assert!(map.iter().all(|row| row == &serde_json::json!([0, -1])));
    let rev = v["rev"].as_u64().unwrap();
    let bucket = node.running.node.bucket("default").unwrap();
    node.running.node.propose_manifest_change(&bucket, |m| m.create_scope("s1").map(drop)).await.unwrap();
    let v: Value = serde_json::from_slice(&c.call(0xb5, &[], &[], &[], 0, 0).await.unwrap().value).unwrap();
    assert!(v["rev"].as_u64().unwrap() > rev);
    assert_eq!(v["collectionsManifestUid"], "1");
    node.stop().await;
}

/// Without a bucket the global config comes back: nodesExt but no name, uuid or vBucket map.
#[tokio::test]
async fn global_config_without_bucket() {
    let node = TestNode::start().await;
    let mut c = Connection::connect(node.kv_addr(), ADMIN, PASSWORD, None, &[]).await.unwrap();
    let r = c.call(0xb5, &[], &[], &[], 0, 0).await.unwrap();
    let v: Value = serde_json::from_slice(&r.value).unwrap();
    assert!(v.get("name").is_none() && v.get("uuid").is_none() && v.get("vBucketServerMap").is_none());
    assert_eq!(v["nodesExt"][0]["services"]["kv"], node.kv_addr().port());
    // Data commands without a bucket are NO_BUCKET.
    assert_eq!(c.call(0x00, b"k", &[], &[], 0, 0).await.unwrap().status, 0x08);
    node.stop().await;
}

/// A client that already has the current revision (GetClusterConfigWithKnownVersion extras) gets an empty body.
#[tokio::test]
async fn known_config_version_gets_empty_body() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let rev = node.running.node.rev();
    let mut extras = 1u64.to_be_bytes().to_vec();
    extras.extend_from_slice(&rev.to_be_bytes());
    let r = c.call(0xb5, &[], &extras, &[], 0, 0).await.unwrap();
    assert_eq!((r.status, r.value.len()), (0, 0));
    let mut old = 1u64.to_be_bytes().to_vec();
    old.extend_from_slice(&(rev - 1).to_be_bytes());
    assert!(!c.call(0xb5, &[], &old, &[], 0, 0).await.unwrap().value.is_empty());
    node.stop().await;
}

/// A vBucket this node does not own (1024 is out of range) is NOT_MY_VBUCKET with the config as a JSON body.
#[tokio::test]
async fn not_my_vbucket_carries_the_config() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let k = c.key(0, b"x");
    let mut r = req(0x00, &k, &[], &[]);
    r.vbucket = 1024;
    let resp = c.send(&r).await.unwrap();
    assert_eq!((resp.status, resp.datatype), (0x07, 1));
    let v: Value = serde_json::from_slice(&resp.value).unwrap();
    assert_eq!(v["name"], "default");
    node.stop().await;
}

/// Selecting a bucket that does not exist is EACCESS (the C++ SDK reports bucket-not-found at once).
#[tokio::test]
async fn unknown_bucket_is_eaccess() {
    let node = TestNode::start().await;
    let err = Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("nope"), &[]).await.err().unwrap();
    assert!(err.to_string().contains("SELECT_BUCKET") && err.to_string().contains("0x24"), "{err}");
    node.stop().await;
}

/// A connection that agreed Duplex and brief cluster-map notifications is told of every config change with a
/// server push (magic 0x82, opcode 0x01, 16-byte epoch and rev, the bucket as key, no value); one that did not
/// agree gets nothing.
#[tokio::test]
async fn config_changes_are_pushed_to_connections_that_asked() {
    use settee_mcbp::Feature;
    use tokio::io::AsyncReadExt;
    let node = TestNode::start().await;
    let asked = [Feature::Duplex, Feature::ClustermapChangeNotificationBrief, Feature::Json];
    let c = settee_client::Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("default"), &asked).await.unwrap();
    assert!(c.has(Feature::ClustermapChangeNotificationBrief));
    let (mut pushed, _) = c.into_parts();
    let quiet = settee_client::Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("default"), &[Feature::Json])
        .await
        .unwrap();
    let (mut silent, _) = quiet.into_parts();
    let before = node.running.node.rev();
    let bucket = node.running.node.bucket("default").unwrap();
    node.running.node.propose_manifest_change(&bucket, |m| m.create_scope("pushed").map(drop)).await.unwrap();
    let mut head = [0u8; 24];
    tokio::time::timeout(std::time::Duration::from_secs(5), pushed.read_exact(&mut head)).await.unwrap().unwrap();
    assert_eq!((head[0], head[1], head[4]), (0x82, 0x01, 16), "a clustermap change notification");
    let (key_len, body_len) =
        (u16::from_be_bytes([head[2], head[3]]), u32::from_be_bytes(head[8..12].try_into().unwrap()));
    let mut body = vec![0u8; body_len as usize];
    pushed.read_exact(&mut body).await.unwrap();
    assert_eq!(body.len(), 16 + usize::from(key_len), "brief: no config in the value");
    let rev = i64::from_be_bytes(body[8..16].try_into().unwrap());
    assert!(rev > i64::try_from(before).unwrap(), "the new revision {rev} after {before}");
    assert_eq!(&body[16..], b"default");
    let mut byte = [0u8; 1];
    let nothing = tokio::time::timeout(std::time::Duration::from_millis(300), silent.read(&mut byte)).await;
    assert!(nothing.is_err(), "a connection that did not agree gets no push");
    node.stop().await;
}
