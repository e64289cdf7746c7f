//! `Node`: a JSON value that is opened up only along the paths an operation walks.
//!
//! A node starts as validated text. Walking into it replaces the text with its members or elements, each again
//! text; everything not walked into keeps its original bytes. Writing the tree back out copies those bytes, so a
//! mutation changes exactly the parts of the document it touches, as Couchbase's splicing does.

use std::borrow::Cow;

use settee_types::Status;

use crate::path::PathComponent;
use crate::syntax::{array_elements, object_members, trim_ws};

/// A JSON value, partly opened.
#[derive(Clone, Debug)]
pub(crate) enum Node<'a> {
    /// Valid JSON text with no surrounding whitespace, not opened yet (or a scalar, which never opens).
    Text(Cow<'a, str>),
    /// Members in document order; keys are the escaped text between the quotes.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
    Array(Vec<Node<'a>>),
}

/// What kind of JSON value a node holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Object,
    Array,
    Scalar,
}

/// Where a walk along a path stopped.
pub(crate) enum Located<'n, 'a> {
    /// Every component matched; this is the value the path names.
    Found(&'n mut Node<'a>),
    /// Component `at` does not exist in `parent`, a container of the kind that component expects.
    Missing { parent: &'n mut Node<'a>, at: usize },
}

impl<'a> Node<'a> {
    /// A node for JSON text the caller has already validated; surrounding whitespace is dropped.
    pub(crate) fn text(text: Cow<'a, str>) -> Node<'a> {
        match text {
            Cow::Borrowed(t) => Node::Text(Cow::Borrowed(trim_ws(t))),
            Cow::Owned(t) if trim_ws(&t).len() == t.len() => Node::Text(Cow::Owned(t)),
            Cow::Owned(t) => Node::Text(Cow::Owned(trim_ws(&t).to_string())),
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        match self {
            Node::Object(_) => Kind::Object,
            Node::Array(_) => Kind::Array,
            Node::Text(t) => match t.as_bytes().first() {
                Some(b'{') => Kind::Object,
                Some(b'[') => Kind::Array,
                _ => Kind::Scalar,
            },
        }
    }

    /// The text of a scalar, or None for a container.
    pub(crate) fn scalar_text(&self) -> Option<&str> {
        match self {
            Node::Text(t) if self.kind() == Kind::Scalar => Some(t),
            _ => None,
        }
    }

    /// Opens a container held as text into its members or elements. Scalars and opened nodes are left alone.
    pub(crate) fn open(&mut self) -> Result<(), Status> {
        let Node::Text(text) = self else {
            return Ok(());
        };
        let opened = match text {
            Cow::Borrowed(t) => open_text(t, Cow::Borrowed)?,
            Cow::Owned(t) => open_text(t.as_str(), |s: &str| Cow::Owned(s.to_string()))?,
        };
        if let Some(node) = opened {
            *self = node;
        }
        Ok(())
    }

    /// How many members or elements an opened container has; 0 for anything else.
    pub(crate) fn len(&self) -> usize {
        match self {
            Node::Object(members) => members.len(),
            Node::Array(items) => items.len(),
            Node::Text(_) => 0,
        }
    }

    /// The position of the child `component` names, None if there is no such child. PATH_MISMATCH if the component
    /// does not fit this value: a key into an array, an index into an object, anything into a scalar.
    pub(crate) fn child_position(&mut self, component: &PathComponent) -> Result<Option<usize>, Status> {
        self.open()?;
        match (self, component) {
            (Node::Object(members), PathComponent::Key(key)) => Ok(members.iter().position(|(k, _)| k == key)),
            (Node::Array(items), PathComponent::Index(index)) => Ok(resolve_index(*index, items.len())),
            _ => Err(Status::SubdocPathMismatch),
        }
    }

    pub(crate) fn child_mut(&mut self, position: usize) -> Result<&mut Node<'a>, Status> {
        let child = match self {
            Node::Object(members) => members.get_mut(position).map(|(_, v)| v),
            Node::Array(items) => items.get_mut(position),
            Node::Text(_) => None,
        };
        // Positions come from `child_position` on the same node, so a miss is a bug, reported without a panic.
        child.ok_or(Status::Einternal)
    }

    /// Removes the child at `position` of an opened container.
    pub(crate) fn remove_child(&mut self, position: usize) -> Result<(), Status> {
        match self {
            Node::Object(members) if position < members.len() => {
                members.remove(position);
            }
            Node::Array(items) if position < items.len() => {
                items.remove(position);
            }
            _ => return Err(Status::Einternal),
        }
        Ok(())
    }

    /// Adds a member at the end of an object, where Couchbase puts new keys.
    pub(crate) fn push_member(&mut self, key: Cow<'a, str>, value: Node<'a>) -> Result<(), Status> {
        self.open()?;
        match self {
            Node::Object(members) => {
                members.push((key, value));
                Ok(())
            }
            _ => Err(Status::SubdocPathMismatch),
        }
    }

    /// The node as JSON text: borrowed when it was never opened, rebuilt otherwise.
    pub(crate) fn to_text(&self) -> Cow<'_, str> {
        match self {
            Node::Text(t) => Cow::Borrowed(t),
            _ => {
                let mut out = String::new();
                self.write(&mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Appends the node's JSON text. Recursion only follows opened nodes, and nodes are opened only along paths
    /// of at most `COMPONENTS_MAX` components, so the depth stays small.
    pub(crate) fn write(&self, out: &mut String) {
        match self {
            Node::Text(t) => out.push_str(t),
            Node::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('"');
                    out.push_str(key);
                    out.push_str("\":");
                    value.write(out);
                }
                out.push('}');
            }
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
        }
    }
}

/// Splits container text into child nodes; `wrap` decides whether children borrow the text or copy it.
fn open_text<'t, 'a>(text: &'t str, wrap: impl Fn(&'t str) -> Cow<'a, str>) -> Result<Option<Node<'a>>, Status> {
    // The text was validated before it became a node, so a failure here is a bug; it is reported, not panicked on.
    let slice = |range: std::ops::Range<usize>| text.get(range).ok_or(Status::Einternal);
    match text.as_bytes().first() {
        Some(b'{') => {
            let mut members = Vec::new();
            for (key, value) in object_members(text).ok_or(Status::Einternal)? {
                members.push((wrap(slice(key)?), Node::Text(wrap(slice(value)?))));
            }
            Ok(Some(Node::Object(members)))
        }
        Some(b'[') => {
            let mut items = Vec::new();
            for element in array_elements(text).ok_or(Status::Einternal)? {
                items.push(Node::Text(wrap(slice(element)?)));
            }
            Ok(Some(Node::Array(items)))
        }
        _ => Ok(None),
    }
}

/// Maps a path index onto an array of `len` elements: -1 is the last one.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    if index == -1 {
        return len.checked_sub(1);
    }
    usize::try_from(index).ok().filter(|&i| i < len)
}

/// Walks `components` from `root`, opening containers on the way.
pub(crate) fn locate<'n, 'a>(root: &'n mut Node<'a>, components: &[PathComponent]) -> Result<Located<'n, 'a>, Status> {
    let mut node = root;
    for (at, component) in components.iter().enumerate() {
        match node.child_position(component)? {
            Some(position) => node = node.child_mut(position)?,
            None => return Ok(Located::Missing { parent: node, at }),
        }
    }
    Ok(Located::Found(node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::parse_path;

    fn comps(path: &str) -> Vec<PathComponent> {
        parse_path(path.as_bytes()).unwrap().components
    }

    fn found_text(doc: &str, path: &str) -> Result<Option<String>, Status> {
        let mut root = Node::text(Cow::Borrowed(doc));
        Ok(match locate(&mut root, &comps(path))? {
            Located::Found(n) => Some(n.to_text().into_owned()),
            Located::Missing { .. } => None,
        })
    }

    /// A walk returns the original bytes of the value it reaches, whitespace inside it included.
    #[test]
    fn walk_returns_original_text() {
        let doc = r#"{ "a" : { "b" : [ 1 , 2.50 , {"c": 1e3} ] } }"#;
        assert_eq!(found_text(doc, "a.b").unwrap().unwrap(), "[ 1 , 2.50 , {\"c\": 1e3} ]");
        assert_eq!(found_text(doc, "a.b[1]").unwrap().unwrap(), "2.50");
        assert_eq!(found_text(doc, "a.b[-1].c").unwrap().unwrap(), "1e3");
        assert_eq!(found_text(doc, "").unwrap().unwrap(), doc.trim());
    }

    /// Missing keys and out-of-range indexes stop the walk with the parent; -1 on an empty array is missing.
    #[test]
    fn missing_children_report_where_the_walk_stopped() {
        let doc = r#"{"a":{"b":[]}}"#;
        let mut root = Node::text(Cow::Borrowed(doc));
        match locate(&mut root, &comps("a.x.y")).unwrap() {
            Located::Missing { parent, at } => {
                assert_eq!(at, 1);
                assert_eq!(parent.kind(), Kind::Object);
            }
            Located::Found(_) => panic!("a.x should be missing"),
        }
        assert_eq!(found_text(doc, "a.b[0]").unwrap(), None);
        assert_eq!(found_text(doc, "a.b[-1]").unwrap(), None);
    }

    /// Keys into arrays, indexes into objects, and anything into a scalar are mismatches.
    #[test]
    fn wrong_component_kind_is_a_mismatch() {
        let doc = r#"{"arr":[1],"obj":{},"num":5}"#;
        assert_eq!(found_text(doc, "arr.x"), Err(Status::SubdocPathMismatch));
        assert_eq!(found_text(doc, "obj[0]"), Err(Status::SubdocPathMismatch));
        assert_eq!(found_text(doc, "num.x"), Err(Status::SubdocPathMismatch));
        assert_eq!(found_text(doc, "num[0]"), Err(Status::SubdocPathMismatch));
    }

    /// Keys match in their escaped form, the way Couchbase compares them.
    #[test]
    fn keys_match_in_escaped_form() {
        let doc = r#"{"\"quoted":true,"caf\u00e9":1}"#;
        assert_eq!(found_text(doc, "\\\"quoted").unwrap().unwrap(), "true");
        assert_eq!(found_text(doc, "caf\u{e9}").unwrap(), None);
    }

    /// Writing an opened tree keeps unopened parts byte for byte and compacts only what was opened.
    #[test]
    fn write_keeps_untouched_bytes() {
        let doc = r#"{"a": {"deep": [1.50, 2E3]}, "b": 123456789012345678901234567890}"#;
        let mut root = Node::text(Cow::Borrowed(doc));
        let Located::Found(b) = locate(&mut root, &comps("b")).unwrap() else { panic!("b exists") };
        *b = Node::text(Cow::Borrowed("7"));
        assert_eq!(root.to_text(), r#"{"a":{"deep": [1.50, 2E3]},"b":7}"#);
    }

    /// Children of text the tree owns are copied, so they outlive the replaced text.
    #[test]
    fn opening_owned_text_copies_children() {
        let mut node = Node::text(Cow::Owned("[ [1], {\"k\":2} ]".to_string()));
        node.open().unwrap();
        assert_eq!(node.len(), 2);
        assert_eq!(node.to_text(), "[[1],{\"k\":2}]");
    }
}
