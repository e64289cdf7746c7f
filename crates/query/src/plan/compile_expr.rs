//! Compiling expressions: names to slots, function names to the library, aggregates to the slots the Group
//! operator fills, subqueries to plans.

use std::sync::Arc;

use super::keyspace::QueryContext;
use super::scope::{Scopes, VarKind};
use super::{AggSpec, CBinding, CExpr, Slot};
use crate::ast::{Binding, Call, Expr, Param, Pos, Select};
use crate::datastore::Datastore;
use crate::functions::{self, Aggregate, FnKind};
use crate::value::Value;
use crate::QueryError;

/// Aggregates being collected for a grouping block: each distinct call (by its text) gets one slot.
pub(crate) struct AggCollector {
    pub specs: Vec<AggSpec>,
    keys: Vec<String>,
}

/// The state of one statement's compilation.
pub struct Compiler<'a> {
    pub(crate) ds: &'a dyn Datastore,
    pub(crate) context: QueryContext,
    pub(crate) scopes: Scopes,
    /// Set while compiling the parts of a grouping block that may hold aggregates.
    pub(crate) aggs: Option<AggCollector>,
    /// Projection aliases ORDER BY may name: the projection's slot and its member names.
    pub(crate) order_aliases: Option<(Slot, Vec<Arc<str>>)>,
    /// Set while compiling an aggregate's argument (aggregates may not nest).
    in_aggregate: bool,
    /// For each subquery being compiled: the first slot it owns, and whether it read a slot below it.
    corr: Vec<(Slot, bool)>,
    next_subquery: usize,
}

impl<'a> Compiler<'a> {
    pub fn new(ds: &'a dyn Datastore, context: QueryContext) -> Compiler<'a> {
        Compiler {
            ds,
            context,
            scopes: Scopes::new(),
            aggs: None,
            order_aliases: None,
            in_aggregate: false,
            corr: Vec::new(),
            next_subquery: 0,
        }
    }

    /// A slot read, noting correlation for the subqueries being compiled.
    pub(crate) fn var(&mut self, slot: Slot) -> CExpr {
        for (floor, correlated) in self.corr.iter_mut() {
            if slot < *floor {
                *correlated = true;
            }
        }
        CExpr::Var(slot)
    }

    pub fn expr(&mut self, e: &Expr) -> Result<CExpr, QueryError> {
        let b = |c: CExpr| Box::new(c);
        Ok(match e {
            Expr::Literal(v) => CExpr::Const(v.clone()),
            Expr::Ident(name) => self.ident(name)?,
            Expr::Param(Param::Named(n)) => CExpr::Named(Arc::from(n.as_str())),
            Expr::Param(Param::Positional(i)) => CExpr::Positional(*i),
            Expr::Field(base, name) => CExpr::Field(b(self.expr(base)?), Arc::from(name.as_str())),
            Expr::DynamicField(base, name) => CExpr::DynField(b(self.expr(base)?), b(self.expr(name)?)),
            Expr::Element(base, i) => CExpr::Element(b(self.expr(base)?), b(self.expr(i)?)),
            Expr::Slice { base, start, end } => CExpr::Slice(
                b(self.expr(base)?),
                b(self.expr(start)?),
                end.as_deref().map(|e| self.expr(e)).transpose()?.map(Box::new),
            ),
            Expr::Neg(x) => match self.expr(x)? {
                CExpr::Const(Value::Number(n)) => CExpr::Const(Value::Number(n.neg())),
                c => CExpr::Neg(b(c)),
            },
            Expr::Not(x) => CExpr::Not(b(self.expr(x)?)),
            Expr::Binary(op, l, r) => CExpr::Binary(*op, b(self.expr(l)?), b(self.expr(r)?)),
            Expr::And(xs) => CExpr::And(self.exprs(xs)?),
            Expr::Or(xs) => CExpr::Or(self.exprs(xs)?),
            Expr::Like { expr, pattern, escape, negated } => CExpr::Like {
                expr: b(self.expr(expr)?),
                pattern: b(self.expr(pattern)?),
                escape: escape.as_deref().map(|e| self.expr(e)).transpose()?.map(Box::new),
                negated: *negated,
            },
            Expr::In { expr, list, negated } => {
                CExpr::In { expr: b(self.expr(expr)?), list: b(self.expr(list)?), negated: *negated }
            }
            Expr::Within { expr, target, negated } => {
                CExpr::Within { expr: b(self.expr(expr)?), target: b(self.expr(target)?), negated: *negated }
            }
            Expr::Between { expr, low, high, negated } => CExpr::Between {
                expr: b(self.expr(expr)?),
                low: b(self.expr(low)?),
                high: b(self.expr(high)?),
                negated: *negated,
            },
            Expr::Is { expr, test, negated } => CExpr::Is { expr: b(self.expr(expr)?), test: *test, negated: *negated },
            Expr::Case(c) => CExpr::Case {
                operand: c.operand.as_deref().map(|e| self.expr(e)).transpose()?.map(Box::new),
                whens: c.whens.iter().map(|(w, t)| Ok((self.expr(w)?, self.expr(t)?))).collect::<Result<_, _>>()?,
                otherwise: c.otherwise.as_deref().map(|e| self.expr(e)).transpose()?.map(Box::new),
            },
            Expr::Call(call) => self.call(call)?,
            Expr::Array(items) => CExpr::Array(self.exprs(items)?),
            Expr::Object(members) => {
                let mut out = Vec::with_capacity(members.len());
                for (name, value) in members {
                    let name = match name {
                        Some(n) => self.expr(n)?,
                        None => match value.implicit_name() {
                            Some(n) => CExpr::Const(Value::string(n)),
                            None => {
                                return Err(QueryError::semantics(
                                    "Object member missing name or value: an unnamed member must be a path",
                                ))
                            }
                        },
                    };
                    out.push((name, self.expr(value)?));
                }
                CExpr::Object(out)
            }
            Expr::Quantified { quantifier, bindings, satisfies } => {
                let (bindings, satisfies) = self.with_bindings(bindings, |c| c.expr(satisfies))?;
                CExpr::Quantified { quantifier: *quantifier, bindings, satisfies: b(satisfies) }
            }
            Expr::ArrayFor { kind, mapping, bindings, when } => {
                let (bindings, (mapping, when)) = self.with_bindings(bindings, |c| {
                    Ok((c.expr(mapping)?, when.as_deref().map(|w| c.expr(w)).transpose()?))
                })?;
                CExpr::ArrayFor { kind: *kind, mapping: b(mapping), bindings, when: when.map(Box::new) }
            }
            Expr::ObjectFor { name, value, bindings, when } => {
                let (bindings, (name, value, when)) = self.with_bindings(bindings, |c| {
                    Ok((c.expr(name)?, c.expr(value)?, when.as_deref().map(|w| c.expr(w)).transpose()?))
                })?;
                CExpr::ObjectFor { name: b(name), value: b(value), bindings, when: when.map(Box::new) }
            }
            Expr::Subquery(select) => self.subquery(select)?,
            Expr::Exists(x) => CExpr::Exists(b(self.expr(x)?)),
        })
    }

    pub(crate) fn exprs(&mut self, xs: &[Expr]) -> Result<Vec<CExpr>, QueryError> {
        xs.iter().map(|x| self.expr(x)).collect()
    }

    fn ident(&mut self, name: &str) -> Result<CExpr, QueryError> {
        if let Some((slot, names)) = &self.order_aliases {
            if names.iter().any(|n| &**n == name) {
                let slot = *slot;
                return Ok(CExpr::Field(Box::new(self.var(slot)), Arc::from(name)));
            }
        }
        if let Some((slot, _)) = self.scopes.lookup(name) {
            return Ok(self.var(slot));
        }
        match self.scopes.block_terms() {
            Some([(_, slot)]) => {
                let slot = *slot;
                Ok(CExpr::Field(Box::new(self.var(slot)), Arc::from(name)))
            }
            _ => Err(QueryError::AmbiguousReference(name.to_string())),
        }
    }

    /// Compiles `body` with the range variables of `bindings` in scope; the bound expressions see only the
    /// scope outside (and the variables bound before them).
    fn with_bindings<T>(
        &mut self,
        bindings: &[Binding],
        body: impl FnOnce(&mut Self) -> Result<T, QueryError>,
    ) -> Result<(Vec<CBinding>, T), QueryError> {
        let mut out = Vec::with_capacity(bindings.len());
        for bnd in bindings {
            out.push(CBinding { name_slot: None, slot: 0, expr: self.expr(&bnd.expr)?, within: bnd.within });
        }
        self.scopes.push();
        for (c, bnd) in out.iter_mut().zip(bindings) {
            c.name_slot = bnd.name_var.as_deref().map(|n| self.scopes.bind(n, VarKind::Variable));
            c.slot = self.scopes.bind(&bnd.var, VarKind::Variable);
        }
        let result = body(self);
        self.scopes.pop();
        Ok((out, result?))
    }

    fn call(&mut self, call: &Call) -> Result<CExpr, QueryError> {
        let Some(def) = functions::lookup(&call.name) else {
            // Couchbase then looks for a user-defined function, named relative to the query context, and says
            // which name it tried.
            let udf = match (&self.context.bucket, &self.context.scope) {
                (Some(b), Some(s)) => format!("default:{b}.{s}.{}", call.name),
                _ => format!("default:{}", call.name),
            };
            return Err(QueryError::Syntax(format!(
                "Invalid function {} (resolving to {udf}) (near line {}, column {})",
                call.name, call.pos.line, call.pos.column
            )));
        };
        let arity = if call.star { 1 } else { call.args.len() };
        if arity < def.min_args || arity > def.max_args {
            let must = if def.min_args == def.max_args {
                format!("{}", def.max_args)
            } else {
                format!("between {} and {}", def.min_args, def.max_args)
            };
            return Err(QueryError::Syntax(format!(
                "Number of arguments to function {} must be {must} (near line {}, column {}).",
                call.name, call.pos.line, call.pos.column
            )));
        }
        match def.kind {
            FnKind::Aggregate(agg) => self.aggregate(call, agg),
            FnKind::Special => self.special(call),
            FnKind::Scalar(_) => {
                if call.star || call.distinct {
                    return Err(QueryError::Syntax(format!(
                        "syntax error - line {}, column {}: {} does not take * or DISTINCT",
                        call.pos.line, call.pos.column, call.name
                    )));
                }
                Ok(CExpr::Call(def, self.exprs(&call.args)?))
            }
        }
    }

    fn aggregate(&mut self, call: &Call, func: Aggregate) -> Result<CExpr, QueryError> {
        if self.in_aggregate {
            return Err(QueryError::Plan(format!(
                "Nested aggregates are not allowed (near line {}, column {}).",
                call.pos.line, call.pos.column
            )));
        }
        if self.aggs.is_none() {
            return Err(QueryError::semantics(format!(
                "Aggregate function {}() is not allowed here (only in the projection, LETTING, HAVING and ORDER BY).",
                call.name
            )));
        }
        if call.star && func != Aggregate::Count {
            return Err(QueryError::Syntax(format!("{}(*) is not allowed", call.name)));
        }
        let key = format!("{call:?}");
        if let Some(collector) = &self.aggs {
            if let Some(i) = collector.keys.iter().position(|k| *k == key) {
                let slot = collector.specs[i].slot;
                return Ok(self.var(slot));
            }
        }
        // The argument is evaluated on input rows: aggregates may not nest.
        let collector = self.aggs.take();
        self.in_aggregate = true;
        let arg = match call.args.first() {
            Some(a) if !call.star => Some(self.expr(a)),
            _ => None,
        };
        self.in_aggregate = false;
        self.aggs = collector;
        let arg = arg.transpose()?;
        let slot = self.scopes.alloc();
        let collector = self.aggs.as_mut().expect("checked above");
        collector.keys.push(key);
        collector.specs.push(AggSpec { func, arg, distinct: call.distinct, slot });
        Ok(CExpr::Var(slot))
    }

    fn special(&mut self, call: &Call) -> Result<CExpr, QueryError> {
        if call.name != "meta" {
            return Err(QueryError::semantics(format!("Function {}() is not supported.", call.name)));
        }
        let slot = match call.args.first() {
            None => match self.scopes.block_terms() {
                Some([(_, slot)]) => *slot,
                _ => return Err(QueryError::semantics("META() needs a keyspace alias when the query has several.")),
            },
            Some(Expr::Ident(alias)) => match self.scopes.lookup(alias) {
                Some((slot, VarKind::Term { .. })) => slot,
                _ => {
                    return Err(QueryError::semantics(format!(
                        "Invalid argument to META(): {alias} is not a keyspace alias."
                    )))
                }
            },
            Some(_) => return Err(QueryError::semantics("META() takes a keyspace alias.")),
        };
        self.var(slot);
        Ok(CExpr::Meta(slot))
    }

    fn subquery(&mut self, select: &Select) -> Result<CExpr, QueryError> {
        let floor = self.scopes.slot_count();
        self.corr.push((floor, false));
        let saved_aggs = self.aggs.take();
        let saved_order = self.order_aliases.take();
        let saved_in_aggregate = std::mem::replace(&mut self.in_aggregate, false);
        let plan = super::select::compile_subquery(self, select);
        self.aggs = saved_aggs;
        self.order_aliases = saved_order;
        self.in_aggregate = saved_in_aggregate;
        let (_, correlated) = self.corr.pop().expect("pushed above");
        let plan = plan?;
        let id = self.next_subquery;
        self.next_subquery += 1;
        Ok(CExpr::Subquery { plan: Arc::new(plan), correlated, id })
    }

    /// Starts collecting aggregates for a grouping block.
    pub(crate) fn start_aggregates(&mut self) {
        self.aggs = Some(AggCollector { specs: Vec::new(), keys: Vec::new() });
    }

    pub(crate) fn finish_aggregates(&mut self) -> Vec<AggSpec> {
        self.aggs.take().map(|c| c.specs).unwrap_or_default()
    }
}

/// Whether an expression calls an aggregate function outside any subquery.
pub(crate) fn has_aggregate(e: &Expr) -> bool {
    first_aggregate(e).is_some()
}

/// Where the first aggregate call of an expression (outside any subquery) is written.
pub(crate) fn first_aggregate(e: &Expr) -> Option<Pos> {
    let mut found = None;
    visit(e, &mut |x| {
        if let Expr::Call(c) = x {
            if found.is_none() && matches!(functions::lookup(&c.name).map(|d| d.kind), Some(FnKind::Aggregate(_))) {
                found = Some(c.pos);
            }
        }
    });
    found
}

/// Couchbase's planning error for an aggregate in a clause evaluated before grouping (LET, WHERE, GROUP BY).
pub(crate) fn aggregate_not_allowed<'e>(
    clause: &str,
    exprs: impl IntoIterator<Item = &'e Expr>,
) -> Result<(), QueryError> {
    match exprs.into_iter().find_map(first_aggregate) {
        Some(pos) => Err(QueryError::Plan(format!(
            "Aggregates not allowed in {clause} (near line {}, column {}).",
            pos.line, pos.column
        ))),
        None => Ok(()),
    }
}

/// Calls `f` on `e` and every expression inside it, not descending into subqueries.
pub(crate) fn visit(e: &Expr, f: &mut impl FnMut(&Expr)) {
    f(e);
    visit_children(e, &mut |x| visit(x, f));
}

/// Calls `f` on each expression directly inside `e` (a subquery's own expressions are not its children).
pub fn visit_children(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    let mut go = |x: &Expr| f(x);
    match e {
        Expr::Literal(_) | Expr::Ident(_) | Expr::Param(_) | Expr::Subquery(_) => {}
        Expr::Field(x, _) | Expr::Neg(x) | Expr::Not(x) | Expr::Exists(x) => go(x),
        Expr::DynamicField(a, c) | Expr::Element(a, c) | Expr::Binary(_, a, c) => {
            go(a);
            go(c)
        }
        Expr::Slice { base, start, end } => {
            go(base);
            go(start);
            if let Some(e) = end {
                go(e)
            }
        }
        Expr::And(xs) | Expr::Or(xs) | Expr::Array(xs) => xs.iter().for_each(go),
        Expr::Like { expr, pattern, escape, .. } => {
            go(expr);
            go(pattern);
            if let Some(e) = escape {
                go(e)
            }
        }
        Expr::In { expr, list: t, .. } | Expr::Within { expr, target: t, .. } => {
            go(expr);
            go(t)
        }
        Expr::Between { expr, low, high, .. } => {
            go(expr);
            go(low);
            go(high)
        }
        Expr::Is { expr, .. } => go(expr),
        Expr::Case(c) => {
            if let Some(o) = &c.operand {
                go(o)
            }
            for (w, t) in &c.whens {
                go(w);
                go(t)
            }
            if let Some(o) = &c.otherwise {
                go(o)
            }
        }
        Expr::Call(c) => c.args.iter().for_each(go),
        Expr::Object(members) => {
            for (n, v) in members {
                if let Some(n) = n {
                    go(n)
                }
                go(v)
            }
        }
        Expr::Quantified { bindings, satisfies, .. } => {
            bindings.iter().for_each(|b| go(&b.expr));
            go(satisfies)
        }
        Expr::ArrayFor { mapping, bindings, when, .. } => {
            bindings.iter().for_each(|b| go(&b.expr));
            go(mapping);
            if let Some(w) = when {
                go(w)
            }
        }
        Expr::ObjectFor { name, value, bindings, when } => {
            bindings.iter().for_each(|b| go(&b.expr));
            go(name);
            go(value);
            if let Some(w) = when {
                go(w)
            }
        }
    }
}
