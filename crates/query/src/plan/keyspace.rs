//! Keyspace paths and the request's `query_context` (`q:algebra/path.go`).
//!
//! Without a query context a one-part path names a bucket (its default collection) and a three-part path a
//! collection. With one (`[ns:]bucket[.scope]`, backticks optional), a one-part path is a collection of the
//! context's scope (`_default` when the context names only a bucket), a two-part path is `scope.collection` of a
//! bucket-only context, and three-part paths stay absolute.

use crate::ast::KeyspacePath;
use crate::datastore::KeyspaceName;
use crate::QueryError;

use super::SystemKeyspace;

/// A parsed `query_context`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryContext {
    pub bucket: Option<String>,
    pub scope: Option<String>,
}

impl QueryContext {
    /// The text prepared statements are filed under (`default:b.s`, or "" without a context).
    pub fn key(&self) -> String {
        match (&self.bucket, &self.scope) {
            (Some(b), Some(s)) => format!("default:{b}.{s}"),
            (Some(b), None) => format!("default:{b}"),
            _ => String::new(),
        }
    }
}

/// Parses `query_context`: `[namespace:]bucket[.scope]`, each part plain or backticked (hyphens allowed).
pub fn parse_query_context(text: &str) -> Result<QueryContext, QueryError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(QueryContext::default());
    }
    let (namespace, rest) = split_namespace(text);
    if let Some(ns) = namespace {
        if !ns.is_empty() && ns != "default" {
            return Err(QueryError::InvalidValue(format!("Invalid query_context namespace: {ns}")));
        }
    }
    if rest.is_empty() {
        return Ok(QueryContext::default());
    }
    let parts = split_parts(rest).ok_or_else(|| QueryError::InvalidValue(format!("Invalid query_context {text}")))?;
    match parts.as_slice() {
        [b] => Ok(QueryContext { bucket: Some(b.clone()), scope: None }),
        [b, s] => Ok(QueryContext { bucket: Some(b.clone()), scope: Some(s.clone()) }),
        _ => Err(QueryError::InvalidValue(format!("Invalid query_context {text}"))),
    }
}

/// Splits `ns:rest` at a colon outside backticks.
fn split_namespace(text: &str) -> (Option<&str>, &str) {
    let mut quoted = false;
    for (i, c) in text.char_indices() {
        match c {
            '`' => quoted = !quoted,
            ':' if !quoted => return (Some(text[..i].trim_matches('`')), &text[i + 1..]),
            _ => {}
        }
    }
    (None, text)
}

/// Splits `a.b` / `` `a`.`b` `` into parts, unquoting backticks (a doubled backtick is one backtick).
fn split_parts(text: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'`') {
            chars.next();
            loop {
                match chars.next()? {
                    '`' if chars.peek() == Some(&'`') => {
                        chars.next();
                        part.push('`');
                    }
                    '`' => break,
                    c => part.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.push(c);
                chars.next();
            }
        }
        if part.is_empty() {
            return None;
        }
        parts.push(part);
        match chars.next() {
            None => return Some(parts),
            Some('.') => continue,
            Some(_) => return None,
        }
    }
}

/// What a keyspace path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolvedPath {
    Collection(KeyspaceName),
    System(SystemKeyspace),
}

/// Resolves a path against the query context.
pub fn resolve_keyspace(path: &KeyspacePath, ctx: &QueryContext) -> Result<ResolvedPath, QueryError> {
    let text = || {
        let parts = path.parts.join(".");
        match &path.namespace {
            Some(ns) => format!("{ns}:{parts}"),
            None => parts,
        }
    };
    match path.namespace.as_deref() {
        Some("system") => {
            return match path.parts.as_slice() {
                [name] => SystemKeyspace::from_name(name)
                    .map(ResolvedPath::System)
                    .ok_or_else(|| QueryError::KeyspaceNotFound(format!("system:{name}"))),
                _ => Err(QueryError::KeyspaceNotFound(text())),
            }
        }
        Some("default") | None => {}
        Some(_) => return Err(QueryError::KeyspaceNotFound(text())),
    }
    let relative = path.namespace.is_none();
    let name = match (path.parts.as_slice(), relative, &ctx.bucket) {
        ([b, s, c], _, _) => KeyspaceName::new(b, s, c),
        ([c], true, Some(bucket)) => KeyspaceName::new(bucket, ctx.scope.as_deref().unwrap_or("_default"), c),
        ([b], _, _) => KeyspaceName::new(b, "_default", "_default"),
        ([s, c], true, Some(bucket)) if ctx.scope.is_none() => KeyspaceName::new(bucket, s, c),
        _ => {
            return Err(QueryError::Semantics(format!(
                "Invalid keyspace path {}: expected a bucket or bucket.scope.collection",
                text()
            )))
        }
    };
    Ok(ResolvedPath::Collection(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(ns: Option<&str>, parts: &[&str]) -> KeyspacePath {
        KeyspacePath { namespace: ns.map(str::to_string), parts: parts.iter().map(|p| p.to_string()).collect() }
    }

    #[test]
    fn query_contexts_parse_in_every_form_the_sdks_and_users_send() {
        // Proves the forms of QUERY.md §1.2: default:`b`.`s`, b.s, `b`.`s`, with hyphens; and a bucket alone.
        let bs = QueryContext { bucket: Some("b-1".into()), scope: Some("s".into()) };
        for text in ["default:`b-1`.`s`", "b-1.s", "`b-1`.`s`", "default:b-1.s", ":b-1.s"] {
            assert_eq!(parse_query_context(text).unwrap(), bs, "{text}");
        }
        assert_eq!(parse_query_context("default:`b`").unwrap(), QueryContext { bucket: Some("b".into()), scope: None });
        assert_eq!(parse_query_context("").unwrap(), QueryContext::default());
        assert!(parse_query_context("a.b.c").is_err());
    }

    #[test]
    fn paths_resolve_relative_to_the_context_only_when_unqualified() {
        // Proves a bare name is a bucket without a context and a collection of the context's scope with one.
        let none = QueryContext::default();
        let ctx = parse_query_context("default:b.s").unwrap();
        let coll = |b: &str, s: &str, c: &str| ResolvedPath::Collection(KeyspaceName::new(b, s, c));
        assert_eq!(resolve_keyspace(&path(None, &["x"]), &none).unwrap(), coll("x", "_default", "_default"));
        assert_eq!(resolve_keyspace(&path(None, &["x"]), &ctx).unwrap(), coll("b", "s", "x"));
        assert_eq!(resolve_keyspace(&path(Some("default"), &["x"]), &ctx).unwrap(), coll("x", "_default", "_default"));
        assert_eq!(resolve_keyspace(&path(None, &["a", "b", "c"]), &ctx).unwrap(), coll("a", "b", "c"));
        let bucket_only = parse_query_context("b").unwrap();
        assert_eq!(resolve_keyspace(&path(None, &["s2", "c2"]), &bucket_only).unwrap(), coll("b", "s2", "c2"));
        assert_eq!(
            resolve_keyspace(&path(Some("system"), &["indexes"]), &ctx).unwrap(),
            ResolvedPath::System(SystemKeyspace::Indexes)
        );
    }
}
