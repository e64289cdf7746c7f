//! Operators, by precedence climbing with n1ql.y's table and yacc's rules for resolving it.
//!
//! n1ql.y, lowest first: OR; AND; NOT (right); `= == != <>` (non-assoc); `< <= > >=` (non-assoc); LIKE; ESCAPE;
//! BETWEEN; IN WITHIN; EXISTS; IS; `||`; `+ -`; `* / %`; unary minus; `.` and `[` (postfix).
//!
//! yacc decides between finishing the operator on its stack (precedence `r`) and taking the next one (precedence
//! `p`) by comparing them: `p > r` takes it, `p < r` finishes, equal follows associativity (non-assoc is an error).
//! `parse_bp(r, assoc)` reads an operand of such an operator. Two consequences worth knowing, both Couchbase's:
//! the NOT of `NOT IN` / `NOT LIKE` / `NOT BETWEEN` / `NOT WITHIN` is compared with NOT's precedence, so
//! `a = b NOT IN c` is `(a = b) NOT IN c`; and BETWEEN's bounds are restricted expressions (`b_expr`: paths,
//! arithmetic and `||` only), so the AND after them always belongs to BETWEEN.

use super::{PResult, Parser};
use crate::ast::{BinaryOp, Expr, IsTest};
use crate::lexer::{Kw, Punct, TokenKind};

pub(super) const P_OR: u8 = 1;
pub(super) const P_AND: u8 = 2;
pub(super) const P_NOT: u8 = 3;
const P_EQ: u8 = 4;
const P_CMP: u8 = 5;
const P_LIKE: u8 = 6;
const P_ESCAPE: u8 = 7;
const P_BETWEEN: u8 = 8;
const P_IN: u8 = 9;
pub(super) const P_EXISTS: u8 = 10;
const P_IS: u8 = 11;
const P_CONCAT: u8 = 13;
const P_ADD: u8 = 14;
const P_MUL: u8 = 15;
pub(super) const P_UMINUS: u8 = 16;
const P_POSTFIX: u8 = 17;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Assoc {
    Left,
    Right,
    Non,
}

/// An operator that continues an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Infix {
    Or,
    And,
    /// NOT followed by BETWEEN, LIKE, IN or WITHIN.
    Not,
    Binary(BinaryOp),
    Like,
    Between,
    In,
    Within,
    Is,
    /// `.name`, `.[expr]`
    Dot,
    /// `[expr]`, `[a:b]`
    Subscript,
}

impl Infix {
    fn precedence(self) -> u8 {
        match self {
            Infix::Or => P_OR,
            Infix::And => P_AND,
            Infix::Not => P_NOT,
            Infix::Binary(op) => match op {
                BinaryOp::Eq | BinaryOp::Ne => P_EQ,
                BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => P_CMP,
                BinaryOp::Concat => P_CONCAT,
                BinaryOp::Add | BinaryOp::Sub => P_ADD,
                BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => P_MUL,
            },
            Infix::Like => P_LIKE,
            Infix::Between => P_BETWEEN,
            Infix::In | Infix::Within => P_IN,
            Infix::Is => P_IS,
            Infix::Dot | Infix::Subscript => P_POSTFIX,
        }
    }

    /// Whether a restricted expression (n1ql.y's `b_expr`, BETWEEN's bounds) may use the operator.
    fn in_b_expr(self) -> bool {
        match self {
            Infix::Binary(op) => matches!(
                op,
                BinaryOp::Concat | BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod
            ),
            Infix::Dot | Infix::Subscript => true,
            _ => false,
        }
    }
}

/// Which n-ary node the loop may still extend (`a AND b AND c` is one AND; a parenthesised one is not extended).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    And,
    Or,
}

impl<'a> Parser<'a> {
    /// A full expression.
    pub(super) fn expr(&mut self) -> PResult<Expr> {
        self.parse_bp(0, Assoc::Left, false)
    }

    /// A restricted expression (`b_expr`): a primary with paths, subscripts, arithmetic and `||`.
    pub(super) fn b_expr(&mut self) -> PResult<Expr> {
        self.parse_bp(0, Assoc::Left, true)
    }

    /// The operand of an operator of precedence `prec`: everything that binds tighter, by yacc's rules.
    pub(super) fn parse_bp(&mut self, prec: u8, assoc: Assoc, restricted: bool) -> PResult<Expr> {
        let saved = self.depth;
        self.nest()?;
        let result = self.prefix(restricted).and_then(|left| self.continue_expr(left, prec, assoc, restricted));
        self.depth = saved;
        result
    }

    /// Applies the operators that follow `left` while they bind tighter than `prec`.
    pub(super) fn continue_expr(&mut self, mut left: Expr, prec: u8, assoc: Assoc, restricted: bool) -> PResult<Expr> {
        let saved = self.depth;
        let mut open = Open::None;
        while let Some(op) = self.infix() {
            if restricted && !op.in_b_expr() {
                break;
            }
            let p = op.precedence();
            if p < prec || (p == prec && assoc == Assoc::Left) {
                break;
            }
            if p == prec && assoc == Assoc::Non {
                return Err(self.error());
            }
            // Each operator applied here wraps `left` once more.
            self.nest()?;
            left = self.apply(op, left, &mut open, restricted)?;
        }
        self.depth = saved;
        Ok(left)
    }

    /// The operator at the current token, if one can continue an expression here.
    fn infix(&self) -> Option<Infix> {
        let op = match self.kind() {
            TokenKind::Keyword(Kw::Or) => Infix::Or,
            TokenKind::Keyword(Kw::And) => Infix::And,
            TokenKind::Keyword(Kw::Not) => Infix::Not,
            TokenKind::Keyword(Kw::Like) => Infix::Like,
            TokenKind::Keyword(Kw::Between) => Infix::Between,
            TokenKind::Keyword(Kw::In) => Infix::In,
            TokenKind::Keyword(Kw::Within) => Infix::Within,
            TokenKind::Keyword(Kw::Is) => Infix::Is,
            TokenKind::Punct(p) => match p {
                Punct::Eq | Punct::DEq => Infix::Binary(BinaryOp::Eq),
                Punct::Ne => Infix::Binary(BinaryOp::Ne),
                Punct::Lt => Infix::Binary(BinaryOp::Lt),
                Punct::Le => Infix::Binary(BinaryOp::Le),
                Punct::Gt => Infix::Binary(BinaryOp::Gt),
                Punct::Ge => Infix::Binary(BinaryOp::Ge),
                Punct::Concat => Infix::Binary(BinaryOp::Concat),
                Punct::Plus => Infix::Binary(BinaryOp::Add),
                Punct::Minus => Infix::Binary(BinaryOp::Sub),
                Punct::Star => Infix::Binary(BinaryOp::Mul),
                Punct::Div => Infix::Binary(BinaryOp::Div),
                Punct::Mod => Infix::Binary(BinaryOp::Mod),
                // `expr.*` ends the expression: the projection takes the `.*`.
                Punct::Dot if self.is_punct_at(1, Punct::Star) => return None,
                Punct::Dot => Infix::Dot,
                Punct::LBracket => Infix::Subscript,
                _ => return None,
            },
            _ => return None,
        };
        Some(op)
    }

    fn apply(&mut self, op: Infix, left: Expr, open: &mut Open, restricted: bool) -> PResult<Expr> {
        let p = op.precedence();
        let (expr, now_open) = match op {
            Infix::Or | Infix::And => {
                self.bump();
                let right = self.parse_bp(p, Assoc::Left, false)?;
                let (kind, build): (Open, fn(Vec<Expr>) -> Expr) =
                    if op == Infix::And { (Open::And, Expr::And) } else { (Open::Or, Expr::Or) };
                let expr = match (left, kind) {
                    (Expr::And(mut items), Open::And) | (Expr::Or(mut items), Open::Or) if *open == kind => {
                        items.push(right);
                        build(items)
                    }
                    (left, _) => build(vec![left, right]),
                };
                (expr, kind)
            }
            Infix::Not => {
                self.bump();
                (self.negatable(left, true)?, Open::None)
            }
            Infix::Like | Infix::Between | Infix::In | Infix::Within => (self.negatable(left, false)?, Open::None),
            Infix::Binary(binary) => {
                self.bump();
                let assoc = if p == P_EQ || p == P_CMP { Assoc::Non } else { Assoc::Left };
                let right = self.parse_bp(p, assoc, restricted)?;
                (Expr::binary(binary, left, right), Open::None)
            }
            Infix::Is => (self.is_test(left)?, Open::None),
            Infix::Dot => (self.dot(left)?, Open::None),
            Infix::Subscript => (self.subscript(left)?, Open::None),
        };
        *open = now_open;
        Ok(expr)
    }

    /// LIKE, BETWEEN, IN or WITHIN at the current token (after NOT when `negated`).
    fn negatable(&mut self, left: Expr, negated: bool) -> PResult<Expr> {
        let expr = Box::new(left);
        if self.eat_kw(Kw::Like) {
            let pattern = Box::new(self.parse_bp(P_LIKE, Assoc::Non, false)?);
            let escape = match self.eat_kw(Kw::Escape) {
                true => Some(Box::new(self.parse_bp(P_ESCAPE, Assoc::Non, false)?)),
                false => None,
            };
            Ok(Expr::Like { expr, pattern, escape, negated })
        } else if self.eat_kw(Kw::Between) {
            let low = Box::new(self.b_expr()?);
            self.expect_kw(Kw::And)?;
            let high = Box::new(self.b_expr()?);
            Ok(Expr::Between { expr, low, high, negated })
        } else if self.eat_kw(Kw::In) {
            let list = Box::new(self.parse_bp(P_IN, Assoc::Non, false)?);
            Ok(Expr::In { expr, list, negated })
        } else if self.eat_kw(Kw::Within) {
            let target = Box::new(self.parse_bp(P_IN, Assoc::Non, false)?);
            Ok(Expr::Within { expr, target, negated })
        } else {
            Err(self.error())
        }
    }

    /// `IS [NOT] NULL | MISSING | VALUED | KNOWN | UNKNOWN`.
    fn is_test(&mut self, left: Expr) -> PResult<Expr> {
        self.expect_kw(Kw::Is)?;
        let not = self.eat_kw(Kw::Not);
        let (test, negated) = match self.kind() {
            TokenKind::Keyword(Kw::Null) => (IsTest::Null, not),
            TokenKind::Keyword(Kw::Missing) => (IsTest::Missing, not),
            TokenKind::Keyword(Kw::Valued | Kw::Known) => (IsTest::Valued, not),
            // IS UNKNOWN is IS NOT VALUED, and IS NOT UNKNOWN is IS VALUED.
            TokenKind::Keyword(Kw::Unknown) => (IsTest::Valued, !not),
            _ => return Err(self.error()),
        };
        self.bump();
        Ok(Expr::Is { expr: Box::new(left), test, negated })
    }

    /// `.name` or `.[expr]`.
    fn dot(&mut self, left: Expr) -> PResult<Expr> {
        self.expect_punct(Punct::Dot)?;
        if self.eat_punct(Punct::LBracket) {
            let name = self.expr()?;
            self.expect_punct(Punct::RBracket)?;
            return Ok(Expr::DynamicField(Box::new(left), Box::new(name)));
        }
        let name = self.ident()?;
        Ok(Expr::Field(Box::new(left), name))
    }

    /// `[i]`, `[a:]`, `[a:b]`, `[:b]`, `[:]` and `[]`; a missing start is 0, so `[:b]` and `[]` are slices from 0.
    fn subscript(&mut self, left: Expr) -> PResult<Expr> {
        self.expect_punct(Punct::LBracket)?;
        let base = Box::new(left);
        let start = match self.kind() {
            TokenKind::Punct(Punct::Colon | Punct::RBracket) => None,
            _ => Some(self.expr()?),
        };
        let start = match start {
            Some(index) if self.is_punct(Punct::RBracket) => {
                self.bump();
                return Ok(Expr::Element(base, Box::new(index)));
            }
            other => other,
        };
        let end = if self.eat_punct(Punct::Colon) && !self.is_punct(Punct::RBracket) {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_punct(Punct::RBracket)?;
        let start = Box::new(start.unwrap_or_else(|| Expr::int(0)));
        Ok(Expr::Slice { base, start, end })
    }

    /// A prefix operator and its operand, or a primary expression.
    fn prefix(&mut self, restricted: bool) -> PResult<Expr> {
        match self.kind() {
            TokenKind::Keyword(Kw::Not) if !restricted => {
                self.bump();
                Ok(Expr::Not(Box::new(self.parse_bp(P_NOT, Assoc::Right, false)?)))
            }
            TokenKind::Keyword(Kw::Exists) if !restricted => {
                self.bump();
                Ok(Expr::Exists(Box::new(self.parse_bp(P_EXISTS, Assoc::Non, false)?)))
            }
            TokenKind::Punct(Punct::Minus) => {
                self.bump();
                Ok(Expr::Neg(Box::new(self.parse_bp(P_UMINUS, Assoc::Right, false)?)))
            }
            _ => self.primary(),
        }
    }
}
