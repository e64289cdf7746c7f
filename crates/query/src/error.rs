//! Every error the query service reports, with Couchbase's code and message text.
//!
//! The SDKs pick most exceptions by matching regexes against `"<code> <msg>"` (the Python SDK) or by code (the
//! C++ core and gocbcore), so codes and texts follow Couchbase Server 7.6 (`QUERY.md` §1.4) exactly where an SDK
//! or a test reads them.

use serde_json::{json, Value as Json};

/// Why a DML statement could not change a document (the `reason` of error 12009).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmlReason {
    /// The document changed between the statement's read and its write (12033).
    CasMismatch,
    /// INSERT of a key that exists (17012).
    DuplicateKey,
    /// The document went away before the write (17014).
    KeyNotFound,
    /// Anything else the data service refused, with its text.
    Other(String),
}

/// A query-service error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("The server or request is read-only and cannot accept this write statement.")]
    ReadOnly,
    #[error("Error processing {0}")]
    BadValue(String),
    #[error("No statement or prepared value")]
    NoStatement,
    #[error("Unrecognized parameter in request: {0}")]
    UnrecognizedParameter(String),
    #[error("Timeout {0} exceeded")]
    Timeout(String),
    #[error("{0}")]
    InvalidValue(String),
    #[error("The query service is shutting down.")]
    ShuttingDown,
    #[error("Request queue full")]
    QueueFull,
    /// The user's `num_concurrent_requests` limit (1191).
    #[error("User has more requests running than allowed")]
    UserRequestsExceeded,
    /// The user's `num_queries_per_min` limit (1192).
    #[error("User has exceeded request rate limit")]
    UserRequestRateExceeded,
    /// The user's `ingress_mib_per_min` limit (1193).
    #[error("User has exceeded input network traffic limit")]
    UserRequestSizeExceeded,
    /// The user's `egress_mib_per_min` limit (1194).
    #[error("User has exceeded results size limit")]
    UserResultSizeExceeded,
    /// A statement that does not parse; the text carries the line, column and context.
    #[error("{0}")]
    Syntax(String),
    #[error("Ambiguous reference to field '{0}'.")]
    AmbiguousReference(String),
    #[error("{0}")]
    Semantics(String),
    #[error("Duplicate {kind} alias '{alias}'")]
    DuplicateAlias { kind: &'static str, alias: String },
    /// PREPARE of a name another statement text holds (4060).
    #[error("Unable to add name: {0}")]
    PreparedName(String),
    #[error("No such prepared statement: {name}, context: {context}")]
    NoSuchPrepared { name: String, context: String },
    #[error(
        "No index available on keyspace {0} that matches your query. Use CREATE PRIMARY INDEX ON {0} to create a \
         primary index, or check that your expected index is online."
    )]
    NoPrimaryIndex(String),
    #[error("The index {0} already exists.")]
    IndexAlreadyExists(String),
    #[error("{0}")]
    Plan(String),
    #[error("Internal error: {0}")]
    Internal(String),
    #[error("{0}")]
    Evaluation(String),
    /// A value the executor cannot use where it stands (a LIMIT or OFFSET that is not a whole number).
    #[error("{0}")]
    ExecutionValue(String),
    #[error("Request has exceeded memory quota (inuse: {inuse} limit: {limit})")]
    MemoryQuota { inuse: u64, limit: u64 },
    #[error("Incorrect number of arguments supplied to function '{0}'")]
    ArgumentsMismatch(String),
    #[error("Keyspace not found in CB datastore: {0}")]
    KeyspaceNotFound(String),
    #[error("Scope not found in CB datastore {0}")]
    ScopeNotFound(String),
    #[error("Bucket not found in CB datastore {0}")]
    BucketNotFound(String),
    #[error("Primary Index not found {0}")]
    PrimaryIndexNotFound(String),
    #[error("Index Not Found - cause: GSI index {0} not found.")]
    IndexNotFound(String),
    /// A grouping query evaluates, after grouping, something that is neither a group key nor an aggregate.
    #[error("Expression {0} must depend only on group keys or aggregates.")]
    NotGroupKeyOrAgg(String),
    #[error("Index scan timed out")]
    IndexScanTimeout,
    /// The node's index memory quota is used up: no index is created or built until memory is freed.
    #[error("GSI {op}() - cause: the index memory quota is exhausted ({used_mb} MiB used of {quota_mb} MiB); drop indexes or raise the quota (--index-memory-quota-mb)")]
    IndexMemoryQuota { op: String, used_mb: u64, quota_mb: u64 },
    #[error("DML Error, possible causes include {}. Failed to perform {op} on key {key}", dml_cause(.reason))]
    Dml { op: &'static str, key: String, reason: DmlReason },
    #[error("{0}")]
    Datastore(String),
    /// INSERT or UPSERT of a key that is not a string (5070, 5078).
    #[error("Cannot {} non-string key {key}.", if *.upsert { "UPSERT" } else { "INSERT" })]
    DmlKeyType { upsert: bool, key: String },
    /// INSERT or UPSERT OPTIONS that are not an object (5071).
    #[error("Cannot INSERT non-OBJECT options {0}.")]
    DmlOptionsType(String),
    /// MERGE changing one document twice (5320).
    #[error("Multiple UPDATE/DELETE of the same document (document key '{0}') in a MERGE statement")]
    MergeMultiUpdate(String),
    #[error("User does not have credentials to run {0}")]
    InsufficientCredentials(String),
}

fn dml_cause(reason: &DmlReason) -> &'static str {
    match reason {
        DmlReason::CasMismatch => "CAS mismatch",
        _ => "concurrent modification",
    }
}

impl QueryError {
    /// Couchbase's error code.
    pub fn code(&self) -> u32 {
        match self {
            QueryError::ReadOnly => 1000,
            QueryError::BadValue(_) => 1040,
            QueryError::NoStatement => 1050,
            QueryError::UnrecognizedParameter(_) => 1065,
            QueryError::Timeout(_) => 1080,
            QueryError::InvalidValue(_) => 1090,
            QueryError::ShuttingDown => 1180,
            QueryError::QueueFull => 1201,
            QueryError::UserRequestsExceeded => 1191,
            QueryError::UserRequestRateExceeded => 1192,
            QueryError::UserRequestSizeExceeded => 1193,
            QueryError::UserResultSizeExceeded => 1194,
            QueryError::Syntax(_) => 3000,
            QueryError::AmbiguousReference(_) => 3080,
            QueryError::Semantics(_) => 3100,
            QueryError::Plan(_) => 4000,
            QueryError::DuplicateAlias { .. } => 4020,
            QueryError::NoSuchPrepared { .. } => 4040,
            QueryError::PreparedName(_) => 4060,
            // Couchbase wraps 4120 in a plan error (4000) with the same text.
            QueryError::NoPrimaryIndex(_) => 4000,
            QueryError::NotGroupKeyOrAgg(_) => 4210,
            QueryError::IndexAlreadyExists(_) => 4300,
            QueryError::Internal(_) | QueryError::IndexMemoryQuota { .. } => 5000,
            QueryError::Evaluation(_) => 5010,
            QueryError::ExecutionValue(_) => 5030,
            QueryError::MemoryQuota { .. } => 5500,
            QueryError::ArgumentsMismatch(_) => 10104,
            QueryError::KeyspaceNotFound(_) => 12003,
            QueryError::PrimaryIndexNotFound(_) => 12004,
            QueryError::Dml { .. } => 12009,
            QueryError::IndexScanTimeout => 12015,
            QueryError::IndexNotFound(_) => 12016,
            QueryError::BucketNotFound(_) => 12020,
            QueryError::ScopeNotFound(_) => 12021,
            QueryError::Datastore(_) => 12000,
            QueryError::DmlKeyType { upsert: false, .. } => 5070,
            QueryError::DmlKeyType { upsert: true, .. } => 5078,
            QueryError::DmlOptionsType(_) => 5071,
            QueryError::MergeMultiUpdate(_) => 5320,
            QueryError::InsufficientCredentials(_) => 13014,
        }
    }

    /// The HTTP status of an answer that fails with this error before any row was sent.
    pub fn http_status(&self) -> u16 {
        match self.code() {
            1000 => 403,
            1040 | 1050 | 1065 | 1090 | 3000..=3999 => 400,
            1080 => 500,
            1180 | 1201 => 503,
            1191 | 1192 => 429,
            1193 | 1194 => 413,
            13014 => 401,
            4000..=4999 if self.code() != 4300 => 404,
            4300 => 409,
            12003 | 12020 | 12021 => 424,
            _ => 500,
        }
    }

    /// Whether the client may retry the request as it is.
    pub fn retry(&self) -> Option<bool> {
        match self {
            QueryError::Timeout(_) | QueryError::QueueFull => Some(true),
            QueryError::Dml { .. } => Some(false),
            _ => None,
        }
    }

    /// The error's `reason` member: the cause the SDKs read for DML failures.
    pub fn reason(&self) -> Option<Json> {
        match self {
            QueryError::Dml { key, reason, .. } => Some(match reason {
                DmlReason::CasMismatch => {
                    json!({"code": 12033, "key": "datastore.couchbase.CAS_mismatch", "message": "CAS mismatch",
                           "document_key": key})
                }
                DmlReason::DuplicateKey => {
                    json!({"code": 17012, "key": "dml.statement.duplicatekey",
                           "message": format!("Duplicate Key: {key}")})
                }
                DmlReason::KeyNotFound => {
                    json!({"code": 17014, "key": "datastore.couchbase.keynotfound",
                           "message": format!("Key not found : {key}")})
                }
                DmlReason::Other(text) => json!({"message": text}),
            }),
            _ => None,
        }
    }

    /// The error as a member of the answer's `errors` array: `code`, `msg`, and `reason` / `retry` when they apply.
    pub fn to_json(&self) -> Json {
        let mut o = serde_json::Map::new();
        o.insert("code".into(), json!(self.code()));
        o.insert("msg".into(), json!(self.to_string()));
        if let Some(reason) = self.reason() {
            o.insert("reason".into(), reason);
        }
        if let Some(retry) = self.retry() {
            o.insert("retry".into(), json!(retry));
        }
        Json::Object(o)
    }

    /// An evaluation error with Couchbase's generic code.
    pub fn eval(msg: impl Into<String>) -> QueryError {
        QueryError::Evaluation(msg.into())
    }

    pub fn semantics(msg: impl Into<String>) -> QueryError {
        QueryError::Semantics(msg.into())
    }

    pub fn internal(msg: impl Into<String>) -> QueryError {
        QueryError::Internal(msg.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_what_the_python_sdk_regexes_look_for() {
        // Proves the messages the Python SDK's QUERY_ERROR_MAPPING regexes match on ("<code> <msg>").
        let cases = [
            (QueryError::KeyspaceNotFound("default:b".into()), 12003, "Keyspace not found"),
            (QueryError::ScopeNotFound("default:b.s".into()), 12021, "Scope not found"),
            (QueryError::NoPrimaryIndex("b".into()), 4000, "No index available"),
            (QueryError::IndexAlreadyExists("ix".into()), 4300, "The index ix already exists."),
            (QueryError::IndexNotFound("ix".into()), 12016, "Index Not Found"),
        ];
        for (e, code, text) in cases {
            assert_eq!(e.code(), code);
            assert!(e.to_string().contains(text), "{e}");
        }
    }

    #[test]
    fn dml_errors_carry_the_reason_code_the_sdks_branch_on() {
        // Proves 12009 with reason.code 12033 / 17012 / 17014 and retry false.
        let e = QueryError::Dml { op: "UPDATE", key: "k".into(), reason: DmlReason::CasMismatch };
        let j = e.to_json();
        assert_eq!((j["code"].as_u64(), j["reason"]["code"].as_u64()), (Some(12009), Some(12033)));
        assert_eq!(j["retry"], json!(false));
        assert!(j["msg"].as_str().unwrap().starts_with("DML Error, possible causes include CAS mismatch."));
        let e = QueryError::Dml { op: "INSERT", key: "k".into(), reason: DmlReason::DuplicateKey };
        assert_eq!(e.to_json()["reason"]["code"], 17012);
    }

    #[test]
    fn http_statuses_follow_couchbase() {
        // Proves the statuses gocbcore and the C++ core read before the body.
        assert_eq!(QueryError::Syntax("x".into()).http_status(), 400);
        assert_eq!(QueryError::NoSuchPrepared { name: "p".into(), context: "unset".into() }.http_status(), 404);
        assert_eq!(QueryError::IndexAlreadyExists("i".into()).http_status(), 409);
        assert_eq!(QueryError::InsufficientCredentials("x".into()).http_status(), 401);
        assert_eq!(QueryError::KeyspaceNotFound("b".into()).http_status(), 424);
    }
}
