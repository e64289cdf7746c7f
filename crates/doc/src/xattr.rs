//! `Xattrs`: the extended-attribute section Couchbase stores in front of a document body.
//!
//! A value whose datatype has the XATTR bit (0x04) starts with a u32 big-endian length of the xattr section (not
//! counting those 4 bytes), then pairs of: u32 big-endian pair length, key bytes, 0x00, value bytes (JSON text),
//! 0x00. The body follows the section. A section is accepted only if every length adds up, every key is a legal
//! xattr key appearing once, and every value is valid JSON, as Couchbase validates it; otherwise XATTR_EINVAL.

use std::borrow::Cow;

use settee_types::Status;

use crate::node::Node;
use crate::syntax::check_value;
use crate::tree::Tree;
use crate::xattr_key::{is_system_key, is_valid_xattr_key};

/// A document's xattrs: ordered (key, JSON value text) pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Xattrs {
    pairs: Vec<(String, Vec<u8>)>,
}

impl Xattrs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a whole xattr section, its 4-byte length prefix included; nothing may follow the section.
    pub fn parse(section: &[u8]) -> Result<Xattrs, Status> {
        let len = section_len(section)?;
        if section.len() != len {
            return Err(Status::XattrEinval);
        }
        let mut pairs: Vec<(String, Vec<u8>)> = Vec::new();
        let mut pos = 4;
        while pos < len {
            let pair_len = read_u32(section, pos)?;
            let start = pos + 4;
            let end = start.checked_add(pair_len).filter(|&end| end <= len).ok_or(Status::XattrEinval)?;
            let (key, value) = split_pair(section.get(start..end).ok_or(Status::XattrEinval)?)?;
            if pairs.iter().any(|(k, _)| k == key) {
                return Err(Status::XattrEinval);
            }
            pairs.push((key.to_string(), value.as_bytes().to_vec()));
            pos = end;
        }
        Ok(Xattrs { pairs })
    }

    /// The JSON text stored under `key`.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice())
    }

    /// Stores `json` under `key`, in place if the key exists, else after the existing keys. The caller provides
    /// valid JSON text and a legal key.
    pub fn set(&mut self, key: &str, json: Vec<u8>) {
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some((_, value)) => *value = json,
            None => self.pairs.push((key.to_string(), json)),
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.pairs.retain(|(k, _)| k != key);
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Keeps only system xattrs (keys starting with `_`), which is what survives deleting a document.
    pub fn retain_system(&mut self) {
        self.pairs.retain(|(k, _)| is_system_key(k));
    }

    /// The section with its 4-byte length prefix; empty if there are no pairs (a value without xattrs has no
    /// section at all).
    pub fn encode(&self) -> Vec<u8> {
        if self.pairs.is_empty() {
            return Vec::new();
        }
        let body_len: usize = self.pairs.iter().map(|(k, v)| 4 + k.len() + v.len() + 2).sum();
        let mut out = Vec::with_capacity(4 + body_len);
        out.extend_from_slice(&be_u32(body_len).to_be_bytes());
        for (key, value) in &self.pairs {
            out.extend_from_slice(&be_u32(key.len() + value.len() + 2).to_be_bytes());
            out.extend_from_slice(key.as_bytes());
            out.push(0);
            out.extend_from_slice(value);
            out.push(0);
        }
        out
    }
}

/// A document's xattrs seen as one JSON object keyed by xattr name. Couchbase 7.6 runs every xattr spec against
/// that object, so one request may read or write several keys, and removing a key's path removes the key.
pub(crate) struct XattrView<'x> {
    members: Vec<(&'x str, &'x str)>,
    levels: usize,
}

impl<'x> XattrView<'x> {
    /// A fresh tree over the xattrs; trees are cheap because they borrow the values until walked into.
    pub(crate) fn tree(&self) -> Tree<'x> {
        let members = self.members.iter().map(|(k, v)| (Cow::Borrowed(*k), Node::text(Cow::Borrowed(*v)))).collect();
        Tree::new(Node::Object(members), self.levels)
    }
}

impl Xattrs {
    /// The xattrs as an object; XATTR_EINVAL if a value set by a caller is not JSON.
    pub(crate) fn view(&self) -> Result<XattrView<'_>, Status> {
        let mut members = Vec::with_capacity(self.pairs.len());
        let mut deepest = 0;
        for (key, value) in &self.pairs {
            let value = std::str::from_utf8(value).map_err(|_| Status::XattrEinval)?;
            deepest = deepest.max(check_value(value).ok_or(Status::XattrEinval)?);
            members.push((key.as_str(), value));
        }
        // The object itself is one level above its values.
        Ok(XattrView { members, levels: deepest + 1 })
    }

    /// Rebuilds xattrs from a tree made by `XattrView::tree` and then edited.
    pub(crate) fn from_tree(tree: &Tree) -> Result<Xattrs, Status> {
        let Node::Object(members) = &tree.root else {
            return Err(Status::Einternal);
        };
        let pairs =
            members.iter().map(|(key, value)| (key.to_string(), value.to_text().into_owned().into_bytes())).collect();
        Ok(Xattrs { pairs })
    }
}

/// Splits a stored value into its xattrs and its body. Without the XATTR datatype bit the whole value is the body.
pub fn split_value(value: &[u8], has_xattr: bool) -> Result<(Xattrs, &[u8]), Status> {
    if !has_xattr {
        return Ok((Xattrs::new(), value));
    }
    let len = section_len(value)?;
    let section = value.get(..len).ok_or(Status::XattrEinval)?;
    let body = value.get(len..).ok_or(Status::XattrEinval)?;
    Ok((Xattrs::parse(section)?, body))
}

/// Joins xattrs and a body into a stored value; the flag says whether the XATTR datatype bit must be set, which is
/// only when there is at least one pair.
pub fn join_value(xattrs: &Xattrs, body: &[u8]) -> (Vec<u8>, bool) {
    if xattrs.is_empty() {
        return (body.to_vec(), false);
    }
    let mut out = xattrs.encode();
    out.extend_from_slice(body);
    (out, true)
}

/// The length of the section starting at the front of `bytes`, prefix included, if the prefix is there.
fn section_len(bytes: &[u8]) -> Result<usize, Status> {
    read_u32(bytes, 0)?.checked_add(4).filter(|&len| len <= bytes.len()).ok_or(Status::XattrEinval)
}

fn read_u32(bytes: &[u8], pos: usize) -> Result<usize, Status> {
    let raw: [u8; 4] = bytes.get(pos..pos + 4).and_then(|b| b.try_into().ok()).ok_or(Status::XattrEinval)?;
    usize::try_from(u32::from_be_bytes(raw)).map_err(|_| Status::XattrEinval)
}

/// Lengths inside a section are u32. Values are bounded far below 4 GiB by `VALUE_BYTES_MAX`, so saturating can
/// only matter for a value that is rejected for its size anyway.
fn be_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `key 0x00 value 0x00`, exactly.
fn split_pair(pair: &[u8]) -> Result<(&str, &str), Status> {
    let key_end = pair.iter().position(|&b| b == 0).ok_or(Status::XattrEinval)?;
    let rest = &pair[key_end + 1..];
    let value_end = rest.iter().position(|&b| b == 0).ok_or(Status::XattrEinval)?;
    if value_end + 1 != rest.len() {
        return Err(Status::XattrEinval);
    }
    let key = std::str::from_utf8(&pair[..key_end]).map_err(|_| Status::XattrEinval)?;
    let value = std::str::from_utf8(&rest[..value_end]).map_err(|_| Status::XattrEinval)?;
    if !is_valid_xattr_key(key) || check_value(value).is_none() {
        return Err(Status::XattrEinval);
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Xattrs {
        let mut x = Xattrs::new();
        x.set("_sync", br#"{"cas":"0x01"}"#.to_vec());
        x.set("meta", b"[1,2]".to_vec());
        x
    }

    /// The encoding is the documented byte layout: section length, then length-prefixed NUL-terminated pairs.
    #[test]
    fn encode_matches_the_byte_layout() {
        let mut x = Xattrs::new();
        x.set("a", b"1".to_vec());
        assert_eq!(x.encode(), [0, 0, 0, 8, 0, 0, 0, 4, b'a', 0, b'1', 0][..]);
        assert_eq!(Xattrs::new().encode(), Vec::<u8>::new());
    }

    /// A value round-trips through join and split, and the XATTR bit is set only when there are xattrs.
    #[test]
    fn join_then_split_round_trips() {
        let (value, has_xattr) = join_value(&sample(), b"{\"body\":true}");
        assert!(has_xattr);
        let (xattrs, body) = split_value(&value, true).unwrap();
        assert_eq!(xattrs, sample());
        assert_eq!(body, b"{\"body\":true}");
        assert_eq!(join_value(&Xattrs::new(), b"x"), (b"x".to_vec(), false));
        let (none, whole) = split_value(b"\0\0\0\x09abc", false).unwrap();
        assert!(none.is_empty());
        assert_eq!(whole, b"\0\0\0\x09abc");
    }

    /// set replaces in place, remove drops, retain_system keeps only underscore keys.
    #[test]
    fn set_remove_and_retain_system() {
        let mut x = sample();
        x.set("_sync", b"2".to_vec());
        assert_eq!(x.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["_sync", "meta"]);
        assert_eq!(x.get("_sync"), Some(&b"2"[..]));
        x.retain_system();
        assert_eq!(x.len(), 1);
        x.remove("_sync");
        assert!(x.is_empty());
        assert_eq!(x.get("_sync"), None);
    }

    /// An empty section (length 0) is valid and holds no pairs.
    #[test]
    fn empty_section_is_valid() {
        assert!(Xattrs::parse(&[0, 0, 0, 0]).unwrap().is_empty());
    }

    /// Malformed sections are XATTR_EINVAL: short, inconsistent lengths, missing NULs, bad keys or values, duplicates.
    #[test]
    fn malformed_sections_are_einval() {
        let good = sample().encode();
        let mut trailing = good.clone();
        trailing.push(b'x');
        let mut bad_len = good.clone();
        bad_len[3] += 1;
        let pair = |k: &[u8], v: &[u8]| {
            let mut p = Vec::new();
            p.extend_from_slice(&((k.len() + v.len() + 2) as u32).to_be_bytes());
            p.extend_from_slice(k);
            p.push(0);
            p.extend_from_slice(v);
            p.push(0);
            p
        };
        let section = |pairs: &[Vec<u8>]| {
            let body: Vec<u8> = pairs.concat();
            let mut s = (body.len() as u32).to_be_bytes().to_vec();
            s.extend(body);
            s
        };
        for bad in [
            vec![],
            vec![0, 0, 0],
            trailing,
            bad_len,
            section(&[pair(b"a", b"not json")]),
            section(&[pair(b"!a", b"1")]),
            section(&[pair(b"a", b"1"), pair(b"a", b"2")]),
            section(&[pair(b"", b"1")]),
            section(&[b"\0\0\0\x03a\x001".to_vec()]),
            section(&[b"\0\0\0\x09a\x001\x00".to_vec()]),
            section(&[b"\0\0".to_vec()]),
        ] {
            assert_eq!(Xattrs::parse(&bad), Err(Status::XattrEinval), "{bad:?}");
        }
        assert_eq!(split_value(&[0, 0, 0, 10, 0], true).map(|_| ()), Err(Status::XattrEinval));
    }

    proptest! {
        /// Any set of legal pairs survives encode, parse and split, in order.
        #[test]
        fn xattr_blob_round_trips(
            pairs in prop::collection::btree_map("[a-z_][a-z0-9]{1,14}", "(null|true|-?[1-9][0-9]{0,5}|\"[a-z ]{0,10}\"|\\[\\])", 0..6),
            body in prop::collection::vec(any::<u8>(), 0..32),
        ) {
            let mut xattrs = Xattrs::new();
            for (k, v) in &pairs {
                xattrs.set(k, v.as_bytes().to_vec());
            }
            if !xattrs.is_empty() {
                prop_assert_eq!(Xattrs::parse(&xattrs.encode()).unwrap(), xattrs.clone());
            }
            let (value, has_xattr) = join_value(&xattrs, &body);
            prop_assert_eq!(has_xattr, !pairs.is_empty());
            let (parsed, parsed_body) = split_value(&value, has_xattr).unwrap();
            prop_assert_eq!(parsed, xattrs);
            prop_assert_eq!(parsed_body, &body[..]);
        }

        /// Parsing arbitrary bytes never panics.
        #[test]
        fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = Xattrs::parse(&bytes);
            let _ = split_value(&bytes, true);
        }
    }
}
