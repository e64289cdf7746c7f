//! What one node's query service asks another: documents of vBuckets active there, mutations of them, chunks of
//! its part of an index, counts (of documents, and of an index range), consistency waits, index states and
//! prepared statements. Typed messages, one request and one reply type per call, POSTed as JSON to the peer's
//! query port under `/settee/query/` with the administrator's credentials.
//!
//! Each node indexes the vBuckets it holds as active, so an index scan asks every node for its part and merges
//! them in index order; a node answers only for the vBuckets the asker names and says which of them it cannot
//! answer for yet (it does not hold them, or its feeder has not read them since they arrived), so a scan during a
//! rebalance asks again where the map says they went instead of missing or repeating entries.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use settee_cluster::transport::basic_authorization;
use settee_cluster::transport::{PeerConnector, TlsSwitch};
use settee_query::datastore::{Consistency, DocMeta, Document, Durability, KeyspaceName, Mutation, MutationKind};
use settee_query::index::{Bound, IndexEntry, ScanRange, Span};
use settee_query::value::Value;
use settee_query::{DmlReason, QueryError};

use super::datastore::{BucketKeyspace, NodeDatastore};
use crate::rest::RestState;

/// The most a peer's reply may hold.
const REPLY_BYTES_MAX: usize = 256 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which collection a call is about.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub bucket: String,
    pub scope: String,
    pub collection: String,
}

impl From<&KeyspaceName> for Target {
    fn from(k: &KeyspaceName) -> Target {
        Target { bucket: k.bucket.clone(), scope: k.scope.clone(), collection: k.collection.clone() }
    }
}

impl Target {
    fn name(&self) -> KeyspaceName {
        KeyspaceName::new(&self.bucket, &self.scope, &self.collection)
    }
}

/// A document on the wire: JSON bodies as text, others in base64.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WireDoc {
    pub body: String,
    pub is_json: bool,
    pub cas: u64,
    pub expiration: u32,
    pub flags: u32,
}

impl WireDoc {
    fn from_doc(d: &Document) -> WireDoc {
        let body = match &d.value {
            Value::Binary(b) => base64::engine::general_purpose::STANDARD.encode(b),
            v => v.to_json_string(),
        };
        WireDoc { body, is_json: d.meta.is_json, cas: d.meta.cas, expiration: d.meta.expiration, flags: d.meta.flags }
    }

    pub fn into_doc(self, key: Arc<str>) -> Document {
        let value = if self.is_json {
            Value::from_json(self.body.as_bytes()).unwrap_or(Value::Null)
        } else {
            let bytes = base64::engine::general_purpose::STANDARD.decode(self.body.as_bytes()).unwrap_or_default();
            Value::Binary(Arc::from(bytes))
        };
        Document {
            key,
            value,
            meta: DocMeta { cas: self.cas, expiration: self.expiration, flags: self.flags, is_json: self.is_json },
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FetchRequest {
    pub target: Target,
    pub keys: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FetchReply {
    pub docs: Vec<Option<WireDoc>>,
    /// Positions of keys whose vBucket is not active on the answering node.
    pub not_here: Vec<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MutateRequest {
    pub target: Target,
    /// `insert`, `upsert`, `replace` or `delete`.
    pub kind: String,
    pub key: String,
    pub body: String,
    pub cas: u64,
    pub expiration: u32,
    pub preserve_expiry: bool,
    pub flags: Option<u32>,
    pub durability: u8,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum MutateReply {
    Done {
        cas: u64,
    },
    /// `cas`, `exists`, `missing` or another reason's text.
    Refused {
        reason: String,
    },
    NotHere,
    Failed {
        message: String,
    },
}

/// An index key bound on the wire.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WireBound {
    Unbounded,
    Included(String),
    Excluded(String),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WireEntry {
    /// The index keys as a JSON array (a MISSING key written as null there).
    pub key: String,
    pub doc_id: String,
    /// The positions of the keys that are MISSING, not null: they sort apart, and a covering scan returns them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ScanRequest {
    pub target: Target,
    pub index: String,
    pub spans: Vec<(WireBound, WireBound)>,
    pub after: Option<WireEntry>,
    pub limit: usize,
    /// The vBuckets to answer for.
    pub vbs: Vec<u16>,
    /// Read from the highest entry down (`after` then bounds from above).
    #[serde(default)]
    pub reverse: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ScanReply {
    pub entries: Vec<WireEntry>,
    /// Asked-for vBuckets this node cannot answer for.
    pub unavailable: Vec<u16>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CountRequest {
    pub target: Target,
    pub index: String,
    pub vbs: Vec<u16>,
}

/// The entries of an index range in the answering node's part, only of `vbs`; answered with a `CountReply`.
#[derive(Debug, Serialize, Deserialize)]
pub struct CountRangeRequest {
    pub target: Target,
    pub index: String,
    pub spans: Vec<(WireBound, WireBound)>,
    pub vbs: Vec<u16>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CountReply {
    pub count: u64,
    pub unavailable: Vec<u16>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WaitRequest {
    pub target: Target,
    pub index: String,
    /// `None` for request_plus (the answering node takes its own high seqnos), else at_plus positions.
    pub at: Option<Vec<(u16, u64)>>,
    pub timeout_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WaitReply {
    pub caught_up: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PreparedRequest {
    pub name: String,
    pub context: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PreparedReply {
    /// The prepared statement's text and query context, if the node has it.
    pub found: Option<(String, String)>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct IndexStateRequest {
    pub bucket: String,
    pub id: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct IndexStateReply {
    pub online: bool,
}

pub(crate) fn wire_key(key: &[Value]) -> String {
    Value::array(key.to_vec()).to_json_string()
}

pub(crate) fn entry_from_wire(e: WireEntry) -> IndexEntry {
    let mut key: Vec<Value> = match Value::from_json(e.key.as_bytes()) {
        Ok(Value::Array(a)) => a.iter().cloned().collect(),
        _ => Vec::new(),
    };
    for i in e.missing {
        if let Some(k) = key.get_mut(i) {
            *k = Value::Missing;
        }
    }
    IndexEntry { key, doc_id: Arc::from(e.doc_id) }
}

pub(crate) fn entry_to_wire(e: &IndexEntry) -> WireEntry {
    let missing = e.key.iter().enumerate().filter(|(_, k)| k.is_missing()).map(|(i, _)| i).collect();
    WireEntry { key: wire_key(&e.key), doc_id: e.doc_id.to_string(), missing }
}

pub(crate) fn range_to_wire(range: &ScanRange) -> Vec<(WireBound, WireBound)> {
    let b = |b: &Bound| match b {
        Bound::Unbounded => WireBound::Unbounded,
        Bound::Included(k) => WireBound::Included(wire_key(k)),
        Bound::Excluded(k) => WireBound::Excluded(wire_key(k)),
    };
    range.spans.iter().map(|s| (b(&s.low), b(&s.high))).collect()
}

fn range_from_wire(spans: Vec<(WireBound, WireBound)>, reverse: bool) -> ScanRange {
    let key = |t: String| match Value::from_json(t.as_bytes()) {
        Ok(Value::Array(a)) => a.iter().cloned().collect(),
        _ => Vec::new(),
    };
    let b = |b: WireBound| match b {
        WireBound::Unbounded => Bound::Unbounded,
        WireBound::Included(k) => Bound::Included(key(k)),
        WireBound::Excluded(k) => Bound::Excluded(key(k)),
    };
    ScanRange { spans: spans.into_iter().map(|(l, h)| Span { low: b(l), high: b(h) }).collect(), reverse }
}

pub(crate) fn mutation_to_wire(target: &KeyspaceName, m: &Mutation) -> MutateRequest {
    let (kind, cas) = match m.kind {
        MutationKind::Insert => ("insert", 0),
        MutationKind::Upsert => ("upsert", 0),
        MutationKind::Replace { cas } => ("replace", cas),
        MutationKind::Delete { cas } => ("delete", cas),
    };
    MutateRequest {
        target: target.into(),
        kind: kind.into(),
        key: m.key.to_string(),
        body: if m.value.is_missing() { String::new() } else { m.value.to_json_string() },
        cas,
        expiration: m.expiration,
        preserve_expiry: m.preserve_expiry,
        flags: m.flags,
        durability: match m.durability {
            Durability::None => 0,
            Durability::Majority => 1,
            Durability::MajorityAndPersistActive => 2,
            Durability::PersistToMajority => 3,
        },
    }
}

fn mutation_from_wire(r: MutateRequest) -> Mutation {
    let kind = match r.kind.as_str() {
        "insert" => MutationKind::Insert,
        "upsert" => MutationKind::Upsert,
        "replace" => MutationKind::Replace { cas: r.cas },
        _ => MutationKind::Delete { cas: r.cas },
    };
    Mutation {
        kind,
        key: Arc::from(r.key),
        value: if r.body.is_empty() {
            Value::Missing
        } else {
            Value::from_json(r.body.as_bytes()).unwrap_or(Value::Null)
        },
        expiration: r.expiration,
        preserve_expiry: r.preserve_expiry,
        flags: r.flags,
        durability: match r.durability {
            1 => Durability::Majority,
            2 => Durability::MajorityAndPersistActive,
            3 => Durability::PersistToMajority,
            _ => Durability::None,
        },
    }
}

/// A refusal as the DML error it stands for.
pub(crate) fn refusal_error(op_key: (&'static str, &str), reason: &str) -> QueryError {
    let reason = match reason {
        "cas" => DmlReason::CasMismatch,
        "exists" => DmlReason::DuplicateKey,
        "missing" => DmlReason::KeyNotFound,
        other => DmlReason::Other(other.to_string()),
    };
    QueryError::Dml { op: op_key.0, key: op_key.1.to_string(), reason }
}

/// The pooled HTTP client for peer calls.
pub struct PeerClient {
    client: Client<PeerConnector, Full<Bytes>>,
    /// Which peers' query ports are reached over TLS (node-to-node encryption at `all` and `strict`).
    tls: Arc<TlsSwitch>,
    /// Replaced when the node adopts its cluster's node-to-node secret at a join.
    authorization: parking_lot::RwLock<HeaderValue>,
}

impl PeerClient {
    pub fn new(username: &str, password: &str) -> PeerClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let tls = Arc::new(TlsSwitch::default());
        let connector = PeerConnector::new(connector, tls.clone());
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE_TIMEOUT).build(connector);
        PeerClient { client, tls, authorization: parking_lot::RwLock::new(basic_authorization(username, password)) }
    }

    /// Which peers later calls reach over TLS.
    pub fn tls(&self) -> &TlsSwitch {
        &self.tls
    }

    /// Sends every later call with these credentials.
    pub fn set_credentials(&self, username: &str, password: &str) {
        *self.authorization.write() = basic_authorization(username, password);
    }

    /// POSTs `req` to `addr` (the peer's query port) at `/settee/query/<call>` and decodes the reply.
    pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        addr: &str,
        call: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, QueryError> {
        let fail = |why: String| QueryError::Datastore(format!("query peer {addr} ({call}): {why}"));
        let exchange = async {
            let body = serde_json::to_vec(req).map_err(|e| fail(e.to_string()))?;
            let uri: hyper::Uri =
                self.tls.uri(addr, &format!("/settee/query/{call}")).parse().map_err(|e| fail(format!("{e}")))?;
            let request = hyper::Request::post(uri)
                .header(CONTENT_TYPE, "application/json")
                .header(AUTHORIZATION, self.authorization.read().clone())
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| fail(e.to_string()))?;
            let response = self.client.request(request).await.map_err(|e| fail(e.to_string()))?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), REPLY_BYTES_MAX)
                .collect()
                .await
                .map_err(|e| fail(e.to_string()))?
                .to_bytes();
            if !status.is_success() {
                return Err(fail(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
                )));
            }
            serde_json::from_slice(&bytes).map_err(|e| fail(format!("bad reply: {e}")))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(fail(format!("no answer within {timeout:?}"))),
        }
    }
}

/// Serving peers: only the cluster's administrator may call, and the work runs on the blocking pool.
async fn serve<Req, Resp>(
    state: RestState,
    headers: HeaderMap,
    body: Bytes,
    work: impl FnOnce(&NodeDatastore, Req) -> Result<Resp, QueryError> + Send + 'static,
) -> Response
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
{
    let Some((id, password)) = crate::rest::auth::basic_credentials(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match crate::rest::auth::authenticate(&state, &id, &password).await {
        Ok(c) if c.user.is_admin() => {}
        _ => return StatusCode::UNAUTHORIZED.into_response(),
    }
    let req: Req = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let node = state.node.clone();
    let runtime = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || {
        let ds = NodeDatastore { registry: node.query.indexes.clone(), node, user: None, runtime };
        work(&ds, req)
    })
    .await;
    match result {
        Ok(Ok(resp)) => Json(resp).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn local(ds: &NodeDatastore, t: &Target) -> Result<BucketKeyspace, QueryError> {
    ds.local_keyspace(&t.name())
}

pub(crate) async fn fetch(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: FetchRequest| {
        let ks = local(ds, &r.target)?;
        let mut docs = Vec::with_capacity(r.keys.len());
        let mut not_here = Vec::new();
        for (i, k) in r.keys.into_iter().enumerate() {
            let key: Arc<str> = Arc::from(k);
            if !ks.holds_key(&key) {
                not_here.push(i);
                docs.push(None);
                continue;
            }
            docs.push(ks.get(&key)?.as_ref().map(WireDoc::from_doc));
        }
        Ok(FetchReply { docs, not_here })
    })
    .await
}

pub(crate) async fn mutate(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: MutateRequest| {
        let ks = local(ds, &r.target)?;
        let m = mutation_from_wire(r);
        if !ks.holds_key(&m.key) {
            return Ok(MutateReply::NotHere);
        }
        Ok(match ks.write(&m) {
            Ok(o) => MutateReply::Done { cas: o.cas },
            Err(QueryError::Dml { reason, .. }) => MutateReply::Refused {
                reason: match reason {
                    DmlReason::CasMismatch => "cas".into(),
                    DmlReason::DuplicateKey => "exists".into(),
                    DmlReason::KeyNotFound => "missing".into(),
                    DmlReason::Other(t) => t,
                },
            },
            Err(e) => MutateReply::Failed { message: e.to_string() },
        })
    })
    .await
}

pub(crate) async fn scan(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: ScanRequest| {
        let ks = local(ds, &r.target)?;
        let range = range_from_wire(r.spans, r.reverse);
        let after = r.after.map(entry_from_wire);
        let (entries, unavailable) = ks.scan_vbs(&r.index, &range, after.as_ref(), r.limit, &r.vbs)?;
        Ok(ScanReply { entries: entries.iter().map(entry_to_wire).collect(), unavailable })
    })
    .await
}

pub(crate) async fn count(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: CountRequest| {
        let ks = local(ds, &r.target)?;
        let (count, unavailable) = ks.count_vbs(&r.index, &r.vbs)?;
        Ok(CountReply { count, unavailable })
    })
    .await
}

pub(crate) async fn count_range(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: CountRangeRequest| {
        let ks = local(ds, &r.target)?;
        let (count, unavailable) = ks.count_range_vbs(&r.index, &range_from_wire(r.spans, false), &r.vbs)?;
        Ok(CountReply { count, unavailable })
    })
    .await
}

pub(crate) async fn wait(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: WaitRequest| {
        let ks = local(ds, &r.target)?;
        let consistency = match r.at {
            None => Consistency::RequestPlus,
            Some(at) => {
                Consistency::AtPlus(at.into_iter().map(|(vb, s)| (String::new(), vb, s, String::new())).collect())
            }
        };
        let caught_up = ks.wait_local(&r.index, &consistency, Duration::from_millis(r.timeout_ms)).is_ok();
        Ok(WaitReply { caught_up })
    })
    .await
}

pub(crate) async fn prepared(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: PreparedRequest| {
        let context = settee_query::plan::parse_query_context(&r.context).unwrap_or_default();
        let found = ds.node.query.engine.prepareds.get(&r.name, &context).map(|p| (p.text.clone(), p.context.key()));
        Ok(PreparedReply { found })
    })
    .await
}

pub(crate) async fn index_state(State(s): State<RestState>, h: HeaderMap, body: Bytes) -> Response {
    serve(s, h, body, |ds, r: IndexStateRequest| {
        let online = ds
            .registry
            .bucket(&r.bucket)
            .and_then(|b| b.instances.read().iter().find(|i| i.def.id == r.id).cloned())
            .is_some_and(|i| i.state() == settee_query::index::IndexState::Online);
        Ok(IndexStateReply { online })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_missing_keys_apart_from_null_on_the_wire() {
        // Proves an index entry whose second key is MISSING comes back MISSING, not null: a null would sort after
        // the node's own MISSING entries, so a scan resuming after it would skip them.
        let entry = IndexEntry { key: vec![Value::int(5), Value::Missing, Value::Null], doc_id: Arc::from("k1") };
        let json = serde_json::to_string(&entry_to_wire(&entry)).unwrap();
        let back = entry_from_wire(serde_json::from_str(&json).unwrap());
        assert!(back.key[1].is_missing() && back.key[2].is_null(), "{json}");
        assert_eq!(back, entry);
    }
}
