//! Reading a query service answer (Couchbase's layout, QUERY.md §1.3) down to what the bench records: how many
//! result rows it carried, and the code of its first error. Rows are counted, not built: the client shares the
//! machine with the server, so it parses no more than it must.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use crate::stats::Outcome;

/// What an answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub outcome: Outcome,
    /// Result rows (0 when the answer has none).
    pub rows: u64,
}

/// The members of an answer the bench reads; the others are skipped.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(default)]
    results: Option<RowCount>,
    #[serde(default)]
    errors: Vec<ErrorEntry>,
    #[serde(borrow, default)]
    status: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorEntry {
    #[serde(default)]
    code: Option<u32>,
}

/// The length of a JSON array whose elements are skipped.
struct RowCount(u64);

impl<'de> Deserialize<'de> for RowCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RowCount, D::Error> {
        struct Count;
        impl<'de> Visitor<'de> for Count {
            type Value = RowCount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of rows")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RowCount, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(RowCount(n))
            }
        }
        d.deserialize_seq(Count)
    }
}

/// Reads an answer with HTTP status `http_status`. An answer with errors counts as its first error's code (even
/// after rows: the SDKs fail such a request too); a lookup (`empty_is_miss`) without a row is a miss.
pub(crate) fn read(http_status: u16, body: &[u8], empty_is_miss: bool) -> Answer {
    let parsed: Option<Body<'_>> = serde_json::from_slice(body).ok();
    let Some(b) = parsed else {
        let outcome = if http_status == 200 { Outcome::BadAnswer } else { Outcome::Http(http_status) };
        return Answer { outcome, rows: 0 };
    };
    let rows = b.results.map_or(0, |r| r.0);
    if let Some(first) = b.errors.first() {
        let outcome = match first.code {
            Some(code) => Outcome::Query(code),
            None if http_status != 200 => Outcome::Http(http_status),
            None => Outcome::BadAnswer,
        };
        return Answer { outcome, rows };
    }
    let outcome = match (http_status, b.status.as_deref()) {
        (200, Some("success")) if rows == 0 && empty_is_miss => Outcome::NotFound,
        (200, Some("success")) => Outcome::Ok,
        (200, _) => Outcome::BadAnswer,
        (s, _) => Outcome::Http(s),
    };
    Answer { outcome, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A success in Couchbase's multi-line layout counts its rows, however nested they are.
    #[test]
    fn success_counts_rows() {
        let body = br#"{
"requestID": "5c0d",
"clientContextID": "bench-1",
"signature": {"id":"json","*":"*"},
"results": [{"id":"user1","field0":"[\"]"},{"id":"user2","nested":{"a":[1,2,{"b":[]}]}}],
"status": "success"
}
"#;
        assert_eq!(read(200, body, false), Answer { outcome: Outcome::Ok, rows: 2 });
        let empty = br#"{"requestID":"x","results":[],"status":"success"}"#;
        assert_eq!(read(200, empty, true), Answer { outcome: Outcome::NotFound, rows: 0 });
        assert_eq!(read(200, empty, false), Answer { outcome: Outcome::Ok, rows: 0 });
    }

    /// Errors count as their first code, before or after rows; HTTP failures without a code by status; a body that
    /// is not an answer as such.
    #[test]
    fn errors_are_read_by_code() {
        let before = br#"{"requestID":"x","errors":[{"code":4120,"msg":"No index available"},{"code":5000}],
                         "status":"fatal"}"#;
        assert_eq!(read(404, before, false), Answer { outcome: Outcome::Query(4120), rows: 0 });
        let after = br#"{"requestID":"x","results":[{"a":1}],"errors":[{"code":1080,"msg":"Timeout 1s exceeded",
                        "retry":true}],"status":"timeout"}"#;
        assert_eq!(read(200, after, false), Answer { outcome: Outcome::Query(1080), rows: 1 });
        assert_eq!(read(503, b"", false), Answer { outcome: Outcome::Http(503), rows: 0 });
        assert_eq!(read(200, b"<html>", false), Answer { outcome: Outcome::BadAnswer, rows: 0 });
        assert_eq!(read(500, br#"{"errors":[{"msg":"no code"}]}"#, false).outcome, Outcome::Http(500));
        assert_eq!(read(200, br#"{"results":[],"status":"stopped"}"#, false).outcome, Outcome::BadAnswer);
        assert_eq!(read(200, br#"{"results":{"not":"rows"},"status":"success"}"#, false).outcome, Outcome::BadAnswer);
    }
}
