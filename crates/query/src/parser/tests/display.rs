//! Couchbase's normalised text (`expression/stringer.go`), as `system:indexes` shows index keys and conditions.

use super::*;

fn norm(text: &str) -> String {
    expr(text).to_string()
}

#[test]
fn operators_are_parenthesised_and_names_backticked() {
    // Proves every operator gets its parentheses, AND / OR are n-ary, names are backticked and keywords lower case.
    assert_eq!(norm("fld1 = 1 AND fld2 = 2"), "((`fld1` = 1) and (`fld2` = 2))");
    assert_eq!(norm("a OR b OR NOT c"), "(`a` or `b` or (not `c`))");
    assert_eq!(norm("a + b * -c"), "(`a` + (`b` * (-`c`)))");
    assert_eq!(norm("a || b || c"), "(`a` || `b` || `c`)");
    assert_eq!(norm("a.b.c[0]"), "(((`a`.`b`).`c`)[0])");
    assert_eq!(norm("a.[b]"), "(`a`.[`b`])");
    assert_eq!(norm("a[1:2]"), "(`a`[1 : 2])");
    assert_eq!(norm("a[1:]"), "(`a`[1 : ])");
    assert_eq!(norm("`we``ird`"), "`we``ird`");
}

#[test]
fn names_with_backslashes_print_escaped_so_they_parse_back() {
    // Regression: a name holding a backslash printed raw (`` `\` ``) read back as an escape and failed with "missing
    // closing quote"; backslashes and backticks in names are now escaped. Found by the round-trip property.
    let e = expr(r"`a\\b` + `c``d`");
    assert_eq!(e, bin(BinaryOp::Add, id(r"a\b"), id("c`d")));
    assert_eq!(e.to_string(), r"(`a\\b` + `c``d`)");
    assert_eq!(expr(&e.to_string()), e);
}

#[test]
fn comparisons_take_couchbases_rewrites() {
    // Proves `>` and `>=` swap to `<` and `<=`, `!=` and the NOT forms become `(not (...))`, and IS keeps its NOT.
    assert_eq!(norm("age > 21"), "(21 < `age`)");
    assert_eq!(norm("age >= 21"), "(21 <= `age`)");
    assert_eq!(norm("a <> 1"), "(not (`a` = 1))");
    assert_eq!(norm("a == 1"), "(`a` = 1)");
    assert_eq!(norm("a NOT IN [1, 2]"), "(not (`a` in [1, 2]))");
    assert_eq!(norm("a NOT LIKE 'x%'"), "(not (`a` like \"x%\"))");
    assert_eq!(norm("a NOT BETWEEN 1 AND 2"), "(not (`a` between 1 and 2))");
    assert_eq!(norm("a NOT WITHIN b"), "(not (`a` within `b`))");
    assert_eq!(norm("a IS NOT NULL"), "(`a` is not null)");
    assert_eq!(norm("a IS UNKNOWN"), "(`a` is not valued)");
    assert_eq!(norm("a IS MISSING"), "(`a` is missing)");
}

#[test]
fn literals_are_json_and_like_drops_the_default_escape() {
    // Proves strings are double-quoted JSON whatever quotes they were written with, numbers as Couchbase writes
    // them, the keyword literals in lower case, and ESCAPE shown only when it is not the backslash.
    assert_eq!(norm("'it''s \"x\"\n'"), r#""it's \"x\"\n""#);
    assert_eq!(norm("[1.0, 1.5, 1e21, TRUE, NULL, MISSING]"), "[1, 1.5, 1000000000000000000000, true, null, missing]");
    assert_eq!(norm("a LIKE 'x' ESCAPE '\\\\'"), "(`a` like \"x\")");
    assert_eq!(norm("a LIKE 'x!%' ESCAPE '!'"), "(`a` like \"x!%\" escape \"!\")");
    assert_eq!(norm("$name + $1 + ?"), "(($name + $1) + $1)");
}

#[test]
fn calls_constructors_and_collections() {
    // Proves function names as stringer writes them (lower case, DISTINCT upper case as for aggregates), META, the
    // constructors (objects sorted by name, implicit names written out), CASE, and the collection operators.
    assert_eq!(norm("LOWER(a)"), "lower(`a`)");
    assert_eq!(norm("COUNT(*)"), "count(*)");
    assert_eq!(norm("count(DISTINCT a)"), "count(DISTINCT `a`)");
    assert_eq!(norm("META().id"), "(meta().`id`)");
    assert_eq!(norm("META(b).id"), "(meta(`b`).`id`)");
    assert_eq!(norm("{'b': 1, 'a': 2, d.c}"), "{\"a\": 2, \"b\": 1, \"c\": (`d`.`c`)}");
    assert_eq!(norm("CASE WHEN a THEN 1 ELSE 2 END"), "case when `a` then 1 else 2 end");
    assert_eq!(norm("CASE a WHEN 1 THEN 2 END"), "case `a` when 1 then 2 end");
    assert_eq!(norm("ANY v IN a SATISFIES v > 1 END"), "any `v` in `a` satisfies (1 < `v`) end");
    assert_eq!(
        norm("SOME AND EVERY i:v WITHIN a SATISFIES v END"),
        "any and every `i` : `v` within `a` satisfies `v` end"
    );
    assert_eq!(
        norm("ARRAY v.day FOR v IN schedule WHEN v.x END"),
        "array (`v`.`day`) for `v` in `schedule` when (`v`.`x`) end"
    );
    assert_eq!(norm("FIRST v FOR v IN a END"), "first `v` for `v` in `a` end");
    assert_eq!(norm("OBJECT v.k : v.v FOR v IN a END"), "object (`v`.`k`) : (`v`.`v`) for `v` in `a` end");
    assert_eq!(norm("EXISTS a"), "(exists `a`)");
}

#[test]
fn index_keys_print_as_system_indexes_lists_them() {
    // Proves index_key texts: array keys as `(distinct (array ... end))`, then INCLUDE MISSING and DESC.
    let Statement::CreateIndex(c) =
        stmt("CREATE INDEX ix ON b(a INCLUDE MISSING DESC, DISTINCT ARRAY v.day FOR v IN schedule END, ALL tags)")
    else {
        panic!()
    };
    let keys: Vec<String> = c.keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        keys,
        vec!["`a` INCLUDE MISSING DESC", "(distinct (array (`v`.`day`) for `v` in `schedule` end))", "(all (`tags`))"]
    );
}

#[test]
fn normalised_text_parses_to_an_equivalent_expression() {
    // Proves Couchbase's form is itself valid SQL++: it parses, and printing that again gives the same text.
    for text in [
        "a > 1 AND b != 2 OR c NOT IN [1, 2]",
        "{'b': x, a.c}",
        "a NOT LIKE 'x' ESCAPE '!'",
        "ARRAY v FOR v IN a WHEN v.x >= 3 END",
    ] {
        let once = norm(text);
        assert_eq!(norm(&once), once, "{text}");
    }
}
