//! XATTR keys: which names are legal, and how an xattr spec's path splits into the key and a path inside it.
//!
//! A key is the part of the path before the first `.` or `[` (backticks do not quote it). It is 1 to 15 bytes of
//! UTF-8 with no NUL, and must not start with punctuation or a control character, except `_` (system xattrs, kept
//! on deletion) and `$` (virtual xattrs, computed by the server); `_` and `$` alone are not keys. The whole path must
//! be valid UTF-8 too. These are Couchbase's rules; a violation is XATTR_EINVAL.

use settee_types::Status;

use crate::path::{parse_path, Path, PathComponent, COMPONENTS_MAX};

/// Keys must be shorter than this many bytes.
const KEY_BYTES_LIMIT: usize = 16;

/// Whether `path` (the full spec path) starts with a legal xattr key.
pub(crate) fn is_valid_xattr_path(path: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(path) else {
        return false;
    };
    if text.contains('\0') {
        return false;
    }
    let key = key_of(text);
    let Some(&first) = key.as_bytes().first() else {
        return false;
    };
    let special = first == b'_' || first == b'$';
    if !special && (first.is_ascii_punctuation() || first.is_ascii_control()) {
        return false;
    }
    key.len() < KEY_BYTES_LIMIT && !(special && key.len() == 1)
}

/// Whether a stored xattr key is legal (a key on its own, without a path after it).
pub(crate) fn is_valid_xattr_key(key: &str) -> bool {
    is_valid_xattr_path(key.as_bytes())
}

/// Keys starting with `_` are system xattrs: they survive deletion of the document.
pub(crate) fn is_system_key(key: &str) -> bool {
    key.starts_with('_')
}

/// Keys starting with `$` are virtual: computed by the server, never stored, never writable.
pub(crate) fn is_virtual_path(path: &[u8]) -> bool {
    path.first() == Some(&b'$')
}

/// The key part of an xattr path.
pub(crate) fn key_of(path: &str) -> &str {
    path.find(['.', '[']).map_or(path, |end| &path[..end])
}

/// Parses an xattr spec's path into a path whose first component is the xattr key, so that all of a document's
/// xattrs can be operated on as one object keyed by name. The key must already have been validated.
pub(crate) fn parse_xattr_path(path: &[u8]) -> Result<Path, Status> {
    let text = std::str::from_utf8(path).map_err(|_| Status::SubdocPathEinval)?;
    let key = key_of(text);
    let mut rest = &text[key.len()..];
    if let Some(after_dot) = rest.strip_prefix('.') {
        if after_dot.is_empty() {
            return Err(Status::SubdocPathEinval);
        }
        rest = after_dot;
    }
    let inner = parse_path(rest.as_bytes())?;
    if inner.components.len() >= COMPONENTS_MAX {
        return Err(Status::SubdocPathE2big);
    }
    let mut components = Vec::with_capacity(inner.components.len() + 1);
    components.push(PathComponent::Key(key.to_string()));
    components.extend(inner.components);
    Ok(Path { components })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ordinary, system and virtual keys are legal, with or without a path after them.
    #[test]
    fn legal_keys() {
        for path in
            ["mydata", "mydata.foobar", "mydata[0]", "_sync", "_sync.cas", "$document", "$XTOC", "a b", "\u{e9}t\u{e9}"]
        {
            assert!(is_valid_xattr_path(path.as_bytes()), "{path}");
        }
    }

    /// Empty keys, lone `_`/`$`, leading punctuation or control bytes, NULs and bad UTF-8 are illegal.
    #[test]
    fn illegal_keys() {
        for path in ["", ".", ".a", "[0]", "_", "$", "_.a", "!a", "#a", "`a`", "\u{1}a", "a\0b", "-a"] {
            assert!(!is_valid_xattr_path(path.as_bytes()), "{path:?}");
        }
        assert!(!is_valid_xattr_path(b"ab\xff"));
    }

    /// Keys up to 15 bytes are legal; 16 bytes is too long, whatever follows the key.
    #[test]
    fn key_length_limit() {
        let long = "The Three Strikes and You're Out";
        for len in 1..long.len() {
            let key = &long[..len];
            assert_eq!(is_valid_xattr_path(key.as_bytes()), len < 16, "{key}");
            let with_path = format!("{key}.x");
            assert_eq!(is_valid_xattr_path(with_path.as_bytes()), len < 16, "{with_path}");
        }
    }

    /// The key becomes the first component; the rest parses as an ordinary path, backticks included.
    #[test]
    fn xattr_paths_split_into_key_and_path() {
        let parse = |p: &str| parse_xattr_path(p.as_bytes()).map(|p| p.components);
        let key = |k: &str| PathComponent::Key(k.to_string());
        assert_eq!(parse("_sync").unwrap(), [key("_sync")]);
        assert_eq!(parse("_sync.a[1]").unwrap(), [key("_sync"), key("a"), PathComponent::Index(1)]);
        assert_eq!(parse("_sync[0]").unwrap(), [key("_sync"), PathComponent::Index(0)]);
        assert_eq!(parse("_sync.`a.b`").unwrap(), [key("_sync"), key("a.b")]);
        assert_eq!(parse("_sync."), Err(Status::SubdocPathEinval));
        assert_eq!(parse("_sync..a"), Err(Status::SubdocPathEinval));
        let deep = format!("_sync.{}", vec!["a"; 30].join("."));
        assert_eq!(parse(&deep).unwrap().len(), 31);
        let too_deep = format!("_sync.{}", vec!["a"; 31].join("."));
        assert_eq!(parse(&too_deep), Err(Status::SubdocPathE2big));
    }
}
