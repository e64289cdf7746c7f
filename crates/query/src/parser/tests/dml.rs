use super::*;

fn insert(text: &str) -> Insert {
    match stmt(text) {
        Statement::Insert(i) | Statement::Upsert(i) => i,
        other => panic!("{other:?}"),
    }
}

fn update(text: &str) -> Update {
    match stmt(text) {
        Statement::Update(u) => u,
        other => panic!("{other:?}"),
    }
}

fn merge(text: &str) -> Merge {
    match stmt(text) {
        Statement::Merge(m) => m,
        other => panic!("{other:?}"),
    }
}

#[test]
fn insert_values_take_several_rows_options_and_headers() {
    // Proves VALUES tuples with and without OPTIONS, the optional (KEY, VALUE[, OPTIONS]) header, a repeated VALUES
    // keyword, an alias on the keyspace, and RETURNING.
    let i = insert(
        "INSERT INTO b AS d (KEY, VALUE, OPTIONS) VALUES ('k1', {'a': 1}), VALUES ('k2', 2, {'expiration': 10}), \
         ('k3', 3) RETURNING META(d).id, d.*",
    );
    assert_eq!(i.keyspace, KeyspaceRef { path: path(None, &["b"]), alias: Some("d".into()) });
    let InsertSource::Values(rows) = &i.source else { panic!("{:?}", i.source) };
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1].key, s("k2"));
    assert!(rows[0].options.is_none() && rows[1].options.is_some());
    let returning = i.returning.expect("RETURNING");
    assert!(!returning.raw && returning.terms.len() == 2);
    let i = insert("UPSERT INTO default:b.s.c (PRIMARY KEY, VALUE) VALUES ($k, $v) RETURNING RAW META().cas");
    assert_eq!(i.keyspace.path, path(Some("default"), &["b", "s", "c"]));
    assert!(i.returning.expect("RETURNING").raw);
    assert!(matches!(stmt("UPSERT INTO b VALUES ('k', 1)"), Statement::Upsert(_)));
}

#[test]
fn insert_select_names_key_value_and_options() {
    // Proves the SELECT form with KEY only, KEY and VALUE, KEY VALUE OPTIONS, and KEY with OPTIONS.
    let source = |text: &str| insert(text).source;
    let InsertSource::Select { key, value, options, select } =
        source("INSERT INTO b (KEY k.id, VALUE k) SELECT k FROM a k")
    else {
        panic!()
    };
    assert_eq!((key, value, options), (field(id("k"), "id"), Some(id("k")), None));
    assert!(matches!(select.body, SetExpr::Query(_)));
    let InsertSource::Select { value, options, .. } =
        source("INSERT INTO b (KEY UUID(), OPTIONS {'expiration': 5}) SELECT 1")
    else {
        panic!()
    };
    assert!(value.is_none() && options.is_some());
    let InsertSource::Select { value, options, .. } =
        source("UPSERT INTO b (PRIMARY KEY a, VALUE b, OPTIONS c) SELECT a, b, c FROM x")
    else {
        panic!()
    };
    assert!(value.is_some() && options.is_some());
}

#[test]
fn update_sets_unsets_and_limits() {
    // Proves USE KEYS, several SET and UNSET terms with paths, WHERE, LIMIT and RETURNING.
    let u = update(
        "UPDATE `default` AS content USE KEYS 'imakey' SET content.a = 'aaaa', b[0].c = 1 UNSET d.[x], e \
         WHERE f = 1 LIMIT 10 RETURNING content",
    );
    assert_eq!(u.keyspace.alias.as_deref(), Some("content"));
    assert_eq!(u.use_keys, Some(s("imakey")));
    assert_eq!(u.set.len(), 2);
    assert_eq!(u.set[0], SetClause { path: field(id("content"), "a"), value: s("aaaa"), update_for: None });
    assert_eq!(u.set[1].path, field(Expr::Element(Box::new(id("b")), Box::new(int(0))), "c"));
    assert_eq!(u.unset[0].path, Expr::DynamicField(Box::new(id("d")), Box::new(id("x"))));
    assert_eq!((u.where_, u.limit), (Some(eq(id("f"), int(1))), Some(int(10))));
    assert!(u.returning.is_some());
    assert!(parse("UPDATE b WHERE x = 1").is_err());
    assert!(parse("UPDATE b SET (a) = 1").is_err());
}

#[test]
fn update_for_keeps_dimensions_outermost_first() {
    // Proves `SET ... FOR inner FOR outer WHEN ... END` keeps the dimensions outermost first, as n1ql.y builds
    // them, with `pos:var` and WITHIN bindings.
    let u = update("UPDATE b SET c.x = 1 FOR c IN s.children FOR i:s WITHIN items WHEN c.y END");
    let uf = u.set[0].update_for.clone().expect("FOR");
    assert_eq!(uf.dimensions.len(), 2);
    assert_eq!(uf.dimensions[0][0].var, "s");
    assert_eq!(uf.dimensions[0][0].name_var.as_deref(), Some("i"));
    assert!(uf.dimensions[0][0].within);
    assert_eq!(uf.dimensions[1][0].var, "c");
    assert_eq!(uf.when, Some(field(id("c"), "y")));
    let u = update("UPDATE b UNSET a.x FOR a IN arr END");
    assert!(u.unset[0].update_for.is_some());
}

#[test]
fn set_meta_expiration_is_the_only_meta_path() {
    // Proves `SET meta().expiration = n` (with and without an alias argument) and Couchbase's errors for other
    // meta paths and other functions.
    let u = update("UPDATE b AS d SET meta(d).expiration = 3600, META().expiration = 0");
    let meta = |args| {
        Expr::Call(Call { name: "meta".into(), args, distinct: false, star: false, pos: Pos { line: 1, column: 19 } })
    };
    assert_eq!(u.set[0].path, field(meta(vec![id("d")]), "expiration"));
    assert_eq!(u.set[0].value, int(3600));
    assert_eq!(err("UPDATE b SET meta().cas = 1"), "SET clause has invalid path `cas` (near line 1, column 21)");
    assert_eq!(err("UPDATE b SET lower(x).y = 1"), "Invalid arguments to function lower (near line 1, column 20)");
}

#[test]
fn update_and_delete_refuse_join_hints() {
    // Proves n1ql.y's message for USE HASH / USE NL on an UPDATE or DELETE target.
    let e = err("DELETE FROM b USE NL WHERE x = 1");
    assert!(
        e.starts_with("Keyspace reference cannot have join hint (USE HASH or USE NL) in DELETE or UPDATE statement")
    );
    assert!(e.ends_with("at: WHERE"), "{e}");
}

#[test]
fn delete_takes_keys_where_limit_and_returning() {
    // Proves the DELETE clauses, and that OFFSET (which the syntax tree cannot hold) is refused.
    let Statement::Delete(d) =
        stmt("DELETE /*+ hint */ FROM b USE KEYS ['a'] WHERE x > 1 LIMIT 1 RETURNING RAW META().id")
    else {
        panic!()
    };
    assert_eq!(d.use_keys, Some(Expr::Array(vec![s("a")])));
    assert!(d.where_.is_some() && d.limit.is_some() && d.returning.is_some());
    assert!(parse("DELETE FROM b LIMIT 1 OFFSET 1").is_err());
}

#[test]
fn merge_has_lookup_and_ansi_forms_with_every_action() {
    // Proves MERGE ... ON KEY (lookup) and ON cond (ANSI), each action, and the INSERT forms.
    let m = merge(
        "MERGE INTO t USING s ON KEY s.id WHEN MATCHED THEN UPDATE SET t.x = s.x UNSET t.y WHERE s.z \
         WHEN MATCHED THEN DELETE WHERE s.gone WHEN NOT MATCHED THEN INSERT s WHERE s.new LIMIT 5 RETURNING *",
    );
    assert_eq!(m.on, MergeOn::Key(field(id("s"), "id")));
    let update = m.update.expect("UPDATE");
    assert_eq!((update.set.len(), update.unset.len()), (1, 1));
    assert_eq!(m.delete.expect("DELETE").where_, Some(field(id("s"), "gone")));
    let insert = m.insert.expect("INSERT");
    assert_eq!((insert.key, insert.value), (None, id("s")));
    assert_eq!((m.limit, m.returning.is_some()), (Some(int(5)), true));

    let m = merge(
        "MERGE INTO t AS x USING (SELECT 1 AS id) AS s ON x.id = s.id WHEN NOT MATCHED THEN INSERT (KEY s.id, VALUE s)",
    );
    assert!(matches!(m.source, FromTerm::Subquery { .. }));
    assert!(matches!(m.on, MergeOn::Condition(_)));
    let insert = m.insert.expect("INSERT");
    assert_eq!((insert.key, insert.value), (Some(field(id("s"), "id")), id("s")));

    let m = merge("MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED THEN INSERT (s.id, s, {'expiration': 1})");
    let insert = m.insert.expect("INSERT");
    assert!(insert.key.is_some() && insert.options.is_some());
    let m = merge("MERGE INTO t USING s ON KEY s.id WHEN NOT MATCHED THEN INSERT (s).v || 'x'");
    assert_eq!(m.insert.expect("INSERT").value, bin(BinaryOp::Concat, field(id("s"), "v"), s("x")));
    let m = merge("MERGE INTO t USING s ON PRIMARY KEY s.id WHEN MATCHED THEN DELETE");
    assert!(m.delete.is_some() && m.update.is_none());
    assert!(parse("MERGE INTO t USE KEYS 'a' USING s ON KEY s.id WHEN MATCHED THEN DELETE").is_err());
}
