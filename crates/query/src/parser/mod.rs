//! SQL++ text → `ast::Statement`: a hand-written recursive-descent parser shaped after Couchbase Server 7.6's
//! grammar (`n1ql.y`), with its operator precedence (`expr.rs`), its error texts (`error.rs`) and its choices where
//! the grammar is ambiguous. Concepts live in their own files: expressions (`expr.rs`, `primary.rs`), SELECT
//! (`select.rs`), FROM (`from.rs`), DML (`dml.rs`), index DDL (`ddl.rs`).
//!
//! Like Couchbase's grammar, a statement that is not one of the statement forms is read as an expression: `SLECT
//! name` fails at `name` (an expression cannot go on with an identifier), and an input that is only an expression
//! is "Invalid input.". Nesting is bounded (`DEPTH_MAX`), so no input can exhaust the stack, here or in the code
//! that walks the tree afterwards.
//!
//! Hot path: a point lookup parses in a few microseconds; no allocation beyond the token list and the tree.

mod ddl;
mod dml;
mod error;
mod expr;
mod from;
mod primary;
mod select;
#[cfg(test)]
mod tests;

use crate::ast::{Expr, Pos, Statement};
use crate::lexer::{tokenize, Kw, Punct, Token, TokenKind};
use crate::QueryError;

pub(crate) type PResult<T> = Result<T, QueryError>;

/// The deepest nesting of expressions, subqueries and operator chains a statement may have. Each level costs a few
/// stack frames here and one level of recursion in every walk of the tree (display, planning, drop).
const DEPTH_MAX: usize = 128;

/// Parses one statement (an optional trailing `;` is allowed).
pub fn parse(text: &str) -> Result<Statement, QueryError> {
    let mut p = Parser::new(text.trim());
    let statement = p.statement()?;
    while p.eat_punct(Punct::Semi) {}
    p.expect_eof()?;
    Ok(statement)
}

/// Parses one expression, as Couchbase does for index keys and conditions.
pub fn parse_expression(text: &str) -> Result<Expr, QueryError> {
    let mut p = Parser::new(text.trim());
    let expr = p.expr()?;
    p.expect_eof()?;
    Ok(expr)
}

pub(crate) struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token<'a>>,
    pos: usize,
    /// Current nesting, against `DEPTH_MAX`.
    depth: usize,
    /// How many `?` placeholders have been numbered.
    next_positional: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, tokens: tokenize(text), pos: 0, depth: 0, next_positional: 0 }
    }

    // ---- tokens ----

    fn peek(&self) -> &Token<'a> {
        // `tokenize` always ends the list with Eof and `bump` never moves past it.
        &self.tokens[self.pos]
    }

    fn kind(&self) -> &TokenKind<'a> {
        &self.peek().kind
    }

    /// The kind of the token `n` places ahead (Eof past the end).
    fn kind_at(&self, n: usize) -> &TokenKind<'a> {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + n).min(last)].kind
    }

    /// Moves past the current token and returns it.
    fn bump(&mut self) -> Token<'a> {
        let token = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        token
    }

    /// Where the current token starts, 1-based.
    fn pos_here(&self) -> Pos {
        let t = self.peek();
        Pos { line: t.line + 1, column: t.column + 1 }
    }

    /// The byte offset just past the last consumed token.
    fn prev_end(&self) -> usize {
        match self.pos.checked_sub(1).and_then(|i| self.tokens.get(i)) {
            Some(t) => t.offset + t.text.len(),
            None => 0,
        }
    }

    fn is_kw(&self, kw: Kw) -> bool {
        *self.kind() == TokenKind::Keyword(kw)
    }

    fn is_kw_at(&self, n: usize, kw: Kw) -> bool {
        *self.kind_at(n) == TokenKind::Keyword(kw)
    }

    fn eat_kw(&mut self, kw: Kw) -> bool {
        let found = self.is_kw(kw);
        if found {
            self.bump();
        }
        found
    }

    fn expect_kw(&mut self, kw: Kw) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn is_punct(&self, p: Punct) -> bool {
        *self.kind() == TokenKind::Punct(p)
    }

    fn is_punct_at(&self, n: usize, p: Punct) -> bool {
        *self.kind_at(n) == TokenKind::Punct(p)
    }

    fn eat_punct(&mut self, p: Punct) -> bool {
        let found = self.is_punct(p);
        if found {
            self.bump();
        }
        found
    }

    fn expect_punct(&mut self, p: Punct) -> PResult<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn expect_eof(&self) -> PResult<()> {
        match self.kind() {
            TokenKind::Eof => Ok(()),
            _ => Err(self.error()),
        }
    }

    /// The identifier the token `n` places ahead spells, if it is one that may name things: a bare or backticked
    /// identifier, or one of the keywords n1ql.y permits as identifiers (`permitted_identifiers`).
    fn ident_at(&self, n: usize) -> Option<&str> {
        let last = self.tokens.len() - 1;
        let token = &self.tokens[(self.pos + n).min(last)];
        match &token.kind {
            TokenKind::Ident(name) => Some(name),
            TokenKind::Keyword(Kw::Default | Kw::User | Kw::Sequence | Kw::Vector) => Some(token.text),
            _ => None,
        }
    }

    fn is_ident(&self) -> bool {
        self.ident_at(0).is_some()
    }

    /// Takes a permitted identifier, or fails at the current token.
    fn ident(&mut self) -> PResult<String> {
        match self.ident_at(0) {
            Some(name) => {
                let name = name.to_string();
                self.bump();
                Ok(name)
            }
            None => Err(self.error()),
        }
    }

    /// `[AS] alias`: an alias after AS, or a permitted identifier standing where an alias may.
    fn opt_alias(&mut self) -> PResult<Option<String>> {
        if self.eat_kw(Kw::As) {
            return self.ident().map(Some);
        }
        match self.is_ident() {
            true => self.ident().map(Some),
            false => Ok(None),
        }
    }

    // ---- errors and nesting ----

    /// A syntax error at the current token.
    fn error(&self) -> QueryError {
        error::at_token(self.text, self.peek())
    }

    /// An error a grammar action raises about the construct that starts at `pos`.
    fn error_at(&self, message: &str, pos: Pos) -> QueryError {
        error::with_position(message, pos.line, pos.column)
    }

    /// Goes one level deeper; fails past `DEPTH_MAX`. The caller restores `depth` when it returns.
    fn nest(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            let pos = self.pos_here();
            return Err(self.error_at("syntax error - statement too deeply nested", pos));
        }
        Ok(())
    }

    // ---- statements ----

    fn statement(&mut self) -> PResult<Statement> {
        match self.kind() {
            TokenKind::Keyword(Kw::Explain) => {
                self.bump();
                Ok(Statement::Explain(Box::new(self.plain_statement()?)))
            }
            TokenKind::Keyword(Kw::Prepare) => self.prepare(),
            TokenKind::Keyword(Kw::Execute) => self.execute(),
            _ => self.plain_statement(),
        }
    }

    /// The statements EXPLAIN and PREPARE may hold (`stmt` in n1ql.y).
    fn plain_statement(&mut self) -> PResult<Statement> {
        match self.kind() {
            TokenKind::Keyword(Kw::Select | Kw::With | Kw::From) => Ok(Statement::Select(self.fullselect()?)),
            TokenKind::Keyword(Kw::Insert) => Ok(Statement::Insert(self.insert()?)),
            TokenKind::Keyword(Kw::Upsert) => Ok(Statement::Upsert(self.insert()?)),
            TokenKind::Keyword(Kw::Update) => Ok(Statement::Update(self.update()?)),
            TokenKind::Keyword(Kw::Delete) => Ok(Statement::Delete(self.delete()?)),
            TokenKind::Keyword(Kw::Merge) => Ok(Statement::Merge(self.merge()?)),
            TokenKind::Keyword(Kw::Create) => self.create(),
            TokenKind::Keyword(Kw::Drop) => self.drop(),
            TokenKind::Keyword(Kw::Alter) => self.alter_index(),
            TokenKind::Keyword(Kw::Build) => self.build_index(),
            _ => self.expression_statement(),
        }
    }

    /// Anything else is read as an expression, as n1ql.y's `expr_input`: a parenthesised select followed by a set
    /// operator is a select; a complete expression is "Invalid input."; otherwise the error is where the expression
    /// could not go on.
    fn expression_statement(&mut self) -> PResult<Statement> {
        let expr = self.expr()?;
        if let Expr::Subquery(select) = expr {
            if self.set_op_ahead() {
                return Ok(Statement::Select(self.fullselect_after_first_term(*select)?));
            }
        }
        match self.kind() {
            TokenKind::Eof => Err(QueryError::Syntax("Invalid input.".to_string())),
            _ => Err(self.error()),
        }
    }

    /// `PREPARE [FORCE] [name FROM|AS] statement`; the text kept is the statement's own, after the name.
    fn prepare(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Prepare)?;
        let force = self.eat_kw(Kw::Force);
        let named = (self.is_ident() || matches!(self.kind(), TokenKind::Str(_)))
            && (self.is_kw_at(1, Kw::From) || self.is_kw_at(1, Kw::As));
        let name = if named {
            let name = match self.kind() {
                TokenKind::Str(s) => {
                    let s = s.to_string();
                    self.bump();
                    s
                }
                _ => self.ident()?,
            };
            self.bump(); // FROM or AS
            Some(name)
        } else {
            None
        };
        let start = self.peek().offset;
        let statement = self.plain_statement()?;
        let text = self.text[start..self.prev_end()].to_string();
        Ok(Statement::Prepare { name, force, statement: Box::new(statement), text })
    }

    /// `EXECUTE name [USING [..] | {..}]`.
    fn execute(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Execute)?;
        let name = self.expr()?;
        let using = if self.eat_kw(Kw::Using) {
            match self.kind() {
                TokenKind::Punct(Punct::LBracket | Punct::LBrace) => Some(self.primary()?),
                _ => return Err(self.error()),
            }
        } else {
            None
        };
        Ok(Statement::Execute { name, using })
    }
}
