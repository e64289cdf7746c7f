//! Property: every tree the parser can produce prints as text that parses back to the same tree. The strategies
//! build such trees (statements, selects, FROM clauses, expressions) at random; shapes the parser never produces
//! (a negative number literal, a join after a comma join) are left out.

use proptest::prelude::*;

use super::*;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_][a-z0-9_]{0,6}",
        1 => "[ -~]{1,6}",
        1 => "\\PC{1,4}",
        1 => Just("select".to_string()),
        1 => Just("a`b".to_string()),
    ]
}

fn param_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,6}"
}

fn literal() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (0..i64::MAX).prop_map(int),
        (0.0..1e300f64).prop_map(|f| lit(Value::float(f))),
        prop::sample::select(vec![1e-7, 1.5e21, 0.1, 3.0]).prop_map(|f| lit(Value::float(f))),
        "\\PC{0,8}".prop_map(|t| s(&t)),
        "[\\x00-\\x1f\"'\\\\`]{0,4}".prop_map(|t| s(&t)),
        prop::sample::select(vec![Value::Bool(true), Value::Bool(false), Value::Null, Value::Missing]).prop_map(lit),
    ]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        3 => literal(),
        3 => name().prop_map(Expr::Ident),
        1 => param_name().prop_map(|n| Expr::Param(Param::Named(n))),
        1 => (1usize..100).prop_map(|n| Expr::Param(Param::Positional(n))),
    ]
}

fn binding(inner: impl Strategy<Value = Expr>) -> impl Strategy<Value = Binding> {
    (prop::option::of(name()), name(), inner, any::<bool>()).prop_map(|(name_var, var, expr, within)| Binding {
        name_var,
        var,
        expr,
        within,
    })
}

fn call(inner: BoxedStrategy<Expr>) -> impl Strategy<Value = Expr> {
    let pos = Pos { line: 1, column: 1 };
    prop_oneof![
        ("[a-z_][a-z0-9_]{0,8}|[a-z ]{1,5}|replace|left", prop::collection::vec(inner.clone(), 0..3))
            .prop_map(move |(name, args)| Expr::Call(Call { name, args, distinct: false, star: false, pos })),
        ("[a-z]{1,6}", inner).prop_map(move |(name, arg)| Expr::Call(Call {
            name,
            args: vec![arg],
            distinct: true,
            star: false,
            pos
        })),
        Just(Expr::Call(Call { name: "count".into(), args: vec![], distinct: false, star: true, pos })),
    ]
}

fn compound(inner: BoxedStrategy<Expr>) -> BoxedStrategy<Expr> {
    let b = |e| Box::new(e);
    let ops = prop::sample::select(vec![
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Mod,
        BinaryOp::Concat,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ]);
    let i = || inner.clone();
    let opt = || prop::option::of(inner.clone().prop_map(Box::new));
    prop_oneof![
        (i(), name()).prop_map(|(e, n)| Expr::Field(Box::new(e), n)),
        (i(), i()).prop_map(move |(a, c)| Expr::DynamicField(b(a), b(c))),
        (i(), i()).prop_map(move |(a, c)| Expr::Element(b(a), b(c))),
        (i(), i(), opt()).prop_map(move |(a, start, end)| Expr::Slice { base: b(a), start: b(start), end }),
        i().prop_map(|e| Expr::Neg(Box::new(e))),
        i().prop_map(|e| Expr::Not(Box::new(e))),
        i().prop_map(|e| Expr::Exists(Box::new(e))),
        (ops, i(), i()).prop_map(|(op, a, c)| Expr::binary(op, a, c)),
        prop::collection::vec(i(), 2..4).prop_map(Expr::And),
        prop::collection::vec(i(), 2..4).prop_map(Expr::Or),
        (i(), i(), opt(), any::<bool>()).prop_map(move |(e, p, escape, negated)| Expr::Like {
            expr: b(e),
            pattern: b(p),
            escape,
            negated
        }),
        (i(), i(), any::<bool>()).prop_map(move |(e, l, negated)| Expr::In { expr: b(e), list: b(l), negated }),
        (i(), i(), any::<bool>()).prop_map(move |(e, t, negated)| Expr::Within { expr: b(e), target: b(t), negated }),
        (i(), i(), i(), any::<bool>()).prop_map(move |(e, low, high, negated)| Expr::Between {
            expr: b(e),
            low: b(low),
            high: b(high),
            negated
        }),
        (i(), prop::sample::select(vec![IsTest::Null, IsTest::Missing, IsTest::Valued]), any::<bool>())
            .prop_map(move |(e, test, negated)| Expr::Is { expr: b(e), test, negated }),
        (opt(), prop::collection::vec((i(), i()), 1..3), opt())
            .prop_map(|(operand, whens, otherwise)| Expr::Case(Case { operand, whens, otherwise })),
        call(inner.clone()),
        prop::collection::vec(i(), 0..3).prop_map(Expr::Array),
        prop::collection::vec((prop::option::of(i()), i()), 0..3).prop_map(|members| Expr::Object(
            members
                .into_iter()
                .map(|(name, value)| match (name, value.implicit_name().is_some()) {
                    (None, false) => (Some(s("n")), value),
                    (name, _) => (name, value),
                })
                .collect()
        )),
        (
            prop::sample::select(vec![Quantifier::Any, Quantifier::Every, Quantifier::AnyAndEvery]),
            prop::collection::vec(binding(i()), 1..3),
            i()
        )
            .prop_map(move |(quantifier, bindings, satisfies)| Expr::Quantified {
                quantifier,
                bindings,
                satisfies: b(satisfies)
            }),
        (any::<bool>(), i(), prop::collection::vec(binding(i()), 1..3), opt()).prop_map(
            move |(first, mapping, bindings, when)| {
                let kind = if first { ArrayForKind::First } else { ArrayForKind::Array };
                Expr::ArrayFor { kind, mapping: b(mapping), bindings, when }
            }
        ),
        (i(), i(), prop::collection::vec(binding(i()), 1..2), opt())
            .prop_map(move |(n, v, bindings, when)| Expr::ObjectFor { name: b(n), value: b(v), bindings, when }),
        i().prop_map(|e| Expr::Subquery(Box::new(simple_select(e)))),
    ]
    .boxed()
}

fn expr_strategy() -> BoxedStrategy<Expr> {
    leaf().boxed().prop_recursive(4, 48, 4, |inner| compound(inner.boxed())).boxed()
}

/// `SELECT RAW e`.
fn simple_select(e: Expr) -> Select {
    let projection = Projection { distinct: false, raw: true, terms: vec![ResultTerm::Expr { expr: e, alias: None }] };
    let body =
        SetExpr::Query(Box::new(Subselect { projection, from: None, let_: vec![], where_: None, group_by: None }));
    Select { with: vec![], body, order_by: vec![], limit: None, offset: None }
}

fn keyspace_path() -> impl Strategy<Value = KeyspacePath> {
    prop_oneof![
        prop::collection::vec(name(), 1..4).prop_map(|parts| KeyspacePath { namespace: None, parts }),
        (
            prop::sample::select(vec!["default", "system"]),
            prop::sample::select(vec![1usize, 3]),
            prop::collection::vec(name(), 3)
        )
            .prop_map(|(ns, n, parts)| KeyspacePath { namespace: Some(ns.to_string()), parts: parts[..n].to_vec() }),
    ]
}

fn keyspace_term() -> impl Strategy<Value = FromTerm> {
    let hint =
        prop::sample::select(vec![JoinHint::None, JoinHint::Hash(true), JoinHint::Hash(false), JoinHint::NestedLoop]);
    let index_hint =
        (prop::option::of(name()), prop::option::of(prop::sample::select(vec![IndexType::Gsi, IndexType::Fts])))
            .prop_map(|(name, using)| IndexHint { name: name.unwrap_or_default(), using });
    let access = prop_oneof![
        Just((None, vec![])),
        expr_strategy().prop_map(|k| (Some(k), vec![])),
        prop::collection::vec(index_hint, 1..3).prop_map(|hints| (None, hints)),
    ];
    (keyspace_path(), prop::option::of(name()), access, hint).prop_map(
        |(path, alias, (use_keys, use_index), join_hint)| {
            FromTerm::Keyspace(KeyspaceTerm { path, alias, use_keys, use_index, join_hint })
        },
    )
}

fn simple_term() -> impl Strategy<Value = FromTerm> {
    prop_oneof![
        3 => keyspace_term(),
        1 => (expr_strategy(), prop::option::of(name())).prop_map(|(expr, alias)| match expr {
            Expr::Subquery(select) => FromTerm::Subquery { select, alias: alias.unwrap_or_else(|| "s".into()) },
            expr => FromTerm::Expr { expr, alias },
        }),
    ]
}

#[derive(Clone, Debug)]
enum Link {
    Join(bool, JoinKind, FromTerm, u8, Expr, String),
    Unnest(bool, Expr, Option<String>),
}

fn from_clause() -> impl Strategy<Value = FromTerm> {
    let kind = prop::sample::select(vec![JoinKind::Inner, JoinKind::LeftOuter]);
    let link = prop_oneof![
        (any::<bool>(), kind, keyspace_term(), 0u8..3, expr_strategy(), name())
            .prop_map(|(nest, kind, right, on, e, alias)| Link::Join(nest, kind, right, on, e, alias)),
        (any::<bool>(), expr_strategy(), prop::option::of(name()))
            .prop_map(|(outer, e, alias)| Link::Unnest(outer, e, alias)),
    ];
    (
        simple_term(),
        prop::option::of((simple_term(), expr_strategy())),
        prop::collection::vec(link, 0..3),
        prop::collection::vec(simple_term(), 0..3),
    )
        .prop_map(|(first, right_join, links, commas)| {
            let mut term = first;
            if let Some((right, cond)) = right_join {
                let on = JoinOn::Condition(cond);
                term = FromTerm::Join { left: Box::new(term), kind: JoinKind::RightOuter, right: Box::new(right), on };
            }
            for link in links {
                let left = Box::new(term);
                term = match link {
                    Link::Join(nest, kind, right, on, e, alias) => {
                        let on = match on {
                            0 => JoinOn::Keys(e),
                            1 => JoinOn::KeyFor { expr: e, for_alias: alias },
                            _ => JoinOn::Condition(e),
                        };
                        let right = Box::new(right);
                        if nest {
                            FromTerm::Nest { left, kind, right, on }
                        } else {
                            FromTerm::Join { left, kind, right, on }
                        }
                    }
                    Link::Unnest(outer, expr, alias) => FromTerm::Unnest { left, outer, expr, alias },
                };
            }
            for right in commas {
                term = FromTerm::Join {
                    left: Box::new(term),
                    kind: JoinKind::Inner,
                    right: Box::new(right),
                    on: JoinOn::Cross,
                };
            }
            term
        })
}

fn projection() -> impl Strategy<Value = Projection> {
    let term = prop_oneof![
        Just(ResultTerm::Star),
        expr_strategy().prop_map(ResultTerm::ExprStar),
        (expr_strategy(), prop::option::of(name())).prop_map(|(expr, alias)| ResultTerm::Expr { expr, alias }),
    ];
    prop_oneof![
        (any::<bool>(), prop::collection::vec(term, 1..3)).prop_map(|(distinct, terms)| Projection {
            distinct,
            raw: false,
            terms
        }),
        (any::<bool>(), expr_strategy(), prop::option::of(name())).prop_map(|(distinct, expr, alias)| Projection {
            distinct,
            raw: true,
            terms: vec![ResultTerm::Expr { expr, alias }]
        }),
    ]
}

fn bindings() -> impl Strategy<Value = Vec<(String, Expr)>> {
    prop::collection::vec((name(), expr_strategy()), 0..2)
}

fn subselect() -> impl Strategy<Value = Subselect> {
    let group = prop_oneof![
        (
            prop::collection::vec((expr_strategy(), prop::option::of(name())), 1..3),
            bindings(),
            prop::option::of(expr_strategy())
        )
            .prop_map(|(keys, letting, having)| GroupBy { keys, letting, having }),
        prop::collection::vec((name(), expr_strategy()), 1..2).prop_map(|letting| GroupBy {
            keys: vec![],
            letting,
            having: None
        }),
    ];
    (
        projection(),
        prop::option::of(from_clause()),
        bindings(),
        prop::option::of(expr_strategy()),
        prop::option::of(group),
    )
        .prop_map(|(projection, from, let_, where_, group_by)| Subselect {
            projection,
            from,
            let_,
            where_,
            group_by,
        })
}

fn select_strategy() -> impl Strategy<Value = Select> {
    let op = prop::sample::select(vec![SetOp::Union, SetOp::Intersect, SetOp::Except]);
    let order = (expr_strategy(), any::<bool>(), prop::option::of(any::<bool>()))
        .prop_map(|(expr, desc, nulls_first)| OrderTerm { expr, desc, nulls_first });
    let with = (name(), expr_strategy()).prop_map(|(alias, expr)| WithTerm { alias, expr });
    (
        prop::collection::vec(with, 0..2),
        subselect(),
        prop::collection::vec((op, any::<bool>(), subselect(), 0u8..3), 0..3),
        prop::collection::vec(order, 0..2),
        prop::option::of(expr_strategy()),
        prop::option::of(expr_strategy()),
    )
        .prop_map(|(with, first, rest, order_by, limit, offset)| {
            let mut body = SetExpr::Query(Box::new(first));
            for (op, all, sub, shape) in rest {
                let right = match shape {
                    // A parenthesised operand with its own LIMIT stays a select.
                    0 => SetExpr::Select(Box::new(Select {
                        with: vec![],
                        body: SetExpr::Query(Box::new(sub)),
                        order_by: vec![],
                        limit: Some(int(1)),
                        offset: None,
                    })),
                    // A right-nested set operation.
                    1 => SetExpr::SetOp {
                        op,
                        all,
                        left: Box::new(body.clone()),
                        right: Box::new(SetExpr::Query(Box::new(sub))),
                    },
                    _ => SetExpr::Query(Box::new(sub)),
                };
                body = SetExpr::SetOp { op, all, left: Box::new(body), right: Box::new(right) };
            }
            Select { with, body, order_by, limit, offset }
        })
}

fn path_expr() -> impl Strategy<Value = Expr> {
    let step = prop_oneof![
        name().prop_map(|n| (0u8, Expr::Ident(n))),
        expr_strategy().prop_map(|e| (1u8, e)),
        expr_strategy().prop_map(|e| (2u8, e)),
    ];
    (name(), prop::collection::vec(step, 0..3)).prop_map(|(first, steps)| {
        steps.into_iter().fold(Expr::Ident(first), |path, (kind, e)| match (kind, e) {
            (0, Expr::Ident(n)) => Expr::Field(Box::new(path), n),
            (1, e) => Expr::Element(Box::new(path), Box::new(e)),
            (_, e) => Expr::DynamicField(Box::new(path), Box::new(e)),
        })
    })
}

fn update_for() -> impl Strategy<Value = Option<UpdateFor>> {
    prop::option::of(
        (
            prop::collection::vec(prop::collection::vec(binding(expr_strategy()), 1..3), 1..3),
            prop::option::of(expr_strategy()),
        )
            .prop_map(|(dimensions, when)| UpdateFor { dimensions, when }),
    )
}

fn set_clauses() -> impl Strategy<Value = (Vec<SetClause>, Vec<UnsetClause>)> {
    let set = (path_expr(), expr_strategy(), update_for()).prop_map(|(path, value, update_for)| SetClause {
        path,
        value,
        update_for,
    });
    let meta = (prop::option::of(name()), expr_strategy()).prop_map(|(alias, value)| {
        let args = alias.map(Expr::Ident).into_iter().collect();
        let call = Expr::Call(Call { name: "meta".into(), args, distinct: false, star: false, pos: Pos::default() });
        SetClause { path: Expr::Field(Box::new(call), "expiration".into()), value, update_for: None }
    });
    let unset = (path_expr(), update_for()).prop_map(|(path, update_for)| UnsetClause { path, update_for });
    (prop::collection::vec(prop_oneof![3 => set, 1 => meta], 0..3), prop::collection::vec(unset, 0..2))
        .prop_filter("SET or UNSET", |(set, unset)| !set.is_empty() || !unset.is_empty())
}

fn keyspace_ref() -> impl Strategy<Value = KeyspaceRef> {
    (keyspace_path(), prop::option::of(name())).prop_map(|(path, alias)| KeyspaceRef { path, alias })
}

/// RETURNING takes no DISTINCT, and no alias after RAW.
fn returning() -> impl Strategy<Value = Option<Projection>> {
    prop::option::of(projection().prop_map(|p| {
        let terms = match p.raw {
            true => p
                .terms
                .into_iter()
                .map(|t| match t {
                    ResultTerm::Expr { expr, .. } => ResultTerm::Expr { expr, alias: None },
                    other => other,
                })
                .collect(),
            false => p.terms,
        };
        Projection { distinct: false, raw: p.raw, terms }
    }))
}

fn static_object() -> impl Strategy<Value = Expr> {
    prop::collection::vec((name(), literal()), 0..3)
        .prop_map(|members| Expr::Object(members.into_iter().map(|(n, v)| (Some(s(&n)), v)).collect()))
}

fn dml() -> impl Strategy<Value = Statement> {
    let values = (expr_strategy(), expr_strategy(), prop::option::of(expr_strategy()))
        .prop_map(|(key, value, options)| InsertValues { key, value, options });
    let source = prop_oneof![
        prop::collection::vec(values, 1..3).prop_map(InsertSource::Values),
        (expr_strategy(), prop::option::of(expr_strategy()), prop::option::of(expr_strategy()), select_strategy())
            .prop_map(|(key, value, options, select)| InsertSource::Select {
                key,
                value,
                options,
                select: Box::new(select)
            }),
    ];
    let insert =
        (keyspace_ref(), source, returning(), any::<bool>()).prop_map(|(keyspace, source, returning, upsert)| {
            let insert = Insert { keyspace, source, returning };
            if upsert {
                Statement::Upsert(insert)
            } else {
                Statement::Insert(insert)
            }
        });
    let o = || prop::option::of(expr_strategy());
    let update = (keyspace_ref(), o(), set_clauses(), o(), o(), returning()).prop_map(
        |(keyspace, use_keys, (set, unset), where_, limit, returning)| {
            Statement::Update(Update { keyspace, use_keys, set, unset, where_, limit, returning })
        },
    );
    let delete =
        (keyspace_ref(), o(), o(), o(), returning()).prop_map(|(keyspace, use_keys, where_, limit, returning)| {
            Statement::Delete(Delete { keyspace, use_keys, where_, limit, returning })
        });
    let merge_insert = prop_oneof![
        (expr_strategy(), o()).prop_map(|(value, where_)| MergeInsert { key: None, value, options: None, where_ }),
        (expr_strategy(), expr_strategy(), o(), o()).prop_map(|(k, value, options, where_)| MergeInsert {
            key: Some(k),
            value,
            options,
            where_
        }),
    ];
    let merge = (
        keyspace_ref(),
        simple_term(),
        any::<bool>(),
        expr_strategy(),
        prop::option::of((set_clauses(), o())),
        prop::option::of(o()),
        prop::option::of(merge_insert),
        (o(), returning()),
    )
        .prop_map(|(target, source, key, on, update, delete, insert, (limit, returning))| {
            Statement::Merge(Merge {
                target,
                source,
                on: if key { MergeOn::Key(on) } else { MergeOn::Condition(on) },
                update: update.map(|((set, unset), where_)| MergeUpdate { set, unset, where_ }),
                delete: delete.map(|where_| MergeDelete { where_ }),
                insert,
                limit,
                returning,
            })
        });
    prop_oneof![insert, update, delete, merge]
}

fn ddl() -> impl Strategy<Value = Statement> {
    let using = || prop::option::of(prop::sample::select(vec![IndexType::Gsi, IndexType::View, IndexType::Fts]));
    let array = prop::option::of(prop::sample::select(vec![ArrayIndexKind::Distinct, ArrayIndexKind::All]));
    let key = (expr_strategy(), array, any::<bool>(), any::<bool>())
        .prop_map(|(expr, array, desc, include_missing)| IndexKey { expr, array, desc, include_missing });
    let primary =
        (prop::option::of(name()), any::<bool>(), keyspace_path(), using(), prop::option::of(static_object()))
            .prop_map(|(name, if_not_exists, keyspace, using, with)| {
                Statement::CreatePrimaryIndex(CreatePrimaryIndex { name, if_not_exists, keyspace, using, with })
            });
    let create = (
        (name(), any::<bool>(), keyspace_path()),
        prop::collection::vec(key, 1..3),
        prop::option::of(prop::collection::vec(expr_strategy(), 1..3)),
        prop::option::of(expr_strategy()),
        using(),
        prop::option::of(static_object()),
    )
        .prop_map(|((name, if_not_exists, keyspace), keys, partition, where_, using, with)| {
            Statement::CreateIndex(CreateIndex { name, if_not_exists, keyspace, keys, partition, where_, using, with })
        });
    let drop = (name(), any::<bool>(), keyspace_path(), using()).prop_map(|(name, if_exists, keyspace, using)| {
        Statement::DropIndex(DropIndex { name, if_exists, keyspace, using })
    });
    let drop_primary = (any::<bool>(), keyspace_path(), using()).prop_map(|(if_exists, keyspace, using)| {
        Statement::DropPrimaryIndex(DropPrimaryIndex { if_exists, keyspace, using })
    });
    let build_name = prop_oneof!["\\PC{1,6}".prop_map(|n| s(&n)), param_name().prop_map(|n| named(&n))];
    let build = (keyspace_path(), prop::collection::vec(build_name, 1..3), using())
        .prop_map(|(keyspace, names, using)| Statement::BuildIndexes(BuildIndexes { keyspace, names, using }));
    let alter = (name(), keyspace_path(), using(), static_object())
        .prop_map(|(name, keyspace, using, with)| Statement::AlterIndex(AlterIndex { name, keyspace, using, with }));
    prop_oneof![primary, create, drop, drop_primary, build, alter]
}

fn plain_statement() -> impl Strategy<Value = Statement> {
    prop_oneof![2 => select_strategy().prop_map(Statement::Select), 2 => dml(), 1 => ddl()]
}

fn statement() -> impl Strategy<Value = Statement> {
    let prepare = (prop::option::of(name()), any::<bool>(), plain_statement()).prop_map(|(name, force, statement)| {
        let text = statement.to_string();
        Statement::Prepare { name, force, statement: Box::new(statement), text }
    });
    let using =
        prop::option::of(prop_oneof![prop::collection::vec(literal(), 0..3).prop_map(Expr::Array), static_object()]);
    let execute = (prop_oneof![name().prop_map(Expr::Ident), "\\PC{0,5}".prop_map(|n| s(&n))], using)
        .prop_map(|(name, using)| Statement::Execute { name, using });
    prop_oneof![
        6 => plain_statement(),
        1 => plain_statement().prop_map(|s| Statement::Explain(Box::new(s))),
        1 => prepare,
        1 => execute,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn expressions_print_in_exact_style_and_parse_back(e in expr_strategy()) {
        // Proves the exact text of any expression parses to the same expression (through a RAW projection, whose
        // printing uses the exact style).
        let statement = Statement::Select(simple_select(e));
        let text = statement.to_string();
        let parsed = parse(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&statement), "{}", text);
    }

    #[test]
    fn normalised_text_always_parses(e in expr_strategy()) {
        // Proves Couchbase's normalised form of any expression is valid SQL++ and reprints identically.
        let text = e.to_string();
        let again = parse_expression(&text);
        prop_assert!(again.is_ok(), "{}: {:?}", text, again);
        prop_assert_eq!(again.map(|e| e.to_string()).ok(), Some(text));
    }
}

#[test]
fn statements_print_and_parse_back() {
    // Proves parse(statement.to_string()) == statement for statements of every kind. Generating and shrinking trees
    // this large recurses deeply in debug builds, so the runner gets a thread with a large stack.
    let run = || {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
        let result = runner.run(&statement(), |statement| {
            let text = statement.to_string();
            let parsed = parse(&text);
            prop_assert_eq!(parsed.as_ref(), Ok(&statement), "{}", text);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    };
    let thread = std::thread::Builder::new().stack_size(256 << 20).spawn(run).expect("thread");
    thread.join().expect("round trip");
}
