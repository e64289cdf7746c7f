//! The SQL++ requests of the query workloads: which statement each operation type runs, and its JSON body as the
//! SDKs send it (`statement`, positional `args`, `scan_consistency`, `timeout`, `metrics: false`,
//! `client_context_id`). The statement part of every body is rendered once; a request appends its arguments and
//! the fixed tail into a reused buffer.

use std::io::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::stats::{OpKind, OP_KIND_COUNT};

/// What `--query` runs: one kind of query over the loaded records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryMode {
    /// Point lookups by key: `... USE KEYS $1`.
    UseKeys,
    /// Point lookups through the primary index: `... WHERE META(d).id = $1`.
    MetaId,
    /// YCSB E's range scans alone: `... WHERE META(d).id >= $1 ORDER BY META(d).id LIMIT $2`.
    Scan,
    /// Pages of a full primary-index scan: `... LIMIT $1 OFFSET $2`, the offset spread over the records.
    Page,
    /// `SELECT COUNT(*)` of the keyspace.
    Count,
    /// Lookups by a field's value through a secondary index on `field0`, fetching the document:
    /// `... WHERE d.field0 = $1`.
    FieldEq,
    /// The same lookups answered from the index alone (covered): `SELECT META(d).id, d.field0 ... WHERE d.field0 = $1`.
    FieldEqCovered,
}

impl QueryMode {
    /// The operation type the mode's queries are reported under.
    pub(crate) fn kind(self) -> OpKind {
        match self {
            QueryMode::UseKeys | QueryMode::MetaId | QueryMode::FieldEq | QueryMode::FieldEqCovered => OpKind::Lookup,
            QueryMode::Scan => OpKind::Scan,
            QueryMode::Page => OpKind::Page,
            QueryMode::Count => OpKind::Count,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            QueryMode::UseKeys => "use-keys",
            QueryMode::MetaId => "meta-id",
            QueryMode::Scan => "scan",
            QueryMode::Page => "page",
            QueryMode::Count => "count",
            QueryMode::FieldEq => "field-eq",
            QueryMode::FieldEqCovered => "field-eq-covered",
        }
    }

    /// Whether the mode's lookups ask for a value of `field0` (through the secondary index on it) rather than a key.
    pub(crate) fn by_field(self) -> bool {
        matches!(self, QueryMode::FieldEq | QueryMode::FieldEqCovered)
    }
}

/// The secondary index the field lookups need (created by the bench when it is missing).
pub(crate) const FIELD_INDEX: &str = "bench_field0";

/// `scan_consistency` of every query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize)]
pub enum ScanConsistency {
    /// Scan the index as it is (the SDKs' default).
    #[value(name = "not_bounded")]
    #[serde(rename = "not_bounded")]
    NotBounded,
    /// Wait until the index has every mutation made before the request.
    #[value(name = "request_plus")]
    #[serde(rename = "request_plus")]
    RequestPlus,
}

impl ScanConsistency {
    fn wire(self) -> &'static str {
        match self {
            ScanConsistency::NotBounded => "not_bounded",
            ScanConsistency::RequestPlus => "request_plus",
        }
    }
}

/// The keyspace as a statement names it: `` `bucket` `` or `` `bucket`.`scope`.`collection` `` (a backtick inside
/// a name is doubled).
pub(crate) fn keyspace_path(bucket: &str, collection: Option<&str>) -> String {
    let quote = |name: &str| format!("`{}`", name.replace('`', "``"));
    match collection.and_then(|c| c.split_once('.')) {
        Some((scope, coll)) => format!("{}.{}.{}", quote(bucket), quote(scope), quote(coll)),
        None => quote(bucket),
    }
}

/// The statement an operation type runs over `ks` (`lookup` decides how a point lookup finds its document).
pub(crate) fn statement(kind: OpKind, lookup: QueryMode, ks: &str) -> Option<String> {
    const PROJECTION: &str = "SELECT META(d).id, d.*";
    Some(match kind {
        OpKind::Scan => format!("{PROJECTION} FROM {ks} AS d WHERE META(d).id >= $1 ORDER BY META(d).id LIMIT $2"),
        OpKind::Lookup if lookup == QueryMode::MetaId => format!("{PROJECTION} FROM {ks} AS d WHERE META(d).id = $1"),
        OpKind::Lookup if lookup == QueryMode::FieldEq => format!("{PROJECTION} FROM {ks} AS d WHERE d.field0 = $1"),
        OpKind::Lookup if lookup == QueryMode::FieldEqCovered => {
            format!("SELECT META(d).id, d.field0 FROM {ks} AS d WHERE d.field0 = $1")
        }
        OpKind::Lookup => format!("{PROJECTION} FROM {ks} AS d USE KEYS $1"),
        OpKind::Page => format!("{PROJECTION} FROM {ks} AS d LIMIT $1 OFFSET $2"),
        OpKind::Count => format!("SELECT COUNT(*) AS n FROM {ks}"),
        OpKind::Get | OpKind::Set | OpKind::Insert | OpKind::Rmw => return None,
    })
}

/// What a request says besides its statement and arguments.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestOptions {
    pub consistency: ScanConsistency,
    /// The server-side deadline (`timeout`), as the SDKs send their request timeout.
    pub timeout: Duration,
}

/// The arguments of one query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Args<'a> {
    /// `[key, length]`: a range scan from `key`, at most `length` rows.
    Scan { key: &'a [u8], length: u64 },
    /// `[key]`.
    Lookup { key: &'a [u8] },
    /// `[limit, offset]`.
    Page { limit: u64, offset: u64 },
    /// No arguments.
    None,
}

/// Request bodies, the statement of each operation type rendered once.
#[derive(Clone, Debug)]
pub(crate) struct RequestWriter {
    /// `{"statement":"...",` per operation type that runs a query.
    heads: [Option<Vec<u8>>; OP_KIND_COUNT],
    /// `"scan_consistency":...,"timeout":...,"metrics":false,"client_context_id":"bench-`
    tail: Vec<u8>,
}

impl RequestWriter {
    /// Bodies for the statements of `kinds` over `ks`.
    pub(crate) fn new(kinds: &[OpKind], lookup: QueryMode, ks: &str, options: RequestOptions) -> RequestWriter {
        let mut heads: [Option<Vec<u8>>; OP_KIND_COUNT] = Default::default();
        for &kind in kinds {
            if let Some(text) = statement(kind, lookup, ks) {
                heads[kind as usize] = Some(head(&text));
            }
        }
        let mut tail = Vec::new();
        let millis = options.timeout.as_millis().max(1);
        let _ = write!(
            tail,
            r#""scan_consistency":"{}","timeout":"{millis}ms","metrics":false,"client_context_id":"bench-"#,
            options.consistency.wire()
        );
        RequestWriter { heads, tail }
    }

    /// Writes the body of a query of type `kind` into `out` (cleared first); false when `kind` runs no query.
    /// `id` goes into the client context id, as an SDK's per-request id.
    pub(crate) fn write(&self, kind: OpKind, args: Args<'_>, id: u64, out: &mut Vec<u8>) -> bool {
        let Some(head) = &self.heads[kind as usize] else { return false };
        out.clear();
        out.extend_from_slice(head);
        match args {
            Args::Scan { key, length } => {
                out.extend_from_slice(br#""args":["#);
                json_string(key, out);
                let _ = write!(out, ",{length}],");
            }
            Args::Lookup { key } => {
                out.extend_from_slice(br#""args":["#);
                json_string(key, out);
                out.extend_from_slice(b"],");
            }
            Args::Page { limit, offset } => {
                let _ = write!(out, r#""args":[{limit},{offset}],"#);
            }
            Args::None => {}
        }
        out.extend_from_slice(&self.tail);
        let _ = write!(out, "{id}\"}}");
        true
    }
}

/// `{"statement":<text as a JSON string>,`
fn head(text: &str) -> Vec<u8> {
    let mut out = br#"{"statement":"#.to_vec();
    json_string(text.as_bytes(), &mut out);
    out.push(b',');
    out
}

/// Appends `s` as a JSON string (keys are UTF-8: ASCII from the key formats, and the `--key-prefix` text).
fn json_string(s: &[u8], out: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(s);
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text.as_ref());
}

/// The body of a one-off statement (index creation, the readiness probe), without arguments.
pub(crate) fn one_off(text: &str, consistency: ScanConsistency, timeout: Duration) -> Vec<u8> {
    let mut out = head(text);
    let millis = timeout.as_millis().max(1);
    let _ = write!(out, r#""scan_consistency":"{}","timeout":"{millis}ms","metrics":false}}"#, consistency.wire());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn options() -> RequestOptions {
        RequestOptions { consistency: ScanConsistency::NotBounded, timeout: Duration::from_secs(30) }
    }

    fn body(w: &RequestWriter, kind: OpKind, args: Args<'_>) -> Value {
        let mut out = b"stale".to_vec();
        assert!(w.write(kind, args, 7, &mut out));
        serde_json::from_slice(&out).expect("the body is JSON")
    }

    /// Each operation type's body carries its statement, its positional arguments and the SDK fields, and parses
    /// as JSON even when the key needs escaping.
    #[test]
    fn bodies_carry_statement_args_and_sdk_fields() {
        let ks = keyspace_path("default", None);
        let kinds = [OpKind::Scan, OpKind::Lookup, OpKind::Page, OpKind::Count];
        let w = RequestWriter::new(&kinds, QueryMode::UseKeys, &ks, options());
        let scan = body(&w, OpKind::Scan, Args::Scan { key: b"user12", length: 42 });
        assert_eq!(
            scan,
            json!({
                "statement":
                    "SELECT META(d).id, d.* FROM `default` AS d WHERE META(d).id >= $1 ORDER BY META(d).id LIMIT $2",
                "args": ["user12", 42], "scan_consistency": "not_bounded", "timeout": "30000ms", "metrics": false,
                "client_context_id": "bench-7"
            })
        );
        let lookup = body(&w, OpKind::Lookup, Args::Lookup { key: br#"a"b\c"# });
        assert_eq!(lookup["args"], json!([r#"a"b\c"#]));
        assert!(lookup["statement"].as_str().unwrap().ends_with("USE KEYS $1"));
        let page = body(&w, OpKind::Page, Args::Page { limit: 100, offset: 999_000 });
        assert_eq!(page["args"], json!([100, 999_000]));
        assert!(page["statement"].as_str().unwrap().ends_with("AS d LIMIT $1 OFFSET $2"));
        let count = body(&w, OpKind::Count, Args::None);
        assert_eq!(count["statement"], "SELECT COUNT(*) AS n FROM `default`");
        assert!(count.get("args").is_none());
        assert!(!w.write(OpKind::Get, Args::None, 1, &mut Vec::new()), "KV operations have no body");
    }

    /// `meta-id` lookups go through the primary index; request_plus and the timeout reach the body.
    #[test]
    fn meta_id_lookups_and_request_plus() {
        let ks = keyspace_path("b", Some("s.c"));
        assert_eq!(ks, "`b`.`s`.`c`");
        let opts = RequestOptions { consistency: ScanConsistency::RequestPlus, timeout: Duration::from_millis(1500) };
        let w = RequestWriter::new(&[OpKind::Lookup], QueryMode::MetaId, &ks, opts);
        let v = body(&w, OpKind::Lookup, Args::Lookup { key: b"k" });
        assert_eq!(v["statement"], "SELECT META(d).id, d.* FROM `b`.`s`.`c` AS d WHERE META(d).id = $1");
        assert_eq!((&v["scan_consistency"], &v["timeout"]), (&json!("request_plus"), &json!("1500ms")));
        assert!(!w.write(OpKind::Scan, Args::None, 1, &mut Vec::new()), "only the kinds asked for");
    }

    /// Field lookups ask for `field0`'s value, fetching the document or covered by the index, and are lookups.
    #[test]
    fn field_lookups_filter_on_field0() {
        let ks = keyspace_path("default", None);
        let w = RequestWriter::new(&[OpKind::Lookup], QueryMode::FieldEq, &ks, options());
        let v = body(&w, OpKind::Lookup, Args::Lookup { key: b"AbC" });
        assert_eq!(v["statement"], "SELECT META(d).id, d.* FROM `default` AS d WHERE d.field0 = $1");
        assert_eq!(v["args"], json!(["AbC"]));
        let w = RequestWriter::new(&[OpKind::Lookup], QueryMode::FieldEqCovered, &ks, options());
        let v = body(&w, OpKind::Lookup, Args::Lookup { key: b"AbC" });
        assert_eq!(v["statement"], "SELECT META(d).id, d.field0 FROM `default` AS d WHERE d.field0 = $1");
        assert!(QueryMode::FieldEq.by_field() && QueryMode::FieldEqCovered.by_field() && !QueryMode::MetaId.by_field());
        assert_eq!(QueryMode::FieldEqCovered.kind(), OpKind::Lookup);
    }

    /// Backticks in names are escaped by doubling; one-off bodies parse.
    #[test]
    fn keyspace_quoting_and_one_off_bodies() {
        assert_eq!(keyspace_path("we`ird", None), "`we``ird`");
        let v: Value = serde_json::from_slice(&one_off(
            "CREATE PRIMARY INDEX ON `x`",
            ScanConsistency::RequestPlus,
            Duration::ZERO,
        ))
        .unwrap();
        assert_eq!(
            v,
            json!({"statement": "CREATE PRIMARY INDEX ON `x`", "scan_consistency": "request_plus",
                             "timeout": "1ms", "metrics": false})
        );
    }
}
