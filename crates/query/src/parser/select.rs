//! SELECT: `[WITH ...] terms [ORDER BY ...] [LIMIT n] [OFFSET n]`, where terms are subselects (SELECT-first or
//! FROM-first) and parenthesised selects joined by UNION / INTERSECT / EXCEPT [ALL], left to right.

use super::{PResult, Parser};
use crate::ast::{GroupBy, OrderTerm, Projection, ResultTerm, Select, SetExpr, SetOp, Subselect, WithTerm};
use crate::lexer::{Kw, Punct, TokenKind};

/// A parenthesised select as an operand of a set operation: its body when it has nothing else, so that
/// `(SELECT 1 UNION SELECT 2)` nests like the unparenthesised form would.
pub(super) fn set_operand(select: Select) -> SetExpr {
    if select.with.is_empty() && select.order_by.is_empty() && select.limit.is_none() && select.offset.is_none() {
        select.body
    } else {
        SetExpr::Select(Box::new(select))
    }
}

impl<'a> Parser<'a> {
    pub(super) fn fullselect(&mut self) -> PResult<Select> {
        let saved = self.depth;
        // A select costs more stack than an expression level: count it twice.
        self.nest()?;
        self.nest()?;
        let with = match self.is_kw(Kw::With) {
            true => self.with_clause()?,
            false => Vec::new(),
        };
        let body = self.select_terms(None)?;
        let select = self.finish_select(with, body);
        self.depth = saved;
        select
    }

    /// The rest of a select whose first term, a parenthesised select, has been read (and a set operator follows).
    pub(super) fn fullselect_after_first_term(&mut self, first: Select) -> PResult<Select> {
        let body = self.select_terms(Some(set_operand(first)))?;
        self.finish_select(Vec::new(), body)
    }

    fn finish_select(&mut self, with: Vec<WithTerm>, body: SetExpr) -> PResult<Select> {
        let mut select = Select { with, body, order_by: Vec::new(), limit: None, offset: None };
        if self.eat_kw(Kw::Order) {
            self.expect_kw(Kw::By)?;
            select.order_by = self.sort_terms()?;
        }
        // LIMIT and OFFSET come in either order.
        if self.eat_kw(Kw::Limit) {
            select.limit = Some(self.expr()?);
            if self.eat_kw(Kw::Offset) {
                select.offset = Some(self.expr()?);
            }
        } else if self.eat_kw(Kw::Offset) {
            select.offset = Some(self.expr()?);
            if self.eat_kw(Kw::Limit) {
                select.limit = Some(self.expr()?);
            }
        }
        Ok(select)
    }

    fn select_terms(&mut self, first: Option<SetExpr>) -> PResult<SetExpr> {
        let saved = self.depth;
        let mut left = match first {
            Some(term) => term,
            None => self.select_term(true)?,
        };
        while let Some((op, all)) = self.set_op() {
            self.nest()?;
            let right = self.select_term(false)?;
            left = SetExpr::SetOp { op, all, left: Box::new(left), right: Box::new(right) };
        }
        self.depth = saved;
        Ok(left)
    }

    pub(super) fn set_op_ahead(&self) -> bool {
        matches!(self.kind(), TokenKind::Keyword(Kw::Union | Kw::Intersect | Kw::Except))
    }

    fn set_op(&mut self) -> Option<(SetOp, bool)> {
        let op = match self.kind() {
            TokenKind::Keyword(Kw::Union) => SetOp::Union,
            TokenKind::Keyword(Kw::Intersect) => SetOp::Intersect,
            TokenKind::Keyword(Kw::Except) => SetOp::Except,
            _ => return None,
        };
        self.bump();
        Some((op, self.eat_kw(Kw::All)))
    }

    /// A subselect or a parenthesised select; a parenthesised select that comes first must be followed by a set
    /// operator (otherwise it is only an expression).
    fn select_term(&mut self, first: bool) -> PResult<SetExpr> {
        if !self.is_punct(Punct::LParen) {
            return Ok(SetExpr::Query(Box::new(self.subselect()?)));
        }
        self.bump();
        let select = match self.select_ahead() || self.is_punct(Punct::LParen) {
            true => self.fullselect()?,
            false => return Err(self.error()),
        };
        self.expect_punct(Punct::RParen)?;
        if first && !self.set_op_ahead() {
            return Err(self.error());
        }
        Ok(set_operand(select))
    }

    /// `SELECT projection [FROM ...] [LET ...] [WHERE ...] [GROUP BY ...]` or the same with FROM first:
    /// `FROM ... [LET ...] [WHERE ...] [GROUP BY ...] SELECT projection`.
    fn subselect(&mut self) -> PResult<Subselect> {
        if self.eat_kw(Kw::From) {
            let from = Some(self.sources()?);
            let let_ = self.opt_let()?;
            let where_ = self.opt_where()?;
            let group_by = self.opt_group_by()?;
            self.expect_kw(Kw::Select)?;
            self.skip_hints();
            let projection = self.projection()?;
            return Ok(Subselect { projection, from, let_, where_, group_by });
        }
        self.expect_kw(Kw::Select)?;
        self.skip_hints();
        let projection = self.projection()?;
        let from = match self.eat_kw(Kw::From) {
            true => Some(self.sources()?),
            false => None,
        };
        let let_ = self.opt_let()?;
        let where_ = self.opt_where()?;
        let group_by = self.opt_group_by()?;
        Ok(Subselect { projection, from, let_, where_, group_by })
    }

    /// Optimizer hints after SELECT, UPDATE, DELETE or MERGE are accepted and ignored.
    pub(super) fn skip_hints(&mut self) {
        if *self.kind() == TokenKind::OptimHints {
            self.bump();
        }
    }

    /// `[DISTINCT|ALL] (RAW|ELEMENT|VALUE expr [[AS] alias] | term, ...)`.
    fn projection(&mut self) -> PResult<Projection> {
        let distinct = self.eat_kw(Kw::Distinct);
        if !distinct {
            self.eat_kw(Kw::All);
        }
        if matches!(self.kind(), TokenKind::Keyword(Kw::Raw | Kw::Element | Kw::Value)) {
            self.bump();
            let expr = self.expr()?;
            let alias = self.opt_alias()?;
            return Ok(Projection { distinct, raw: true, terms: vec![ResultTerm::Expr { expr, alias }] });
        }
        let terms = self.result_terms()?;
        Ok(Projection { distinct, raw: false, terms })
    }

    /// `*`, `expr.*` or `expr [[AS] alias]`, separated by commas.
    pub(super) fn result_terms(&mut self) -> PResult<Vec<ResultTerm>> {
        let mut terms = Vec::new();
        loop {
            let term = if self.eat_punct(Punct::Star) {
                ResultTerm::Star
            } else {
                let expr = self.expr()?;
                if self.is_punct(Punct::Dot) && self.is_punct_at(1, Punct::Star) {
                    self.bump();
                    self.bump();
                    ResultTerm::ExprStar(expr)
                } else {
                    ResultTerm::Expr { expr, alias: self.opt_alias()? }
                }
            };
            terms.push(term);
            if !self.eat_punct(Punct::Comma) {
                return Ok(terms);
            }
        }
    }

    /// `LET name = expr, ...`.
    fn opt_let(&mut self) -> PResult<Vec<(String, crate::ast::Expr)>> {
        match self.eat_kw(Kw::Let) {
            true => self.let_bindings(),
            false => Ok(Vec::new()),
        }
    }

    fn let_bindings(&mut self) -> PResult<Vec<(String, crate::ast::Expr)>> {
        let mut bindings = Vec::new();
        loop {
            let name = self.ident()?;
            self.expect_punct(Punct::Eq)?;
            bindings.push((name, self.expr()?));
            if !self.eat_punct(Punct::Comma) {
                return Ok(bindings);
            }
        }
    }

    pub(super) fn opt_where(&mut self) -> PResult<Option<crate::ast::Expr>> {
        match self.eat_kw(Kw::Where) {
            true => self.expr().map(Some),
            false => Ok(None),
        }
    }

    /// `GROUP BY expr [[AS] alias], ... [LETTING ...] [HAVING cond]`, or LETTING alone.
    fn opt_group_by(&mut self) -> PResult<Option<GroupBy>> {
        if self.eat_kw(Kw::Letting) {
            let letting = self.let_bindings()?;
            return Ok(Some(GroupBy { keys: Vec::new(), letting, having: None }));
        }
        if !self.eat_kw(Kw::Group) {
            return Ok(None);
        }
        self.expect_kw(Kw::By)?;
        let mut keys = Vec::new();
        loop {
            let expr = self.expr()?;
            keys.push((expr, self.opt_alias()?));
            if !self.eat_punct(Punct::Comma) {
                break;
            }
        }
        let letting = match self.eat_kw(Kw::Letting) {
            true => self.let_bindings()?,
            false => Vec::new(),
        };
        let having = match self.eat_kw(Kw::Having) {
            true => Some(self.expr()?),
            false => None,
        };
        Ok(Some(GroupBy { keys, letting, having }))
    }

    /// `expr [ASC|DESC] [NULLS FIRST|LAST], ...`.
    fn sort_terms(&mut self) -> PResult<Vec<OrderTerm>> {
        let mut terms = Vec::new();
        loop {
            let expr = self.expr()?;
            let desc = match self.kind() {
                TokenKind::Keyword(Kw::Asc) => Some(false),
                TokenKind::Keyword(Kw::Desc) => Some(true),
                _ => None,
            };
            if desc.is_some() {
                self.bump();
            }
            let nulls_first = match self.eat_kw(Kw::Nulls) {
                true if self.eat_kw(Kw::First) => Some(true),
                true if self.eat_kw(Kw::Last) => Some(false),
                true => return Err(self.error()),
                false => None,
            };
            terms.push(OrderTerm { expr, desc: desc.unwrap_or(false), nulls_first });
            if !self.eat_punct(Punct::Comma) {
                return Ok(terms);
            }
        }
    }

    /// `WITH alias AS (expr), ...`.
    fn with_clause(&mut self) -> PResult<Vec<WithTerm>> {
        self.expect_kw(Kw::With)?;
        let mut terms = Vec::new();
        loop {
            let alias = self.ident()?;
            self.expect_kw(Kw::As)?;
            if !self.is_punct(Punct::LParen) {
                return Err(self.error());
            }
            terms.push(WithTerm { alias, expr: self.parenthesised()? });
            if !self.eat_punct(Punct::Comma) {
                return Ok(terms);
            }
        }
    }
}
