//! Query requests as the SDKs, cbq and curl send them (`QUERY.md` §1.2): a JSON body (what the SDKs send), a
//! form body, or `GET ?statement=`. Every option is a top-level field; `$name` fields are named parameters and
//! `args` the positional ones. An unknown field is refused (1065), as Couchbase does.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value as Json;
use settee_query::datastore::{Consistency, Durability};
use settee_query::plan::{parse_query_context, QueryContext};
use settee_query::value::Value;
use settee_query::QueryError;

/// The most a request may ask for as its server-side timeout: Couchbase caps it too.
const TIMEOUT_MAX: Duration = Duration::from_secs(24 * 60 * 60 * 7);

/// `profile`: what timing information the answer carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    #[default]
    Off,
    Phases,
    Timings,
}

/// A parsed request.
#[derive(Debug, Default)]
pub struct QueryRequest {
    pub statement: Option<String>,
    pub prepared: Option<String>,
    pub named: HashMap<String, Value>,
    pub positional: Vec<Value>,
    pub client_context_id: Option<String>,
    /// The server-side timeout and its text as given (for the 1080 message).
    pub timeout: Option<(Duration, String)>,
    pub consistency: Consistency,
    pub consistency_name: &'static str,
    pub scan_wait: Option<Duration>,
    pub query_context: QueryContext,
    pub readonly: bool,
    pub metrics: bool,
    pub profile: Profile,
    pub auto_execute: bool,
    pub preserve_expiry: bool,
    /// Per-request memory quota in MiB (0: the node's default).
    pub memory_quota_mb: u64,
    pub durability: Durability,
    pub signature: bool,
    pub pretty: bool,
}

/// Fields Couchbase accepts that settee reads, or accepts and ignores (tuning knobs, transactions off).
const KNOWN: &[&str] = &[
    "statement",
    "prepared",
    "encoded_plan",
    "args",
    "client_context_id",
    "timeout",
    "scan_consistency",
    "scan_vector",
    "scan_vectors",
    "scan_wait",
    "query_context",
    "readonly",
    "metrics",
    "profile",
    "max_parallelism",
    "scan_cap",
    "pipeline_batch",
    "pipeline_cap",
    "auto_execute",
    "use_fts",
    "preserve_expiry",
    "use_replica",
    "memory_quota",
    "durability_level",
    "kvtimeout",
    "pretty",
    "signature",
    "namespace",
    "creds",
    "compression",
    "encoding",
    "format",
    "use_cbo",
    "sort_projection",
    "numatrs",
    "tximplicit",
    "atrcollection",
    "txtimeout",
    "txstmtnum",
    "txdata",
    "txid",
    "controls",
    "batch_args",
    "batch_named_args",
];

/// Parses the fields of a request. `from_form` says the values are strings from a form or query string (JSON
/// values such as `args` are then JSON text).
pub fn parse(fields: Vec<(String, Json)>, from_form: bool) -> Result<QueryRequest, QueryError> {
    let mut r = QueryRequest { metrics: true, signature: true, consistency_name: "unbounded", ..Default::default() };
    let mut vectors = None;
    for (name, value) in fields {
        if let Some(param) = name.strip_prefix('$') {
            r.named.insert(param.to_string(), json_value(value, from_form));
            continue;
        }
        if !KNOWN.contains(&name.as_str()) {
            return Err(QueryError::UnrecognizedParameter(name));
        }
        match name.as_str() {
            "statement" => r.statement = Some(string(&name, value)?),
            "prepared" => r.prepared = Some(string(&name, value)?),
            "args" => match json_value(value, from_form) {
                Value::Array(a) => r.positional = a.iter().cloned().collect(),
                _ => return Err(QueryError::BadValue("args".into())),
            },
            "client_context_id" => r.client_context_id = Some(plain_text(value)),
            "timeout" => {
                let text = string(&name, value)?;
                let d = parse_duration(&text).ok_or_else(|| QueryError::BadValue("timeout".into()))?;
                r.timeout = Some((d.min(TIMEOUT_MAX), text));
            }
            "scan_consistency" => {
                let text = string(&name, value)?.to_ascii_lowercase();
                (r.consistency, r.consistency_name) = match text.as_str() {
                    "not_bounded" | "" => (Consistency::NotBounded, "unbounded"),
                    "request_plus" | "statement_plus" => (Consistency::RequestPlus, "scan_plus"),
                    "at_plus" => (Consistency::NotBounded, "at_plus"),
                    _ => return Err(QueryError::BadValue("scan_consistency".into())),
                };
            }
            "scan_vectors" | "scan_vector" => vectors = Some((name.clone(), json_value(value, from_form))),
            "scan_wait" => {
                let text = string(&name, value)?;
                r.scan_wait = Some(parse_duration(&text).ok_or_else(|| QueryError::BadValue("scan_wait".into()))?);
            }
            "query_context" => r.query_context = parse_query_context(&string(&name, value)?)?,
            "readonly" => r.readonly = boolean(&name, value)?,
            "metrics" => r.metrics = boolean(&name, value)?,
            "signature" => r.signature = boolean(&name, value)?,
            "pretty" => r.pretty = boolean(&name, value)?,
            "auto_execute" => r.auto_execute = boolean(&name, value)?,
            "preserve_expiry" => r.preserve_expiry = boolean(&name, value)?,
            "profile" => {
                r.profile = match string(&name, value)?.to_ascii_lowercase().as_str() {
                    "off" | "" => Profile::Off,
                    "phases" => Profile::Phases,
                    "timings" => Profile::Timings,
                    _ => return Err(QueryError::BadValue("profile".into())),
                }
            }
            "memory_quota" => r.memory_quota_mb = number(&name, value)?,
            "durability_level" => {
                r.durability = match string(&name, value)?.to_ascii_lowercase().as_str() {
                    "" | "none" => Durability::None,
                    "majority" => Durability::Majority,
                    "majorityandpersistactive" | "majority_and_persist_to_active" => {
                        Durability::MajorityAndPersistActive
                    }
                    "persisttomajority" | "persist_to_majority" => Durability::PersistToMajority,
                    _ => return Err(QueryError::BadValue("durability_level".into())),
                }
            }
            "use_replica" => {
                let v = string(&name, value)?.to_ascii_lowercase();
                if !matches!(v.as_str(), "on" | "off" | "unset" | "") {
                    return Err(QueryError::BadValue("use_replica".into()));
                }
            }
            _ => {}
        }
    }
    if let Some((name, v)) = vectors {
        if r.consistency_name != "at_plus" {
            return Err(QueryError::BadValue(format!("{name} without scan_consistency at_plus")));
        }
        r.consistency = Consistency::AtPlus(scan_vector(&name, &v)?);
    } else if r.consistency_name == "at_plus" {
        return Err(QueryError::BadValue("scan_consistency at_plus without scan_vectors".into()));
    }
    Ok(r)
}

/// A value given as JSON, or (from a form) as JSON text, or plain text when it is not JSON.
fn json_value(v: Json, from_form: bool) -> Value {
    match v {
        Json::String(s) if from_form => Value::from_json(s.as_bytes()).unwrap_or_else(|_| Value::from(s)),
        v => Value::from(v),
    }
}

fn string(name: &str, v: Json) -> Result<String, QueryError> {
    match v {
        Json::String(s) => Ok(s),
        Json::Number(n) => Ok(n.to_string()),
        _ => Err(QueryError::BadValue(name.to_string())),
    }
}

fn plain_text(v: Json) -> String {
    match v {
        Json::String(s) => s,
        other => other.to_string(),
    }
}

fn boolean(name: &str, v: Json) -> Result<bool, QueryError> {
    match v {
        Json::Bool(b) => Ok(b),
        Json::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Json::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(QueryError::BadValue(name.to_string())),
    }
}

fn number(name: &str, v: Json) -> Result<u64, QueryError> {
    match v {
        Json::Number(n) => n.as_u64().ok_or_else(|| QueryError::BadValue(name.to_string())),
        Json::String(s) => s.trim().parse().map_err(|_| QueryError::BadValue(name.to_string())),
        _ => Err(QueryError::BadValue(name.to_string())),
    }
}

/// `scan_vectors` (`{"bucket": {"vb": [seqno, "vbuuid"]}}`) or `scan_vector` (`{"vb": [...]}` or an array of
/// `[seqno, "vbuuid"]` indexed by vBucket).
fn scan_vector(name: &str, v: &Value) -> Result<Vec<(String, u16, u64, String)>, QueryError> {
    let bad = || QueryError::BadValue(name.to_string());
    let entry = |bucket: &str, vb: &str, e: &Value, out: &mut Vec<(String, u16, u64, String)>| {
        let vb: u16 = vb.parse().map_err(|_| bad())?;
        let (seqno, uuid) = match e {
            Value::Array(a) if a.len() == 2 => (a[0].as_i64(), a[1].as_str().map(str::to_string)),
            Value::Object(o) => {
                (o.get("seqno").and_then(Value::as_i64), o.get("vbuuid").and_then(|u| u.as_str().map(str::to_string)))
            }
            _ => (None, None),
        };
        out.push((
            bucket.to_string(),
            vb,
            u64::try_from(seqno.ok_or_else(bad)?).map_err(|_| bad())?,
            uuid.unwrap_or_default(),
        ));
        Ok::<_, QueryError>(())
    };
    let mut out = Vec::new();
    match (name, v) {
        ("scan_vectors", Value::Object(buckets)) => {
            for (bucket, vbs) in buckets.iter() {
                let Value::Object(vbs) = vbs else { return Err(bad()) };
                for (vb, e) in vbs.iter() {
                    entry(bucket, vb, e, &mut out)?;
                }
            }
        }
        ("scan_vector", Value::Object(vbs)) => {
            for (vb, e) in vbs.iter() {
                entry("", vb, e, &mut out)?;
            }
        }
        ("scan_vector", Value::Array(items)) => {
            for (vb, e) in items.iter().enumerate() {
                entry("", &vb.to_string(), e, &mut out)?;
            }
        }
        _ => return Err(bad()),
    }
    Ok(out)
}

/// Parses a Go duration: a sequence of decimal numbers with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`
/// (`1.5s`, `74500ms`, `1m30s`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    if t == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = t;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total.min(1e12)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Json) -> Vec<(String, Json)> {
        v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    #[test]
    fn durations_parse_as_go_writes_them() {
        // Proves the forms the C++ core ("74500ms") and gocb ("4.999s", "1m30s") send.
        assert_eq!(parse_duration("74500ms"), Some(Duration::from_millis(74_500)));
        assert_eq!(parse_duration("4.999s"), Some(Duration::from_millis(4_999)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250us"), Some(Duration::from_micros(250)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("abc"), None);
    }

    #[test]
    fn sdk_fields_parse_and_unknown_ones_are_refused() {
        // Proves named ($x) and positional parameters, string booleans, and 1065 for an unknown field.
        let r = parse(
            fields(json!({"statement": "SELECT $a", "$a": 1, "args": [2], "metrics": "false", "max_parallelism": "4",
                          "scan_consistency": "request_plus", "query_context": "default:`b`.`s`"})),
            false,
        )
        .unwrap();
        assert_eq!(r.named["a"], Value::int(1));
        assert_eq!(r.positional, vec![Value::int(2)]);
        assert!(!r.metrics && r.consistency == Consistency::RequestPlus);
        assert_eq!(r.query_context.scope.as_deref(), Some("s"));
        let e = parse(fields(json!({"statement": "x", "bogus": 1})), false).unwrap_err();
        assert_eq!(e.code(), 1065);
    }

    #[test]
    fn form_values_are_json_text() {
        // Proves cbq/curl forms: args and $params given as JSON text, plain strings kept as strings.
        let r = parse(vec![("args".into(), json!("[1,\"a\"]")), ("$n".into(), json!("xyz"))], true).unwrap();
        assert_eq!(r.positional, vec![Value::int(1), Value::string("a")]);
        assert_eq!(r.named["n"], Value::string("xyz"));
    }

    #[test]
    fn scan_vectors_give_at_plus_positions() {
        // Proves the SDKs' at_plus form {"bucket": {"vb": [seqno, "vbuuid"]}}.
        let r = parse(
            fields(json!({"statement": "x", "scan_consistency": "at_plus",
                          "scan_vectors": {"default": {"12": [34, "5678"]}}})),
            false,
        )
        .unwrap();
        assert_eq!(r.consistency, Consistency::AtPlus(vec![("default".into(), 12, 34, "5678".into())]));
    }
}
