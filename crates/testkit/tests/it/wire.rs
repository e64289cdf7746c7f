//! Wire tests: bytes in, bytes out, against a real listener.

use settee_client::Connection;
use settee_mcbp::{encode_request, Magic, Request};
use settee_testkit::TestNode;

use crate::helpers::{get, req, set, vb};

/// A HELLO is answered with exactly the supported features, in the order the client asked, and unknown or
/// unsupported codes (TLS 0x02, tracing 0x0f, an undefined 0x7f) are dropped.
#[tokio::test]
async fn hello_echoes_supported_features_in_request_order() {
    let node = TestNode::start().await;
    let mut c = Connection::connect_raw(node.kv_addr()).await.unwrap();
    let asked: Vec<u8> = [0x12u16, 0x02, 0x04, 0x0f, 0x7f, 0x07, 0x10].iter().flat_map(|c| c.to_be_bytes()).collect();
    let r = c.call(0x1f, b"{\"a\":\"test\"}", &[], &asked, 0, 0).await.unwrap();
    assert_eq!(r.status, 0);
    assert_eq!(r.value, vec![0x00, 0x12, 0x00, 0x04, 0x00, 0x07, 0x00, 0x10]);
    node.stop().await;
}

/// Before authentication only the allow-list runs: a GET gets EACCESS, GET_ERROR_MAP and SASL_LIST_MECHS work.
#[tokio::test]
async fn commands_before_auth_get_eaccess() {
    let node = TestNode::start().await;
    let mut c = Connection::connect_raw(node.kv_addr()).await.unwrap();
    assert_eq!(c.call(0x00, b"k", &[], &[], 0, 0).await.unwrap().status, 0x24);
    let mechs = c.call(0x20, &[], &[], &[], 0, 0).await.unwrap();
    assert_eq!((mechs.status, mechs.value.as_slice()), (0, &b"SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN"[..]));
    let map = c.call(0xfe, &[], &[], &2u16.to_be_bytes(), 0, 0).await.unwrap();
    assert_eq!(map.status, 0);
    let v: serde_json::Value = serde_json::from_slice(&map.value).unwrap();
    assert_eq!(v["errors"]["88"]["name"], "UNKNOWN_COLLECTION");
    node.stop().await;
}

/// A wrong password is AUTH_ERROR and the connection stays unauthenticated.
#[tokio::test]
async fn wrong_password_is_auth_error() {
    let node = TestNode::start().await;
    let err = Connection::connect(node.kv_addr(), "Administrator", "nope", Some("default"), &[]).await.err().unwrap();
    assert!(err.to_string().contains("0x20"), "{err}");
    node.stop().await;
}

/// An unknown opcode is UNKNOWN_COMMAND with opcode and opaque echoed, and the connection keeps working.
#[tokio::test]
async fn unknown_opcode_is_unknown_command() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let mut r = req(0x7e, b"", &[], &[]);
    r.opaque = 0;
    let resp = c.send(&r).await.unwrap();
    assert_eq!((resp.opcode, resp.status), (0x7e, 0x81));
    assert_eq!(c.call(0x0a, &[], &[], &[], 0, 0).await.unwrap().status, 0);
    node.stop().await;
}

/// A frame with an invalid magic closes the connection; other connections are not disturbed.
#[tokio::test]
async fn bad_magic_closes_only_that_connection() {
    let node = TestNode::start().await;
    let mut good = node.connect().await;
    let mut bad = Connection::connect_raw(node.kv_addr()).await.unwrap();
    bad.send_raw(&[0x42; 24]).await.unwrap();
    assert!(bad.closed_by_server().await);
    assert_eq!(set(&mut good, b"k", b"v", 0, 0).await.status, 0);
    node.stop().await;
}

/// A header declaring a body over 30 MiB closes the connection before the body is read.
#[tokio::test]
async fn oversized_frame_closes_connection() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let mut h = vec![0x80, 0x01, 0, 1, 8, 0, 0, 0];
    h.extend_from_slice(&(31u32 * 1024 * 1024).to_be_bytes());
    h.extend_from_slice(&[0; 12]);
    c.send_raw(&h).await.unwrap();
    assert!(c.closed_by_server().await);
    node.stop().await;
}

/// Inconsistent lengths (extras longer than the body) close the connection.
#[tokio::test]
async fn inconsistent_lengths_close_connection() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let mut h = vec![0x80, 0x00, 0, 0, 10, 0, 0, 0, 0, 0, 0, 2];
    h.extend_from_slice(&[0; 12]);
    h.extend_from_slice(&[1, 2]);
    c.send_raw(&h).await.unwrap();
    assert!(c.closed_by_server().await);
    node.stop().await;
}

/// A pipelined batch of 200 requests in one write is answered in order, each with its own opaque.
#[tokio::test]
async fn pipelined_batch_is_answered_in_order() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let mut out = Vec::new();
    let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("pipe-{i}").into_bytes()).collect();
    let extras = [0u8; 8];
    for (i, k) in keys.iter().enumerate() {
        let pk = c.key(0, k);
        let value = format!("v{i}");
        let mut r = req(0x01, &pk, &extras, value.as_bytes());
        r.vbucket = vb(k);
        r.opaque = 1000 + i as u32;
        encode_request(&mut out, &r);
        let mut g = req(0x00, &pk, &[], &[]);
        g.vbucket = vb(k);
        g.opaque = 5000 + i as u32;
        encode_request(&mut out, &g);
    }
    c.send_raw(&out).await.unwrap();
    for i in 0..100u32 {
        let s = c.read_response().await.unwrap();
        assert_eq!((s.opcode, s.status, s.opaque), (0x01, 0, 1000 + i));
        let g = c.read_response().await.unwrap();
        assert_eq!((g.opcode, g.status, g.opaque), (0x00, 0, 5000 + i));
        assert_eq!(g.value, format!("v{i}").into_bytes());
    }
    node.stop().await;
}

/// SET answers with a 16-byte mutation token (vbuuid, seqno) and a CAS; GET answers flags in 4 extras bytes,
/// the JSON datatype for a JSON value, and the same CAS.
#[tokio::test]
async fn set_and_get_reply_layouts() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let s = set(&mut c, b"doc", br#"{"a":1}"#, 0x0200_0000, 0).await;
    assert_eq!(s.status, 0);
    assert_eq!(s.extras.len(), 16);
    assert_eq!(u64::from_be_bytes(s.extras[8..].try_into().unwrap()), 1, "first seqno of the vBucket");
    assert_ne!(s.cas, 0);
    let g = get(&mut c, b"doc").await;
    assert_eq!((g.status, g.extras.as_slice(), g.datatype, g.cas), (0, &[2, 0, 0, 0][..], 1, s.cas));
    assert_eq!(g.value, br#"{"a":1}"#);
    let s2 = set(&mut c, b"doc", b"not json", 7, 0).await;
    assert!(s2.cas > s.cas);
    assert_eq!(u64::from_be_bytes(s2.extras[8..].try_into().unwrap()), 2);
    let g = get(&mut c, b"doc").await;
    assert_eq!((g.datatype, g.extras.as_slice()), (0, &[0, 0, 0, 7][..]));
    node.stop().await;
}

/// A request with flexible framing (magic 0x08) and a preserve-TTL frame is accepted and answered with magic 0x81.
#[tokio::test]
async fn flexible_framing_is_accepted() {
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let k = c.key(0, b"flex");
    let r = Request {
        magic: Magic::AltClientRequest,
        opcode: 0x01,
        datatype: 0,
        vbucket: vb(b"flex"),
        opaque: 0,
        cas: 0,
        framing: &[0x50, 0x22, 0xAA, 0xBB],
        extras: &[0; 8],
        key: &k,
        value: b"v",
    };
    let resp = c.send(&r).await.unwrap();
    assert_eq!(resp.status, 0);
    node.stop().await;
}
