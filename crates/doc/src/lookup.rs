//! SUBDOC_MULTI_LOOKUP (and single-path lookups as one-spec requests) against one stored value.
//!
//! The request is checked as a whole first; after that every spec gets its own status and value, so one missing
//! path does not hide the others. Each spec reads a fresh view of the document, so a value comes back with the
//! exact bytes it is stored with.

use std::borrow::Cow;

use settee_types::Status;

use crate::meta::DocMeta;
use crate::node::Node;
use crate::path::{parse_path, PathComponent};
use crate::spec::{check_request, CheckedSpec, RawSpec, SpecOp};
use crate::syntax::check_value;
use crate::tree::Tree;
use crate::vattr::vattr_tree;
use crate::xattr::{split_value, XattrView, Xattrs};
use crate::xattr_key::{is_virtual_path, key_of, parse_xattr_path};

/// One lookup spec as it arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupSpec<'a> {
    pub opcode: u8,
    pub flags: u8,
    pub path: &'a [u8],
}

/// The outcome of one spec: a status and, for GET, GET_COUNT and GET_DOC, a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecResult {
    pub status: Status,
    pub value: Vec<u8>,
}

/// Runs lookup specs against a stored value (snappy already removed). `now_secs` is the vBucket clock for
/// `$vbucket.HLC`. Returns one result per spec in request order, or the request's error status (INVALID_COMBO,
/// INVALID_XATTR_ORDER, EINVAL, XATTR_EINVAL...) when the request as a whole is refused.
pub fn lookup(
    value: &[u8],
    has_xattr: bool,
    meta: &DocMeta,
    specs: &[LookupSpec],
    now_secs: u32,
) -> Result<Vec<SpecResult>, Status> {
    let raw: Vec<RawSpec> =
        specs.iter().map(|s| RawSpec { opcode: s.opcode, flags: s.flags, path: s.path, value: b"" }).collect();
    let checked = check_request(&raw, false, 0)?;
    let (xattrs, body) = split_value(value, has_xattr)?;
    let view = xattrs.view()?;
    let doc = Document { body, body_json: body_json(body), xattrs: &xattrs, view, meta, now_secs };
    Ok(checked
        .iter()
        .map(|spec| match doc.run(spec) {
            Ok(value) => SpecResult { status: Status::Success, value },
            Err(status) => SpecResult { status, value: Vec::new() },
        })
        .collect())
}

/// The body as text, with the levels it uses, if it is JSON; path specs on any other body fail with DOC_NOTJSON.
/// Checked once per request, not once per spec.
fn body_json(body: &[u8]) -> Option<(&str, usize)> {
    let text = std::str::from_utf8(body).ok()?;
    Some((text, check_value(text)?))
}

/// Everything a lookup spec may read.
struct Document<'d> {
    body: &'d [u8],
    body_json: Option<(&'d str, usize)>,
    xattrs: &'d Xattrs,
    view: XattrView<'d>,
    meta: &'d DocMeta,
    now_secs: u32,
}

impl Document<'_> {
    fn run(&self, spec: &CheckedSpec) -> Result<Vec<u8>, Status> {
        if spec.op() == SpecOp::GetDoc {
            // An empty body (a deleted document's) counts as a path that does not exist.
            if self.body.is_empty() {
                return Err(Status::SubdocPathEnoent);
            }
            return Ok(self.body.to_vec());
        }
        if spec.is_xattr() {
            let mut tree = if is_virtual_path(spec.path) {
                let path = std::str::from_utf8(spec.path).map_err(|_| Status::XattrEinval)?;
                vattr_tree(key_of(path), self.meta, self.xattrs, self.now_secs)?
            } else {
                self.view.tree()
            };
            let path = parse_xattr_path(spec.path)?;
            return read(spec.op(), &mut tree, &path.components);
        }
        let (text, levels) = self.body_json.ok_or(Status::SubdocDocNotjson)?;
        let path = parse_path(spec.path)?;
        let mut tree = Tree::new(Node::text(Cow::Borrowed(text)), levels);
        read(spec.op(), &mut tree, &path.components)
    }
}

fn read(op: SpecOp, tree: &mut Tree, path: &[PathComponent]) -> Result<Vec<u8>, Status> {
    match op {
        SpecOp::Get => tree.get(path),
        SpecOp::Exists => tree.exists(path),
        SpecOp::GetCount => tree.count(path),
        // The request checks admit only lookup opcodes here.
        _ => Err(Status::Einternal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{op, path_flag};

    const X: u8 = path_flag::XATTR;

    fn spec(opcode: u8, flags: u8, path: &str) -> LookupSpec<'_> {
        LookupSpec { opcode, flags, path: path.as_bytes() }
    }

    fn stored(body: &str, xattrs: &[(&str, &str)]) -> (Vec<u8>, bool) {
        let mut x = Xattrs::new();
        for (k, v) in xattrs {
            x.set(k, v.as_bytes().to_vec());
        }
        crate::xattr::join_value(&x, body.as_bytes())
    }

    fn meta() -> DocMeta {
        DocMeta {
            cas: 5_000_000_000,
            seqno: 9,
            revid: 2,
            flags: 7,
            datatype: 0x05,
            value_bytes: 17,
            ..DocMeta::default()
        }
    }

    /// (status, value as text) per spec.
    fn run(value: &(Vec<u8>, bool), specs: &[LookupSpec]) -> Result<Vec<(Status, String)>, Status> {
        let results = lookup(&value.0, value.1, &meta(), specs, 1234)?;
        Ok(results.into_iter().map(|r| (r.status, String::from_utf8(r.value).unwrap())).collect())
    }

    fn ok(value: &str) -> (Status, String) {
        (Status::Success, value.to_string())
    }

    fn err(status: Status) -> (Status, String) {
        (status, String::new())
    }

    /// Each spec gets its own result in request order; a missing path does not affect the others.
    #[test]
    fn each_spec_has_its_own_result() {
        let doc = stored(r#"{"from":"mnunberg","to":"couchbase","list":[1,2,3]}"#, &[]);
        let specs = [
            spec(op::GET, 0, "from"),
            spec(op::GET, 0, "cc"),
            spec(op::EXISTS, 0, "to"),
            spec(op::GET_COUNT, 0, "list"),
            spec(op::GET, 0, "from.x"),
        ];
        let got = run(&doc, &specs).unwrap();
        assert_eq!(
            got,
            [ok("\"mnunberg\""), err(Status::SubdocPathEnoent), ok(""), ok("3"), err(Status::SubdocPathMismatch)]
        );
    }

    /// GET_DOC returns the whole body, JSON or not, and PATH_ENOENT for an empty one.
    #[test]
    fn get_doc_returns_the_body() {
        assert_eq!(run(&stored("not json", &[]), &[spec(op::GET_DOC, 0, "")]).unwrap(), [ok("not json")]);
        assert_eq!(
            run(&stored("", &[("_s", "1")]), &[spec(op::GET_DOC, 0, "")]).unwrap(),
            [err(Status::SubdocPathEnoent)]
        );
    }

    /// Path specs on a non-JSON body are DOC_NOTJSON; bad paths fail per spec.
    #[test]
    fn body_errors_are_per_spec() {
        let raw = stored("binary", &[]);
        assert_eq!(run(&raw, &[spec(op::GET, 0, "a")]).unwrap(), [err(Status::SubdocDocNotjson)]);
        let doc = stored("{}", &[]);
        let deep = "[0]".repeat(32);
        let specs = [spec(op::GET, 0, "a[x]"), spec(op::GET, 0, &deep)];
        assert_eq!(run(&doc, &specs).unwrap(), [err(Status::SubdocPathEinval), err(Status::SubdocPathE2big)]);
    }

    /// Xattr paths read stored xattrs, several keys in one request, alongside the body.
    #[test]
    fn xattrs_are_readable_with_the_body() {
        let doc = stored(r#"{"a":1}"#, &[("_sync", r#"{"cas":"0x1","list":[1, 2]}"#), ("meta", "true")]);
        let specs = [
            spec(op::GET, X, "_sync"),
            spec(op::GET, X, "_sync.list[1]"),
            spec(op::GET, X, "meta"),
            spec(op::EXISTS, X, "_nope"),
            spec(op::GET_COUNT, X, "_sync"),
            spec(op::GET, 0, "a"),
        ];
        let got = run(&doc, &specs).unwrap();
        assert_eq!(
            got,
            [
                ok(r#"{"cas":"0x1","list":[1, 2]}"#),
                ok("2"),
                ok("true"),
                err(Status::SubdocPathEnoent),
                ok("2"),
                ok("1"),
            ]
        );
    }

    /// Virtual xattrs read the metadata; unknown ones are XATTR_UNKNOWN_VATTR per spec.
    #[test]
    fn virtual_xattrs() {
        let doc = stored(r#"{"a":1}"#, &[("_sync", "1"), ("user", "2")]);
        let specs = [
            spec(op::GET, X, "$document.CAS"),
            spec(op::GET, X, "$document.revid"),
            spec(op::GET, X, "$document.flags"),
            spec(op::GET, X, "$document.last_modified"),
            spec(op::GET, X, "$vbucket.HLC.now"),
            spec(op::GET, X, "$XTOC"),
            spec(op::GET, X, "$nope"),
            spec(op::GET, X, "$document.nope"),
        ];
        let got = run(&doc, &specs).unwrap();
        assert_eq!(
            got,
            [
                ok("\"0x000000012a05f200\""),
                ok("\"2\""),
                ok("7"),
                ok("\"5\""),
                ok("\"1234\""),
                ok(r#"["_sync","user"]"#),
                err(Status::SubdocXattrUnknownVattr),
                err(Status::SubdocPathEnoent),
            ]
        );
        let whole = run(&doc, &[spec(op::GET, X, "$document")]).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&whole[0].1).unwrap();
        assert_eq!(parsed["datatype"], serde_json::json!(["json", "xattr"]));
    }

    /// Request-level problems fail the whole lookup with one status.
    #[test]
    fn request_errors_fail_everything() {
        let doc = stored("{}", &[]);
        assert_eq!(run(&doc, &[spec(op::GET, 0, "a"), spec(op::GET, X, "_x")]), Err(Status::SubdocInvalidXattrOrder));
        assert_eq!(run(&doc, &[spec(op::DICT_ADD, 0, "a")]), Err(Status::SubdocInvalidCombo));
        assert_eq!(run(&doc, &vec![spec(op::GET, 0, "a"); 17]), Err(Status::SubdocInvalidCombo));
        assert_eq!(run(&doc, &[spec(op::GET, X, "ThisIsASuperDuperLongPath")]), Err(Status::XattrEinval));
        assert_eq!(run(&doc, &[]), Err(Status::SubdocInvalidCombo));
        assert_eq!(run(&(vec![0, 0, 0, 9], true), &[spec(op::GET, 0, "a")]), Err(Status::XattrEinval));
    }

    /// A document deeper than 32 levels answers DOC_E2DEEP to path specs but still returns its body whole.
    #[test]
    fn too_deep_documents() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(40), "]".repeat(40));
        let doc = stored(&deep, &[]);
        let got = run(&doc, &[spec(op::GET, 0, "a"), spec(op::GET_DOC, 0, "")]).unwrap();
        assert_eq!(got, [err(Status::SubdocDocE2deep), ok(&deep)]);
    }
}
