//! The calls one node makes to another outside Raft, as typed messages shared by both ends: the caller builds a
//! request and decodes the reply as its [`PeerCall::Reply`]; the handler decodes the same request type and answers
//! the same reply type. One request and one reply type per call:
//!
//! | request | endpoint | reply |
//! |---|---|---|
//! | [`SeqnosRequest`] | `GET /settee/node/seqnos` | [`SeqnoReport`] |
//! | [`HoldRequest`] | `POST /settee/node/drain` | [`HoldReply`] |
//! | [`JoinRequest`] | `POST /node/controller/doJoinCluster` | none (200) |
//! | [`ProbeRequest`] | `GET /pools` | ignored (200 means alive) |
//! | [`ClusterCaRequest`] | `GET /settee/tls/ca` | [`ClusterCaReply`] |
//! | [`PeerSecretRequest`] | `GET /settee/node/peerSecret` | [`PeerSecretReply`] |
//! | [`BucketSamplesRequest`] | `POST /settee/node/bucketSamples` | [`BucketSamples`] |
//!
//! The settee-only calls carry JSON; `doJoinCluster` is Couchbase's endpoint and keeps its form fields. Every call
//! goes to the management port with the administrator's credentials (the probe with none).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::vbmap::NodeId;

/// How a request travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// No body (a GET).
    Empty,
    /// `application/json`.
    Json(String),
    /// `application/x-www-form-urlencoded`.
    Form(String),
}

/// One node-to-node call: where it goes, how its request is encoded and what it answers.
pub trait PeerCall {
    /// "GET" or "POST".
    const METHOD: &'static str;
    const PATH: &'static str;
    type Reply;
    fn body(&self) -> Body;
    /// Decodes a 200 answer's body.
    fn decode_reply(body: &[u8]) -> Result<Self::Reply, serde_json::Error>;
}

/// High seqnos by bucket and vBucket. On the wire `{bucket: {"vb": seqno}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VbSeqnos(pub BTreeMap<String, BTreeMap<u16, u64>>);

impl VbSeqnos {
    /// The seqno of `vb` of `bucket`, if reported.
    pub fn get(&self, bucket: &str, vb: u16) -> Option<u64> {
        self.0.get(bucket).and_then(|vbs| vbs.get(&vb)).copied()
    }

    /// Lists `bucket` (with no vBucket yet): a bucket is always present, even when it reports none.
    pub fn add_bucket(&mut self, bucket: &str) {
        self.0.entry(bucket.to_owned()).or_default();
    }

    pub fn insert(&mut self, bucket: &str, vb: u16, seqno: u64) {
        self.0.entry(bucket.to_owned()).or_default().insert(vb, seqno);
    }

    /// The vBuckets reported for each bucket.
    pub fn vbuckets(&self) -> impl Iterator<Item = (&str, Vec<u16>)> {
        self.0.iter().map(|(bucket, vbs)| (bucket.as_str(), vbs.keys().copied().collect()))
    }
}

/// `GET /settee/node/seqnos`: how far each copy on the node is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqnosRequest;

/// The answer to [`SeqnosRequest`]. A bucket still warming up reports no vBucket: seqnos its warmup has not loaded
/// yet would understate what the node holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqnoReport {
    /// Every active or replica vBucket.
    pub buckets: VbSeqnos,
    /// Dead vBuckets that still hold data: a failed-over node's copies, which delta recovery resumes from.
    #[serde(default)]
    pub kept: VbSeqnos,
    /// The metadata revision the node's vBucket states reflect: every change up to it was applied there before the
    /// seqnos were read. A node behind the metadata may report a copy that a change it has not applied yet drops
    /// (a copy a stopped rebalance was building): the rebalance trusts a copy's seqno only from a node that has
    /// applied the change that put the copy there. 0 from a node that does not say.
    #[serde(default)]
    pub rev: u64,
    /// Data requests (key-addressed KV commands: reads and writes, whatever their answer) the node has answered
    /// since it started: a graceful failover ends the node's drain once this stops growing. 0 from a node that
    /// does not say.
    #[serde(default)]
    pub data_requests: u64,
}

impl SeqnoReport {
    /// The seqno of the copy of `vb` of `bucket` that the metadata at revision `placed` puts on the node, if the
    /// node had applied that revision when it reported: before, the copy it reports may be one a change it has not
    /// applied yet empties, and nothing may be decided on it.
    pub fn copy_seqno(&self, bucket: &str, vb: u16, placed: u64) -> Option<u64> {
        (self.rev >= placed).then(|| self.buckets.get(bucket, vb)).flatten()
    }
}

impl PeerCall for SeqnosRequest {
    const METHOD: &'static str = "GET";
    const PATH: &'static str = "/settee/node/seqnos";
    type Reply = SeqnoReport;
    fn body(&self) -> Body {
        Body::Empty
    }
    fn decode_reply(body: &[u8]) -> Result<SeqnoReport, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// A joining node asks its seed, with the administrator's own credentials, for the secret the cluster's nodes
/// authenticate each other with (so that they do not depend on the administrator's password, which may be reset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerSecretRequest;

/// The seed's node-to-node secret; None for a cluster formed by a settee that had none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerSecretReply {
    pub secret: Option<String>,
}

impl PeerCall for PeerSecretRequest {
    const METHOD: &'static str = "GET";
    const PATH: &'static str = "/settee/node/peerSecret";
    type Reply = PeerSecretReply;
    fn body(&self) -> Body {
        Body::Empty
    }
    fn decode_reply(body: &[u8]) -> Result<PeerSecretReply, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// A joining node asks its seed for the cluster's CA, so that every node presents a certificate from one CA and a
/// client trusts the whole cluster with one certificate (Couchbase's cluster CA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterCaRequest;

/// The cluster's generated CA: its certificate, its key and its common name (the issuer name of the node
/// certificates it signs). `ca` is None when the seed uses certificates an operator supplied, whose CA key it does
/// not hold: then each node keeps its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCaReply {
    pub ca: Option<ClusterCa>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCa {
    pub cert_pem: String,
    pub key_pem: String,
    pub common_name: String,
}

impl PeerCall for ClusterCaRequest {
    const METHOD: &'static str = "GET";
    const PATH: &'static str = "/settee/tls/ca";
    type Reply = ClusterCaReply;
    fn body(&self) -> Body {
        Body::Empty
    }
    fn decode_reply(body: &[u8]) -> Result<ClusterCaReply, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// A bucket flush reaching every node: each flushes its part of the bucket (`Bucket::flush`: a persistent
/// bucket's actives, whose deletions replicate; all of a memory-only bucket's copies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushRequest {
    pub bucket: String,
}

/// A node's answer to a [`FlushRequest`]: done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushReply {}

impl PeerCall for FlushRequest {
    const METHOD: &'static str = "POST";
    const PATH: &'static str = "/settee/node/flush";
    type Reply = FlushReply;
    fn body(&self) -> Body {
        // A struct of one string always serialises.
        Body::Json(serde_json::to_string(self).expect("a flush request serialises"))
    }
    fn decode_reply(body: &[u8]) -> Result<FlushReply, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// Which active vBuckets a [`HoldRequest`] covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HoldScope {
    /// Holding: every vBucket the map makes active on the node (graceful failover). Releasing: every vBucket held.
    All,
    /// These vBuckets of one bucket (a rebalance's takeovers).
    Some { bucket: String, vbs: Vec<u16> },
}

/// `POST /settee/node/drain`: hold active vBuckets for a takeover (pending: clients are refused while DCP still
/// streams them to the copies that take over), or release them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRequest {
    /// True to hold, false to release.
    pub hold: bool,
    pub scope: HoldScope,
    /// For a move that keeps a vBucket active on the node while its replicas change: the chain the move commits.
    /// Such a hold lasts until the node applies a map giving the vBucket that chain (see `Holds::end_committed`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub until_chains: BTreeMap<u16, Vec<Option<NodeId>>>,
}

/// The answer to [`HoldRequest`]: the high seqno each covered vBucket stopped at (a bucket warming up lists none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldReply {
    pub stopped: VbSeqnos,
}

impl PeerCall for HoldRequest {
    const METHOD: &'static str = "POST";
    const PATH: &'static str = "/settee/node/drain";
    type Reply = HoldReply;
    fn body(&self) -> Body {
        // A struct of strings, numbers and lists always serialises.
        Body::Json(serde_json::to_string(self).expect("a hold request serialises"))
    }
    fn decode_reply(body: &[u8]) -> Result<HoldReply, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// `POST /settee/node/bucketSamples`: a node's statistics samples of one bucket at one zoom level (Couchbase's
/// `minute` ... `year`), from after `since_ms` (Unix ms) if given, for the cluster-wide
/// `/pools/default/buckets/<b>/stats`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketSamplesRequest {
    pub bucket: String,
    pub zoom: String,
    #[serde(default)]
    pub since_ms: Option<u64>,
}

/// The answer to [`BucketSamplesRequest`]: sample times (Unix ms) and each statistic's values (rates already per
/// second; null where the node had no value).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketSamples {
    pub times: Vec<u64>,
    pub series: BTreeMap<String, Vec<Option<f64>>>,
}

impl PeerCall for BucketSamplesRequest {
    const METHOD: &'static str = "POST";
    const PATH: &'static str = "/settee/node/bucketSamples";
    type Reply = BucketSamples;
    fn body(&self) -> Body {
        // A struct of strings and numbers always serialises.
        Body::Json(serde_json::to_string(self).expect("a samples request serialises"))
    }
    fn decode_reply(body: &[u8]) -> Result<BucketSamples, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// `POST /node/controller/doJoinCluster`, sent by `/controller/addNode` to the newcomer: leave your own cluster and
/// join the one at `host:port` with these credentials. Couchbase's form fields, since tools call it directly too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    /// `clusterMemberHostIp`: the member to join (no brackets around an IPv6 address).
    pub host: String,
    /// `clusterMemberPort`: its management port (ns_server's default 8091 when absent).
    pub port: u16,
    pub user: String,
    pub password: String,
    /// `serverGroup` (settee's): the uuid of the server group the node registers itself in, when it is added into
    /// one (`/pools/default/serverGroups/<uuid>/addNode`); the default group when absent.
    pub group: Option<String>,
}

/// Why a [`JoinRequest`] form is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JoinRequestError {
    #[error("clusterMemberHostIp is required")]
    MissingHost,
    #[error("clusterMemberPort must be a port number")]
    BadPort,
}

impl JoinRequest {
    pub const DEFAULT_PORT: u16 = 8091;

    /// Reads the form's fields through `field` (a missing user or password stays empty).
    pub fn from_form<'a>(field: impl Fn(&str) -> Option<&'a str>) -> Result<JoinRequest, JoinRequestError> {
        let host = field("clusterMemberHostIp").filter(|h| !h.is_empty()).ok_or(JoinRequestError::MissingHost)?;
        let port = match field("clusterMemberPort") {
            None => Self::DEFAULT_PORT,
            Some(p) => p.trim().parse().map_err(|_| JoinRequestError::BadPort)?,
        };
        Ok(JoinRequest {
            host: host.to_owned(),
            port,
            user: field("user").unwrap_or_default().to_owned(),
            password: field("password").unwrap_or_default().to_owned(),
            group: field("serverGroup").filter(|g| !g.is_empty()).map(str::to_owned),
        })
    }
}

impl PeerCall for JoinRequest {
    const METHOD: &'static str = "POST";
    const PATH: &'static str = "/node/controller/doJoinCluster";
    type Reply = ();
    fn body(&self) -> Body {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let port = self.port.to_string();
        let mut fields = vec![
            ("clusterMemberHostIp", host),
            ("clusterMemberPort", port.as_str()),
            ("user", self.user.as_str()),
            ("password", self.password.as_str()),
        ];
        if let Some(group) = &self.group {
            fields.push(("serverGroup", group));
        }
        form(&fields)
    }
    fn decode_reply(_: &[u8]) -> Result<(), serde_json::Error> {
        Ok(())
    }
}

/// The health probe: `GET /pools` without credentials. Any 200 means the node is up and has started (a node still
/// forming, joining or restoring its cluster answers 503).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeRequest;

impl PeerCall for ProbeRequest {
    const METHOD: &'static str = "GET";
    const PATH: &'static str = "/pools";
    type Reply = ();
    fn body(&self) -> Body {
        Body::Empty
    }
    fn decode_reply(_: &[u8]) -> Result<(), serde_json::Error> {
        Ok(())
    }
}

/// Decodes a JSON request body of type `T` (what a handler receives).
pub fn decode_request<T: DeserializeOwned>(body: &[u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
}

/// A form body from `pairs`, each name and value percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> Body {
    Body::Form(pairs.iter().map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v))).collect::<Vec<_>>().join("&"))
}

/// Percent-encodes one form component (RFC 3986 unreserved characters pass).
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seqno report and a hold reply cross the wire unchanged (vBucket ids as JSON object keys), a report from a
    /// node without kept copies may omit `kept`, and lookups find exactly what was reported.
    #[test]
    fn seqno_messages_round_trip_through_json() {
        let mut report = SeqnoReport::default();
        report.buckets.insert("b", 7, 40);
        report.buckets.add_bucket("warming");
        report.kept.insert("b", 9, 3);
        report.rev = 12;
        report.data_requests = 5;
        let wire = serde_json::to_string(&report).unwrap();
        let expected = r#"{"buckets":{"b":{"7":40},"warming":{}},"kept":{"b":{"9":3}},"rev":12,"data_requests":5}"#;
        assert_eq!(wire, expected);
        assert_eq!(SeqnosRequest::decode_reply(wire.as_bytes()).unwrap(), report);
        assert_eq!(report.buckets.get("b", 7), Some(40));
        assert_eq!(report.buckets.get("b", 8), None);
        assert_eq!(report.buckets.get("warming", 7), None);
        let old: SeqnoReport = serde_json::from_str(r#"{"buckets":{"b":{"1":2}}}"#).unwrap();
        assert_eq!(old.kept, VbSeqnos::default());
        assert_eq!(old.rev, 0, "a node that does not say what it applied reports revision 0");
        assert_eq!(old.data_requests, 0, "nor any data request");
        assert!(SeqnosRequest::decode_reply(br#"{"buckets":{"b":{"x":1}}}"#).is_err(), "a vBucket id is a number");

        let hold = HoldRequest {
            hold: true,
            scope: HoldScope::Some { bucket: "a%b&c".into(), vbs: vec![1, 2] },
            until_chains: Default::default(),
        };
        let Body::Json(body) = hold.body() else { panic!("a hold is JSON") };
        assert_eq!(decode_request::<HoldRequest>(body.as_bytes()).unwrap(), hold, "any bucket name survives");
        let all = HoldRequest { hold: false, scope: HoldScope::All, until_chains: Default::default() };
        let Body::Json(body) = all.body() else { panic!("a hold is JSON") };
        assert_eq!(decode_request::<HoldRequest>(body.as_bytes()).unwrap(), all);
    }

    /// The join request is Couchbase's form: encoded so any credential survives, read back with ns_server's
    /// default port, and refused without a host or with a port that is not a number.
    #[test]
    fn a_join_request_is_couchbases_form() {
        let join =
            JoinRequest { host: "[::1]".into(), port: 9000, user: "a b".into(), password: "p&q=r".into(), group: None };
        assert_eq!(
            join.body(),
            Body::Form("clusterMemberHostIp=%3A%3A1&clusterMemberPort=9000&user=a%20b&password=p%26q%3Dr".into())
        );
        let fields = [("clusterMemberHostIp", "10.0.0.1"), ("user", "u")];
        let get = |k: &str| fields.iter().find(|(f, _)| *f == k).map(|(_, v)| *v);
        let read = JoinRequest::from_form(get).unwrap();
        assert_eq!(
            (read.host.as_str(), read.port, read.user.as_str(), read.password.as_str()),
            ("10.0.0.1", 8091, "u", "")
        );
        assert_eq!(read.group, None, "the default group");
        let into_group = JoinRequest { group: Some("g-1".into()), ..join };
        let Body::Form(body) = into_group.body() else { panic!("a join is a form") };
        assert!(body.ends_with("&serverGroup=g-1"), "{body}");
        let in_group = [("clusterMemberHostIp", "h"), ("serverGroup", "g-1")];
        let get = |k: &str| in_group.iter().find(|(f, _)| *f == k).map(|(_, v)| *v);
        assert_eq!(JoinRequest::from_form(get).unwrap().group.as_deref(), Some("g-1"));
        assert_eq!(JoinRequest::from_form(|_| None), Err(JoinRequestError::MissingHost));
        let bad = |k: &str| if k == "clusterMemberPort" { Some("x") } else { Some("h") };
        assert_eq!(JoinRequest::from_form(bad), Err(JoinRequestError::BadPort));
    }
}
