use super::*;

fn only_term(text: &str) -> ResultTerm {
    let mut terms = subselect(text).projection.terms;
    assert_eq!(terms.len(), 1);
    terms.remove(0)
}

#[test]
fn projections_take_stars_raw_distinct_and_aliases() {
    // Proves `*`, `alias.*`, RAW / ELEMENT / VALUE, DISTINCT, and aliases with and without AS.
    assert_eq!(only_term("SELECT * FROM b"), ResultTerm::Star);
    assert_eq!(only_term("SELECT `idx`.* FROM b AS idx"), ResultTerm::ExprStar(id("idx")));
    for raw in ["RAW", "ELEMENT", "VALUE"] {
        let p = subselect(&format!("SELECT DISTINCT {raw} name FROM b")).projection;
        assert!(p.raw && p.distinct);
        assert_eq!(p.terms, vec![ResultTerm::Expr { expr: id("name"), alias: None }]);
    }
    let p = subselect("SELECT a AS x, b y, c.d, user FROM b").projection;
    let term = |e: Expr, alias: Option<&str>| ResultTerm::Expr { expr: e, alias: alias.map(str::to_string) };
    assert_eq!(
        p.terms,
        vec![
            term(id("a"), Some("x")),
            term(id("b"), Some("y")),
            term(field(id("c"), "d"), None),
            term(id("user"), None)
        ]
    );
    assert!(subselect("SELECT 1").from.is_none());
}

#[test]
fn keyspace_paths_take_namespaces_and_up_to_three_parts() {
    // Proves bucket, namespaced bucket, namespaced and bare three-part paths, two-part paths, and system keyspaces.
    assert_eq!(from("SELECT * FROM `default`"), keyspace(None, &["default"], None));
    assert_eq!(from("SELECT * FROM default:b"), keyspace(Some("default"), &["b"], None));
    assert_eq!(from("SELECT * FROM default:`b`.`s`.`c` c"), keyspace(Some("default"), &["b", "s", "c"], Some("c")));
    assert_eq!(from("SELECT * FROM b.s.c AS x"), keyspace(None, &["b", "s", "c"], Some("x")));
    assert_eq!(from("SELECT * FROM b.s"), keyspace(None, &["b", "s"], None));
    assert_eq!(from("SELECT * FROM system:indexes AS idx"), keyspace(Some("system"), &["indexes"], Some("idx")));
    assert_eq!(from("SELECT * FROM SYSTEM:keyspaces"), keyspace(Some("system"), &["keyspaces"], None));
    assert!(parse("SELECT * FROM default:b.s").is_err());
    assert!(parse("SELECT * FROM foo:b").is_err());
}

#[test]
fn other_from_terms_are_expressions_or_subqueries() {
    // Proves expression terms (calls, parenthesised or longer paths, parameters) and subqueries with their alias.
    let call = match from("SELECT COUNT (1) AS c FROM ARRAY_RANGE(0,110) AS d1") {
        FromTerm::Expr { expr: Expr::Call(call), alias } => (call.name, alias),
        other => panic!("{other:?}"),
    };
    assert_eq!(call, ("array_range".to_string(), Some("d1".to_string())));
    let paren = from("SELECT * FROM (t.children) c");
    assert_eq!(paren, FromTerm::Expr { expr: field(id("t"), "children"), alias: Some("c".into()) });
    assert!(matches!(from("SELECT * FROM a.b.c.d"), FromTerm::Expr { .. }));
    assert!(matches!(from("SELECT * FROM $docs AS d"), FromTerm::Expr { expr: Expr::Param(_), .. }));
    let sub = from("SELECT * FROM (SELECT RAW 1) AS s");
    assert!(matches!(sub, FromTerm::Subquery { ref alias, .. } if alias == "s"));
    assert_eq!(err("SELECT * FROM (SELECT 1)"), "Subquery in FROM clause must have an alias (near line 1, column 15).");
    assert_eq!(
        err("SELECT * FROM (SELECT 1) s USE KEYS 'a'"),
        "FROM Subquery cannot have USE KEYS or USE INDEX (near line 1, column 28)."
    );
    assert_eq!(
        err("SELECT * FROM [1] AS a USE KEYS 'x'"),
        "FROM Expression cannot have USE KEYS or USE INDEX (near line 1, column 15)."
    );
}

#[test]
fn use_clauses_give_keys_indexes_and_join_hints() {
    // Proves USE [PRIMARY] KEYS, USE INDEX with and without USING, USE HASH / NL, and a join hint after keys or
    // indexes within one USE.
    let term = |text: &str| match from(text) {
        FromTerm::Keyspace(k) => k,
        other => panic!("{other:?}"),
    };
    assert_eq!(term("SELECT * FROM b USE KEYS ['a', 'b']").use_keys, Some(Expr::Array(vec![s("a"), s("b")])));
    assert_eq!(term("SELECT * FROM b USE PRIMARY KEYS $k").use_keys, Some(named("k")));
    let k = term("SELECT * FROM b USE INDEX (ix USING GSI, `iy`) HASH(PROBE)");
    assert_eq!(
        k.use_index,
        vec![
            IndexHint { name: "ix".into(), using: Some(IndexType::Gsi) },
            IndexHint { name: "iy".into(), using: None }
        ]
    );
    assert_eq!(k.join_hint, JoinHint::Hash(false));
    assert_eq!(term("SELECT * FROM b USE HASH(BUILD)").join_hint, JoinHint::Hash(true));
    let k = term("SELECT * FROM b USE NL KEYS 'a'");
    assert_eq!((k.join_hint, k.use_keys), (JoinHint::NestedLoop, Some(s("a"))));
    assert!(parse("SELECT * FROM b USE").is_err());
}

#[test]
fn comma_joins_pair_every_row_and_take_only_simple_terms() {
    // Proves `a, b, c` is a left-deep cross join and that a join on the right of a comma is refused, as in n1ql.y.
    let cross = |l: FromTerm, r: FromTerm| FromTerm::Join {
        left: Box::new(l),
        kind: JoinKind::Inner,
        right: Box::new(r),
        on: JoinOn::Cross,
    };
    let want = cross(cross(keyspace(None, &["a"], None), keyspace(None, &["b"], None)), keyspace(None, &["c"], None));
    assert_eq!(from("SELECT * FROM a, b, c"), want);
    let e = err("SELECT * FROM a, b JOIN c ON b.x = c.y");
    assert!(e.starts_with("Right side (`b` JOIN `c` ON ((`b`.`x`) = (`c`.`y`))) of a COMMA"), "{e}");
}

#[test]
fn lookup_index_and_ansi_joins() {
    // Proves ON [PRIMARY] KEYS, ON KEY ... FOR, ANSI ON conditions, the join kinds, and that lookup joins need a
    // keyspace on the right.
    let join = |text: &str| match from(text) {
        FromTerm::Join { kind, right, on, .. } => (kind, *right, on),
        other => panic!("{other:?}"),
    };
    let (kind, right, on) = join("SELECT * FROM a JOIN b ON KEYS a.bid");
    assert_eq!((kind, right, on), (JoinKind::Inner, keyspace(None, &["b"], None), JoinOn::Keys(field(id("a"), "bid"))));
    let (kind, _, on) = join("SELECT * FROM a LEFT OUTER JOIN b ON PRIMARY KEYS a.bid");
    assert_eq!((kind, on), (JoinKind::LeftOuter, JoinOn::Keys(field(id("a"), "bid"))));
    let (_, _, on) = join("SELECT * FROM a INNER JOIN b ON KEY b.aid FOR a");
    assert_eq!(on, JoinOn::KeyFor { expr: field(id("b"), "aid"), for_alias: "a".into() });
    let (kind, _, on) = join("SELECT * FROM a LEFT JOIN b ON a.x = b.y");
    assert_eq!((kind, on), (JoinKind::LeftOuter, JoinOn::Condition(eq(field(id("a"), "x"), field(id("b"), "y")))));
    let (kind, _, _) = join("SELECT * FROM a RIGHT OUTER JOIN b ON a.x = b.y");
    assert_eq!(kind, JoinKind::RightOuter);
    assert!(parse("SELECT * FROM a JOIN b ON a.x = b.x RIGHT JOIN c ON c.x = a.x").is_err());
    assert_eq!(
        err("SELECT * FROM a JOIN [1] AS b ON KEYS 'k'"),
        "JOIN must be done on a keyspace (near line 1, column 22)"
    );
}

#[test]
fn nest_and_unnest_hang_off_the_left_term() {
    // Proves NEST (lookup and ANSI), [LEFT] UNNEST with and without alias, and FLATTEN as UNNEST.
    assert!(matches!(from("SELECT * FROM a NEST b ON KEYS a.ids"), FromTerm::Nest { on: JoinOn::Keys(_), .. }));
    assert!(matches!(
        from("SELECT * FROM a LEFT NEST b ON a.id = b.aid"),
        FromTerm::Nest { kind: JoinKind::LeftOuter, on: JoinOn::Condition(_), .. }
    ));
    let unnest = from("SELECT * FROM a LEFT UNNEST a.items AS i UNNEST i.parts");
    let FromTerm::Unnest { left, outer: false, expr, alias: None } = unnest else { panic!("{unnest:?}") };
    assert_eq!(expr, field(id("i"), "parts"));
    assert!(matches!(*left, FromTerm::Unnest { outer: true, ref alias, .. } if alias.as_deref() == Some("i")));
    assert!(matches!(from("SELECT * FROM a FLATTEN a.x"), FromTerm::Unnest { .. }));
}

#[test]
fn clauses_let_where_group_letting_having() {
    // Proves LET, WHERE, GROUP BY with aliases, LETTING and HAVING, and LETTING without GROUP BY.
    let q = subselect(
        "SELECT k, n FROM b LET x = 1, y = 2 WHERE a = x GROUP BY a.k AS k, c LETTING n = COUNT(*) HAVING n > 1",
    );
    assert_eq!(q.let_, vec![("x".to_string(), int(1)), ("y".to_string(), int(2))]);
    assert_eq!(q.where_, Some(eq(id("a"), id("x"))));
    let g = q.group_by.expect("GROUP BY");
    assert_eq!(g.keys, vec![(field(id("a"), "k"), Some("k".to_string())), (id("c"), None)]);
    assert_eq!(g.letting.len(), 1);
    assert!(g.having.is_some());
    let g = subselect("SELECT n FROM b LETTING n = 1").group_by.expect("LETTING");
    assert!(g.keys.is_empty() && g.having.is_none());
    assert!(parse("SELECT n FROM b HAVING n > 1").is_err());
}

#[test]
fn order_limit_and_offset() {
    // Proves ASC / DESC / NULLS FIRST / LAST, and LIMIT and OFFSET in either order.
    let q = select("SELECT * FROM b ORDER BY is_primary DESC, name ASC NULLS LAST, x NULLS FIRST LIMIT 5 OFFSET 2");
    let order: Vec<(Expr, bool, Option<bool>)> =
        q.order_by.into_iter().map(|t| (t.expr, t.desc, t.nulls_first)).collect();
    assert_eq!(
        order,
        vec![(id("is_primary"), true, None), (id("name"), false, Some(false)), (id("x"), false, Some(true))]
    );
    assert_eq!((q.limit, q.offset), (Some(int(5)), Some(int(2))));
    let q = select("SELECT * FROM b OFFSET $1 LIMIT $batch");
    assert_eq!((q.limit, q.offset), (Some(named("batch")), Some(Expr::Param(Param::Positional(1)))));
}

#[test]
fn with_names_common_table_expressions() {
    // Proves WITH terms take subqueries and plain expressions in parentheses.
    let q = select("WITH a AS (SELECT RAW 1), b AS (2 + 3) SELECT * FROM a");
    assert_eq!(q.with.len(), 2);
    assert!(matches!(q.with[0].expr, Expr::Subquery(_)));
    assert_eq!(q.with[1].expr, bin(BinaryOp::Add, int(2), int(3)));
}

#[test]
fn set_operations_group_from_the_left_and_take_parenthesised_selects() {
    // Proves UNION / INTERSECT / EXCEPT [ALL] nest left to right, that a parenthesised operand with its own LIMIT
    // stays a select while a plain one is just its body, and that a select may start with a parenthesised operand.
    let q = select("SELECT 1 UNION ALL SELECT 2 EXCEPT SELECT 3 ORDER BY 1");
    let SetExpr::SetOp { op: SetOp::Except, all: false, left, .. } = q.body else { panic!("{:?}", q.body) };
    assert!(matches!(*left, SetExpr::SetOp { op: SetOp::Union, all: true, .. }));
    assert_eq!(q.order_by.len(), 1);
    let q = select("SELECT a FROM b INTERSECT (SELECT c FROM d ORDER BY c LIMIT 1)");
    let SetExpr::SetOp { right, .. } = q.body else { panic!() };
    assert!(matches!(*right, SetExpr::Select(ref s) if s.limit.is_some()));
    let q = select("(SELECT 1) UNION SELECT 2");
    let SetExpr::SetOp { left, .. } = q.body else { panic!() };
    assert!(matches!(*left, SetExpr::Query(_)));
    let q = select("SELECT 1 UNION (SELECT 2 UNION SELECT 3)");
    let SetExpr::SetOp { right, .. } = q.body else { panic!() };
    assert!(matches!(*right, SetExpr::SetOp { .. }));
}

#[test]
fn from_first_selects_and_hints() {
    // Proves FROM ... SELECT is the same subselect, and optimizer hints after SELECT are accepted and ignored.
    assert_eq!(stmt("FROM b WHERE x = 1 SELECT a"), stmt("SELECT a FROM b WHERE x = 1"));
    assert_eq!(stmt("SELECT /*+ INDEX(b ix) */ a FROM b"), stmt("SELECT a FROM b"));
    assert!(parse("SELECT a FROM /*+ INDEX(b ix) */ b").is_err());
}

#[test]
fn explain_prepare_and_execute() {
    // Proves EXPLAIN wraps a statement, PREPARE keeps its name, FORCE and the inner statement's text, and EXECUTE
    // takes a name and USING values.
    assert!(matches!(stmt("EXPLAIN SELECT 1"), Statement::Explain(ref s) if matches!(**s, Statement::Select(_))));
    let Statement::Prepare { name, force, statement, text } =
        stmt("PREPARE FORCE p1 FROM SELECT * FROM b WHERE x = $1;")
    else {
        panic!("not PREPARE")
    };
    assert_eq!((name.as_deref(), force, text.as_str()), (Some("p1"), true, "SELECT * FROM b WHERE x = $1"));
    assert_eq!(*statement, stmt("SELECT * FROM b WHERE x = $1"));
    let Statement::Prepare { name, text, .. } = stmt("PREPARE 'my name' AS\n  SELECT 'k' -- note\n , 1") else {
        panic!("not PREPARE")
    };
    assert_eq!((name.as_deref(), text.as_str()), (Some("my name"), "SELECT 'k' -- note\n , 1"));
    let Statement::Prepare { name: None, text, .. } = stmt("PREPARE SELECT 1") else { panic!("named") };
    assert_eq!(text, "SELECT 1");
    assert_eq!(
        stmt("EXECUTE p1 USING [1, 'a']"),
        Statement::Execute { name: id("p1"), using: Some(Expr::Array(vec![int(1), s("a")])) }
    );
    assert!(matches!(stmt("EXECUTE 'p1'"), Statement::Execute { using: None, .. }));
    assert!(parse("EXECUTE p1 USING 1").is_err());
    assert!(parse("EXPLAIN EXPLAIN SELECT 1").is_err());
}
