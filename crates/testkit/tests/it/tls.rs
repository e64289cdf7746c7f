//! TLS on the KV, management and query ports (issue 17, item 1): a real node on real sockets, a rustls client that
//! trusts the CA the node serves, and one that trusts another CA.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use settee_mcbp::{decode_response, encode_request, Request};
use settee_server::config::ServerConfig;
use settee_testkit::{free_port, TestNode, ADMIN, PASSWORD};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::helpers::{req, vb};

/// Turns the three TLS ports on, on free ports.
fn tls_on(c: &mut ServerConfig) {
    (c.kv_tls_port, c.mgmt_tls_port, c.query_tls_port) = (free_port(), free_port(), free_port());
}

/// A client that trusts only the certificates of `ca_pem`.
fn connector(ca_pem: &str) -> TlsConnector {
    connector_with_alpn(ca_pem, Vec::new())
}

/// As `connector`, offering the ALPN protocols `alpn`.
fn connector_with_alpn(ca_pem: &str, alpn: Vec<Vec<u8>>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in pem_certs(ca_pem) {
        roots.add(cert).expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut config = config;
    config.alpn_protocols = alpn;
    TlsConnector::from(Arc::new(config))
}

fn pem_certs(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>().expect("PEM certificates")
}

async fn tls_connect(addr: SocketAddr, ca_pem: &str) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    connector(ca_pem).connect(name, tcp).await
}

/// Sends one KV request and reads its reply: (status, value).
async fn kv_call(s: &mut TlsStream<TcpStream>, request: &Request<'_>) -> (u16, Vec<u8>) {
    let mut out = Vec::new();
    encode_request(&mut out, request);
    s.write_all(&out).await.expect("write");
    let mut buf = Vec::new();
    loop {
        if let Some((r, _)) = decode_response(&buf, 1 << 20).expect("a valid reply") {
            return (r.status, r.value.to_vec());
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One HTTP/1.1 request over TLS that closes the connection; returns the raw answer.
async fn https(addr: SocketAddr, ca_pem: &str, method: &str, path: &str, body: &str) -> String {
    use base64::Engine;
    let mut s = tls_connect(addr, ca_pem).await.expect("tls handshake");
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{ADMIN}:{PASSWORD}"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A CA the node has never seen, and a certificate it signs for 127.0.0.1: (CA PEM, chain PEM, key PEM).
fn foreign_ca_and_cert() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca, &ca_key);
    let node_key = rcgen::KeyPair::generate().expect("key");
    let node = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("params");
    let node_cert = node.signed_by(&node_key, &issuer).expect("node certificate");
    (ca_cert.pem(), node_cert.pem(), node_key.serialize_pem())
}

/// Proves the TLS ports serve what the plain ones do to a client trusting the served CA: on the KV port HELLO, SASL
/// PLAIN, SELECT_BUCKET, SET and GET; on the management port `/pools` and the CA itself; on the query port a
/// statement. The CA comes from `/pools/default/certificate` over the plain management port, as an operator
/// would fetch it, and the cluster config advertises the three ports as kvSSL, mgmtSSL and n1qlSSL.
#[tokio::test]
async fn tls_ports_serve_kv_rest_and_query_to_a_client_trusting_the_served_ca() {
    let node = TestNode::start_with(tls_on).await;
    let r = &node.running;
    let ca = node.running.node.tls.ca_pem().to_owned();
    let (kv, mgmt, query) = (r.kv_tls_addr.unwrap(), r.mgmt_tls_addr.unwrap(), r.query_tls_addr.unwrap());

    let mut s = tls_connect(kv, &ca).await.expect("kv tls handshake");
    assert_eq!(kv_call(&mut s, &req(0x1f, b"tls-test", &[], &[])).await.0, 0, "HELLO");
    let plain = format!("\0{ADMIN}\0{PASSWORD}");
    assert_eq!(kv_call(&mut s, &req(0x21, b"PLAIN", &[], plain.as_bytes())).await.0, 0, "SASL PLAIN");
    assert_eq!(kv_call(&mut s, &req(0x89, b"default", &[], &[])).await.0, 0, "SELECT_BUCKET");
    let set = Request { vbucket: vb(b"k"), ..req(0x01, b"k", &[0; 8], b"\"over tls\"") };
    assert_eq!(kv_call(&mut s, &set).await.0, 0, "SET");
    let get = Request { vbucket: vb(b"k"), ..req(0x00, b"k", &[], &[]) };
    assert_eq!(kv_call(&mut s, &get).await, (0, b"\"over tls\"".to_vec()), "GET");
    let (status, config) = kv_call(&mut s, &req(0xb5, b"", &[], &[])).await;
    assert_eq!(status, 0);
    let config: serde_json::Value = serde_json::from_slice(&config).expect("config JSON");
    let services = &config["nodesExt"][0]["services"];
    assert_eq!(services["kvSSL"], kv.port(), "{services}");
    assert_eq!(services["mgmtSSL"], mgmt.port(), "{services}");
    assert_eq!(services["n1qlSSL"], query.port(), "{services}");

    let pools = https(mgmt, &ca, "GET", "/pools", "").await;
    assert!(pools.starts_with("HTTP/1.1 200"), "{pools}");
    let served = https(mgmt, &ca, "GET", "/pools/default/certificate", "").await;
    assert!(served.ends_with(&ca), "{served}");
    let answer = https(query, &ca, "POST", "/query/service", "statement=SELECT%201%20AS%20one").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"one\": 1") || answer.contains("\"one\":1"), "{answer}");
    node.stop().await;
}

/// Proves a client that trusts another CA fails the handshake on every TLS port, and that the failure closes only
/// that connection: a client with the right CA is served right after.
#[tokio::test]
async fn handshake_fails_for_a_client_trusting_another_ca() {
    let node = TestNode::start_with(tls_on).await;
    let r = &node.running;
    let (foreign, _, _) = foreign_ca_and_cert();
    for addr in [r.kv_tls_addr.unwrap(), r.mgmt_tls_addr.unwrap(), r.query_tls_addr.unwrap()] {
        let err = tls_connect(addr, &foreign).await.expect_err("the handshake fails");
        assert!(err.to_string().contains("invalid peer certificate"), "{addr}: {err}");
    }
    let ca = node.running.node.tls.ca_pem().to_owned();
    let mut s = tls_connect(r.kv_tls_addr.unwrap(), &ca).await.expect("handshake with the right CA");
    assert_eq!(kv_call(&mut s, &req(0x1f, b"after-failures", &[], &[])).await.0, 0, "HELLO");
    node.stop().await;
}

/// Proves a connection that opens the KV TLS port and never sends a ClientHello is closed once the handshake
/// timeout passes, instead of holding its slot.
#[tokio::test]
async fn stalled_handshake_is_closed_after_the_handshake_timeout() {
    let node = TestNode::start_with(|c| {
        tls_on(c);
        c.tls_handshake_timeout_secs = 1;
    })
    .await;
    let mut silent = TcpStream::connect(node.running.kv_tls_addr.unwrap()).await.expect("connect");
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut byte)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the server closed the silent connection: {read:?}");
    node.stop().await;
}

/// Proves a node given `--tls-cert/--tls-key/--tls-ca` presents that certificate and serves that CA, and that
/// `reloadCertificate` installs a new certificate from `<data-dir>/inbox/` without a restart: the next handshake
/// presents it, while a certificate from a CA the node does not trust is refused with 400 and changes nothing.
#[tokio::test]
async fn supplied_certificate_is_served_and_reload_installs_the_inbox_one() {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "operator CA");
    let ca_pem = ca.self_signed(&ca_key).expect("CA").pem();
    let issuer = rcgen::Issuer::new(ca, &ca_key);
    let node_cert = |cn: &str| {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &issuer).expect("node certificate");
        (cert.pem(), cert.der().clone(), key.serialize_pem())
    };
    let dir = settee_testkit::temp_dir("tls-supplied");
    let (first_pem, first_der, first_key) = node_cert("first");
    for (name, text) in [("ca.pem", &ca_pem), ("chain.pem", &first_pem), ("pkey.pem", &first_key)] {
        std::fs::write(dir.join(name), text).expect("write");
    }
    let node = TestNode::start_with(|c| {
        tls_on(c);
        c.tls_cert = Some(dir.join("chain.pem"));
        c.tls_key = Some(dir.join("pkey.pem"));
        c.tls_ca = Some(dir.join("ca.pem"));
    })
    .await;
    let kv = node.running.kv_tls_addr.unwrap();
    let presented = |s: &TlsStream<TcpStream>| s.get_ref().1.peer_certificates().expect("a certificate")[0].clone();
    assert_eq!(node.running.node.tls.ca_pem(), ca_pem);
    assert_eq!(presented(&tls_connect(kv, &ca_pem).await.expect("handshake")), first_der);

    let inbox = node.running.node.tls.inbox_dir().to_owned();
    std::fs::create_dir_all(&inbox).expect("inbox");
    let (_, foreign_chain, foreign_key) = foreign_ca_and_cert();
    std::fs::write(inbox.join("chain.pem"), &foreign_chain).expect("write");
    std::fs::write(inbox.join("pkey.pem"), &foreign_key).expect("write");
    let refused = rest_post(node.running.mgmt_addr, "/node/controller/reloadCertificate").await;
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert_eq!(presented(&tls_connect(kv, &ca_pem).await.expect("handshake")), first_der);

    let (second_pem, second_der, second_key) = node_cert("second");
    std::fs::write(inbox.join("chain.pem"), &second_pem).expect("write");
    std::fs::write(inbox.join("pkey.pem"), &second_key).expect("write");
    let reloaded = rest_post(node.running.mgmt_addr, "/node/controller/reloadCertificate").await;
    assert!(reloaded.starts_with("HTTP/1.1 200"), "{reloaded}");
    assert_eq!(presented(&tls_connect(kv, &ca_pem).await.expect("handshake")), second_der);
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A POST as the administrator over the plain management port; returns the raw answer.
async fn rest_post(addr: SocketAddr, path: &str) -> String {
    use base64::Engine;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{ADMIN}:{PASSWORD}"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic {auth}\r\nConnection: close\r\n\
         Content-Length: 0\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer).await;
    answer
}

/// Proves a node that joins a cluster takes the cluster's CA from its seed: it serves the seed's CA and its KV TLS
/// port passes a handshake for a client that trusts only that CA, so one CA covers the cluster.
#[tokio::test]
async fn joining_node_adopts_the_cluster_ca() {
    let first = TestNode::start_with(tls_on).await;
    let seed = first.running.mgmt_addr.to_string();
    let second = TestNode::start_with(|c| {
        tls_on(c);
        c.join = Some(seed);
        c.bucket = String::new();
    })
    .await;
    let ca = first.running.node.tls.ca_pem();
    assert_eq!(second.running.node.tls.ca_pem(), ca);
    let mut s = tls_connect(second.running.kv_tls_addr.unwrap(), &ca).await.expect("handshake with the cluster CA");
    assert_eq!(kv_call(&mut s, &req(0x1f, b"joined", &[], &[])).await.0, 0, "HELLO");
    second.stop().await;
    first.stop().await;
}

/// Regression (found in review): every TLS port shared one rustls config that listed ALPN `http/1.1`, and rustls
/// refuses a client whose offered ALPN protocols do not include one the server lists. Proves the KV port lists none
/// (a client offering another protocol is served) while the management port still agrees on `http/1.1`.
#[tokio::test]
async fn kv_tls_port_accepts_clients_offering_other_alpn_protocols() {
    let node = TestNode::start_with(tls_on).await;
    let ca = node.running.node.tls.ca_pem();
    let connect = |addr: SocketAddr, alpn: &[u8]| {
        let connector = connector_with_alpn(&ca, vec![alpn.to_vec()]);
        async move {
            let tcp = TcpStream::connect(addr).await?;
            connector.connect(ServerName::IpAddress(addr.ip().into()), tcp).await
        }
    };
    let mut kv = connect(node.running.kv_tls_addr.unwrap(), b"memcached").await.expect("kv handshake");
    assert_eq!(kv.get_ref().1.alpn_protocol(), None);
    assert_eq!(kv_call(&mut kv, &req(0x1f, b"alpn", &[], &[])).await.0, 0, "HELLO");
    let mgmt = connect(node.running.mgmt_tls_addr.unwrap(), b"http/1.1").await.expect("mgmt handshake");
    assert_eq!(mgmt.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    node.stop().await;
}

/// Proves settee's own client runs a whole KV session over the TLS port (HELLO, SASL, SELECT_BUCKET, a pipelined
/// SET then GET) when it trusts the node's CA, hands the TLS stream on with `into_parts` (a NOOP answered through
/// it), and fails the handshake when it trusts another CA, before sending anything.
#[tokio::test]
async fn client_connection_runs_over_tls_and_refuses_a_server_another_ca_signed() {
    use settee_client::{ClientError, Connection, KvStream, TlsClient};
    let node = TestNode::start_with(tls_on).await;
    let kv = node.running.kv_tls_addr.unwrap();
    let trusted = TlsClient::with_roots_pem(&node.running.node.tls.ca_pem()).expect("the node's CA");
    let mut c = Connection::connect_with(kv, None, Some(&trusted), ADMIN, PASSWORD, Some("default"), &[])
        .await
        .expect("a TLS session");
    assert!(c.is_tls());
    c.queue(&Request { vbucket: vb(b"k"), ..req(0x01, b"k", &[0; 8], b"\"via client\"") });
    c.queue(&Request { vbucket: vb(b"k"), ..req(0x00, b"k", &[], &[]) });
    c.flush().await.expect("flush");
    let (set, get) = (c.read_response().await.expect("SET"), c.read_response().await.expect("GET"));
    assert_eq!((set.status, get.status, get.value), (0, 0, b"\"via client\"".to_vec()));
    let (mut stream, unread) = c.into_parts();
    assert!(unread.is_empty() && matches!(stream, KvStream::Tls(_)));
    let mut noop = Vec::new();
    encode_request(&mut noop, &Request { opaque: 77, ..req(0x0a, b"", &[], &[]) });
    stream.write_all(&noop).await.expect("write");
    stream.flush().await.expect("flush");
    let mut head = [0u8; 24];
    stream.read_exact(&mut head).await.expect("the NOOP reply");
    assert_eq!((head[1], &head[12..16]), (0x0a, &77u32.to_be_bytes()[..]));

    let (foreign, _, _) = foreign_ca_and_cert();
    let wrong = TlsClient::with_roots_pem(&foreign).expect("a CA");
    let refused = Connection::connect_with(kv, None, Some(&wrong), ADMIN, PASSWORD, None, &[]).await;
    assert!(
        matches!(&refused, Err(ClientError::Io(e)) if e.to_string().contains("invalid peer certificate")),
        "{:?}",
        refused.err()
    );
    node.stop().await;
}
