//! The path mutations (dict add/upsert, replace, remove, array push/insert/add-unique) on a `Tree`.
//!
//! Each operation checks things in the order Couchbase does, because clients see whichever error comes first: the
//! value (VALUE_CANTINSERT, VALUE_ETOODEEP), then rules on the path's shape (PATH_EINVAL), then the document's depth
//! (DOC_E2DEEP), then the walk (PATH_MISMATCH, PATH_ENOENT, PATH_EEXISTS).

use std::borrow::Cow;
use std::ops::Range;

use settee_types::Status;

use crate::node::{locate, Kind, Located, Node};
use crate::path::PathComponent;
use crate::syntax::{check_list, check_value};
use crate::tree::{Tree, LEVELS_MAX};

/// Whether a dictionary store may overwrite an existing key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    Add,
    Upsert,
}

/// Which end of an array a push adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    First,
    Last,
}

impl<'a> Tree<'a> {
    /// DICT_ADD / DICT_UPSERT: set the key the path ends with. MKDIR_P creates missing parent objects.
    pub(crate) fn dict_store(
        &mut self,
        path: &[PathComponent],
        value: Cow<'a, str>,
        mode: Store,
        mkdir_p: bool,
    ) -> Result<(), Status> {
        // The root cannot be a dictionary entry.
        let (last, parents) = path.split_last().ok_or(Status::SubdocValueCantinsert)?;
        check_single(&value, path.len())?;
        self.check_depth()?;
        let ends_in_index = matches!(last, PathComponent::Index(_));
        match locate(&mut self.root, parents)? {
            Located::Missing { parent, at } => {
                if ends_in_index {
                    return Err(Status::SubdocPathEinval);
                }
                if !mkdir_p {
                    return Err(Status::SubdocPathEnoent);
                }
                create_chain(parent, &path[at..], value)
            }
            Located::Found(parent) => {
                let position = parent.child_position(last)?;
                if ends_in_index {
                    return Err(Status::SubdocPathEinval);
                }
                match (position, mode) {
                    (Some(_), Store::Add) => Err(Status::SubdocPathEexists),
                    (Some(position), Store::Upsert) => {
                        *parent.child_mut(position)? = Node::text(value);
                        Ok(())
                    }
                    (None, _) => create_chain(parent, std::slice::from_ref(last), value),
                }
            }
        }
    }

    /// REPLACE: overwrite an existing value (object member or array element).
    pub(crate) fn replace(&mut self, path: &[PathComponent], value: Cow<'a, str>) -> Result<(), Status> {
        let (last, parents) = path.split_last().ok_or(Status::SubdocValueCantinsert)?;
        check_single(&value, path.len())?;
        let (parent, position) = self.existing_child(parents, last)?;
        *parent.child_mut(position)? = Node::text(value);
        Ok(())
    }

    /// DELETE (remove a path): drop an existing object member or array element.
    pub(crate) fn remove(&mut self, path: &[PathComponent]) -> Result<(), Status> {
        let (last, parents) = path.split_last().ok_or(Status::SubdocValueCantinsert)?;
        let (parent, position) = self.existing_child(parents, last)?;
        parent.remove_child(position)
    }

    /// ARRAY_PUSH_FIRST / ARRAY_PUSH_LAST: add one or more comma-separated values to the array at `path`.
    pub(crate) fn push(
        &mut self,
        path: &[PathComponent],
        value: Cow<'a, str>,
        end: End,
        mkdir_p: bool,
    ) -> Result<(), Status> {
        let spans = check_elements(&value, path.len() + 1)?;
        let items = pieces(&value, spans)?;
        if path.is_empty() && end == End::Last {
            // Couchbase appends to the root by looking only at its closing bracket, without parsing (or measuring)
            // the document, so neither is checked here either.
            return match self.root.kind() {
                Kind::Array => append(&mut self.root, items, end),
                Kind::Object => Err(Status::SubdocPathMismatch),
                Kind::Scalar => Err(Status::SubdocDocNotjson),
            };
        }
        self.check_depth()?;
        match locate(&mut self.root, path)? {
            Located::Found(node) => append(node, items, end),
            Located::Missing { parent, at } if mkdir_p => create_chain(parent, &path[at..], array_text(&items)),
            Located::Missing { .. } => Err(Status::SubdocPathEnoent),
        }
    }

    /// ARRAY_ADD_UNIQUE: append one primitive value unless an equal one (compared as text) is already there.
    pub(crate) fn add_unique(
        &mut self,
        path: &[PathComponent],
        value: Cow<'a, str>,
        mkdir_p: bool,
    ) -> Result<(), Status> {
        let spans = check_elements(&value, path.len() + 1)?;
        if spans.len() != 1 {
            return Err(Status::SubdocValueCantinsert);
        }
        let item = pieces(&value, spans)?.pop().ok_or(Status::Einternal)?;
        if item.kind() != Kind::Scalar {
            return Err(Status::SubdocValueCantinsert);
        }
        self.check_depth()?;
        match locate(&mut self.root, path)? {
            Located::Found(node) => {
                node.open()?;
                let Node::Array(existing) = node else {
                    return Err(Status::SubdocPathMismatch);
                };
                if existing.iter().any(|n| n.kind() != Kind::Scalar) {
                    return Err(Status::SubdocPathMismatch);
                }
                if existing.iter().any(|n| n.scalar_text() == item.scalar_text()) {
                    return Err(Status::SubdocPathEexists);
                }
                existing.push(item);
                Ok(())
            }
            Located::Missing { parent, at } if mkdir_p => create_chain(parent, &path[at..], array_text(&[item])),
            Located::Missing { .. } => Err(Status::SubdocPathEnoent),
        }
    }

    /// ARRAY_INSERT: insert values before the element the path's final index names; the index may equal the
    /// array's length (append) but not exceed it, and may not be negative.
    pub(crate) fn insert(&mut self, path: &[PathComponent], value: Cow<'a, str>) -> Result<(), Status> {
        let spans = check_elements(&value, path.len())?;
        let items = pieces(&value, spans)?;
        let Some((PathComponent::Index(index), parents)) = path.split_last() else {
            return Err(Status::SubdocPathEinval);
        };
        let index = usize::try_from(*index).map_err(|_| Status::SubdocPathEinval)?;
        self.check_depth()?;
        let Located::Found(array) = locate(&mut self.root, parents)? else {
            return Err(Status::SubdocPathEnoent);
        };
        array.open()?;
        let Node::Array(existing) = array else {
            return Err(Status::SubdocPathMismatch);
        };
        if index > existing.len() {
            return Err(Status::SubdocPathEnoent);
        }
        existing.splice(index..index, items);
        Ok(())
    }

    /// The parent and position of the existing value `parents` + `last` names, for replace and remove.
    fn existing_child(
        &mut self,
        parents: &[PathComponent],
        last: &PathComponent,
    ) -> Result<(&mut Node<'a>, usize), Status> {
        self.check_depth()?;
        let Located::Found(parent) = locate(&mut self.root, parents)? else {
            return Err(Status::SubdocPathEnoent);
        };
        let position = parent.child_position(last)?.ok_or(Status::SubdocPathEnoent)?;
        Ok((parent, position))
    }
}

/// Adds `items` to the array `node`, or PATH_MISMATCH if it is not an array.
fn append<'a>(node: &mut Node<'a>, items: Vec<Node<'a>>, end: End) -> Result<(), Status> {
    node.open()?;
    let Node::Array(existing) = node else {
        return Err(Status::SubdocPathMismatch);
    };
    match end {
        End::First => {
            existing.splice(0..0, items);
        }
        End::Last => existing.extend(items),
    }
    Ok(())
}

/// Creates the members `path` names under `parent` (MKDIR_P): the first as a member of `parent`, the rest as nested
/// objects, the last holding `value`. Only object keys can be created; an index anywhere is PATH_ENOENT.
pub(crate) fn create_chain<'a>(
    parent: &mut Node<'a>,
    path: &[PathComponent],
    value: Cow<'a, str>,
) -> Result<(), Status> {
    let mut keys = Vec::with_capacity(path.len());
    for component in path {
        match component {
            PathComponent::Key(key) => keys.push(key.as_str()),
            PathComponent::Index(_) => return Err(Status::SubdocPathEnoent),
        }
    }
    let (first, nested) = keys.split_first().ok_or(Status::Einternal)?;
    let text = if nested.is_empty() {
        value
    } else {
        let mut text = String::with_capacity(value.len() + nested.iter().map(|k| k.len() + 5).sum::<usize>());
        for key in nested {
            text.push_str("{\"");
            text.push_str(key);
            text.push_str("\":");
        }
        text.push_str(&value);
        text.push_str(&"}".repeat(nested.len()));
        Cow::Owned(text)
    };
    parent.push_member(Cow::Owned((*first).to_string()), Node::text(text))
}

/// Checks a single JSON value that will sit at a path of `depth` components.
fn check_single(value: &str, depth: usize) -> Result<(), Status> {
    let levels = check_value(value).ok_or(Status::SubdocValueCantinsert)?;
    if depth + levels > LEVELS_MAX {
        return Err(Status::SubdocValueEtoodeep);
    }
    Ok(())
}

/// Checks comma-separated values whose elements will sit at paths of `depth` components.
fn check_elements(value: &str, depth: usize) -> Result<Vec<Range<usize>>, Status> {
    let (spans, levels) = check_list(value).ok_or(Status::SubdocValueCantinsert)?;
    if depth + levels > LEVELS_MAX {
        return Err(Status::SubdocValueEtoodeep);
    }
    Ok(spans)
}

/// Nodes for the parts of `value` at `spans`, borrowing when the value is borrowed.
fn pieces<'a>(value: &Cow<'a, str>, spans: Vec<Range<usize>>) -> Result<Vec<Node<'a>>, Status> {
    spans
        .into_iter()
        .map(|span| {
            let text = match value {
                Cow::Borrowed(v) => Cow::Borrowed(v.get(span).ok_or(Status::Einternal)?),
                Cow::Owned(v) => Cow::Owned(v.get(span).ok_or(Status::Einternal)?.to_string()),
            };
            Ok(Node::text(text))
        })
        .collect()
}

/// `[a,b,...]` for array nodes created by MKDIR_P.
fn array_text<'a>(items: &[Node<'a>]) -> Cow<'a, str> {
    let mut text = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        item.write(&mut text);
    }
    text.push(']');
    Cow::Owned(text)
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
