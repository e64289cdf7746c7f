//! JSON syntax checking and span finding over raw text.
//!
//! Sub-document operations splice JSON text rather than parse documents into a tree of values: untouched parts of
//! a document keep their exact bytes (numbers of any size or precision, escapes, key order), keys are compared in
//! their escaped form as Couchbase compares them, and a lookup returns the stored text of a value. The checker is
//! iterative, so no document, however deeply nested, can exhaust the stack.
//!
//! Levels are counted the way Couchbase's parser counts them: a top-level value is at level 1 and every container
//! puts its children one level deeper. `1` and `[]` use 1 level, `[1]` and `{"a":{}}` use 2.

use std::ops::Range;

/// Checks that `text` is exactly one JSON value, optionally surrounded by whitespace; returns the levels it uses.
pub(crate) fn check_value(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let start = skip_ws(bytes, 0);
    let (end, levels) = skip_value(bytes, start)?;
    (skip_ws(bytes, end) == bytes.len()).then_some(levels)
}

/// Checks that `text` is one or more JSON values separated by commas, which is how array pushes accept several
/// values at once (the text must form a valid array when wrapped in brackets). Returns the span of each value and
/// the most levels any one of them uses.
pub(crate) fn check_list(text: &str) -> Option<(Vec<Range<usize>>, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut deepest = 0;
    let mut pos = skip_ws(bytes, 0);
    loop {
        let (end, levels) = skip_value(bytes, pos)?;
        spans.push(pos..end);
        deepest = deepest.max(levels);
        pos = skip_ws(bytes, end);
        match bytes.get(pos) {
            None => return Some((spans, deepest)),
            Some(b',') => pos = skip_ws(bytes, pos + 1),
            Some(_) => return None,
        }
    }
}

/// The members of a JSON object given as text starting with `{`: for each, the span of the key between its quotes
/// (still escaped) and the span of its value. None if the text is not a well-formed object.
pub(crate) fn object_members(text: &str) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let mut members = Vec::new();
    let mut pos = skip_ws(bytes, 1);
    if bytes.get(pos) == Some(&b'}') {
        return Some(members);
    }
    loop {
        if bytes.get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(bytes, pos)?;
        let key = pos + 1..key_end - 1;
        pos = skip_ws(bytes, key_end);
        if bytes.get(pos) != Some(&b':') {
            return None;
        }
        pos = skip_ws(bytes, pos + 1);
        let (value_end, _) = skip_value(bytes, pos)?;
        members.push((key, pos..value_end));
        pos = skip_ws(bytes, value_end);
        match bytes.get(pos)? {
            b',' => pos = skip_ws(bytes, pos + 1),
            b'}' => return Some(members),
            _ => return None,
        }
    }
}

/// The spans of the elements of a JSON array given as text starting with `[`. None if it is not a well-formed array.
pub(crate) fn array_elements(text: &str) -> Option<Vec<Range<usize>>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let mut elements = Vec::new();
    let mut pos = skip_ws(bytes, 1);
    if bytes.get(pos) == Some(&b']') {
        return Some(elements);
    }
    loop {
        let (end, _) = skip_value(bytes, pos)?;
        elements.push(pos..end);
        pos = skip_ws(bytes, end);
        match bytes.get(pos)? {
            b',' => pos = skip_ws(bytes, pos + 1),
            b']' => return Some(elements),
            _ => return None,
        }
    }
}

/// Finds the end of the JSON value starting exactly at `start` and the levels it uses. None if the bytes there are
/// not a complete, valid value. Containers are tracked on a heap stack, never by recursion.
pub(crate) fn skip_value(bytes: &[u8], start: usize) -> Option<(usize, usize)> {
    // The closing byte expected for each container that is open.
    let mut open: Vec<u8> = Vec::new();
    let mut deepest = 0;
    let mut pos = start;
    loop {
        // A value starts at `pos`; it sits one level below the containers around it.
        deepest = deepest.max(open.len() + 1);
        match *bytes.get(pos)? {
            b'{' => {
                open.push(b'}');
                pos = skip_ws(bytes, pos + 1);
                if bytes.get(pos) == Some(&b'}') {
                    open.pop();
                    pos += 1;
                } else {
                    pos = skip_member_key(bytes, pos)?;
                    continue;
                }
            }
            b'[' => {
                open.push(b']');
                pos = skip_ws(bytes, pos + 1);
                if bytes.get(pos) == Some(&b']') {
                    open.pop();
                    pos += 1;
                } else {
                    continue;
                }
            }
            b'"' => pos = skip_string(bytes, pos)?,
            b't' => pos = skip_literal(bytes, pos, b"true")?,
            b'f' => pos = skip_literal(bytes, pos, b"false")?,
            b'n' => pos = skip_literal(bytes, pos, b"null")?,
            b'-' | b'0'..=b'9' => pos = skip_number(bytes, pos)?,
            _ => return None,
        }
        // A value ended at `pos`: close finished containers, or step to the next member or element.
        loop {
            let Some(&close) = open.last() else {
                return Some((pos, deepest));
            };
            pos = skip_ws(bytes, pos);
            match *bytes.get(pos)? {
                b',' => {
                    pos = skip_ws(bytes, pos + 1);
                    if close == b'}' {
                        pos = skip_member_key(bytes, pos)?;
                    }
                    break;
                }
                byte if byte == close => {
                    open.pop();
                    pos += 1;
                }
                _ => return None,
            }
        }
    }
}

/// Skips `"key" :` and the whitespace after it; returns where the member's value starts.
fn skip_member_key(bytes: &[u8], pos: usize) -> Option<usize> {
    if bytes.get(pos) != Some(&b'"') {
        return None;
    }
    let pos = skip_ws(bytes, skip_string(bytes, pos)?);
    if bytes.get(pos) != Some(&b':') {
        return None;
    }
    Some(skip_ws(bytes, pos + 1))
}

/// Skips a string starting at its opening quote; returns the position after the closing quote. Validity of the
/// UTF-8 itself is guaranteed by callers working on `str`.
pub(crate) fn skip_string(bytes: &[u8], pos: usize) -> Option<usize> {
    if bytes.get(pos) != Some(&b'"') {
        return None;
    }
    let mut i = pos + 1;
    loop {
        match *bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *bytes.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = bytes.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            byte if byte < 0x20 => return None,
            _ => i += 1,
        }
    }
}

fn skip_literal(bytes: &[u8], pos: usize, literal: &[u8]) -> Option<usize> {
    let end = pos.checked_add(literal.len())?;
    (bytes.get(pos..end)? == literal).then_some(end)
}

/// Skips `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn skip_number(bytes: &[u8], mut i: usize) -> Option<usize> {
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match *bytes.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = skip_digits(bytes, i),
        _ => return None,
    }
    if bytes.get(i) == Some(&b'.') {
        let end = skip_digits(bytes, i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = skip_digits(bytes, i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

fn skip_digits(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Skips JSON whitespace (space, tab, line feed, carriage return) and nothing else.
pub(crate) fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Removes JSON whitespace from both ends of `text`.
pub(crate) fn trim_ws(text: &str) -> &str {
    text.trim_matches([' ', '\t', '\n', '\r'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Well-formed values of every kind are accepted, with surrounding whitespace.
    #[test]
    fn check_value_accepts_every_kind_of_value() {
        for text in [
            "0",
            "-0",
            "1.5",
            "-12e+3",
            "1E5",
            "123456789012345678901234567890",
            "true",
            "false",
            "null",
            "\"\"",
            "\"a\\\"b\\u00e9\\n\"",
            "[]",
            "{}",
            " [1, {\"a\": [null]} ] ",
            "{\"a\":1,\"b\":[true,false]}",
        ] {
            assert!(check_value(text).is_some(), "{text}");
        }
    }

    /// Malformed values are rejected: bad numbers, literals, escapes, separators and trailing garbage.
    #[test]
    fn check_value_rejects_malformed_text() {
        for text in [
            "",
            " ",
            "01",
            "1.",
            ".5",
            "2.0e",
            "2.0e+",
            "-",
            "+1",
            "nul",
            "truex",
            "tru",
            "\"abc",
            "\"\\x\"",
            "\"\\u12g4\"",
            "\"a\u{1}\"",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{a:1}",
            "[1 2]",
            "1 2",
            "{} x",
            "[",
            "]",
            "{",
            "}",
            "INVALID",
            "1,2",
        ] {
            assert!(check_value(text).is_none(), "{text:?}");
        }
    }

    /// Levels follow Couchbase's counting: the top-level value is level 1 and each container adds one.
    #[test]
    fn levels_count_containers_like_couchbase() {
        assert_eq!(check_value("1"), Some(1));
        assert_eq!(check_value("[]"), Some(1));
        assert_eq!(check_value("[1]"), Some(2));
        assert_eq!(check_value("{\"a\":{}}"), Some(2));
        assert_eq!(check_value("{\"a\":{\"b\":[1]},\"c\":2}"), Some(4));
    }

    /// A pathologically deep document is measured, not rejected, and does not overflow the stack.
    #[test]
    fn deep_nesting_is_measured_without_recursion() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check_value(&text), Some(100_000));
    }

    /// Comma-separated lists give each value's span, and reject empty items.
    #[test]
    fn check_list_splits_comma_separated_values() {
        let text = " 1, \"a,b\" ,[2,3]";
        let (spans, levels) = check_list(text).unwrap();
        let items: Vec<&str> = spans.into_iter().map(|s| &text[s]).collect();
        assert_eq!(items, ["1", "\"a,b\"", "[2,3]"]);
        assert_eq!(levels, 2);
        for bad in ["", "1,", ",1", "1,,2", "1 2"] {
            assert!(check_list(bad).is_none(), "{bad:?}");
        }
    }

    /// Object members keep their keys escaped and their values verbatim.
    #[test]
    fn object_members_keep_raw_keys_and_values() {
        let text = "{ \"a\\\"b\" : [1, 2] , \"c\":{} }";
        let members = object_members(text).unwrap();
        let got: Vec<(&str, &str)> = members.into_iter().map(|(k, v)| (&text[k], &text[v])).collect();
        assert_eq!(got, [("a\\\"b", "[1, 2]"), ("c", "{}")]);
        assert_eq!(object_members("{ }").unwrap().len(), 0);
        assert!(object_members("[1]").is_none());
    }

    /// Array elements are found with nested containers skipped as a whole.
    #[test]
    fn array_elements_skip_nested_containers() {
        let text = "[ {\"a\":[1,2]} , \"]\" ,3 ]";
        let got: Vec<&str> = array_elements(text).unwrap().into_iter().map(|s| &text[s]).collect();
        assert_eq!(got, ["{\"a\":[1,2]}", "\"]\"", "3"]);
        assert_eq!(array_elements("[]").unwrap().len(), 0);
        assert!(array_elements("{}").is_none());
    }

    proptest! {
        /// The checker never panics, whatever the input.
        #[test]
        fn check_value_never_panics(text in ".{0,64}") {
            let _ = check_value(&text);
            let _ = check_list(&text);
        }

        /// Anything serde_json accepts as a value, the checker accepts too.
        #[test]
        fn check_value_agrees_with_serde_on_generated_json(v in json_value()) {
            let text = v.to_string();
            prop_assert!(check_value(&text).is_some(), "{}", text);
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
            ".{0,8}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                prop::collection::vec((".{0,4}", inner), 0..4)
                    .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
