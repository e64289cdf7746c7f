//! Sub-document paths: `a.b[0].c`, `[2]`, `a[-1]`, backtick-quoted keys, and the empty path for the whole value.
//!
//! The grammar is Couchbase's (N1QL-style): `.` separates keys, `[n]` indexes arrays (`[-1]` is the last element;
//! no other negative index exists), and a backtick-quoted stretch makes `.`, `[` and `]` literal, with a doubled
//! backtick standing for one backtick. Keys stay JSON-escaped: Couchbase matches a path key against the escaped text
//! of a document's keys, so the key `a"b` is written `a\"b` in a path, and a raw `"` or control byte is invalid.

use settee_types::limits::{SUBDOC_DEPTH_MAX, SUBDOC_PATH_BYTES_MAX};
use settee_types::Status;

/// The most components a path may have. The document root occupies the first of the `SUBDOC_DEPTH_MAX` levels
/// Couchbase's parser allows, so a path of 32 components is already too deep (PATH_E2BIG), as on a real server.
pub(crate) const COMPONENTS_MAX: usize = SUBDOC_DEPTH_MAX - 1;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathComponent {
    /// An object key in its JSON-escaped form, backtick quoting already removed.
    Key(String),
    /// An array index; -1 means the last element.
    Index(i64),
}

/// A parsed path; no components means the whole document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path {
    pub components: Vec<PathComponent>,
}

/// Parses a path. SubdocPathEinval for bad syntax (unbalanced brackets or backticks, a bad index, an empty
/// component, an unescaped quote or control byte, invalid UTF-8); SubdocPathE2big for a path longer than
/// `SUBDOC_PATH_BYTES_MAX` bytes or with more than `COMPONENTS_MAX` components.
pub fn parse_path(path: &[u8]) -> Result<Path, Status> {
    if path.len() > SUBDOC_PATH_BYTES_MAX {
        return Err(Status::SubdocPathE2big);
    }
    let text = std::str::from_utf8(path).map_err(|_| Status::SubdocPathEinval)?;
    let bytes = text.as_bytes();
    let mut components = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if bytes.get(pos) == Some(&b'[') {
            let close = text[pos..].find(']').ok_or(Status::SubdocPathEinval)? + pos;
            let index = parse_index(&text[pos + 1..close])?;
            push(&mut components, PathComponent::Index(index))?;
            pos = close + 1;
            match bytes.get(pos) {
                None | Some(b'[') => {}
                Some(b'.') => pos = skip_separator(bytes, pos)?,
                Some(_) => return Err(Status::SubdocPathEinval),
            }
        } else {
            let end = key_end(bytes, pos)?;
            push(&mut components, PathComponent::Key(unquote(&text[pos..end])?))?;
            pos = end;
            if bytes.get(pos) == Some(&b'.') {
                pos = skip_separator(bytes, pos)?;
            }
        }
    }
    Ok(Path { components })
}

fn push(components: &mut Vec<PathComponent>, component: PathComponent) -> Result<(), Status> {
    if components.len() == COMPONENTS_MAX {
        return Err(Status::SubdocPathE2big);
    }
    components.push(component);
    Ok(())
}

/// Steps over the `.` at `pos`; a path may not end with one (that would be an empty last component).
fn skip_separator(bytes: &[u8], pos: usize) -> Result<usize, Status> {
    let next = pos + 1;
    if next == bytes.len() {
        return Err(Status::SubdocPathEinval);
    }
    Ok(next)
}

/// `-1`, or a non-negative decimal index that fits an i64.
fn parse_index(text: &str) -> Result<i64, Status> {
    if text == "-1" {
        return Ok(-1);
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Status::SubdocPathEinval);
    }
    text.parse::<i64>().map_err(|_| Status::SubdocPathEinval)
}

/// Finds where the key starting at `start` ends: at the first `.` or `[` outside backticks, or at the end of the
/// path. Checks the JSON escaping on the way.
fn key_end(bytes: &[u8], start: usize) -> Result<usize, Status> {
    let mut in_backticks = false;
    let mut in_escape = false;
    let mut pos = start;
    while let Some(&byte) = bytes.get(pos) {
        if in_escape {
            // `\u` escapes are refused, as Couchbase refuses them in paths.
            if !matches!(byte, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') {
                return Err(Status::SubdocPathEinval);
            }
            in_escape = false;
        } else if byte == b'\\' {
            in_escape = true;
        } else if byte == b'"' || byte < 0x20 {
            return Err(Status::SubdocPathEinval);
        }
        if byte == b'`' {
            in_backticks = !in_backticks;
        }
        if !in_backticks {
            match byte {
                b']' => return Err(Status::SubdocPathEinval),
                b'[' | b'.' => break,
                _ => {}
            }
        }
        pos += 1;
    }
    if in_backticks || in_escape || pos == start {
        return Err(Status::SubdocPathEinval);
    }
    Ok(pos)
}

/// Removes backtick quoting: a key wholly wrapped in backticks loses them, then single backticks are dropped and
/// doubled ones become one literal backtick.
fn unquote(raw: &str) -> Result<String, Status> {
    let inner = if raw.len() > 1 && raw.starts_with('`') && raw.ends_with('`') { &raw[1..raw.len() - 1] } else { raw };
    let mut key = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '`' {
            key.push(c);
        } else if chars.peek() == Some(&'`') {
            chars.next();
            key.push('`');
        }
    }
    if key.is_empty() {
        return Err(Status::SubdocPathEinval);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use PathComponent::{Index, Key};

    fn key(k: &str) -> PathComponent {
        Key(k.to_string())
    }

    fn parse(p: &str) -> Result<Vec<PathComponent>, Status> {
        parse_path(p.as_bytes()).map(|p| p.components)
    }

    /// Dotted keys and bracketed indexes parse into components in order.
    #[test]
    fn keys_and_indexes_parse_in_order() {
        assert_eq!(parse("a.b[0].c").unwrap(), [key("a"), key("b"), Index(0), key("c")]);
        assert_eq!(parse("foo[0][0][0]").unwrap(), [key("foo"), Index(0), Index(0), Index(0)]);
        assert_eq!(parse("[1][2][3]").unwrap(), [Index(1), Index(2), Index(3)]);
        assert_eq!(parse("a.[0]").unwrap(), [key("a"), Index(0)]);
        assert_eq!(parse("[-1].[-1]").unwrap(), [Index(-1), Index(-1)]);
        assert_eq!(parse("F\u{fa}tbol").unwrap(), [key("F\u{fa}tbol")]);
    }

    /// The empty path addresses the whole document.
    #[test]
    fn empty_path_has_no_components() {
        assert_eq!(parse("").unwrap(), []);
    }

    /// Only -1 is a valid negative index; other bad indexes are invalid paths.
    #[test]
    fn only_minus_one_is_a_valid_negative_index() {
        assert_eq!(parse("a[-1]").unwrap(), [key("a"), Index(-1)]);
        for bad in ["a[-2]", "a[-0]", "a[x]", "a[]", "a[1x]", "a[ 1]", "[99999999999999999999]"] {
            assert_eq!(parse(bad), Err(Status::SubdocPathEinval), "{bad}");
        }
        assert_eq!(parse("a[007]").unwrap(), [key("a"), Index(7)]);
    }

    /// Backticks make path metacharacters literal and a doubled backtick is a literal backtick.
    #[test]
    fn backticks_quote_metacharacters() {
        assert_eq!(parse("`simple`.`escaped`.`path`").unwrap(), [key("simple"), key("escaped"), key("path")]);
        assert_eq!(parse("escaped.`arr.idx`[9]").unwrap(), [key("escaped"), key("arr.idx"), Index(9)]);
        assert_eq!(parse("`BACKTICK``HAPPY`.`CAMPER`").unwrap(), [key("BACKTICK`HAPPY"), key("CAMPER")]);
        assert_eq!(parse("trailing``").unwrap(), [key("trailing`")]);
        assert_eq!(parse("a`.`b").unwrap(), [key("a.b")]);
        assert_eq!(parse("`a[0]`").unwrap(), [key("a[0]")]);
    }

    /// Keys stay JSON-escaped; raw quotes, control bytes, bad escapes and \u escapes are refused.
    #[test]
    fn keys_must_be_valid_escaped_json_text() {
        assert_eq!(parse("\\\"quoted.path").unwrap(), [key("\\\"quoted"), key("path")]);
        for bad in ["\"invalid.path", "a\u{1}b", "a\\x", "a\\u0041", "a\\"] {
            assert_eq!(parse(bad), Err(Status::SubdocPathEinval), "{bad:?}");
        }
    }

    /// Unbalanced brackets or backticks, empty components and junk after an index are invalid.
    #[test]
    fn malformed_paths_are_invalid() {
        for bad in [
            ".",
            "....",
            ".a",
            "a..b",
            "a.",
            "a[0].",
            "a[0",
            "a]",
            "a]b",
            "hello[0]world",
            "[not][a][number]",
            "`a",
            "```",
            "``",
            "a.``",
        ] {
            assert_eq!(parse(bad), Err(Status::SubdocPathEinval), "{bad:?}");
        }
        assert_eq!(parse_path(b"a\xffb"), Err(Status::SubdocPathEinval));
    }

    /// 31 components parse; 32 exceed the depth the root leaves and give PATH_E2BIG, as Couchbase does.
    #[test]
    fn too_many_components_is_e2big() {
        let ok = vec!["a"; COMPONENTS_MAX].join(".");
        assert_eq!(parse(&ok).unwrap().len(), 31);
        let too_many = vec!["a"; COMPONENTS_MAX + 1].join(".");
        assert_eq!(parse(&too_many), Err(Status::SubdocPathE2big));
        assert_eq!(parse(&"[0]".repeat(32)), Err(Status::SubdocPathE2big));
    }

    /// A path longer than the byte limit is PATH_E2BIG even if well formed.
    #[test]
    fn too_long_path_is_e2big() {
        let long = "a".repeat(SUBDOC_PATH_BYTES_MAX + 1);
        assert_eq!(parse(&long), Err(Status::SubdocPathE2big));
        assert!(parse(&"a".repeat(SUBDOC_PATH_BYTES_MAX)).is_ok());
    }

    proptest! {
        /// Parsing never panics, whatever the bytes.
        #[test]
        fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_path(&bytes);
        }

        /// Keys made of plain characters survive a join-then-parse round trip, with backticks protecting dots.
        #[test]
        fn quoted_keys_round_trip(keys in prop::collection::vec("[a-z.\\[\\]]{1,6}", 1..8)) {
            let text: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            let parsed = parse(&text.join(".")).unwrap();
            let expected: Vec<PathComponent> = keys.iter().map(|k| key(k)).collect();
            prop_assert_eq!(parsed, expected);
        }
    }
}
