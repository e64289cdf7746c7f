//! Tests for `mutate`, kept beside mutation.rs in their own file so that both stay a readable size. The path
//! operations themselves are tested in edit.rs and counter.rs; these cover what the request adds: atomicity, xattrs,
//! macros, virtual xattrs, whole-document specs, document creation and deletion.

use super::*;
use crate::spec::{op, path_flag};
use crate::xattr::{join_value, split_value};

const X: u8 = path_flag::XATTR;
const M: u8 = path_flag::MKDIR_P;
const XM: u8 = X | path_flag::EXPAND_MACROS;

fn spec<'s>(opcode: u8, flags: u8, path: &'s str, value: &'s str) -> MutationSpec<'s> {
    MutationSpec { opcode, flags, path: path.as_bytes(), value: value.as_bytes() }
}

fn ctx() -> MutationContext {
    MutationContext { new_cas: 0x0102_0304_0506_0708, new_seqno: 77, now_secs: 1000, doc_flags: 0 }
}

fn stored(body: &str, xattrs: &[(&str, &str)]) -> (Vec<u8>, bool) {
    let mut x = Xattrs::new();
    for (k, v) in xattrs {
        x.set(k, v.as_bytes().to_vec());
    }
    join_value(&x, body.as_bytes())
}

fn run(doc: &(Vec<u8>, bool), specs: &[MutationSpec]) -> Result<MutationOutcome, SpecFailure> {
    mutate(Some((&doc.0, doc.1)), &DocMeta::default(), specs, &ctx())
}

/// The new body and xattrs as text.
fn parts(outcome: &MutationOutcome) -> (String, Vec<(String, String)>) {
    let (xattrs, body) = split_value(&outcome.value, outcome.has_xattr).unwrap();
    let xattrs = xattrs.iter().map(|(k, v)| (k.to_string(), String::from_utf8(v.to_vec()).unwrap())).collect();
    (String::from_utf8(body.to_vec()).unwrap(), xattrs)
}

fn xattr_pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn spec_failure(index: u8, status: Status) -> SpecFailure {
    SpecFailure { index: Some(index), status }
}

fn request_failure(status: Status) -> SpecFailure {
    SpecFailure { index: None, status }
}

/// Several body specs apply in order; untouched members keep their bytes.
#[test]
fn specs_apply_in_order() {
    let doc = stored(r#"{"keep": 1.50, "list": [1]}"#, &[]);
    let out = run(
        &doc,
        &[
            spec(op::DICT_UPSERT, 0, "a", "1"),
            spec(op::ARRAY_PUSH_LAST, 0, "list", "2"),
            spec(op::REPLACE, 0, "a", "\"x\""),
        ],
    )
    .unwrap();
    assert_eq!(parts(&out).0, r#"{"keep":1.50,"list":[1,2],"a":"x"}"#);
    assert!(out.is_json && !out.has_xattr && !out.delete_document && out.results.is_empty());
}

/// A failing second spec fails the request with its index and leaves nothing applied.
#[test]
fn a_failing_spec_aborts_everything() {
    let doc = stored(r#"{"a":1}"#, &[("_s", "1")]);
    let specs = [
        spec(op::DICT_UPSERT, X, "_s", "2"),
        spec(op::DICT_UPSERT, 0, "b", "2"),
        spec(op::DICT_ADD, 0, "a", "3"),
        spec(op::DICT_UPSERT, 0, "c", "4"),
    ];
    assert_eq!(run(&doc, &specs), Err(spec_failure(2, Status::SubdocPathEexists)));
    // The caller keeps its stored value; running only the good specs shows they would have changed it.
    let out = run(&doc, &specs[..2]).unwrap();
    assert_eq!(parts(&out), (r#"{"a":1,"b":2}"#.to_string(), xattr_pairs(&[("_s", "2")])));
}

/// Counters report their results with their spec index; other specs report nothing.
#[test]
fn counters_return_results_by_index() {
    let doc = stored(r#"{"n":5}"#, &[]);
    let specs = [spec(op::DICT_UPSERT, 0, "a", "1"), spec(op::COUNTER, 0, "n", "3"), spec(op::COUNTER, 0, "m", "-2")];
    let out = run(&doc, &specs).unwrap();
    assert_eq!(out.results, [(1, b"8".to_vec()), (2, b"-2".to_vec())]);
    assert_eq!(parts(&out).0, r#"{"n":8,"a":1,"m":-2}"#);
}

/// Xattr specs create, change and remove keys; several keys may be written in one request, as on 7.6.
#[test]
fn xattr_specs_edit_keys() {
    let doc = stored(r#"{"body":true}"#, &[("_sync", r#"{"rev":1}"#), ("user", "[]")]);
    let specs = [
        spec(op::DICT_UPSERT, X, "_sync.rev", "2"),
        spec(op::ARRAY_PUSH_LAST, X, "user", "\"x\""),
        spec(op::DICT_UPSERT, X | M, "_new.deep.k", "true"),
        spec(op::COUNTER, X, "_cnt", "5"),
    ];
    let out = run(&doc, &specs).unwrap();
    assert!(out.has_xattr && out.is_json);
    assert_eq!(out.results, [(3, b"5".to_vec())]);
    let expected = xattr_pairs(&[
        ("_sync", r#"{"rev":2}"#),
        ("user", r#"["x"]"#),
        ("_new", r#"{"deep":{"k":true}}"#),
        ("_cnt", "5"),
    ]);
    assert_eq!(parts(&out), (r#"{"body":true}"#.to_string(), expected));
}

/// Removing an xattr's key drops it; removing the last one clears the XATTR bit. Removing an inner path keeps the key.
#[test]
fn removing_xattrs() {
    let doc = stored("{}", &[("_sync", r#"{"a":1}"#)]);
    let out = run(&doc, &[spec(op::REMOVE, X, "_sync.a", "")]).unwrap();
    assert_eq!(parts(&out).1, xattr_pairs(&[("_sync", "{}")]));
    let out = run(&doc, &[spec(op::REMOVE, X, "_sync", "")]).unwrap();
    assert!(!out.has_xattr);
    assert_eq!(out.value, b"{}");
    assert_eq!(run(&doc, &[spec(op::REMOVE, X, "_nope", "")]), Err(spec_failure(0, Status::SubdocPathEnoent)));
}

/// Xattr paths need MKDIR_P for missing parents, and xattr specs work on documents whose body is not JSON.
#[test]
fn xattr_path_rules() {
    let doc = stored("raw bytes", &[]);
    assert_eq!(run(&doc, &[spec(op::DICT_UPSERT, X, "_s.a", "1")]), Err(spec_failure(0, Status::SubdocPathEnoent)));
    let out = run(&doc, &[spec(op::DICT_UPSERT, X | M, "_s.a", "1")]).unwrap();
    assert!(!out.is_json);
    assert_eq!(parts(&out), ("raw bytes".to_string(), xattr_pairs(&[("_s", r#"{"a":1}"#)])));
    assert_eq!(run(&doc, &[spec(op::DICT_UPSERT, 0, "a", "1")]), Err(spec_failure(0, Status::SubdocDocNotjson)));
}

/// Mutation macros expand to the new CAS (network byte order), the new seqno, and the final body's CRC32C.
#[test]
fn mutation_macros_expand() {
    let doc = stored(r#"{"a":1}"#, &[]);
    let specs = [
        spec(op::DICT_UPSERT, XM | M, "_txn.cas", "\"${Mutation.CAS}\""),
        spec(op::DICT_UPSERT, XM, "_txn.seqno", "\"${Mutation.seqno}\""),
        spec(op::DICT_UPSERT, XM, "_txn.crc", "\"${Mutation.value_crc32c}\""),
        spec(op::DICT_UPSERT, 0, "b", "2"),
    ];
    let out = run(&doc, &specs).unwrap();
    let (body, xattrs) = parts(&out);
    assert_eq!(body, r#"{"a":1,"b":2}"#);
    let crc = crc32c::crc32c(body.as_bytes());
    let expected = format!(r#"{{"cas":"0x0807060504030201","seqno":"0x000000000000004d","crc":"0x{crc:08x}"}}"#);
    assert_eq!(xattrs, xattr_pairs(&[("_txn", &expected)]));
}

/// Without EXPAND_MACROS a macro is stored as the plain string it is.
#[test]
fn macros_need_the_flag() {
    let doc = stored("{}", &[]);
    let out = run(&doc, &[spec(op::DICT_UPSERT, X, "_t", "\"${Mutation.CAS}\"")]).unwrap();
    assert_eq!(parts(&out).1, xattr_pairs(&[("_t", "\"${Mutation.CAS}\"")]));
}

/// $document macros expand to the metadata before the mutation; unknown fields fail that spec.
#[test]
fn document_macros_expand() {
    let doc = stored("{}", &[]);
    let meta = DocMeta { cas: 0xabc, revid: 4, ..DocMeta::default() };
    let specs = [
        spec(op::DICT_UPSERT, XM, "_p", "\"${$document.CAS}\""),
        spec(op::DICT_UPSERT, XM, "_r", "\"${$document.revid}\""),
    ];
    let out = mutate(Some((&doc.0, doc.1)), &meta, &specs, &ctx()).unwrap();
    assert_eq!(parts(&out).1, xattr_pairs(&[("_p", "\"0x0000000000000abc\""), ("_r", "\"4\"")]));
    let bad = [spec(op::DICT_UPSERT, XM, "_p", "\"${$document.nope}\"")];
    assert_eq!(run(&doc, &bad), Err(spec_failure(0, Status::SubdocXattrUnknownVattrMacro)));
    let unknown = [spec(op::DICT_UPSERT, XM, "_p", "\"${Mutation.nope}\"")];
    assert_eq!(run(&doc, &unknown), Err(request_failure(Status::SubdocXattrUnknownMacro)));
}

/// Virtual xattrs cannot be written; the request fails before any spec runs.
#[test]
fn virtual_xattrs_are_read_only() {
    let doc = stored("{}", &[]);
    let specs = [spec(op::DICT_UPSERT, 0, "a", "1"), spec(op::DICT_UPSERT, X, "$document.CAS", "1")];
    assert_eq!(run(&doc, &specs[1..]), Err(request_failure(Status::SubdocXattrCantModifyVattr)));
    assert_eq!(run(&doc, &specs), Err(request_failure(Status::SubdocXattrCantModifyVattr)));
}

/// SET_DOC replaces the body, JSON or not, and keeps xattrs.
#[test]
fn set_doc_replaces_the_body() {
    let doc = stored(r#"{"old":1}"#, &[("_s", "1")]);
    let out = run(&doc, &[spec(op::SET_DOC, 0, "", "not json")]).unwrap();
    assert!(!out.is_json && out.has_xattr);
    assert_eq!(parts(&out), ("not json".to_string(), xattr_pairs(&[("_s", "1")])));
    let out = run(&doc, &[spec(op::SET_DOC, 0, "", r#"{"new":2}"#)]).unwrap();
    assert!(out.is_json);
}

/// REMOVE_DOC empties the body, keeps only system xattrs, and marks the document for deletion.
#[test]
fn remove_doc_keeps_system_xattrs() {
    let doc = stored(r#"{"a":1}"#, &[("_sync", "1"), ("user", "2")]);
    let out = run(&doc, &[spec(op::DICT_UPSERT, X, "_sync", "3"), spec(op::REMOVE_DOC, 0, "", "")]).unwrap();
    assert!(out.delete_document && out.has_xattr && !out.is_json);
    assert_eq!(parts(&out), (String::new(), xattr_pairs(&[("_sync", "3")])));
    let plain = stored(r#"{"a":1}"#, &[]);
    let out = run(&plain, &[spec(op::REMOVE_DOC, 0, "", "")]).unwrap();
    assert!(out.delete_document && !out.has_xattr && out.value.is_empty());
}

/// REPLACE_BODY_WITH_XATTR makes an xattr's value the body.
#[test]
fn replace_body_with_xattr() {
    let doc = stored("", &[("_txn", r#"{"staged":{"v":[1, 2]}}"#)]);
    let specs = [spec(op::REPLACE_BODY_WITH_XATTR, X, "_txn.staged", ""), spec(op::REMOVE, X, "_txn", "")];
    let out = run(&doc, &specs).unwrap();
    assert!(out.is_json && !out.has_xattr);
    assert_eq!(out.value, br#"{"v":[1, 2]}"#);
    let missing = [spec(op::REPLACE_BODY_WITH_XATTR, X, "_txn.nope", "")];
    assert_eq!(run(&doc, &missing), Err(spec_failure(0, Status::SubdocPathEnoent)));
}

/// A body with surrounding whitespace is kept exactly when only xattrs change.
#[test]
fn untouched_body_keeps_its_bytes() {
    let doc = stored(" {\"a\": 1}\n", &[]);
    let out = run(&doc, &[spec(op::DICT_UPSERT, X, "_s", "1")]).unwrap();
    assert_eq!(parts(&out).0, " {\"a\": 1}\n");
}

/// A created document starts as an object, or an array when the first body path addresses the root array.
#[test]
fn created_documents_pick_their_root() {
    let create = |specs: &[MutationSpec], doc_flags: u8| {
        mutate(None, &DocMeta::default(), specs, &MutationContext { doc_flags, ..ctx() }).map(|o| parts(&o).0)
    };
    let mk = doc_flag::MKDOC;
    assert_eq!(create(&[spec(op::DICT_UPSERT, 0, "a.b", "1")], mk).unwrap(), r#"{"a":{"b":1}}"#);
    assert_eq!(create(&[spec(op::ARRAY_PUSH_LAST, 0, "", "1")], mk).unwrap(), "[1]");
    assert_eq!(create(&[spec(op::ARRAY_ADD_UNIQUE, 0, "", "1")], doc_flag::ADD).unwrap(), "[1]");
    assert_eq!(create(&[spec(op::ARRAY_PUSH_LAST, 0, "a", "1")], mk).unwrap(), r#"{"a":[1]}"#);
    assert_eq!(create(&[spec(op::DICT_UPSERT, X, "_s", "1")], mk).unwrap(), "{}");
    assert_eq!(create(&[spec(op::SET_DOC, 0, "", "raw")], mk).unwrap(), "raw");
}

/// MKDOC and ADD imply MKDIR_P on every path, even on an existing document.
#[test]
fn mkdoc_implies_mkdir_p() {
    let doc = stored("{}", &[]);
    let specs = [spec(op::DICT_UPSERT, 0, "a.b.c", "1")];
    assert_eq!(run(&doc, &specs), Err(spec_failure(0, Status::SubdocPathEnoent)));
    let with_mkdoc = MutationContext { doc_flags: doc_flag::MKDOC, ..ctx() };
    let out = mutate(Some((&doc.0, doc.1)), &DocMeta::default(), &specs, &with_mkdoc).unwrap();
    assert_eq!(parts(&out).0, r#"{"a":{"b":{"c":1}}}"#);
}

/// A document created deleted has no body: xattr specs work, a body must not appear.
#[test]
fn create_as_deleted_documents_have_no_body() {
    let flags = doc_flag::ADD | doc_flag::CREATE_AS_DELETED | doc_flag::ACCESS_DELETED;
    let ctx = MutationContext { doc_flags: flags, ..ctx() };
    let out = mutate(None, &DocMeta::default(), &[spec(op::DICT_UPSERT, X, "_txn", "{}")], &ctx).unwrap();
    assert_eq!(parts(&out), (String::new(), xattr_pairs(&[("_txn", "{}")])));
    let body = [spec(op::DICT_UPSERT, 0, "a", "1")];
    assert_eq!(mutate(None, &DocMeta::default(), &body, &ctx), Err(spec_failure(0, Status::SubdocDocNotjson)));
}

/// A deleted document may change its xattrs but gets no body unless it is revived; only deleted ones revive.
#[test]
fn deleted_documents_and_revival() {
    let tombstone = stored("", &[("_txn", "{\"v\":{\"a\":1}}")]);
    let deleted = DocMeta { deleted: true, ..DocMeta::default() };
    let access = MutationContext { doc_flags: doc_flag::ACCESS_DELETED, ..ctx() };
    let to_body = [spec(op::REPLACE_BODY_WITH_XATTR, X, "_txn.v", "")];
    let existing = Some((&tombstone.0[..], tombstone.1));
    assert_eq!(
        mutate(existing, &deleted, &to_body, &access),
        Err(request_failure(Status::SubdocDeletedDocumentCantHaveValue))
    );
    assert!(mutate(existing, &deleted, &[spec(op::DICT_UPSERT, X, "_txn.b", "2")], &access).is_ok());
    let revive = MutationContext { doc_flags: doc_flag::ACCESS_DELETED | doc_flag::REVIVE_DOCUMENT, ..ctx() };
    let out = mutate(existing, &deleted, &to_body, &revive).unwrap();
    assert_eq!(parts(&out).0, r#"{"a":1}"#);
    let alive = DocMeta::default();
    assert_eq!(
        mutate(existing, &alive, &to_body, &revive),
        Err(request_failure(Status::SubdocCanOnlyReviveDeletedDocuments))
    );
}

/// Request-level problems report no index.
#[test]
fn request_errors_have_no_index() {
    let doc = stored("{}", &[]);
    assert_eq!(run(&doc, &[]), Err(request_failure(Status::SubdocInvalidCombo)));
    assert_eq!(run(&doc, &[spec(op::GET, 0, "a", "")]), Err(request_failure(Status::SubdocInvalidCombo)));
    let order = [spec(op::DICT_UPSERT, 0, "a", "1"), spec(op::DICT_UPSERT, X, "_s", "1")];
    assert_eq!(run(&doc, &order), Err(request_failure(Status::SubdocInvalidXattrOrder)));
    assert_eq!(
        run(&(vec![0, 0, 0, 1], true), &[spec(op::DICT_UPSERT, 0, "a", "1")]),
        Err(request_failure(Status::XattrEinval))
    );
}

/// A value that grows past the size limit is E2BIG.
#[test]
fn oversized_values_are_e2big() {
    let big = format!("\"{}\"", "x".repeat(VALUE_BYTES_MAX));
    let doc = stored("{}", &[]);
    assert_eq!(run(&doc, &[spec(op::DICT_UPSERT, 0, "a", &big)]), Err(request_failure(Status::E2big)));
}

/// Values that are not UTF-8 cannot be inserted, and counter deltas that are not UTF-8 are invalid deltas.
#[test]
fn non_utf8_values() {
    let doc = stored("{}", &[]);
    let bad = MutationSpec { opcode: op::DICT_UPSERT, flags: 0, path: b"a", value: b"\"\xff\"" };
    assert_eq!(run(&doc, &[bad]), Err(spec_failure(0, Status::SubdocValueCantinsert)));
    let delta = MutationSpec { opcode: op::COUNTER, flags: 0, path: b"a", value: b"\xff" };
    assert_eq!(run(&doc, &[delta]), Err(spec_failure(0, Status::SubdocDeltaEinval)));
}

mod properties {
    use super::*;
    use crate::syntax::check_value;
    use proptest::prelude::*;

    const OPCODES: [u8; 12] = [
        op::SET_DOC,
        op::REMOVE_DOC,
        op::DICT_ADD,
        op::DICT_UPSERT,
        op::REMOVE,
        op::REPLACE,
        op::ARRAY_PUSH_LAST,
        op::ARRAY_PUSH_FIRST,
        op::ARRAY_INSERT,
        op::ARRAY_ADD_UNIQUE,
        op::COUNTER,
        op::REPLACE_BODY_WITH_XATTR,
    ];

    fn any_spec() -> impl Strategy<Value = (u8, u8, String, String)> {
        (
            prop::sample::select(&OPCODES[..]),
            prop::sample::select(&[0u8, M, X, X | M, XM][..]),
            "(_x|a|b|`c.d`|\\[0\\]|\\[-1\\]|\\.|\\[)(\\.a|\\[0\\]|\\[1\\]|\\.b){0,3}",
            "(1|-2|\"s\"|\\[1,2\\]|\\{\"a\":1\\}|1,2|null|x|\"\\$\\{Mutation.CAS\\}\"|)",
        )
    }

    proptest! {
        /// Whatever the specs, mutate never panics, and whenever it succeeds the stored value splits back into
        /// valid xattrs and a body whose JSON flag is true exactly when it is valid JSON.
        #[test]
        fn mutate_is_total_and_keeps_values_well_formed(
            specs in prop::collection::vec(any_spec(), 1..5),
            doc_flags in prop::sample::select(&[0u8, doc_flag::MKDOC, doc_flag::ACCESS_DELETED][..]),
        ) {
            let doc = stored(r#"{"a":{"b":[1,2]},"x":[0]}"#, &[("_x", r#"{"a":[1]}"#)]);
            let specs: Vec<MutationSpec> = specs
                .iter()
                .map(|(opcode, flags, path, value)| spec(*opcode, *flags, path, value))
                .collect();
            let ctx = MutationContext { doc_flags, ..ctx() };
            if let Ok(out) = mutate(Some((&doc.0, doc.1)), &DocMeta::default(), &specs, &ctx) {
                let (xattrs, body) = split_value(&out.value, out.has_xattr).unwrap();
                prop_assert_eq!(out.has_xattr, !xattrs.is_empty());
                let body_is_json = std::str::from_utf8(body).ok().and_then(check_value).is_some();
                prop_assert_eq!(out.is_json, body_is_json);
            }
        }

        /// Lookups never panic either, whatever the paths.
        #[test]
        fn lookup_is_total(paths in prop::collection::vec(("[ -~]{0,12}", any::<bool>()), 1..5)) {
            let doc = stored(r#"{"a":{"b":[1,2]}}"#, &[("_x", "1")]);
            let specs: Vec<crate::LookupSpec> = paths
                .iter()
                .map(|(p, xattr)| crate::LookupSpec { opcode: op::GET, flags: if *xattr { X } else { 0 }, path: p.as_bytes() })
                .collect();
            let _ = crate::lookup(&doc.0, doc.1, &DocMeta::default(), &specs, 0);
        }
    }
}
