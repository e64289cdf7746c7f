//! SQL++ text → tokens, following Couchbase Server 7.6's lexer (`n1ql.nex`): case-insensitive keywords,
//! identifiers `[A-Za-z_][A-Za-z0-9_]*` or backticked, strings in `'…'` or `"…"`, numbers (integers that fit in 64
//! bits, floats otherwise), parameters `$name` / `@name`, `$1`, `?`, operators, `--` and `/* */` comments, and
//! optimizer hints (`/*+ … */`, `--+ …`) as tokens of their own.
//!
//! Positions are Couchbase's: 0-based lines (a line ends at `\n`) and 0-based columns counted in characters; error
//! messages add one to both. A malformed token (an unterminated string, `1abc`, a bad escape) becomes an `Error`
//! token that ends the list: the parser reports it only if it gets that far, as Couchbase does.
//!
//! Hot path: one pass, no allocation per character; identifier and string values borrow from the text unless they
//! hold escapes.

mod escape;
mod keywords;

use std::borrow::Cow;

pub(crate) use keywords::{is_token_name, Kw};

/// Punctuation and operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Punct {
    Dot,
    Plus,
    Minus,
    Star,
    Div,
    Mod,
    /// `^`, which n1ql.y knows as POW; settee does not support it.
    Pow,
    /// `==`
    DEq,
    Eq,
    /// `!=` or `<>`
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `||`
    Concat,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    Colon,
    LBracket,
    RBracket,
    /// `]i`, a case-insensitive subscript in Couchbase; settee does not support it.
    RBracketIcase,
    Semi,
    /// `!` on its own (NOT_A_TOKEN).
    Bang,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TokenKind<'a> {
    /// A bare or backticked identifier, escapes resolved.
    Ident(Cow<'a, str>),
    Keyword(Kw),
    /// A string literal, escapes resolved.
    Str(Cow<'a, str>),
    Int(i64),
    Num(f64),
    /// `$name` or `@name`, without the sigil.
    NamedParam(&'a str),
    /// `$n` / `@n`; `None` when n does not fit in a `usize`.
    PositionalParam(Option<usize>),
    /// `?`
    NextParam,
    /// `??`
    RandomElement,
    Punct(Punct),
    /// `/*+ … */` or `--+ …`.
    OptimHints,
    /// A character no rule matches.
    Unknown,
    /// A malformed token, with the scanner's message (`invalid quoted string - missing closing quote`).
    Error(String),
    Eof,
}

/// One token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token<'a> {
    pub(crate) kind: TokenKind<'a>,
    /// The token as written (empty at the end of input).
    pub(crate) text: &'a str,
    /// Byte offset of the token in the text.
    pub(crate) offset: usize,
    /// 0-based line.
    pub(crate) line: u32,
    /// 0-based column, in characters.
    pub(crate) column: u32,
}

/// Whether `name` can be written bare where an identifier may stand (a function name, for instance): it has the
/// shape of an identifier and is not a reserved word, other than those n1ql.y lets name things (and REPLACE, which
/// names a function).
pub(crate) fn is_plain_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'));
    first_ok
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && matches!(
            keywords::lookup(name),
            None | Some(Kw::Default | Kw::User | Kw::Sequence | Kw::Vector | Kw::Replace)
        )
}

/// Every token of `text`, ending with `Eof`; after an `Error` token nothing more is read.
pub(crate) fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut lexer = Lexer { text, bytes: text.as_bytes(), pos: 0, line: 0, column: 0 };
    let mut tokens = Vec::with_capacity(text.len() / 4 + 2);
    loop {
        let token = lexer.next_token();
        let stop = matches!(token.kind, TokenKind::Eof | TokenKind::Error(_));
        tokens.push(token);
        if stop {
            break;
        }
    }
    if !matches!(tokens.last().map(|t| &t.kind), Some(TokenKind::Eof)) {
        tokens.push(Token {
            kind: TokenKind::Eof,
            text: "",
            offset: text.len(),
            line: lexer.line,
            column: lexer.column,
        });
    }
    tokens
}

struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    column: u32,
}

impl<'a> Lexer<'a> {
    fn next_token(&mut self) -> Token<'a> {
        self.skip_blanks();
        let start = self.pos;
        let (line, column) = (self.line, self.column);
        let (kind, len) = match self.bytes.get(start) {
            None => (TokenKind::Eof, 0),
            Some(&b) => self.scan(b, start),
        };
        let end = start + len;
        self.advance_to(end);
        Token { kind, text: &self.text[start..end], offset: start, line, column }
    }

    /// Skips whitespace (`[ \t\n\r\f]`) and comments; an unterminated `/*` is not a comment (it lexes as `/`, `*`).
    fn skip_blanks(&mut self) {
        loop {
            let rest = &self.bytes[self.pos..];
            let skip = match rest {
                [b' ' | b'\t' | b'\n' | b'\r' | 0x0c, ..] => {
                    rest.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c)).count()
                }
                [b'-', b'-', b'+', ..] | [b'/', b'*', b'+', ..] => 0,
                [b'-', b'-', ..] => rest.iter().take_while(|&&b| b != b'\n' && b != b'\r').count(),
                [b'/', b'*', ..] => block_comment_len(rest).unwrap_or(0),
                _ => 0,
            };
            if skip == 0 {
                return;
            }
            self.advance_to(self.pos + skip);
        }
    }

    /// Moves to byte `end`, counting lines and characters on the way.
    fn advance_to(&mut self, end: usize) {
        for &b in &self.bytes[self.pos..end] {
            if b == b'\n' {
                self.line += 1;
                self.column = 0;
            } else if b & 0xc0 != 0x80 {
                // Count characters, not bytes: skip UTF-8 continuation bytes.
                self.column += 1;
            }
        }
        self.pos = end;
    }

    /// The token starting with byte `b` at `start`, and its length in bytes.
    fn scan(&self, b: u8, start: usize) -> (TokenKind<'a>, usize) {
        let rest = &self.bytes[start..];
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.word(start),
            b'0'..=b'9' => self.number(start),
            b'"' | b'\'' | b'`' => self.quoted(start, b),
            b'$' | b'@' => param(&self.text[start..]),
            b'?' if rest.get(1) == Some(&b'?') => (TokenKind::RandomElement, 2),
            b'?' => (TokenKind::NextParam, 1),
            b'/' if rest.starts_with(b"/*+") => match block_comment_len(rest) {
                Some(len) => (TokenKind::OptimHints, len),
                None => (TokenKind::Punct(Punct::Div), 1),
            },
            b'-' if rest.starts_with(b"--+") => {
                (TokenKind::OptimHints, rest.iter().take_while(|&&b| b != b'\n' && b != b'\r').count())
            }
            _ => match punct(rest) {
                Some((p, len)) => (TokenKind::Punct(p), len),
                None => {
                    let len = self.text[start..].chars().next().map_or(1, char::len_utf8);
                    (TokenKind::Unknown, len)
                }
            },
        }
    }

    fn word(&self, start: usize) -> (TokenKind<'a>, usize) {
        let len = self.bytes[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
        let word = &self.text[start..start + len];
        let kind = match keywords::lookup(word) {
            Some(kw) => TokenKind::Keyword(kw),
            None => TokenKind::Ident(Cow::Borrowed(word)),
        };
        (kind, len)
    }

    /// Numbers as n1ql.nex matches them: the longest of a decimal, an exponent form, an integer without leading
    /// zeros, and digits run into letters (`1abc`, an error); on a tie the earlier rule wins.
    fn number(&self, start: usize) -> (TokenKind<'a>, usize) {
        let s = &self.bytes[start..];
        let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let int_len = if s[0] == b'0' { 1 } else { digits };
        let mut decimal = 0;
        let mut exponent = 0;
        if int_len == digits {
            let frac = match s.get(int_len) {
                Some(b'.') => s[int_len + 1..].iter().take_while(|b| b.is_ascii_digit()).count(),
                _ => 0,
            };
            if frac > 0 {
                let mantissa = int_len + 1 + frac;
                decimal = mantissa + exponent_len(&s[mantissa..]);
            }
            exponent = match exponent_len(&s[int_len..]) {
                0 => 0,
                e => int_len + e,
            };
        }
        let bad = match s.get(digits) {
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
                digits + s[digits..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count()
            }
            _ => 0,
        };
        let longest = decimal.max(exponent).max(int_len).max(bad);
        let text = &self.text[start..start + longest];
        let kind = if longest == bad && longest > decimal.max(exponent).max(int_len) {
            None
        } else if longest == int_len && longest > decimal.max(exponent) {
            match text.parse::<i64>() {
                Ok(i) => Some(TokenKind::Int(i)),
                Err(_) => float(text),
            }
        } else {
            float(text)
        };
        (kind.unwrap_or_else(|| TokenKind::Error("invalid number".to_string())), longest)
    }

    /// A string (`'…'`, `"…"`) or backticked identifier. Like n1ql.nex's rules, an unterminated one runs to the end
    /// of the text and then fails with "missing closing quote"; a backticked name followed at once by `i` is
    /// Couchbase's case-insensitive identifier, which settee does not support.
    fn quoted(&self, start: usize, quote: u8) -> (TokenKind<'a>, usize) {
        let s = &self.bytes[start..];
        let mut i = 1;
        while i < s.len() {
            match s[i] {
                b'\\' if i + 1 < s.len() => i += 2,
                b'\\' => break,
                c if c == quote && quote != b'"' && s.get(i + 1) == Some(&quote) => i += 2,
                c if c == quote => {
                    i += 1;
                    if quote == b'`' && s.get(i) == Some(&b'i') {
                        let msg = "case-insensitive identifiers are not supported".to_string();
                        return (TokenKind::Error(msg), i + 1);
                    }
                    return (quoted_kind(&self.text[start..start + i], quote), i);
                }
                _ => i += 1,
            }
        }
        (quoted_kind(&self.text[start..start + i], quote), i)
    }
}

fn quoted_kind(token: &str, quote: u8) -> TokenKind<'_> {
    match (escape::unescape(token), quote) {
        (Ok(value), b'`') => TokenKind::Ident(value),
        (Ok(value), _) => TokenKind::Str(value),
        (Err(e), b'`') => TokenKind::Error(format!("invalid escaped identifier - {}", e.text())),
        (Err(e), _) => TokenKind::Error(format!("invalid quoted string - {}", e.text())),
    }
}

/// A float literal; one beyond the range of a double (`1e999`) is refused, since no text could print it back.
fn float(text: &str) -> Option<TokenKind<'_>> {
    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(TokenKind::Num)
}

/// The length of `[eE][+-]?[0-9]+` at the start of `s`, or 0.
fn exponent_len(s: &[u8]) -> usize {
    if !matches!(s.first(), Some(b'e' | b'E')) {
        return 0;
    }
    let sign = usize::from(matches!(s.get(1), Some(b'+' | b'-')));
    match s[1 + sign..].iter().take_while(|b| b.is_ascii_digit()).count() {
        0 => 0,
        digits => 1 + sign + digits,
    }
}

/// The length of a `/* … */` comment at the start of `s`, if it is closed.
fn block_comment_len(s: &[u8]) -> Option<usize> {
    s.get(2..)?.windows(2).position(|w| w == b"*/").map(|p| p + 4)
}

/// `$name`, `@name`, `$n`; a lone `$` or `@` is an unknown character.
fn param(s: &str) -> (TokenKind<'_>, usize) {
    let b = s.as_bytes();
    match b.get(1) {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
            let len = 1 + b[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
            (TokenKind::NamedParam(&s[1..len]), len)
        }
        Some(b'1'..=b'9') => {
            let len = 1 + b[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            (TokenKind::PositionalParam(s[1..len].parse().ok()), len)
        }
        _ => (TokenKind::Unknown, 1),
    }
}

fn punct(s: &[u8]) -> Option<(Punct, usize)> {
    let two = match s {
        [b'=', b'=', ..] => Some(Punct::DEq),
        [b'!', b'=', ..] | [b'<', b'>', ..] => Some(Punct::Ne),
        [b'<', b'=', ..] => Some(Punct::Le),
        [b'>', b'=', ..] => Some(Punct::Ge),
        [b'|', b'|', ..] => Some(Punct::Concat),
        [b']', b'i', ..] => Some(Punct::RBracketIcase),
        _ => None,
    };
    if let Some(p) = two {
        return Some((p, 2));
    }
    let one = match s.first()? {
        b'.' => Punct::Dot,
        b'+' => Punct::Plus,
        b'-' => Punct::Minus,
        b'*' => Punct::Star,
        b'/' => Punct::Div,
        b'%' => Punct::Mod,
        b'^' => Punct::Pow,
        b'=' => Punct::Eq,
        b'<' => Punct::Lt,
        b'>' => Punct::Gt,
        b'(' => Punct::LParen,
        b')' => Punct::RParen,
        b'{' => Punct::LBrace,
        b'}' => Punct::RBrace,
        b',' => Punct::Comma,
        b':' => Punct::Colon,
        b'[' => Punct::LBracket,
        b']' => Punct::RBracket,
        b';' => Punct::Semi,
        b'!' => Punct::Bang,
        _ => return None,
    };
    Some((one, 1))
}

#[cfg(test)]
mod tests;
