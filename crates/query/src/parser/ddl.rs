//! Index statements: CREATE [PRIMARY] INDEX, DROP [PRIMARY] INDEX, ALTER INDEX and BUILD INDEX, in the forms
//! n1ql.y accepts (IF [NOT] EXISTS before or after the name, the older `ks.name` form of DROP and ALTER).

use super::{PResult, Parser};
use crate::ast::{
    AlterIndex, ArrayIndexKind, BuildIndexes, CreateIndex, CreatePrimaryIndex, DropIndex, DropPrimaryIndex, Expr,
    IndexKey, KeyspacePath, Statement,
};
use crate::lexer::{Kw, Punct, TokenKind};
use crate::value::Value;

impl<'a> Parser<'a> {
    pub(super) fn create(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Create)?;
        if self.eat_kw(Kw::Primary) {
            self.expect_kw(Kw::Index)?;
            return self.create_primary_index();
        }
        self.expect_kw(Kw::Index)?;
        let mut if_not_exists = self.eat_if_not_exists()?;
        let name = self.ident()?;
        if !if_not_exists {
            if_not_exists = self.eat_if_not_exists()?;
        }
        self.expect_kw(Kw::On)?;
        let keyspace = self.keyspace_path()?;
        self.expect_punct(Punct::LParen)?;
        let mut keys = vec![self.index_key()?];
        while self.eat_punct(Punct::Comma) {
            keys.push(self.index_key()?);
        }
        self.expect_punct(Punct::RParen)?;
        let partition = match self.eat_kw(Kw::Partition) {
            true => {
                self.expect_kw(Kw::By)?;
                self.expect_kw(Kw::Hash)?;
                self.expect_punct(Punct::LParen)?;
                if self.is_punct(Punct::RParen) {
                    return Err(self.error());
                }
                Some(self.exprs_until(Punct::RParen)?)
            }
            false => None,
        };
        let where_ = self.opt_where()?;
        let using = self.opt_index_using()?;
        let with = self.opt_with()?;
        Ok(Statement::CreateIndex(CreateIndex { name, if_not_exists, keyspace, keys, partition, where_, using, with }))
    }

    /// After `CREATE PRIMARY INDEX`: `[name] [IF NOT EXISTS] ON ks [USING ...] [WITH ...]`, IF NOT EXISTS also
    /// before the name.
    fn create_primary_index(&mut self) -> PResult<Statement> {
        let mut if_not_exists = self.eat_if_not_exists()?;
        let name = match self.is_kw(Kw::On) {
            true => None,
            false => Some(self.ident()?),
        };
        if !if_not_exists && name.is_some() {
            if_not_exists = self.eat_if_not_exists()?;
        }
        self.expect_kw(Kw::On)?;
        let keyspace = self.keyspace_path()?;
        let using = self.opt_index_using()?;
        let with = self.opt_with()?;
        Ok(Statement::CreatePrimaryIndex(CreatePrimaryIndex { name, if_not_exists, keyspace, using, with }))
    }

    fn eat_if_not_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw(Kw::If) {
            return Ok(false);
        }
        self.expect_kw(Kw::Not)?;
        self.expect_kw(Kw::Exists)?;
        Ok(true)
    }

    fn eat_if_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw(Kw::If) {
            return Ok(false);
        }
        self.expect_kw(Kw::Exists)?;
        Ok(true)
    }

    /// `[WITH expr]`, whose value must be known without any document (n1ql.y: "WITH value must be static").
    fn opt_with(&mut self) -> PResult<Option<Expr>> {
        if !self.eat_kw(Kw::With) {
            return Ok(None);
        }
        let pos = self.pos_here();
        let with = self.expr()?;
        if !is_static(&with) {
            return Err(self.error_at("WITH value must be static", pos));
        }
        Ok(Some(with))
    }

    /// One index key: `expr`, `DISTINCT|ALL|EACH [DISTINCT] expr` (also in parentheses, as Couchbase prints
    /// them), then up to two of ASC, DESC, INCLUDE MISSING.
    fn index_key(&mut self) -> PResult<IndexKey> {
        let parenthesised = self.is_punct(Punct::LParen)
            && matches!(self.kind_at(1), TokenKind::Keyword(Kw::Distinct | Kw::All | Kw::Each));
        if parenthesised {
            self.bump();
        }
        let array = match self.kind() {
            TokenKind::Keyword(Kw::Distinct) => {
                self.bump();
                Some(ArrayIndexKind::Distinct)
            }
            TokenKind::Keyword(Kw::All | Kw::Each) => {
                self.bump();
                match self.eat_kw(Kw::Distinct) {
                    true => Some(ArrayIndexKind::Distinct),
                    false => Some(ArrayIndexKind::All),
                }
            }
            _ => None,
        };
        let expr = self.expr()?;
        if parenthesised {
            self.expect_punct(Punct::RParen)?;
        }
        let mut key = IndexKey { expr, array, desc: false, include_missing: false };
        let (mut asc, mut seen) = (false, 0);
        while seen < 2 {
            let pos = self.pos_here();
            let (is_asc, is_desc, missing) = match self.kind() {
                TokenKind::Keyword(Kw::Asc) => (true, false, false),
                TokenKind::Keyword(Kw::Desc) => (false, true, false),
                TokenKind::Keyword(Kw::Include) => (false, false, true),
                _ => break,
            };
            self.bump();
            if missing {
                self.expect_kw(Kw::Missing)?;
            }
            let repeated = (missing && key.include_missing) || ((is_asc || is_desc) && (asc || key.desc));
            if repeated {
                return Err(self.error_at("Duplicate or Invalid index key attribute", pos));
            }
            asc |= is_asc;
            key.desc |= is_desc;
            key.include_missing |= missing;
            seen += 1;
        }
        Ok(key)
    }

    /// `DROP PRIMARY INDEX [name] [IF EXISTS] ON ks`, `DROP INDEX name [IF EXISTS] ON ks` or `DROP INDEX ks.name`,
    /// each with an optional `USING ...`. A named primary index is dropped like any index by name.
    pub(super) fn drop(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Drop)?;
        let primary = self.eat_kw(Kw::Primary);
        self.expect_kw(Kw::Index)?;
        let mut if_exists = self.eat_if_exists()?;
        if primary && self.is_kw(Kw::On) {
            self.bump();
            let keyspace = self.keyspace_path()?;
            let using = self.opt_index_using()?;
            return Ok(Statement::DropPrimaryIndex(DropPrimaryIndex { if_exists, keyspace, using }));
        }
        let (name, keyspace) = match primary {
            true => self.index_name_on(&mut if_exists, true)?,
            false => self.index_name_on(&mut if_exists, false)?,
        };
        let using = self.opt_index_using()?;
        Ok(Statement::DropIndex(DropIndex { name, if_exists, keyspace, using }))
    }

    /// `name [IF EXISTS] ON ks`, or (unless `name_form_only`) the older `ks.name [IF EXISTS]` where `ks` is a bucket
    /// or a namespaced three-part path.
    fn index_name_on(&mut self, if_exists: &mut bool, name_form_only: bool) -> PResult<(String, KeyspacePath)> {
        let legacy = !name_form_only && (self.namespace_ahead() || self.is_punct_at(1, Punct::Dot));
        if !legacy {
            let name = self.ident()?;
            if !*if_exists {
                *if_exists = self.eat_if_exists()?;
            }
            self.expect_kw(Kw::On)?;
            return Ok((name, self.keyspace_path()?));
        }
        let keyspace = if self.namespace_ahead() {
            let path = self.keyspace_path()?;
            if path.parts.len() != 3 {
                return Err(self.error());
            }
            path
        } else {
            KeyspacePath { namespace: None, parts: vec![self.ident()?] }
        };
        self.expect_punct(Punct::Dot)?;
        let name = self.ident()?;
        if !*if_exists {
            *if_exists = self.eat_if_exists()?;
        }
        Ok((name, keyspace))
    }

    /// `ALTER INDEX name ON ks [USING ...] WITH {...}` or `ALTER INDEX ks.name [USING ...] WITH {...}`.
    pub(super) fn alter_index(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Alter)?;
        self.expect_kw(Kw::Index)?;
        let legacy = self.namespace_ahead() || self.is_punct_at(1, Punct::Dot);
        let (name, keyspace) = if legacy {
            // ALTER has no IF EXISTS: start as if it had been read so that none is taken.
            let mut no_if_exists = true;
            self.index_name_on(&mut no_if_exists, false)?
        } else {
            let name = self.ident()?;
            self.expect_kw(Kw::On)?;
            (name, self.keyspace_path()?)
        };
        let using = self.opt_index_using()?;
        if !self.is_kw(Kw::With) {
            return Err(self.error());
        }
        let with = self.opt_with()?.unwrap_or(Expr::Literal(Value::Missing));
        Ok(Statement::AlterIndex(AlterIndex { name, keyspace, using, with }))
    }

    /// `BUILD INDEX ON ks(name_or_expr, ...) [USING ...]`; a bare name becomes a string literal.
    pub(super) fn build_index(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Build)?;
        self.expect_kw(Kw::Index)?;
        self.expect_kw(Kw::On)?;
        let keyspace = self.keyspace_path()?;
        self.expect_punct(Punct::LParen)?;
        if self.is_punct(Punct::RParen) {
            return Err(self.error());
        }
        let names = self
            .exprs_until(Punct::RParen)?
            .into_iter()
            .map(|e| match e {
                Expr::Ident(name) => Expr::string(&name),
                other => other,
            })
            .collect();
        let using = self.opt_index_using()?;
        Ok(Statement::BuildIndexes(BuildIndexes { keyspace, names, using }))
    }
}

/// Whether an expression's value is known without a document or parameters: no names, parameters or subqueries.
fn is_static(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(_) => true,
        Expr::Ident(_) | Expr::Param(_) | Expr::Subquery(_) => false,
        Expr::Quantified { .. } | Expr::ArrayFor { .. } | Expr::ObjectFor { .. } => false,
        Expr::Field(e, _) | Expr::Neg(e) | Expr::Not(e) | Expr::Exists(e) => is_static(e),
        Expr::Is { expr, .. } => is_static(expr),
        Expr::DynamicField(a, b) | Expr::Element(a, b) | Expr::Binary(_, a, b) => is_static(a) && is_static(b),
        Expr::In { expr, list: b, .. } | Expr::Within { expr, target: b, .. } => is_static(expr) && is_static(b),
        Expr::Slice { base, start, end } => is_static(base) && is_static(start) && end.as_deref().is_none_or(is_static),
        Expr::Like { expr, pattern, escape, .. } => {
            is_static(expr) && is_static(pattern) && escape.as_deref().is_none_or(is_static)
        }
        Expr::Between { expr, low, high, .. } => is_static(expr) && is_static(low) && is_static(high),
        Expr::And(items) | Expr::Or(items) | Expr::Array(items) => items.iter().all(is_static),
        Expr::Object(members) => {
            members.iter().all(|(name, value)| name.as_ref().is_none_or(is_static) && is_static(value))
        }
        Expr::Call(call) => call.args.iter().all(is_static),
        Expr::Case(case) => {
            case.operand.as_deref().is_none_or(is_static)
                && case.whens.iter().all(|(w, t)| is_static(w) && is_static(t))
                && case.otherwise.as_deref().is_none_or(is_static)
        }
    }
}
