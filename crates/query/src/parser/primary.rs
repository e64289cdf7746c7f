//! Primary expressions (n1ql.y's `c_expr`): literals, parameters, identifiers, function calls, constructors,
//! CASE, the collection operators (ANY / EVERY / ARRAY / FIRST / OBJECT), parentheses and subqueries.

use super::{PResult, Parser};
use crate::ast::{ArrayForKind, Binding, Call, Case, Expr, Param, Quantifier};
use crate::lexer::{Kw, Punct, TokenKind};
use crate::value::Value;

impl<'a> Parser<'a> {
    pub(super) fn primary(&mut self) -> PResult<Expr> {
        let literal = match self.kind() {
            TokenKind::Int(i) => Some(Value::int(*i)),
            TokenKind::Num(f) => Some(Value::float(*f)),
            TokenKind::Str(s) => Some(Value::string(s)),
            TokenKind::Keyword(Kw::True) => Some(Value::Bool(true)),
            TokenKind::Keyword(Kw::False) => Some(Value::Bool(false)),
            TokenKind::Keyword(Kw::Null) => Some(Value::Null),
            TokenKind::Keyword(Kw::Missing) => Some(Value::Missing),
            _ => None,
        };
        if let Some(value) = literal {
            self.bump();
            return Ok(Expr::Literal(value));
        }
        match self.kind() {
            TokenKind::NamedParam(name) => {
                let name = name.to_string();
                self.bump();
                Ok(Expr::Param(Param::Named(name)))
            }
            TokenKind::PositionalParam(Some(n)) => {
                let n = *n;
                self.bump();
                Ok(Expr::Param(Param::Positional(n)))
            }
            TokenKind::PositionalParam(None) => {
                let pos = self.pos_here();
                let msg = format!("Positional parameter out of range: {}", self.peek().text);
                Err(self.error_at(&msg, pos))
            }
            TokenKind::NextParam => {
                self.bump();
                self.next_positional += 1;
                Ok(Expr::Param(Param::Positional(self.next_positional)))
            }
            TokenKind::Keyword(Kw::Replace) if self.is_punct_at(1, Punct::LParen) => self.call(),
            _ if self.is_ident() => match self.is_punct_at(1, Punct::LParen) {
                true => self.call(),
                false => Ok(Expr::Ident(self.ident()?)),
            },
            TokenKind::Punct(Punct::LParen) => self.parenthesised(),
            TokenKind::Punct(Punct::LBracket) => {
                self.bump();
                let items = self.exprs_until(Punct::RBracket)?;
                Ok(Expr::Array(items))
            }
            TokenKind::Punct(Punct::LBrace) => self.object(),
            TokenKind::Keyword(Kw::Case) => self.case(),
            TokenKind::Keyword(Kw::Any | Kw::Some | Kw::Every) => self.quantified(),
            TokenKind::Keyword(Kw::Array | Kw::First) => self.array_for(),
            TokenKind::Keyword(Kw::Object) => self.object_for(),
            _ => Err(self.error()),
        }
    }

    /// `expr, expr, ...` up to and including `close`; empty when `close` comes at once.
    pub(super) fn exprs_until(&mut self, close: Punct) -> PResult<Vec<Expr>> {
        let mut items = Vec::new();
        if self.eat_punct(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat_punct(close) {
                return Ok(items);
            }
            self.expect_punct(Punct::Comma)?;
        }
    }

    /// `name(args)`, `name(*)`, `name(DISTINCT x)`, `name(ALL x)`. The name is kept in lower case; whether it
    /// names a function is checked later. `*` is COUNT's alone, as n1ql.y has it.
    fn call(&mut self) -> PResult<Expr> {
        let pos = self.pos_here();
        let written = match self.ident_at(0) {
            Some(name) => name.to_string(),
            None => self.peek().text.to_string(),
        };
        self.bump();
        self.expect_punct(Punct::LParen)?;
        let mut call = Call { name: written.to_lowercase(), args: Vec::new(), distinct: false, star: false, pos };
        if self.is_punct(Punct::Star) && self.is_punct_at(1, Punct::RParen) {
            if call.name != "count" {
                return Err(self.error_at(&format!("Invalid aggregate function {written}(*)."), pos));
            }
            self.bump();
            self.bump();
            call.star = true;
        } else if self.is_kw(Kw::Distinct) || self.is_kw(Kw::All) {
            call.distinct = self.bump().kind == TokenKind::Keyword(Kw::Distinct);
            call.args.push(self.expr()?);
            self.expect_punct(Punct::RParen)?;
        } else {
            call.args = self.exprs_until(Punct::RParen)?;
        }
        Ok(Expr::Call(call))
    }

    /// `(expr)` or a subquery `(select)`. A parenthesised select followed by a set operator is the first term of
    /// a larger select: `((SELECT 1) UNION (SELECT 2))`.
    pub(super) fn parenthesised(&mut self) -> PResult<Expr> {
        self.expect_punct(Punct::LParen)?;
        let expr = if self.select_ahead() {
            Expr::Subquery(Box::new(self.fullselect()?))
        } else {
            match self.expr()? {
                Expr::Subquery(first) if self.set_op_ahead() => {
                    Expr::Subquery(Box::new(self.fullselect_after_first_term(*first)?))
                }
                expr => expr,
            }
        };
        self.expect_punct(Punct::RParen)?;
        Ok(expr)
    }

    /// Whether a select starts at the current token.
    pub(super) fn select_ahead(&self) -> bool {
        matches!(self.kind(), TokenKind::Keyword(Kw::Select | Kw::With | Kw::From))
    }

    /// `{name: value, ...}`; a member without a name takes it from its path (`{d.name}`) or its alias
    /// (`{d.x AS y}`).
    fn object(&mut self) -> PResult<Expr> {
        self.expect_punct(Punct::LBrace)?;
        let mut members = Vec::new();
        if self.eat_punct(Punct::RBrace) {
            return Ok(Expr::Object(members));
        }
        loop {
            let pos = self.pos_here();
            let first = self.expr()?;
            if self.eat_punct(Punct::Colon) {
                members.push((Some(first), self.expr()?));
            } else if let Some(alias) = self.opt_alias()? {
                members.push((Some(Expr::string(&alias)), first));
            } else if first.implicit_name().is_some() {
                members.push((None, first));
            } else {
                return Err(self.error_at(&format!("Object member missing name or value: {first}"), pos));
            }
            if self.eat_punct(Punct::RBrace) {
                return Ok(Expr::Object(members));
            }
            self.expect_punct(Punct::Comma)?;
        }
    }

    /// `CASE [operand] WHEN c THEN v ... [ELSE e] END`.
    fn case(&mut self) -> PResult<Expr> {
        self.expect_kw(Kw::Case)?;
        let operand = match self.is_kw(Kw::When) {
            true => None,
            false => Some(Box::new(self.expr()?)),
        };
        let mut whens = Vec::new();
        while self.eat_kw(Kw::When) {
            let when = self.expr()?;
            self.expect_kw(Kw::Then)?;
            whens.push((when, self.expr()?));
        }
        if whens.is_empty() {
            return Err(self.error());
        }
        let otherwise = match self.eat_kw(Kw::Else) {
            true => Some(Box::new(self.expr()?)),
            false => None,
        };
        self.expect_kw(Kw::End)?;
        Ok(Expr::Case(Case { operand, whens, otherwise }))
    }

    /// `ANY | SOME | EVERY | ANY AND EVERY | SOME AND EVERY bindings SATISFIES cond END`.
    fn quantified(&mut self) -> PResult<Expr> {
        let quantifier = match self.bump().kind {
            TokenKind::Keyword(Kw::Every) => Quantifier::Every,
            _ if self.eat_kw(Kw::And) => {
                self.expect_kw(Kw::Every)?;
                Quantifier::AnyAndEvery
            }
            _ => Quantifier::Any,
        };
        let bindings = self.bindings()?;
        self.expect_kw(Kw::Satisfies)?;
        let satisfies = Box::new(self.expr()?);
        self.expect_kw(Kw::End)?;
        Ok(Expr::Quantified { quantifier, bindings, satisfies })
    }

    /// `ARRAY | FIRST mapping FOR bindings [WHEN cond] END`.
    fn array_for(&mut self) -> PResult<Expr> {
        let kind = match self.bump().kind {
            TokenKind::Keyword(Kw::First) => ArrayForKind::First,
            _ => ArrayForKind::Array,
        };
        let mapping = Box::new(self.expr()?);
        let (bindings, when) = self.for_clause()?;
        Ok(Expr::ArrayFor { kind, mapping, bindings, when })
    }

    /// `OBJECT name : value FOR bindings [WHEN cond] END`.
    fn object_for(&mut self) -> PResult<Expr> {
        self.expect_kw(Kw::Object)?;
        let name = Box::new(self.expr()?);
        self.expect_punct(Punct::Colon)?;
        let value = Box::new(self.expr()?);
        let (bindings, when) = self.for_clause()?;
        Ok(Expr::ObjectFor { name, value, bindings, when })
    }

    /// `FOR bindings [WHEN cond] END`.
    fn for_clause(&mut self) -> PResult<(Vec<Binding>, Option<Box<Expr>>)> {
        self.expect_kw(Kw::For)?;
        let bindings = self.bindings()?;
        let when = match self.eat_kw(Kw::When) {
            true => Some(Box::new(self.expr()?)),
            false => None,
        };
        self.expect_kw(Kw::End)?;
        Ok((bindings, when))
    }

    /// `[name:]var IN|WITHIN expr, ...`.
    pub(super) fn bindings(&mut self) -> PResult<Vec<Binding>> {
        let mut bindings = Vec::new();
        loop {
            let first = self.ident()?;
            let (name_var, var) = match self.eat_punct(Punct::Colon) {
                true => (Some(first), self.ident()?),
                false => (None, first),
            };
            let within = match self.kind() {
                TokenKind::Keyword(Kw::In) => false,
                TokenKind::Keyword(Kw::Within) => true,
                _ => return Err(self.error()),
            };
            self.bump();
            bindings.push(Binding { name_var, var, expr: self.expr()?, within });
            if !self.eat_punct(Punct::Comma) {
                return Ok(bindings);
            }
        }
    }
}
