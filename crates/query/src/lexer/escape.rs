//! The body of a quoted token (string or backticked identifier) with its escapes resolved, as Couchbase's
//! `ProcessEscapeSequences` does: the JSON escapes plus `\'` and `` \` ``, `\uXXXX` with surrogate pairs, and a
//! doubled quote inside `'…'` and `` `…` `` standing for one quote character.

use std::borrow::Cow;

/// Why a quoted token is invalid; the lexer prefixes it with what kind of token it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EscapeError {
    InvalidString,
    MissingClosingQuote,
    InvalidEscapeSequence,
    UnescapedEmbeddedQuote,
}

impl EscapeError {
    pub(crate) fn text(self) -> &'static str {
        match self {
            EscapeError::InvalidString => "invalid string",
            EscapeError::MissingClosingQuote => "missing closing quote",
            EscapeError::InvalidEscapeSequence => "invalid escape sequence",
            EscapeError::UnescapedEmbeddedQuote => "unescaped embedded quote",
        }
    }
}

/// The content of `token`, which starts with its quote character and, when well formed, ends with it. Borrows
/// when there is nothing to unescape.
pub(crate) fn unescape(token: &str) -> Result<Cow<'_, str>, EscapeError> {
    let s = token.as_bytes();
    if s.len() < 2 {
        return Err(EscapeError::InvalidString);
    }
    let quote = s[0];
    let last = s.len() - 1;
    if s[last] != quote {
        return Err(EscapeError::MissingClosingQuote);
    }
    let body = &token[1..last];
    if !body.bytes().any(|b| b == b'\\' || b == quote) {
        return Ok(Cow::Borrowed(body));
    }
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let mut r = 1;
    while r < last {
        let c = s[r];
        r += 1;
        if c == b'\\' {
            if r == last {
                return Err(EscapeError::MissingClosingQuote);
            }
            let e = s[r];
            r += 1;
            match e {
                b'b' => out.push(0x08),
                b'f' => out.push(0x0c),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'/' | b'\\' | b'"' | b'\'' | b'`' => out.push(e),
                b'u' => {
                    let (ch, used) = unicode_escape(&s[r..last])?;
                    r += used;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                _ => return Err(EscapeError::InvalidEscapeSequence),
            }
        } else {
            out.push(c);
            if c == quote {
                // Only `''` and ```` `` ```` are escapes; a lone quote cannot reach here through the lexer, but a
                // token handed in directly is checked all the same.
                if quote == b'"' || r >= last || s[r] != quote {
                    return Err(EscapeError::UnescapedEmbeddedQuote);
                }
                r += 1;
            }
        }
    }
    // Only ASCII bytes were removed or replaced and only whole characters added, so the bytes stay UTF-8.
    String::from_utf8(out).map(Cow::Owned).map_err(|_| EscapeError::InvalidString)
}

/// The character of a `\u` escape whose four hex digits start `rest`, and how many bytes of `rest` it used: a high
/// surrogate followed by `\uXXXX` is joined with it; a surrogate that cannot be joined becomes U+FFFD.
fn unicode_escape(rest: &[u8]) -> Result<(char, usize), EscapeError> {
    let first = hex4(rest)?;
    if !(0xd800..0xe000).contains(&first) {
        // Not a surrogate, so a valid scalar value.
        return Ok((char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER), 4));
    }
    if rest.len() < 10 || rest[4] != b'\\' || rest[5] != b'u' {
        return Ok((char::REPLACEMENT_CHARACTER, 4));
    }
    let second = hex4(&rest[6..])?;
    let joined = if (0xd800..0xdc00).contains(&first) && (0xdc00..0xe000).contains(&second) {
        char::from_u32(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00))
    } else {
        None
    };
    Ok((joined.unwrap_or(char::REPLACEMENT_CHARACTER), 10))
}

fn hex4(s: &[u8]) -> Result<u32, EscapeError> {
    let digits = s.get(..4).ok_or(EscapeError::InvalidEscapeSequence)?;
    digits.iter().try_fold(0u32, |acc, &b| {
        let d = (b as char).to_digit(16).ok_or(EscapeError::InvalidEscapeSequence)?;
        Ok(acc << 4 | d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_bodies_are_borrowed_and_escapes_resolved() {
        // Proves the fast path borrows and that every JSON escape, `\'`, and doubled quotes are resolved.
        assert!(matches!(unescape("'abc'"), Ok(Cow::Borrowed("abc"))));
        assert_eq!(unescape(r#""a\"b\\c\/d\n\t\b\f\r""#).unwrap(), "a\"b\\c/d\n\t\u{8}\u{c}\r");
        assert_eq!(unescape("'it''s'").unwrap(), "it's");
        assert_eq!(unescape(r"'it\'s'").unwrap(), "it's");
        assert_eq!(unescape("`a``b`").unwrap(), "a`b");
        assert_eq!(unescape(r#""\u00e9\u0041""#).unwrap(), "éA");
    }

    #[test]
    fn surrogate_pairs_join_and_lone_surrogates_become_replacement_characters() {
        // Proves `\uD83D\uDE00` decodes to one character and an unpaired surrogate to U+FFFD, as Go's utf16 does.
        assert_eq!(unescape(r#""\ud83d\ude00""#).unwrap(), "😀");
        assert_eq!(unescape(r#""\ud83dx""#).unwrap(), "\u{fffd}x");
        assert_eq!(unescape(r#""\ude00\u0041""#).unwrap(), "\u{fffd}");
    }

    #[test]
    fn malformed_tokens_name_couchbases_causes() {
        // Proves each failure maps to the cause text Couchbase prints after "invalid quoted string - ".
        assert_eq!(unescape("'abc"), Err(EscapeError::MissingClosingQuote));
        assert_eq!(unescape("'"), Err(EscapeError::InvalidString));
        assert_eq!(unescape(r#""\q""#), Err(EscapeError::InvalidEscapeSequence));
        assert_eq!(unescape(r#""\u12""#), Err(EscapeError::InvalidEscapeSequence));
        assert_eq!(unescape(r"'abc\'"), Err(EscapeError::MissingClosingQuote));
        assert_eq!(unescape("'abc''"), Err(EscapeError::UnescapedEmbeddedQuote));
    }
}
