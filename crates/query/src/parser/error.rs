//! Syntax errors in Couchbase's words (`n1ql.go`: `Error`, `ErrorContext`, `getContextFor`, `FatalError`).
//!
//! A grammar error reads `syntax error - line L, column C, near '<context>', at: <token>`, with ` (reserved word)`
//! when the token's text is one of the grammar's token names, or `syntax error - at end of input`; a malformed
//! token puts the scanner's message after `syntax error: `. The context is the text of the error's line before the
//! token, at most 20 characters, from its first non-blank character, with `...` when it does not start the line.
//! Errors the grammar's actions raise read `<message> (near line L, column C)` (before the final `.`, if any).

use crate::lexer::{is_token_name, Token, TokenKind};
use crate::QueryError;

/// The most characters of context `getContextFor` shows.
const CONTEXT_CHARS_MAX: usize = 20;

/// A syntax error at `token` of `text`.
pub(crate) fn at_token(text: &str, token: &Token<'_>) -> QueryError {
    let mut msg = String::from("syntax error");
    if let TokenKind::Error(scanner) = &token.kind {
        msg.push_str(": ");
        msg.push_str(scanner);
    }
    msg.push_str(&error_context(text, token));
    if token.kind != TokenKind::Eof && is_token_name(&token.text.to_ascii_uppercase()) {
        msg.push_str(" (reserved word)");
    }
    QueryError::Syntax(msg)
}

/// Where `token` is, as `ErrorContext` writes it: ` - line L, column C, near '...', at: <token>`, or
/// ` - at end of input`.
pub(crate) fn error_context(text: &str, token: &Token<'_>) -> String {
    if token.kind == TokenKind::Eof {
        return " - at end of input".to_string();
    }
    let (line, column) = (token.line as usize + 1, token.column as usize + 1);
    match context(text, token.line as usize, token.column as usize) {
        near if near.is_empty() => format!(" - line {line}, column {column}, at: {}", token.text),
        near => format!(" - line {line}, column {column}, near '{near}', at: {}", token.text),
    }
}

/// An error raised by a grammar action, naming the 1-based line and column it concerns.
pub(crate) fn with_position(message: &str, line: u32, column: u32) -> QueryError {
    let near = format!(" (near line {line}, column {column})");
    let text = match message.strip_suffix('.') {
        Some(head) => format!("{head}{near}."),
        None => format!("{message}{near}"),
    };
    QueryError::Syntax(text)
}

/// The text before (0-based) `column` of `line`: up to the last 20 characters, starting at the first non-blank one
/// among them, with `...` in front when that is not the start of the line.
fn context(text: &str, line: usize, column: usize) -> String {
    if text.is_empty() {
        return String::new();
    }
    let line_start = if line == 0 {
        0
    } else {
        match text.bytes().enumerate().filter(|(_, b)| *b == b'\n').nth(line - 1) {
            Some((i, _)) => i + 1,
            None => text.len(),
        }
    };
    // The byte offset of each of the last 20 characters before the column, `None` for whitespace.
    let mut window: [Option<usize>; CONTEXT_CHARS_MAX] = [None; CONTEXT_CHARS_MAX];
    let mut count = 0;
    let mut end = line_start;
    for (offset, ch) in text[line_start..].char_indices().take(column) {
        window[count % CONTEXT_CHARS_MAX] = if ch.is_whitespace() { None } else { Some(line_start + offset) };
        count += 1;
        end = line_start + offset + ch.len_utf8();
    }
    if end == 0 {
        return String::new();
    }
    let first = count.saturating_sub(CONTEXT_CHARS_MAX);
    for i in first..count {
        if let Some(start) = window[i % CONTEXT_CHARS_MAX] {
            return if start == line_start {
                text[start..end].to_string()
            } else {
                format!("...{}", &text[start..end])
            };
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_the_last_twenty_characters_before_the_token() {
        // Proves the context keeps a short line whole (with its trailing blank), trims long ones to 20 characters
        // behind `...`, skips leading blanks, and looks only at the error's line.
        assert_eq!(context("SLECT name", 0, 6), "SLECT ");
        assert_eq!(context("SELECT a, b, c, d FROM x WHERE", 0, 25), "...T a, b, c, d FROM x ");
        assert_eq!(context("SELECT 1\n  FROM", 1, 2), "");
        assert_eq!(context("SELECT 1\nFROM x y", 1, 7), "FROM x ");
        assert_eq!(context("ab", 0, 0), "");
    }

    #[test]
    fn positioned_messages_put_the_position_before_the_final_period() {
        // Proves FatalError's layout: the position goes before a trailing period, or at the end without one.
        let e = with_position("Subquery in FROM clause must have an alias.", 1, 15);
        assert_eq!(e.to_string(), "Subquery in FROM clause must have an alias (near line 1, column 15).");
        let e = with_position("Duplicate or Invalid index key attribute", 2, 3);
        assert_eq!(e.to_string(), "Duplicate or Invalid index key attribute (near line 2, column 3)");
    }
}
