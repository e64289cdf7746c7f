//! FROM: keyspace paths, expression and subquery terms, USE hints, comma joins, lookup / index / ANSI joins, NEST
//! and UNNEST; and the keyspace paths other statements name.
//!
//! As in n1ql.y, a term that is a path of one to three identifiers, not in parentheses, is a keyspace
//! (`b`, `` `b`.`s`.`c` ``); anything else is an expression whose elements are the rows (`ARRAY_RANGE(0, 5) AS d`,
//! `(t.children) AS c`). A one- or two-part path may still turn out to name a variable in scope (a correlated
//! `FROM t.children`): the semantic pass decides, as Couchbase's formalizer does.

use super::{PResult, Parser};
use crate::ast::{Expr, FromTerm, IndexHint, IndexType, JoinHint, JoinKind, JoinOn, KeyspacePath, KeyspaceTerm, Pos};
use crate::lexer::{Kw, Punct, TokenKind};

/// What a `USE ...` clause said.
#[derive(Default)]
pub(super) struct Use {
    pub(super) keys: Option<Expr>,
    pub(super) indexes: Vec<IndexHint>,
    pub(super) hint: JoinHint,
    /// Where the clause starts, for errors about it.
    pub(super) pos: Option<Pos>,
}

impl<'a> Parser<'a> {
    /// `term [, term ...]`: comma joins, whose right sides must be simple terms.
    pub(super) fn sources(&mut self) -> PResult<FromTerm> {
        let saved = self.depth;
        let mut left = self.joined_term()?;
        while self.eat_punct(Punct::Comma) {
            self.nest()?;
            let pos = self.pos_here();
            let right = self.joined_term()?;
            if matches!(right, FromTerm::Join { .. } | FromTerm::Nest { .. } | FromTerm::Unnest { .. }) {
                let msg =
                    format!("Right side ({right}) of a COMMA in a FROM clause must be a simple term or sub-query");
                return Err(self.error_at(&msg, pos));
            }
            left = FromTerm::Join {
                left: Box::new(left),
                kind: JoinKind::Inner,
                right: Box::new(right),
                on: JoinOn::Cross,
            };
        }
        self.depth = saved;
        Ok(left)
    }

    /// A simple term followed by any number of JOIN / NEST / UNNEST clauses (RIGHT JOIN only right after it).
    fn joined_term(&mut self) -> PResult<FromTerm> {
        let saved = self.depth;
        let mut left = self.simple_from_term()?;
        if self.eat_kw(Kw::Right) {
            self.eat_kw(Kw::Outer);
            self.expect_kw(Kw::Join)?;
            let right = self.simple_from_term()?;
            self.expect_kw(Kw::On)?;
            let on = JoinOn::Condition(self.expr()?);
            left = FromTerm::Join { left: Box::new(left), kind: JoinKind::RightOuter, right: Box::new(right), on };
        }
        loop {
            let kind = match self.kind() {
                TokenKind::Keyword(Kw::Inner) => {
                    self.bump();
                    JoinKind::Inner
                }
                TokenKind::Keyword(Kw::Left) => {
                    self.bump();
                    self.eat_kw(Kw::Outer);
                    JoinKind::LeftOuter
                }
                TokenKind::Keyword(Kw::Join | Kw::Nest | Kw::Unnest | Kw::Flatten) => JoinKind::Inner,
                _ => break,
            };
            self.nest()?;
            left = match self.kind() {
                TokenKind::Keyword(Kw::Join) | TokenKind::Keyword(Kw::Nest) => self.join(left, kind)?,
                TokenKind::Keyword(Kw::Unnest | Kw::Flatten) => {
                    self.bump();
                    let expr = self.expr()?;
                    let alias = self.opt_alias()?;
                    FromTerm::Unnest { left: Box::new(left), outer: kind == JoinKind::LeftOuter, expr, alias }
                }
                _ => return Err(self.error()),
            };
        }
        self.depth = saved;
        Ok(left)
    }

    /// `JOIN|NEST term ON [PRIMARY] KEYS e | ON [PRIMARY] KEY e FOR alias | ON cond`.
    fn join(&mut self, left: FromTerm, kind: JoinKind) -> PResult<FromTerm> {
        let nest = self.bump().kind == TokenKind::Keyword(Kw::Nest);
        let pos = self.pos_here();
        let right = self.simple_from_term()?;
        self.expect_kw(Kw::On)?;
        let lookup = self.is_kw(Kw::Keys)
            || self.is_kw(Kw::Key)
            || (self.is_kw(Kw::Primary) && (self.is_kw_at(1, Kw::Keys) || self.is_kw_at(1, Kw::Key)));
        let on = if lookup {
            self.eat_kw(Kw::Primary);
            let keys = self.bump().kind == TokenKind::Keyword(Kw::Keys);
            let expr = self.expr()?;
            if !matches!(right, FromTerm::Keyspace(_)) {
                let what = if nest { "NEST" } else { "JOIN" };
                return Err(self.error_at(&format!("{what} must be done on a keyspace"), pos));
            }
            match keys {
                true => JoinOn::Keys(expr),
                false => {
                    self.expect_kw(Kw::For)?;
                    JoinOn::KeyFor { expr, for_alias: self.ident()? }
                }
            }
        } else {
            JoinOn::Condition(self.expr()?)
        };
        let (left, right) = (Box::new(left), Box::new(right));
        Ok(match nest {
            true => FromTerm::Nest { left, kind, right, on },
            false => FromTerm::Join { left, kind, right, on },
        })
    }

    /// A keyspace with a namespace (`default:b`, `system:indexes`), or an expression term that is a keyspace path,
    /// a subquery with its alias, or any other expression, each with an optional alias and USE clause.
    pub(super) fn simple_from_term(&mut self) -> PResult<FromTerm> {
        let saved = self.depth;
        self.nest()?;
        let term = self.simple_from_term_inner();
        self.depth = saved;
        term
    }

    fn simple_from_term_inner(&mut self) -> PResult<FromTerm> {
        if self.namespace_ahead() {
            let path = self.keyspace_path()?;
            let alias = self.opt_alias()?;
            let using = self.opt_use()?;
            return Ok(keyspace_term(path, alias, using));
        }
        let pos = self.pos_here();
        let parenthesised = self.is_punct(Punct::LParen);
        let expr = self.expr()?;
        let alias = self.opt_alias()?;
        let using = self.opt_use()?;
        let use_pos = using.pos.unwrap_or(pos);
        let keys_or_index = using.keys.is_some() || !using.indexes.is_empty();
        match expr {
            Expr::Subquery(select) => {
                let Some(alias) = alias else {
                    return Err(self.error_at("Subquery in FROM clause must have an alias.", pos));
                };
                if keys_or_index {
                    return Err(self.error_at("FROM Subquery cannot have USE KEYS or USE INDEX.", use_pos));
                }
                Ok(FromTerm::Subquery { select, alias })
            }
            expr if !parenthesised && path_parts(&expr).is_some() => {
                let parts = path_parts(&expr).unwrap_or_default();
                Ok(keyspace_term(KeyspacePath { namespace: None, parts }, alias, using))
            }
            Expr::Param(_) if !using.indexes.is_empty() => {
                Err(self.error_at("FROM <placeholder> cannot have USE INDEX.", pos))
            }
            // `FROM $p USE KEYS ...` (a keyspace named by a parameter) has no place in the syntax tree.
            Expr::Param(_) if using.keys.is_some() => Err(self.error_at("syntax error", use_pos)),
            _ if keys_or_index => Err(self.error_at("FROM Expression cannot have USE KEYS or USE INDEX.", pos)),
            expr => Ok(FromTerm::Expr { expr, alias }),
        }
    }

    /// Whether a namespace and its colon start here: `default:` or `system:` (n1ql.go only treats the names of
    /// namespaces so, and only the lower-case spelling of `default`).
    pub(super) fn namespace_ahead(&self) -> bool {
        if !self.is_punct_at(1, Punct::Colon) {
            return false;
        }
        if self.is_kw(Kw::System) {
            return true;
        }
        matches!(self.ident_at(0).map(|n| n.strip_prefix('#').unwrap_or(n)), Some("default" | "system"))
    }

    /// `[namespace:]a[.b.c]`: one to three parts, one or three after a namespace.
    pub(super) fn keyspace_path(&mut self) -> PResult<KeyspacePath> {
        let namespace = if self.namespace_ahead() {
            let ns = match self.ident_at(0) {
                Some(name) => name.strip_prefix('#').unwrap_or(name).to_string(),
                None => "system".to_string(),
            };
            self.bump();
            self.bump();
            Some(ns)
        } else {
            None
        };
        let mut parts = vec![self.ident()?];
        if namespace.is_some() {
            if self.eat_punct(Punct::Dot) {
                parts.push(self.ident()?);
                self.expect_punct(Punct::Dot)?;
                parts.push(self.ident()?);
            }
        } else {
            while parts.len() < 3 && self.eat_punct(Punct::Dot) {
                parts.push(self.ident()?);
            }
        }
        Ok(KeyspacePath { namespace, parts })
    }

    /// `USE KEYS e | USE INDEX (...) | USE HASH(BUILD|PROBE) | USE NL`, and the pairs n1ql.y allows after one USE
    /// (a join hint with keys or indexes).
    pub(super) fn opt_use(&mut self) -> PResult<Use> {
        let mut using = Use::default();
        if !self.is_kw(Kw::Use) {
            return Ok(using);
        }
        using.pos = Some(self.pos_here());
        self.bump();
        let (mut took_hint, mut took_access) = (false, false);
        for _ in 0..2 {
            if !took_hint && self.join_hint(&mut using)? {
                took_hint = true;
            } else if !took_access && self.keys_or_indexes(&mut using)? {
                took_access = true;
            } else {
                break;
            }
        }
        if !took_hint && !took_access {
            return Err(self.error());
        }
        Ok(using)
    }

    /// `HASH(BUILD|PROBE)` or `NL`.
    fn join_hint(&mut self, using: &mut Use) -> PResult<bool> {
        if self.eat_kw(Kw::Nl) {
            using.hint = JoinHint::NestedLoop;
            return Ok(true);
        }
        if !self.eat_kw(Kw::Hash) {
            return Ok(false);
        }
        self.expect_punct(Punct::LParen)?;
        let build = match self.kind() {
            TokenKind::Keyword(Kw::Build) => true,
            TokenKind::Keyword(Kw::Probe) => false,
            _ => return Err(self.error()),
        };
        self.bump();
        self.expect_punct(Punct::RParen)?;
        using.hint = JoinHint::Hash(build);
        Ok(true)
    }

    /// `[PRIMARY] KEYS expr` or `INDEX ([name] [USING GSI|VIEW|FTS], ...)`.
    fn keys_or_indexes(&mut self, using: &mut Use) -> PResult<bool> {
        if self.is_kw(Kw::Keys) || (self.is_kw(Kw::Primary) && self.is_kw_at(1, Kw::Keys)) {
            self.eat_kw(Kw::Primary);
            self.bump();
            using.keys = Some(self.expr()?);
            return Ok(true);
        }
        if !self.eat_kw(Kw::Index) {
            return Ok(false);
        }
        self.expect_punct(Punct::LParen)?;
        loop {
            let name = match self.is_ident() {
                true => self.ident()?,
                false => String::new(),
            };
            using.indexes.push(IndexHint { name, using: self.opt_index_using()? });
            if !self.eat_punct(Punct::Comma) {
                break;
            }
        }
        self.expect_punct(Punct::RParen)?;
        Ok(true)
    }

    /// `USING GSI | VIEW | FTS`.
    pub(super) fn opt_index_using(&mut self) -> PResult<Option<IndexType>> {
        if !self.eat_kw(Kw::Using) {
            return Ok(None);
        }
        let using = match self.kind() {
            TokenKind::Keyword(Kw::Gsi) => IndexType::Gsi,
            TokenKind::Keyword(Kw::View) => IndexType::View,
            TokenKind::Keyword(Kw::Fts) => IndexType::Fts,
            _ => return Err(self.error()),
        };
        self.bump();
        Ok(Some(using))
    }
}

fn keyspace_term(path: KeyspacePath, alias: Option<String>, using: Use) -> FromTerm {
    FromTerm::Keyspace(KeyspaceTerm {
        path,
        alias,
        use_keys: using.keys,
        use_index: using.indexes,
        join_hint: using.hint,
    })
}

/// The names of a path of one to three identifiers (`a`, `a.b`, `a.b.c`), if `expr` is one.
fn path_parts(expr: &Expr) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut e = expr;
    loop {
        match e {
            Expr::Ident(name) => {
                parts.push(name.clone());
                break;
            }
            Expr::Field(base, name) if parts.len() < 2 => {
                parts.push(name.clone());
                e = base;
            }
            _ => return None,
        }
    }
    parts.reverse();
    Some(parts)
}
