//! `Tree`: the JSON value one request operates on (a document body, or all of a document's xattrs seen as one
//! object keyed by xattr name) together with whether it is too deep to operate on, and the read operations.
//!
//! Couchbase's parser stops at `SUBDOC_DEPTH_MAX` levels, so every path operation on a deeper document fails with
//! DOC_E2DEEP; the check runs after the operation has validated its own inputs, in Couchbase's order.

use std::borrow::Cow;

use settee_types::limits::SUBDOC_DEPTH_MAX;
use settee_types::Status;

use crate::node::{locate, Kind, Located, Node};
use crate::path::PathComponent;
use crate::syntax::check_value;

/// The most levels a document, or a value placed into one, may use.
pub(crate) const LEVELS_MAX: usize = SUBDOC_DEPTH_MAX;

pub(crate) struct Tree<'a> {
    pub(crate) root: Node<'a>,
    too_deep: bool,
}

impl<'a> Tree<'a> {
    /// A tree over JSON text; None if the text is not JSON.
    pub(crate) fn parse(text: &'a str) -> Option<Tree<'a>> {
        let levels = check_value(text)?;
        Some(Tree::new(Node::text(Cow::Borrowed(text)), levels))
    }

    /// A tree over a node known to be valid JSON using `levels` levels.
    pub(crate) fn new(root: Node<'a>, levels: usize) -> Tree<'a> {
        Tree { root, too_deep: levels > LEVELS_MAX }
    }

    /// Fails with DOC_E2DEEP if the document is deeper than Couchbase can parse.
    pub(crate) fn check_depth(&self) -> Result<(), Status> {
        if self.too_deep {
            return Err(Status::SubdocDocE2deep);
        }
        Ok(())
    }

    /// The value at `path`, or PATH_ENOENT / PATH_MISMATCH.
    pub(crate) fn find(&mut self, path: &[PathComponent]) -> Result<&mut Node<'a>, Status> {
        self.check_depth()?;
        match locate(&mut self.root, path)? {
            Located::Found(node) => Ok(node),
            Located::Missing { .. } => Err(Status::SubdocPathEnoent),
        }
    }

    /// SUBDOC_GET: the JSON text of the value at `path`.
    pub(crate) fn get(&mut self, path: &[PathComponent]) -> Result<Vec<u8>, Status> {
        Ok(self.find(path)?.to_text().into_owned().into_bytes())
    }

    /// SUBDOC_EXISTS: success with no value when the path exists.
    pub(crate) fn exists(&mut self, path: &[PathComponent]) -> Result<Vec<u8>, Status> {
        self.find(path).map(|_| Vec::new())
    }

    /// SUBDOC_GET_COUNT: the number of elements of an array or members of an object, as decimal text.
    pub(crate) fn count(&mut self, path: &[PathComponent]) -> Result<Vec<u8>, Status> {
        let node = self.find(path)?;
        if node.kind() == Kind::Scalar {
            return Err(Status::SubdocPathMismatch);
        }
        node.open()?;
        Ok(node.len().to_string().into_bytes())
    }

    /// The tree as JSON text.
    pub(crate) fn to_text(&self) -> Cow<'_, str> {
        self.root.to_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::parse_path;

    #[derive(Clone, Copy)]
    enum Read {
        Get,
        Exists,
        Count,
    }

    fn run(doc: &str, path: &str, read: Read) -> Result<String, Status> {
        let mut tree = Tree::parse(doc).unwrap();
        let path = parse_path(path.as_bytes()).unwrap().components;
        let value = match read {
            Read::Get => tree.get(&path),
            Read::Exists => tree.exists(&path),
            Read::Count => tree.count(&path),
        };
        value.map(|v| String::from_utf8(v).unwrap())
    }

    /// GET returns the value's stored text and reports missing and mismatched paths.
    #[test]
    fn get_returns_text_or_path_errors() {
        let doc = r#"{"name":"Allagash Brewing","list":[1, 2 ,3],"n":{"x":null}}"#;
        assert_eq!(run(doc, "name", Read::Get).unwrap(), "\"Allagash Brewing\"");
        assert_eq!(run(doc, "list", Read::Get).unwrap(), "[1, 2 ,3]");
        assert_eq!(run(doc, "n.x", Read::Get).unwrap(), "null");
        assert_eq!(run(doc, "missing", Read::Get), Err(Status::SubdocPathEnoent));
        assert_eq!(run(doc, "list[3]", Read::Get), Err(Status::SubdocPathEnoent));
        assert_eq!(run(doc, "name.x", Read::Get), Err(Status::SubdocPathMismatch));
    }

    /// EXISTS answers with an empty value, or the same errors GET gives.
    #[test]
    fn exists_has_no_value() {
        assert_eq!(run(r#"{"a":1}"#, "a", Read::Exists).unwrap(), "");
        assert_eq!(run(r#"{"a":1}"#, "b", Read::Exists), Err(Status::SubdocPathEnoent));
    }

    /// GET_COUNT counts array elements and object members, and refuses scalars.
    #[test]
    fn get_count_counts_containers() {
        assert_eq!(run(r#"{"array":[1,2,3,4]}"#, "array", Read::Count).unwrap(), "4");
        assert_eq!(run(r#"{"array":[1,2,3,4]}"#, "array[0]", Read::Count), Err(Status::SubdocPathMismatch));
        assert_eq!(run("[]", "", Read::Count).unwrap(), "0");
        assert_eq!(run(r#"{"a":1,"b":2}"#, "", Read::Count).unwrap(), "2");
        assert_eq!(run(r#"{"array":[[]]}"#, "array[-1]", Read::Count).unwrap(), "0");
        assert_eq!(run("{}", "non.exist.path", Read::Count), Err(Status::SubdocPathEnoent));
    }

    /// A document at the depth limit is readable at its deepest point; one level more makes every path DOC_E2DEEP.
    #[test]
    fn documents_deeper_than_the_limit_are_e2deep() {
        let at_limit = format!("{}1{}", "[".repeat(LEVELS_MAX - 1), "]".repeat(LEVELS_MAX - 1));
        let deepest = "[0]".repeat(LEVELS_MAX - 1);
        assert_eq!(run(&at_limit, &deepest, Read::Get).unwrap(), "1");
        let too_deep = format!("{{\"a\":1,\"b\":{}{}}}", "[".repeat(LEVELS_MAX), "]".repeat(LEVELS_MAX));
        assert_eq!(run(&too_deep, "a", Read::Get), Err(Status::SubdocDocE2deep));
    }
}
