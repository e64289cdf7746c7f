//! Tests for the path mutations in edit.rs, kept in their own file so that both stay a readable size.

use super::*;
use crate::path::parse_path;

/// Runs one edit on `doc` and returns the new document text.
fn edit<'v>(
    doc: &'v str,
    f: impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status>,
    path: &str,
) -> Result<String, Status> {
    let mut tree = Tree::parse(doc).unwrap();
    let path = parse_path(path.as_bytes()).unwrap().components;
    f(&mut tree, &path)?;
    Ok(tree.to_text().into_owned())
}

fn add<'v>(value: &'v str, mkdir_p: bool) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.dict_store(p, Cow::Borrowed(value), Store::Add, mkdir_p)
}

fn upsert<'v>(value: &'v str, mkdir_p: bool) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.dict_store(p, Cow::Borrowed(value), Store::Upsert, mkdir_p)
}

fn push<'v>(
    value: &'v str,
    end: End,
    mkdir_p: bool,
) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.push(p, Cow::Borrowed(value), end, mkdir_p)
}

fn unique<'v>(value: &'v str, mkdir_p: bool) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.add_unique(p, Cow::Borrowed(value), mkdir_p)
}

fn insert<'v>(value: &'v str) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.insert(p, Cow::Borrowed(value))
}

fn replace<'v>(value: &'v str) -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    move |t, p| t.replace(p, Cow::Borrowed(value))
}

fn remove<'v>() -> impl FnOnce(&mut Tree<'v>, &[PathComponent]) -> Result<(), Status> {
    |t, p| t.remove(p)
}

/// DICT_ADD adds a new key at the end of its object and refuses an existing one.
#[test]
fn dict_add_adds_new_keys_only() {
    assert_eq!(edit(r#"{"a":1}"#, add("\"x\"", false), "b").unwrap(), r#"{"a":1,"b":"x"}"#);
    assert_eq!(edit(r#"{"a":1}"#, add("2", false), "a"), Err(Status::SubdocPathEexists));
}

/// DICT_UPSERT overwrites an existing key in place and keeps the order of the others.
#[test]
fn dict_upsert_overwrites_in_place() {
    assert_eq!(edit(r#"{"a":1,"b":2}"#, upsert("[3]", false), "a").unwrap(), r#"{"a":[3],"b":2}"#);
}

/// Missing parents are PATH_ENOENT unless MKDIR_P creates them as objects; an index can never be created.
#[test]
fn dict_store_creates_parents_only_with_mkdir_p() {
    assert_eq!(edit("{}", add("[1,2,3]", false), "foo.bar.baz"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("{}", add("[1,2,3]", true), "foo.bar.baz").unwrap(), r#"{"foo":{"bar":{"baz":[1,2,3]}}}"#);
    assert_eq!(edit(r#"{"a":{}}"#, upsert("1", true), "a.b[0].c"), Err(Status::SubdocPathEnoent));
}

/// A dictionary path ending in an index is PATH_EINVAL; into an array or scalar parent it is PATH_MISMATCH.
#[test]
fn dict_store_path_shape_errors() {
    let doc = r#"{"array":[null],"n":1}"#;
    for path in ["array[0]", "array[1]", "array[-1]"] {
        assert_eq!(edit(doc, upsert("true", false), path), Err(Status::SubdocPathEinval), "{path}");
    }
    assert_eq!(edit(doc, upsert("true", false), "array.key"), Err(Status::SubdocPathMismatch));
    assert_eq!(edit(doc, upsert("true", false), "n.key"), Err(Status::SubdocPathMismatch));
    assert_eq!(edit("[]", upsert("true", false), "key"), Err(Status::SubdocPathMismatch));
}

/// Values must be valid JSON and are checked before the path is walked.
#[test]
fn invalid_values_cannot_be_inserted() {
    for value in ["INVALID", "1,2,3,4", "{ \"foo\" }", "{ \"foo\": }", "nul", "2.0.0", "2.", "2.0e", "2.0e+"] {
        assert_eq!(edit("{}", add(value, true), "missing.parent.k"), Err(Status::SubdocValueCantinsert), "{value}");
    }
    assert_eq!(edit("{}", replace("blah"), "missing"), Err(Status::SubdocValueCantinsert));
}

/// A value that would push the document past 32 levels is VALUE_ETOODEEP, checked against the path's depth.
#[test]
fn values_too_deep_for_their_position() {
    let deep = format!("{}{}", "[".repeat(LEVELS_MAX), "]".repeat(LEVELS_MAX));
    assert_eq!(edit("{}", add(&deep, false), "k"), Err(Status::SubdocValueEtoodeep));
    let fits = format!("{}{}", "[".repeat(LEVELS_MAX - 1), "]".repeat(LEVELS_MAX - 1));
    assert!(edit("{}", add(&fits, false), "k").is_ok());
}

/// At the deepest position (31 components) a scalar can be set but a push would be too deep.
#[test]
fn deepest_path_allows_scalars_not_pushes() {
    let path: Vec<String> = (0..31).map(|i| format!("P{i}")).collect();
    let path = path.join(".");
    assert!(edit("{}", upsert("123", true), &path).is_ok());
    let parent: Vec<String> = (0..30).map(|i| format!("P{i}")).collect();
    assert!(edit("{}", push("123", End::Last, true), &parent.join(".")).is_ok());
    assert_eq!(edit("{}", push("123", End::Last, true), &path), Err(Status::SubdocValueEtoodeep));
}

/// REPLACE overwrites members and elements and needs the path to exist.
#[test]
fn replace_needs_an_existing_value() {
    let doc = r#"{"address":["a","b"]}"#;
    assert_eq!(edit(doc, replace("\"S\""), "address[1]").unwrap(), r#"{"address":["a","S"]}"#);
    assert_eq!(edit(doc, replace("\"S\""), "address[-1]").unwrap(), r#"{"address":["a","S"]}"#);
    assert_eq!(edit(doc, replace("1"), "address[2]"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit(doc, replace("1"), "missing"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit(doc, replace("1"), "missing.x"), Err(Status::SubdocPathEnoent));
}

/// REMOVE drops members and elements (including [-1]); missing paths are PATH_ENOENT; the root cannot go.
#[test]
fn remove_drops_existing_values() {
    assert_eq!(edit("[1,2]", remove(), "[0]").unwrap(), "[2]");
    assert_eq!(edit("[1,2]", remove(), "[-1]").unwrap(), "[1]");
    assert_eq!(edit(r#"[0,[1,[2]],{"key":"val"}]"#, remove(), "[1][1][0]").unwrap(), r#"[0,[1,[]],{"key":"val"}]"#);
    assert_eq!(edit(r#"{"0": 1,"1": 2.0}"#, remove(), "0").unwrap(), r#"{"1":2.0}"#);
    assert_eq!(edit("[]", remove(), "[-1]"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit(r#"{"a":1}"#, remove(), "b"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("[]", remove(), ""), Err(Status::SubdocValueCantinsert));
}

/// Pushes add one or several comma-separated values at either end.
#[test]
fn pushes_add_values_at_either_end() {
    let doc = r#"{"array":[4,5,6]}"#;
    assert_eq!(edit(doc, push("1,2,3", End::First, false), "array").unwrap(), r#"{"array":[1,2,3,4,5,6]}"#);
    assert_eq!(edit(doc, push("7, 8", End::Last, false), "array").unwrap(), r#"{"array":[4,5,6,7,8]}"#);
    assert_eq!(edit("[]", push("null", End::Last, false), "").unwrap(), "[null]");
    assert_eq!(edit("[[]]", push("123", End::Last, false), "[0]").unwrap(), "[[123]]");
    assert_eq!(
        edit("[1,2,3,[4,5,6,[7,8]]]", push("10", End::Last, false), "[-1].[-1]").unwrap(),
        "[1,2,3,[4,5,6,[7,8,10]]]"
    );
}

/// Pushes onto missing arrays need MKDIR_P; onto non-arrays they are mismatches; the root is special-cased.
#[test]
fn push_error_cases() {
    assert_eq!(edit("{}", push("123", End::First, false), "array"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("{}", push("1,2", End::First, true), "a.b").unwrap(), r#"{"a":{"b":[1,2]}}"#);
    assert_eq!(edit("{}", push("null", End::Last, false), ""), Err(Status::SubdocPathMismatch));
    assert_eq!(edit("{}", push("null", End::First, false), ""), Err(Status::SubdocPathMismatch));
    assert_eq!(edit("5", push("null", End::Last, false), ""), Err(Status::SubdocDocNotjson));
    assert_eq!(edit(r#"{"a":{}}"#, push("1", End::Last, false), "a"), Err(Status::SubdocPathMismatch));
    assert_eq!(edit(r#"{"array":[null]}"#, push("true", End::Last, true), "array[1]"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("[]", push("notjson", End::Last, false), ""), Err(Status::SubdocValueCantinsert));
    assert_eq!(edit("[]", push("1,", End::Last, false), ""), Err(Status::SubdocValueCantinsert));
}

/// ADD_UNIQUE adds primitives not already present, comparing as text.
#[test]
fn add_unique_compares_text() {
    assert_eq!(edit("{}", unique("\"value\"", true), "unique").unwrap(), r#"{"unique":["value"]}"#);
    assert_eq!(edit(r#"{"u":["value"]}"#, unique("\"value\"", false), "u"), Err(Status::SubdocPathEexists));
    assert_eq!(edit(r#"{"u":[1]}"#, unique("\"1\"", false), "u").unwrap(), r#"{"u":[1,"1"]}"#);
    assert_eq!(edit(r#"{"u":[1]}"#, unique("1.0", false), "u").unwrap(), r#"{"u":[1,1.0]}"#);
    assert_eq!(edit("[0]", unique("0", false), ""), Err(Status::SubdocPathEexists));
}

/// ADD_UNIQUE refuses non-primitive or multiple values, and arrays holding non-primitives.
#[test]
fn add_unique_restrictions() {
    assert_eq!(edit(r#"{"u":[]}"#, unique("[]", false), "u"), Err(Status::SubdocValueCantinsert));
    assert_eq!(edit(r#"{"u":[]}"#, unique("1,2,3", false), "u"), Err(Status::SubdocValueCantinsert));
    assert_eq!(edit(r#"{"u":[[]]}"#, unique("2", false), "u"), Err(Status::SubdocPathMismatch));
    assert_eq!(edit(r#"{"u":{}}"#, unique("2", false), "u"), Err(Status::SubdocPathMismatch));
    assert_eq!(edit("{}", unique("2", false), "u"), Err(Status::SubdocPathEnoent));
}

/// ARRAY_INSERT inserts before an index, may append at the length, and refuses other positions.
#[test]
fn array_insert_positions() {
    assert_eq!(edit("[1,2,4,5]", insert("3"), "[2]").unwrap(), "[1,2,3,4,5]");
    assert_eq!(edit("[1]", insert("0"), "[0]").unwrap(), "[0,1]");
    assert_eq!(edit("[0,1]", insert("2"), "[2]").unwrap(), "[0,1,2]");
    assert_eq!(edit("[]", insert("0"), "[0]").unwrap(), "[0]");
    assert_eq!(edit(r#"{"a":[4]}"#, insert("-3,-2,-1"), "a[0]").unwrap(), r#"{"a":[-3,-2,-1,4]}"#);
    assert_eq!(edit("[1,2,3,5]", insert("4"), "[-1]"), Err(Status::SubdocPathEinval));
    assert_eq!(edit("[1,2,3]", insert("null"), "[4]"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("[1,2,3]", insert("null"), "[0].anything"), Err(Status::SubdocPathEinval));
    assert_eq!(edit("{}", insert("null"), "non_exist[0]"), Err(Status::SubdocPathEnoent));
    assert_eq!(edit("[]", insert("blah"), "[0]"), Err(Status::SubdocValueCantinsert));
    assert_eq!(edit("{}", insert("null"), "[0]"), Err(Status::SubdocPathMismatch));
}

/// Every path operation on a document deeper than the limit is DOC_E2DEEP, after the value checks.
#[test]
fn edits_on_too_deep_documents_fail() {
    let doc = format!("{{\"a\":{}{}}}", "[".repeat(LEVELS_MAX), "]".repeat(LEVELS_MAX));
    assert_eq!(edit(&doc, upsert("1", false), "b"), Err(Status::SubdocDocE2deep));
    assert_eq!(edit(&doc, remove(), "a"), Err(Status::SubdocDocE2deep));
    assert_eq!(edit(&doc, upsert("bad", false), "b"), Err(Status::SubdocValueCantinsert));
}

/// Untouched parts of the document keep their exact bytes, including big and oddly written numbers.
#[test]
fn untouched_values_keep_their_bytes() {
    let doc = r#"{"big": 123456789012345678901234567890, "f": 1.50, "e": 1E5, "s": "\u00e9", "x": 1}"#;
    let out = edit(doc, upsert("2", false), "x").unwrap();
    assert_eq!(out, r#"{"big":123456789012345678901234567890,"f":1.50,"e":1E5,"s":"\u00e9","x":2}"#);
}
