//! Temporary rendering until the normalised renderer lands: replaced by the parser's `display.rs`.

use std::fmt;

use super::Expr;

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Ident(n) => write!(f, "`{}`", n.replace('`', "``")),
            Expr::Field(b, n) => write!(f, "({b}.`{}`)", n.replace('`', "``")),
            other => write!(f, "{other:?}"),
        }
    }
}
