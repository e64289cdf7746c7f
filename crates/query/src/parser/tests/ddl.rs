use super::*;

fn create_index(text: &str) -> CreateIndex {
    match stmt(text) {
        Statement::CreateIndex(c) => c,
        other => panic!("{other:?}"),
    }
}

fn key(expr: Expr) -> IndexKey {
    IndexKey { expr, array: None, desc: false, include_missing: false }
}

#[test]
fn create_primary_index_takes_name_if_not_exists_using_and_with() {
    // Proves the named and unnamed forms, IF NOT EXISTS before or after the name, USING and WITH.
    let c = |text: &str| match stmt(text) {
        Statement::CreatePrimaryIndex(c) => c,
        other => panic!("{other:?}"),
    };
    let p = c("CREATE PRIMARY INDEX ON default:`b` USING GSI WITH {\"defer_build\":true,\"num_replica\":1}");
    assert_eq!((p.name, p.if_not_exists, p.keyspace), (None, false, path(Some("default"), &["b"])));
    assert_eq!(p.using, Some(IndexType::Gsi));
    assert!(matches!(p.with, Some(Expr::Object(ref m)) if m.len() == 2));
    assert_eq!(c("CREATE PRIMARY INDEX `p` IF NOT EXISTS ON b").name.as_deref(), Some("p"));
    assert!(c("CREATE PRIMARY INDEX IF NOT EXISTS p ON b").if_not_exists);
    assert!(c("CREATE PRIMARY INDEX IF NOT EXISTS ON b").if_not_exists);
    assert!(parse("CREATE PRIMARY INDEX ON b PARTITION BY HASH(a)").is_err());
}

#[test]
fn create_index_keys_take_order_missing_and_array_forms() {
    // Proves key attributes (DESC, ASC, INCLUDE MISSING in either order), DISTINCT / ALL / EACH array keys, the
    // parenthesised form Couchbase prints, PARTITION BY HASH, WHERE, USING and WITH.
    let c = create_index(
        "CREATE INDEX IF NOT EXISTS ix ON b(a INCLUDE MISSING DESC, b ASC, DISTINCT ARRAY v.d FOR v IN s END, \
         ALL c, EACH DISTINCT e, (distinct (array `v` for `v` in `w` end))) PARTITION BY HASH(a, b) \
         WHERE a > 1 USING GSI WITH {'nodes': ['n1']}",
    );
    assert!(c.if_not_exists);
    assert_eq!(c.keys[0], IndexKey { expr: id("a"), array: None, desc: true, include_missing: true });
    assert_eq!(c.keys[1], key(id("b")));
    assert_eq!(c.keys[2].array, Some(ArrayIndexKind::Distinct));
    assert!(matches!(c.keys[2].expr, Expr::ArrayFor { .. }));
    assert_eq!(c.keys[3].array, Some(ArrayIndexKind::All));
    assert_eq!(c.keys[4].array, Some(ArrayIndexKind::Distinct));
    assert_eq!(c.keys[5].array, Some(ArrayIndexKind::Distinct));
    assert_eq!(c.partition, Some(vec![id("a"), id("b")]));
    assert!(c.where_.is_some() && c.with.is_some());
    assert_eq!(create_index("CREATE INDEX ix IF NOT EXISTS ON b(a)").keys, vec![key(id("a"))]);
}

#[test]
fn index_key_attributes_may_not_repeat_or_conflict() {
    // Proves n1ql.y's "Duplicate or Invalid index key attribute" for DESC DESC and ASC DESC.
    assert_eq!(
        err("CREATE INDEX ix ON b(a DESC DESC)"),
        "Duplicate or Invalid index key attribute (near line 1, column 29)"
    );
    assert!(err("CREATE INDEX ix ON b(a ASC DESC)").starts_with("Duplicate or Invalid"));
    assert!(parse("CREATE INDEX ix ON b(a INCLUDE MISSING ASC DESC)").is_err());
}

#[test]
fn with_values_must_be_static() {
    // Proves WITH accepts constant expressions and refuses names and parameters, as Couchbase does.
    assert!(parse("CREATE INDEX ix ON b(a) WITH {'num_replica': 1 + 1}").is_ok());
    assert_eq!(err("CREATE INDEX ix ON b(a) WITH {'n': $n}"), "WITH value must be static (near line 1, column 30)");
    assert!(parse("CREATE PRIMARY INDEX ON b WITH x").is_err());
}

#[test]
fn drop_index_takes_both_forms_and_if_exists() {
    // Proves `DROP INDEX name ON ks`, the older `DROP INDEX ks.name` (bucket or namespaced three-part path),
    // IF EXISTS in both places, USING, and DROP PRIMARY INDEX with and without a name.
    let d = |text: &str| match stmt(text) {
        Statement::DropIndex(d) => d,
        other => panic!("{other:?}"),
    };
    let a = d("DROP INDEX `ix` ON default:`b`.`s`.`c` USING GSI");
    assert_eq!(
        (a.name.as_str(), a.keyspace, a.using),
        ("ix", path(Some("default"), &["b", "s", "c"]), Some(IndexType::Gsi))
    );
    let b = d("DROP INDEX `b`.`ix` USING GSI");
    assert_eq!((b.name.as_str(), b.keyspace), ("ix", path(None, &["b"])));
    let c = d("DROP INDEX IF EXISTS default:b.s.c.ix");
    assert_eq!((c.name.as_str(), c.if_exists, c.keyspace), ("ix", true, path(Some("default"), &["b", "s", "c"])));
    assert!(d("DROP INDEX ix IF EXISTS ON b").if_exists);
    assert!(d("DROP INDEX b.ix IF EXISTS").if_exists);
    assert!(parse("DROP INDEX b.s.ix").is_err());
    let named_primary = d("DROP PRIMARY INDEX `p` ON b");
    assert_eq!(named_primary.name, "p");
    let Statement::DropPrimaryIndex(p) = stmt("DROP PRIMARY INDEX IF EXISTS ON default:`b` USING GSI") else {
        panic!()
    };
    assert_eq!((p.if_exists, p.keyspace, p.using), (true, path(Some("default"), &["b"]), Some(IndexType::Gsi)));
}

#[test]
fn build_and_alter_index() {
    // Proves BUILD INDEX turns bare names into strings and keeps other expressions, and both ALTER INDEX forms.
    let Statement::BuildIndexes(b) = stmt("BUILD INDEX ON default:`b` (`a`,`b`, $more) USING GSI") else { panic!() };
    assert_eq!(b.names, vec![s("a"), s("b"), named("more")]);
    assert_eq!(b.keyspace, path(Some("default"), &["b"]));
    assert!(parse("BUILD INDEX ON b()").is_err());
    let Statement::AlterIndex(a) = stmt("ALTER INDEX ix ON b.s.c WITH {'action': 'move'}") else { panic!() };
    assert_eq!((a.name.as_str(), a.keyspace), ("ix", path(None, &["b", "s", "c"])));
    let Statement::AlterIndex(a) = stmt("ALTER INDEX b.ix USING GSI WITH {'action': 'move'}") else { panic!() };
    assert_eq!((a.name.as_str(), a.keyspace, a.using), ("ix", path(None, &["b"]), Some(IndexType::Gsi)));
    assert!(parse("ALTER INDEX ix ON b").is_err());
}

#[test]
fn statements_settee_does_not_support_are_syntax_errors() {
    // Proves statements outside the syntax tree fail cleanly with 3000 rather than being half-understood.
    for text in [
        "CREATE SCOPE b.s",
        "CREATE VECTOR INDEX ix ON b(v)",
        "CREATE INDEX ix ON b(a) INCLUDE (c)",
        "INFER b",
        "GRANT query_select ON b TO u",
        "PREPARE SAVE p FROM SELECT 1",
        "WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r",
        "SELECT a ^ 2",
        "SELECT a IS DISTINCT FROM b",
        "SELECT a[*].b FROM x",
        "SELECT SUM(a) OVER () FROM x",
        "UPDATE b LET x = 1 SET a = x",
        "SELECT * FROM b USE KEYS VALIDATE 'a'",
        "SELECT * FROM a JOIN LATERAL b ON true",
    ] {
        assert_eq!(parse(text).map_err(|e| e.code()), Err(3000), "{text}");
    }
}
