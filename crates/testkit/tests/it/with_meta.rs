//! SET_WITH_META / DEL_WITH_META on a real node: the document keeps the CAS, revision, flags and expiry the request
//! gives, conflict resolution refuses an older revision, and the meta-write privilege is required (data_writer is
//! not enough, as in Couchbase).

use settee_client::{Connection, OwnedResponse};
use settee_testkit::TestNode;

use crate::helpers::{req, vb};
use crate::security::add_user;

const SET_WITH_META: u8 = 0xa2;
const DEL_WITH_META: u8 = 0xa8;
const GET_META: u8 = 0xa0;
const KEY_ENOENT: u16 = 0x01;
const KEY_EEXISTS: u16 = 0x02;
const EACCESS: u16 = 0x24;

fn extras(flags: u32, expiry: u32, rev: u64, cas: u64, options: u32) -> Vec<u8> {
    settee_mcbp::WithMetaExtras { flags, expiry, rev, cas, options, ext_meta_len: 0 }.encode().to_vec()
}

async fn with_meta(c: &mut Connection, op: u8, key: &[u8], value: &[u8], extras: &[u8]) -> OwnedResponse {
    let request = settee_mcbp::Request { vbucket: vb(key), ..req(op, key, extras, value) };
    c.send(&request).await.expect("reply")
}

/// (deleted, flags, expiry, rev, cas) from GET_META.
async fn meta(c: &mut Connection, key: &[u8]) -> (u32, u32, u32, u64, u64) {
    let r = c.send(&settee_mcbp::Request { vbucket: vb(key), ..req(GET_META, key, &[], &[]) }).await.expect("reply");
    assert_eq!(r.status, 0, "GET_META");
    let e = &r.extras;
    let u32_at = |i: usize| u32::from_be_bytes(e[i..i + 4].try_into().unwrap());
    (u32_at(0), u32_at(4), u32_at(8), u64::from_be_bytes(e[12..20].try_into().unwrap()), r.cas)
}

/// Proves the document written by SET_WITH_META carries exactly the given metadata, that an older revision is
/// refused with KEY_EEXISTS and a newer one accepted, and that DEL_WITH_META leaves a tombstone with its metadata.
#[tokio::test]
async fn with_meta_writes_keep_the_given_metadata_when_they_win() {
    let node = TestNode::start().await;
    let mut c = Connection::connect(node.kv_addr(), "Administrator", "password", Some("default"), &[]).await.unwrap();
    let cas = 0x1800_0000_0000_0000;
    let r =
        with_meta(&mut c, SET_WITH_META, b"doc", br#"{"v":1}"#, &extras(0x0200_0006, 2_000_000_000, 7, cas, 0)).await;
    assert_eq!((r.status, r.cas), (0, cas));
    assert_eq!(meta(&mut c, b"doc").await, (0, 0x0200_0006, 2_000_000_000, 7, cas));
    let older = with_meta(&mut c, SET_WITH_META, b"doc", b"old", &extras(0, 0, 6, cas + 1, 0)).await;
    assert_eq!(older.status, KEY_EEXISTS);
    let newer = with_meta(&mut c, SET_WITH_META, b"doc", b"new", &extras(1, 0, 8, cas - 1, 0)).await;
    assert_eq!(newer.status, 0);
    assert_eq!(meta(&mut c, b"doc").await, (0, 1, 0, 8, cas - 1));
    let del = with_meta(&mut c, DEL_WITH_META, b"doc", b"", &extras(0, 1_900_000_000, 9, cas + 5, 0)).await;
    assert_eq!(del.status, 0);
    assert_eq!(meta(&mut c, b"doc").await, (1, 0, 1_900_000_000, 9, cas + 5));
    let get = c.send(&settee_mcbp::Request { vbucket: vb(b"doc"), ..req(0x00, b"doc", &[], &[]) }).await.unwrap();
    assert_eq!(get.status, KEY_ENOENT);
    node.stop().await;
}

/// Proves SET_WITH_META needs `data.meta!write`: data_writer (plain writes) gets EACCESS, data_backup succeeds.
#[tokio::test]
async fn with_meta_writes_are_refused_when_the_user_lacks_meta_write() {
    let node = TestNode::start().await;
    add_user(&node, "writer", "writer-pw", "data_writer[default]").await;
    add_user(&node, "backup", "backup-pw", "data_backup[default]").await;
    let e = extras(0, 0, 1, 42, 0);
    let mut w = Connection::connect(node.kv_addr(), "writer", "writer-pw", Some("default"), &[]).await.unwrap();
    assert_eq!(with_meta(&mut w, SET_WITH_META, b"k", b"v", &e).await.status, EACCESS);
    let mut b = Connection::connect(node.kv_addr(), "backup", "backup-pw", Some("default"), &[]).await.unwrap();
    assert_eq!(with_meta(&mut b, SET_WITH_META, b"k", b"v", &e).await.status, 0);
    node.stop().await;
}
