//! The few management (REST) calls a backup and a restore make: the bucket list and settings with their vBucket
//! maps, the scopes and collections, and creating missing ones. One HTTP/1.1 request per connection (hyper's
//! connection-level client); answers are bounded in size.

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;

use crate::error::BackupError;

const ANSWER_BYTES_MAX: usize = 64 << 20;

/// A cluster's management endpoint and credentials.
#[derive(Clone, Debug)]
pub(crate) struct Rest {
    /// `host:port`.
    pub host: String,
    authorization: String,
    pub username: String,
    pub password: String,
}

impl Rest {
    /// From cbbackupmgr's `-c`: `http://host:port`, `couchbase://host` is not supported (no TLS here yet).
    pub(crate) fn new(cluster: &str, username: &str, password: &str) -> Result<Rest, BackupError> {
        let host = cluster.strip_prefix("http://").unwrap_or(cluster).trim_end_matches('/');
        if host.is_empty() || host.contains('/') || cluster.starts_with("https://") {
            return Err(BackupError::Usage(format!("--cluster must be http://HOST:PORT, not `{cluster}`")));
        }
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        Ok(Rest {
            host: host.to_string(),
            authorization: format!("Basic {token}"),
            username: username.to_string(),
            password: password.to_string(),
        })
    }

    /// The same credentials at another `host:port` (another service of the cluster).
    pub(crate) fn at(&self, host: &str) -> Rest {
        Rest { host: host.to_string(), ..self.clone() }
    }

    pub(crate) async fn get_json(&self, path: &str) -> Result<serde_json::Value, BackupError> {
        let (status, body) = self.call("GET", path, None).await?;
        if status != 200 {
            return Err(BackupError::Cluster(format!("GET {path}: HTTP {status}: {}", String::from_utf8_lossy(&body))));
        }
        serde_json::from_slice(&body).map_err(|e| BackupError::Cluster(format!("GET {path}: {e}")))
    }

    /// GETs a path; returns the status and body (the caller decides what a non-200 means).
    pub(crate) async fn get(&self, path: &str) -> Result<(u16, Vec<u8>), BackupError> {
        self.call("GET", path, None).await
    }

    /// PUTs a form; returns the status and body.
    pub(crate) async fn put_form(&self, path: &str, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), BackupError> {
        self.call("PUT", path, Some(form_body(form))).await
    }

    /// POSTs a form; returns the status and body (the caller decides what a non-200 means).
    pub(crate) async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), BackupError> {
        self.call("POST", path, Some(form_body(form))).await
    }

    async fn call(&self, method: &str, path: &str, form: Option<String>) -> Result<(u16, Vec<u8>), BackupError> {
        let fail = |e: String| BackupError::Cluster(format!("{method} http://{}{path}: {e}", self.host));
        let stream = tokio::net::TcpStream::connect(&self.host).await.map_err(|e| fail(e.to_string()))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| fail(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = hyper::Request::builder().method(method).uri(path);
        let headers = req.headers_mut().ok_or_else(|| fail("bad request".into()))?;
        headers.insert(HOST, HeaderValue::from_str(&self.host).map_err(|e| fail(e.to_string()))?);
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&self.authorization).map_err(|e| fail(e.to_string()))?);
        if form.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
        }
        let req = req.body(Full::new(Bytes::from(form.unwrap_or_default()))).map_err(|e| fail(e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), ANSWER_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| fail(e.to_string()))?
            .to_bytes();
        Ok((status, body.to_vec()))
    }
}

fn form_body(form: &[(&str, &str)]) -> String {
    form.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

/// Percent-encodes a form value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A bucket's vBucket map, read by settee-client's `ClusterConfig` (the SDKs' rules: `serverList` order checked
/// against `nodesExt`, `$HOST` replaced), with each KV node's address.
pub(crate) struct BucketMap {
    pub nodes: Vec<std::net::SocketAddr>,
    /// Per vBucket, the index into `nodes` of its active copy; None when it has none.
    pub actives: Vec<Option<usize>>,
}

impl BucketMap {
    /// The map of the bucket config `config`, fetched from `rest`.
    pub(crate) fn of(config: &serde_json::Value, rest: &Rest) -> Result<BucketMap, BackupError> {
        let seed = rest.host.rsplit_once(':').map_or(rest.host.as_str(), |(host, _)| host);
        let body = serde_json::to_vec(config).map_err(|e| BackupError::Cluster(e.to_string()))?;
        let cfg = settee_client::ClusterConfig::parse(&body, seed)?;
        let nodes = cfg
            .kv_nodes
            .iter()
            .map(|n| {
                n.parse().map_err(|_| BackupError::Cluster(format!("unusable KV address `{n}` in the vBucket map")))
            })
            .collect::<Result<_, _>>()?;
        let actives = (0..cfg.num_vbuckets()).map(|vb| cfg.active_node(vb)).collect();
        Ok(BucketMap { nodes, actives })
    }
}
