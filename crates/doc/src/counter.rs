//! SUBDOC_COUNTER: add a signed 64-bit delta to an integer in the document, creating it if it is missing.
//!
//! Couchbase counters never wrap and never change a number's type: the delta must be a plain non-zero JSON integer
//! (DELTA_EINVAL otherwise), the existing value must be an integer (PATH_MISMATCH for floats and non-numbers) that
//! fits an i64 (NUM_ERANGE), and a result outside the i64 range fails with VALUE_CANTINSERT, which is the status
//! Couchbase maps its delta-overflow error to.

use std::borrow::Cow;

use settee_types::Status;

use crate::edit::create_chain;
use crate::node::{locate, Kind, Located, Node};
use crate::path::PathComponent;
use crate::tree::Tree;

impl<'a> Tree<'a> {
    /// Applies `delta` (the spec's value text) at `path`; returns the new value as decimal text.
    pub(crate) fn counter(&mut self, path: &[PathComponent], delta: &str, mkdir_p: bool) -> Result<String, Status> {
        let delta = parse_delta(delta)?;
        // The request checks refuse an empty counter path, so an empty one here can only be a caller's bug.
        let (last, parents) = path.split_last().ok_or(Status::SubdocPathEinval)?;
        self.check_depth()?;
        match locate(&mut self.root, parents)? {
            Located::Found(parent) => match parent.child_position(last)? {
                Some(position) => {
                    let current = parent.child_mut(position)?;
                    let updated = parse_existing(current)?.checked_add(delta).ok_or(Status::SubdocValueCantinsert)?;
                    let text = updated.to_string();
                    *current = Node::text(Cow::Owned(text.clone()));
                    Ok(text)
                }
                // Only a missing object key can be created; a missing array element cannot.
                None if parent.kind() == Kind::Object => create(parent, std::slice::from_ref(last), delta),
                None => Err(Status::SubdocPathEnoent),
            },
            Located::Missing { parent, at } => {
                if !mkdir_p || parent.kind() != Kind::Object {
                    return Err(Status::SubdocPathEnoent);
                }
                if matches!(last, PathComponent::Index(_)) {
                    return Err(Status::SubdocPathEinval);
                }
                create(parent, &path[at..], delta)
            }
        }
    }
}

/// Creates the counter with the delta as its value.
fn create<'a>(parent: &mut Node<'a>, path: &[PathComponent], delta: i64) -> Result<String, Status> {
    let text = delta.to_string();
    create_chain(parent, path, Cow::Owned(text.clone()))?;
    Ok(text)
}

/// A delta is `-?[1-9][0-9]*` within the i64 range: no sign `+`, no leading zeros, no zero, no fraction.
fn parse_delta(text: &str) -> Result<i64, Status> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let well_formed = !digits.is_empty() && !digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit());
    if !well_formed {
        return Err(Status::SubdocDeltaEinval);
    }
    text.parse::<i64>().map_err(|_| Status::SubdocDeltaEinval)
}

/// The integer an existing value holds.
fn parse_existing(node: &Node) -> Result<i64, Status> {
    let text = node.scalar_text().ok_or(Status::SubdocPathMismatch)?;
    let is_number = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    if !is_number || text.contains(['.', 'e', 'E']) {
        return Err(Status::SubdocPathMismatch);
    }
    // The text is a valid JSON integer, so parsing can only fail by being out of range.
    text.parse::<i64>().map_err(|_| Status::SubdocNumErange)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::parse_path;

    fn count(doc: &str, path: &str, delta: &str, mkdir_p: bool) -> Result<(String, String), Status> {
        let mut tree = Tree::parse(doc).unwrap();
        let path = parse_path(path.as_bytes()).unwrap().components;
        let result = tree.counter(&path, delta, mkdir_p)?;
        Ok((result, tree.to_text().into_owned()))
    }

    /// Counters add signed deltas and return the new value.
    #[test]
    fn counter_adds_and_returns_new_value() {
        assert_eq!(count(r#"{"c":1}"#, "c", "-101", false).unwrap(), ("-100".into(), r#"{"c":-100}"#.into()));
        assert_eq!(count("[-20]", "[0]", "1", false).unwrap().0, "-19");
        assert_eq!(count(r#"{"n":{"c":5}}"#, "n.c", "5", false).unwrap().0, "10");
    }

    /// A missing counter is created with the delta; missing parents need MKDIR_P; array slots cannot be created.
    #[test]
    fn missing_counters_are_created() {
        assert_eq!(count("{}", "counter", "1", false).unwrap(), ("1".into(), r#"{"counter":1}"#.into()));
        assert_eq!(count("{}", "a.b", "1", false), Err(Status::SubdocPathEnoent));
        assert_eq!(count("{}", "a.b", "7", true).unwrap().1, r#"{"a":{"b":7}}"#);
        assert_eq!(count("[]", "[0]", "42", false), Err(Status::SubdocPathEnoent));
        assert_eq!(count("[]", "[0]", "42", true), Err(Status::SubdocPathEnoent));
        assert_eq!(count(r#"{"array":[null]}"#, "array[1]", "100", true), Err(Status::SubdocPathEnoent));
        assert_eq!(count("{}", "a[0]", "1", true), Err(Status::SubdocPathEinval));
    }

    /// Bad deltas are DELTA_EINVAL: not integers, zero, leading zeros, out of range.
    #[test]
    fn bad_deltas_are_einval() {
        for delta in ["bad", "3.14", "-", "43f", "0", "-0", "01", "+1", "", " 1", "1e3", "9223372036854775808"] {
            assert_eq!(count("{}", "pth", delta, true), Err(Status::SubdocDeltaEinval), "{delta:?}");
        }
    }

    /// Existing non-integers are mismatches; integers beyond i64 are NUM_ERANGE.
    #[test]
    fn existing_value_must_be_an_i64_integer() {
        assert_eq!(count(r#"{"c":3.14}"#, "c", "1", false), Err(Status::SubdocPathMismatch));
        assert_eq!(count(r#"{"c":1e3}"#, "c", "1", false), Err(Status::SubdocPathMismatch));
        assert_eq!(count(r#"{"c":"1"}"#, "c", "1", false), Err(Status::SubdocPathMismatch));
        assert_eq!(count(r#"{"c":[]}"#, "c", "1", false), Err(Status::SubdocPathMismatch));
        assert_eq!(count(r#"{"c":9999999999999999999999999999999}"#, "c", "1", false), Err(Status::SubdocNumErange));
    }

    /// The full i64 range is reachable, and crossing it fails with VALUE_CANTINSERT instead of wrapping.
    #[test]
    fn overflow_is_refused() {
        let (max, min) = (i64::MAX, i64::MIN);
        assert_eq!(count(r#"{"c":0}"#, "c", &max.to_string(), false).unwrap().0, max.to_string());
        assert_eq!(count(r#"{"c":0}"#, "c", &min.to_string(), false).unwrap().0, min.to_string());
        let near_max = format!(r#"{{"c":{}}}"#, max - 1);
        assert_eq!(count(&near_max, "c", "1", false).unwrap().0, max.to_string());
        assert_eq!(count(&near_max, "c", "2", false), Err(Status::SubdocValueCantinsert));
        let near_min = format!(r#"{{"c":{}}}"#, min + 1);
        assert_eq!(count(&near_min, "c", "-2", false), Err(Status::SubdocValueCantinsert));
    }
}
