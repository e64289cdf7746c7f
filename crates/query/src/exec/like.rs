//! `LIKE`: `%` matches any run of characters, `_` one character, and the escape character (backslash unless
//! `ESCAPE` names another) makes the next one literal.

use crate::value::Value;
use crate::QueryError;

/// `v LIKE pattern [ESCAPE esc]`: MISSING if either is MISSING, NULL if either is not a string.
pub(crate) fn like(v: &Value, pattern: &Value, escape: Option<&Value>) -> Result<Value, QueryError> {
    if v.is_missing() || pattern.is_missing() {
        return Ok(Value::Missing);
    }
    let (Some(s), Some(p)) = (v.as_str(), pattern.as_str()) else { return Ok(Value::Null) };
    let esc = match escape {
        None => '\\',
        Some(Value::String(e)) => {
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => c,
                _ => return Err(QueryError::eval("ESCAPE must be a single character")),
            }
        }
        Some(Value::Missing) => return Ok(Value::Missing),
        Some(_) => return Ok(Value::Null),
    };
    Ok(Value::Bool(matches(s, &compile(p, esc))))
}

#[derive(Debug, PartialEq)]
enum Token {
    Char(char),
    One,
    Any,
}

fn compile(p: &str, esc: char) -> Vec<Token> {
    let mut out = Vec::with_capacity(p.len());
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            c if c == esc => Token::Char(chars.next().unwrap_or(esc)),
            '%' => {
                if out.last() == Some(&Token::Any) {
                    continue;
                }
                Token::Any
            }
            '_' => Token::One,
            c => Token::Char(c),
        });
    }
    out
}

/// Greedy matching with one backtrack point per `%`: linear in practice, O(n·m) at worst, never exponential.
fn matches(s: &str, pattern: &[Token]) -> bool {
    let text: Vec<char> = s.chars().collect();
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Token::Char(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            Some(Token::One) => {
                t += 1;
                p += 1;
            }
            Some(Token::Any) => {
                star = Some((p, t));
                p += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|tok| *tok == Token::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str, p: &str) -> bool {
        like(&Value::string(s), &Value::string(p), None).unwrap().truth()
    }

    #[test]
    fn wildcards_and_escapes_match_as_sql_does() {
        // Proves %, _, escapes and anchoring at both ends.
        assert!(l("batch-1", "batch%"));
        assert!(l("abc", "a_c") && !l("abbc", "a_c"));
        assert!(l("50%", "50\\%") && !l("500", "50\\%"));
        assert!(l("", "%") && !l("a", ""));
        assert!(l("xaybzc", "%a%b%c") && !l("xaybz", "%a%b%c"));
        assert!(l("ünïcode", "_n_code"));
    }

    #[test]
    fn unknown_and_wrong_typed_operands_follow_missing_and_null_rules() {
        // Proves MISSING propagates and a non-string gives NULL.
        assert!(like(&Value::Missing, &Value::string("%"), None).unwrap().is_missing());
        assert!(like(&Value::int(1), &Value::string("%"), None).unwrap().is_null());
    }
}
