//! INSERT, UPSERT, UPDATE, DELETE and MERGE.

use super::error::error_context;
use super::{PResult, Parser};
use crate::ast::{
    Binding, Call, Delete, Expr, Insert, InsertSource, InsertValues, KeyspaceRef, Merge, MergeDelete, MergeInsert,
    MergeOn, MergeUpdate, Projection, ResultTerm, SetClause, UnsetClause, Update, UpdateFor,
};
use crate::lexer::{Kw, Punct, TokenKind};
use crate::QueryError;

impl<'a> Parser<'a> {
    /// `INSERT|UPSERT INTO ks [(KEY, VALUE[, OPTIONS])] VALUES (k, v[, o]), ...` or
    /// `INSERT|UPSERT INTO ks (KEY k[, VALUE v][, OPTIONS o]) select`, then `[RETURNING ...]`.
    pub(super) fn insert(&mut self) -> PResult<Insert> {
        self.bump();
        self.expect_kw(Kw::Into)?;
        let keyspace = self.keyspace_ref()?;
        let values_header = (self.is_kw_at(1, Kw::Key) && self.is_punct_at(2, Punct::Comma))
            || (self.is_kw_at(1, Kw::Primary) && self.is_kw_at(2, Kw::Key) && self.is_punct_at(3, Punct::Comma));
        let source = if self.is_punct(Punct::LParen) && !values_header {
            self.bump();
            let (key, value, options) = self.key_value_options()?;
            self.expect_punct(Punct::RParen)?;
            let select = Box::new(self.fullselect()?);
            InsertSource::Select { key, value, options, select }
        } else {
            if self.eat_punct(Punct::LParen) {
                self.eat_kw(Kw::Primary);
                self.expect_kw(Kw::Key)?;
                self.expect_punct(Punct::Comma)?;
                self.expect_kw(Kw::Value)?;
                if self.eat_punct(Punct::Comma) {
                    self.expect_kw(Kw::Options)?;
                }
                self.expect_punct(Punct::RParen)?;
            }
            InsertSource::Values(self.values_list()?)
        };
        let returning = self.opt_returning()?;
        Ok(Insert { keyspace, source, returning })
    }

    /// The target of a DML statement: `path [[AS] alias]`.
    fn keyspace_ref(&mut self) -> PResult<KeyspaceRef> {
        let path = self.keyspace_path()?;
        let alias = self.opt_alias()?;
        Ok(KeyspaceRef { path, alias })
    }

    /// `RETURNING (RAW|ELEMENT|VALUE expr | term, ...)` after DML.
    fn opt_returning(&mut self) -> PResult<Option<Projection>> {
        if !self.eat_kw(Kw::Returning) {
            return Ok(None);
        }
        if matches!(self.kind(), TokenKind::Keyword(Kw::Raw | Kw::Element | Kw::Value)) {
            self.bump();
            let expr = self.expr()?;
            return Ok(Some(Projection {
                distinct: false,
                raw: true,
                terms: vec![ResultTerm::Expr { expr, alias: None }],
            }));
        }
        Ok(Some(Projection { distinct: false, raw: false, terms: self.result_terms()? }))
    }

    /// `VALUES (k, v[, o]) [, [VALUES] (k, v[, o]) ...]`.
    fn values_list(&mut self) -> PResult<Vec<InsertValues>> {
        self.expect_kw(Kw::Values)?;
        let mut rows = Vec::new();
        loop {
            let (key, value, options) = self.key_value_tuple()?;
            rows.push(InsertValues { key, value, options });
            if !self.eat_punct(Punct::Comma) {
                return Ok(rows);
            }
            self.eat_kw(Kw::Values);
        }
    }

    /// `(key, value[, options])`.
    fn key_value_tuple(&mut self) -> PResult<(Expr, Expr, Option<Expr>)> {
        self.expect_punct(Punct::LParen)?;
        let key = self.expr()?;
        self.expect_punct(Punct::Comma)?;
        let value = self.expr()?;
        let options = match self.eat_punct(Punct::Comma) {
            true => Some(self.expr()?),
            false => None,
        };
        self.expect_punct(Punct::RParen)?;
        Ok((key, value, options))
    }

    /// `[PRIMARY] KEY k [, VALUE v] [, OPTIONS o]`.
    fn key_value_options(&mut self) -> PResult<(Expr, Option<Expr>, Option<Expr>)> {
        self.eat_kw(Kw::Primary);
        self.expect_kw(Kw::Key)?;
        let key = self.expr()?;
        let mut value = None;
        let mut options = None;
        if self.eat_punct(Punct::Comma) {
            if self.eat_kw(Kw::Value) {
                value = Some(self.expr()?);
                if self.eat_punct(Punct::Comma) {
                    self.expect_kw(Kw::Options)?;
                    options = Some(self.expr()?);
                }
            } else {
                self.expect_kw(Kw::Options)?;
                options = Some(self.expr()?);
            }
        }
        Ok((key, value, options))
    }

    /// `UPDATE ks [USE KEYS e] [SET ...] [UNSET ...] [WHERE c] [LIMIT n] [RETURNING ...]`.
    pub(super) fn update(&mut self) -> PResult<Update> {
        self.expect_kw(Kw::Update)?;
        self.skip_hints();
        let keyspace = self.keyspace_ref()?;
        let use_keys = self.dml_use_keys()?;
        let set = match self.eat_kw(Kw::Set) {
            true => self.set_clauses()?,
            false => Vec::new(),
        };
        let unset = match self.eat_kw(Kw::Unset) {
            true => self.unset_clauses()?,
            false => Vec::new(),
        };
        if set.is_empty() && unset.is_empty() {
            return Err(self.error());
        }
        let where_ = self.opt_where()?;
        let limit = self.opt_limit()?;
        let returning = self.opt_returning()?;
        Ok(Update { keyspace, use_keys, set, unset, where_, limit, returning })
    }

    /// `DELETE FROM ks [USE KEYS e] [WHERE c] [LIMIT n] [RETURNING ...]`.
    pub(super) fn delete(&mut self) -> PResult<Delete> {
        self.expect_kw(Kw::Delete)?;
        self.skip_hints();
        self.expect_kw(Kw::From)?;
        let keyspace = self.keyspace_ref()?;
        let use_keys = self.dml_use_keys()?;
        let where_ = self.opt_where()?;
        let limit = self.opt_limit()?;
        let returning = self.opt_returning()?;
        Ok(Delete { keyspace, use_keys, where_, limit, returning })
    }

    fn opt_limit(&mut self) -> PResult<Option<Expr>> {
        match self.eat_kw(Kw::Limit) {
            true => self.expr().map(Some),
            false => Ok(None),
        }
    }

    /// The USE clause of UPDATE and DELETE: keys are kept, index hints accepted and dropped (the syntax tree has no
    /// place for them; they never change results), join hints refused as n1ql.y refuses them.
    fn dml_use_keys(&mut self) -> PResult<Option<Expr>> {
        let using = self.opt_use()?;
        if using.hint != crate::ast::JoinHint::None {
            let msg = "Keyspace reference cannot have join hint (USE HASH or USE NL) in DELETE or UPDATE statement";
            return Err(QueryError::Syntax(format!("{msg}{}", error_context(self.text, self.peek()))));
        }
        Ok(using.keys)
    }

    /// `path = value [FOR ... END], ...`, including `meta([alias]).expiration = value`.
    fn set_clauses(&mut self) -> PResult<Vec<SetClause>> {
        let mut clauses = Vec::new();
        loop {
            if self.is_ident() && self.is_punct_at(1, Punct::LParen) {
                clauses.push(self.set_meta()?);
            } else {
                let path = self.path()?;
                self.expect_punct(Punct::Eq)?;
                let value = self.expr()?;
                clauses.push(SetClause { path, value, update_for: self.opt_update_for()? });
            }
            if !self.eat_punct(Punct::Comma) {
                return Ok(clauses);
            }
        }
    }

    /// `meta([alias]).expiration = value`: the only document attribute SET may change.
    fn set_meta(&mut self) -> PResult<SetClause> {
        let name_pos = self.pos_here();
        let written = self.ident()?;
        let args_pos = {
            self.expect_punct(Punct::LParen)?;
            self.pos_here()
        };
        let args = self.exprs_until(Punct::RParen)?;
        if !written.eq_ignore_ascii_case("meta") || args.len() > 1 {
            return Err(self.error_at(&format!("Invalid arguments to function {written}"), args_pos));
        }
        let meta = Expr::Call(Call { name: "meta".to_string(), args, distinct: false, star: false, pos: name_pos });
        self.expect_punct(Punct::Dot)?;
        let path_pos = self.pos_here();
        let tail = self.path()?;
        let Expr::Ident(name) = &tail else {
            return Err(self.error_at(&format!("SET clause has invalid path {tail}"), path_pos));
        };
        if name != "expiration" {
            return Err(self.error_at(&format!("SET clause has invalid path {tail}"), path_pos));
        }
        self.expect_punct(Punct::Eq)?;
        let value = self.expr()?;
        Ok(SetClause { path: Expr::Field(Box::new(meta), name.clone()), value, update_for: None })
    }

    /// `path [FOR ... END], ...`.
    fn unset_clauses(&mut self) -> PResult<Vec<UnsetClause>> {
        let mut clauses = Vec::new();
        loop {
            let path = self.path()?;
            clauses.push(UnsetClause { path, update_for: self.opt_update_for()? });
            if !self.eat_punct(Punct::Comma) {
                return Ok(clauses);
            }
        }
    }

    /// A path as SET and UNSET name it: `name`, then `.name`, `.[expr]` or `[expr]` any number of times.
    fn path(&mut self) -> PResult<Expr> {
        let saved = self.depth;
        let mut path = Expr::Ident(self.ident()?);
        loop {
            if self.eat_punct(Punct::Dot) {
                path = match self.eat_punct(Punct::LBracket) {
                    true => {
                        let name = self.expr()?;
                        self.expect_punct(Punct::RBracket)?;
                        Expr::DynamicField(Box::new(path), Box::new(name))
                    }
                    false => Expr::Field(Box::new(path), self.ident()?),
                };
            } else if self.eat_punct(Punct::LBracket) {
                let index = self.expr()?;
                self.expect_punct(Punct::RBracket)?;
                path = Expr::Element(Box::new(path), Box::new(index));
            } else {
                break;
            }
            self.nest()?;
        }
        self.depth = saved;
        Ok(path)
    }

    /// `FOR bindings [FOR bindings ...] [WHEN cond] END`; the dimensions are kept outermost first, which is the
    /// reverse of how they are written (`FOR c IN b.children FOR b IN items END`).
    fn opt_update_for(&mut self) -> PResult<Option<UpdateFor>> {
        if !self.is_kw(Kw::For) {
            return Ok(None);
        }
        let mut dimensions: Vec<Vec<Binding>> = Vec::new();
        while self.eat_kw(Kw::For) {
            dimensions.push(self.bindings()?);
        }
        dimensions.reverse();
        let when = match self.eat_kw(Kw::When) {
            true => Some(self.expr()?),
            false => None,
        };
        self.expect_kw(Kw::End)?;
        Ok(Some(UpdateFor { dimensions, when }))
    }

    /// `MERGE INTO ks USING source ON [KEY] expr WHEN ... [LIMIT n] [RETURNING ...]`.
    pub(super) fn merge(&mut self) -> PResult<Merge> {
        self.expect_kw(Kw::Merge)?;
        self.skip_hints();
        self.expect_kw(Kw::Into)?;
        let target = self.keyspace_ref()?;
        let using = self.opt_use()?;
        if let Some(pos) = using.pos {
            if using.keys.is_some() {
                return Err(self.error_at("Keyspace reference cannot have USE KEYS hint in MERGE statement", pos));
            }
            if using.hint != crate::ast::JoinHint::None {
                let msg = "Keyspace reference cannot have join hint (USE HASH or USE NL) in MERGE statement";
                return Err(self.error_at(msg, pos));
            }
        }
        self.expect_kw(Kw::Using)?;
        let source = self.simple_from_term()?;
        self.expect_kw(Kw::On)?;
        let lookup = self.is_kw(Kw::Key) || (self.is_kw(Kw::Primary) && self.is_kw_at(1, Kw::Key));
        if lookup {
            self.eat_kw(Kw::Primary);
            self.bump();
        }
        let on_expr = self.expr()?;
        let on = if lookup { MergeOn::Key(on_expr) } else { MergeOn::Condition(on_expr) };
        let mut merge =
            Merge { target, source, on, update: None, delete: None, insert: None, limit: None, returning: None };
        self.merge_actions(&mut merge)?;
        merge.limit = self.opt_limit()?;
        merge.returning = self.opt_returning()?;
        Ok(merge)
    }

    /// `WHEN MATCHED THEN UPDATE ...`, `WHEN MATCHED THEN DELETE ...`, `WHEN NOT MATCHED THEN INSERT ...`, each
    /// optional, in that order.
    fn merge_actions(&mut self, merge: &mut Merge) -> PResult<()> {
        if self.matched_ahead(Kw::Update) {
            self.bump_n(4);
            let set = match self.eat_kw(Kw::Set) {
                true => self.set_clauses()?,
                false => Vec::new(),
            };
            let unset = match self.eat_kw(Kw::Unset) {
                true => self.unset_clauses()?,
                false => Vec::new(),
            };
            if set.is_empty() && unset.is_empty() {
                return Err(self.error());
            }
            merge.update = Some(MergeUpdate { set, unset, where_: self.opt_where()? });
        }
        if self.matched_ahead(Kw::Delete) {
            self.bump_n(4);
            merge.delete = Some(MergeDelete { where_: self.opt_where()? });
        }
        if self.is_kw(Kw::When) && self.is_kw_at(1, Kw::Not) {
            self.bump_n(2);
            self.expect_kw(Kw::Matched)?;
            self.expect_kw(Kw::Then)?;
            self.expect_kw(Kw::Insert)?;
            merge.insert = Some(self.merge_insert()?);
        }
        Ok(())
    }

    /// Whether `WHEN MATCHED THEN <action>` comes next.
    fn matched_ahead(&self, action: Kw) -> bool {
        self.is_kw(Kw::When) && self.is_kw_at(1, Kw::Matched) && self.is_kw_at(2, Kw::Then) && self.is_kw_at(3, action)
    }

    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    /// After MERGE's INSERT: `value`, `(key, value[, options])` or `(KEY k, VALUE v[, OPTIONS o])`, then
    /// `[WHERE cond]`.
    fn merge_insert(&mut self) -> PResult<MergeInsert> {
        let header = self.is_punct(Punct::LParen)
            && (self.is_kw_at(1, Kw::Key) || (self.is_kw_at(1, Kw::Primary) && self.is_kw_at(2, Kw::Key)));
        let (key, value, options) = if header {
            self.bump();
            let pos = self.pos_here();
            let (key, value, options) = self.key_value_options()?;
            self.expect_punct(Punct::RParen)?;
            let Some(value) = value else {
                return Err(self.error_at("syntax error - MERGE INSERT without VALUE is not supported", pos));
            };
            (Some(key), value, options)
        } else if self.is_punct(Punct::LParen)
            && !matches!(self.kind_at(1), TokenKind::Keyword(Kw::Select | Kw::With | Kw::From))
        {
            // `(k, v[, o])`, or a parenthesised value that may go on (`(a).b || c`).
            self.bump();
            let first = self.expr()?;
            if self.eat_punct(Punct::Comma) {
                let value = self.expr()?;
                let options = match self.eat_punct(Punct::Comma) {
                    true => Some(self.expr()?),
                    false => None,
                };
                self.expect_punct(Punct::RParen)?;
                (Some(first), value, options)
            } else {
                self.expect_punct(Punct::RParen)?;
                (None, self.continue_expr(first, 0, super::expr::Assoc::Left, false)?, None)
            }
        } else {
            (None, self.expr()?, None)
        };
        Ok(MergeInsert { key, value, options, where_: self.opt_where()? })
    }
}
