use super::*;
use crate::ast::BinaryOp::*;

#[test]
fn precedence_follows_n1ql_y() {
    // Proves the operator table: OR < AND < NOT < = < comparisons < IN < IS < || < + < * < unary minus < paths.
    assert_eq!(expr("a OR b AND c"), Expr::Or(vec![id("a"), Expr::And(vec![id("b"), id("c")])]));
    assert_eq!(expr("NOT a = b"), Expr::Not(Box::new(eq(id("a"), id("b")))));
    assert_eq!(expr("NOT a AND b"), Expr::And(vec![Expr::Not(Box::new(id("a"))), id("b")]));
    assert_eq!(expr("a + b * c"), bin(Add, id("a"), bin(Mul, id("b"), id("c"))));
    assert_eq!(expr("a - b - c"), bin(Sub, bin(Sub, id("a"), id("b")), id("c")));
    assert_eq!(expr("a || b + c"), bin(Concat, id("a"), bin(Add, id("b"), id("c"))));
    assert_eq!(expr("a < b = c"), eq(bin(Lt, id("a"), id("b")), id("c")));
    assert_eq!(expr("a = b < c"), eq(id("a"), bin(Lt, id("b"), id("c"))));
    assert_eq!(expr("-a.b * c"), bin(Mul, Expr::Neg(Box::new(field(id("a"), "b"))), id("c")));
    let is_null = Expr::Is { expr: Box::new(bin(Add, id("a"), int(1))), test: IsTest::Null, negated: false };
    assert_eq!(expr("a + 1 IS NULL"), is_null);
    let in_list = Expr::In { expr: Box::new(id("b")), list: Box::new(id("c")), negated: false };
    assert_eq!(expr("a = b IN c"), eq(id("a"), in_list));
}

#[test]
fn not_in_binds_as_loosely_as_not_when_it_follows_a_comparison() {
    // Proves yacc's reading of `a = b NOT IN c`: the NOT token has NOT's precedence, below `=`, so the comparison is
    // finished first — `(a = b) NOT IN c`, as Couchbase parses it — while after AND it binds tighter.
    let not_in = |e: Expr| Expr::In { expr: Box::new(e), list: Box::new(id("c")), negated: true };
    assert_eq!(expr("a = b NOT IN c"), not_in(eq(id("a"), id("b"))));
    assert_eq!(expr("a AND b NOT IN c"), Expr::And(vec![id("a"), not_in(id("b"))]));
    assert_eq!(expr("NOT a NOT IN c"), Expr::Not(Box::new(not_in(id("a")))));
}

#[test]
fn comparisons_do_not_chain() {
    // Proves the non-associative operators of n1ql.y refuse a second operator of the same level.
    for text in ["a = b = c", "a < b > c", "a LIKE b LIKE c", "a IN b IN c", "a == b != c"] {
        assert!(parse_expression(text).is_err(), "{text}");
    }
}

#[test]
fn and_or_chains_are_flat_unless_parenthesised() {
    // Proves `a AND b AND c` is one n-ary AND while a parenthesised AND stays a separate operand.
    assert_eq!(expr("a AND b AND c"), Expr::And(vec![id("a"), id("b"), id("c")]));
    assert_eq!(expr("a AND (b AND c)"), Expr::And(vec![id("a"), Expr::And(vec![id("b"), id("c")])]));
    assert_eq!(expr("a OR b OR c AND d"), Expr::Or(vec![id("a"), id("b"), Expr::And(vec![id("c"), id("d")])]));
}

#[test]
fn between_bounds_are_restricted_expressions() {
    // Proves BETWEEN's AND is its own and the bounds take arithmetic and `||` but not comparisons or AND.
    let between = |x: Expr, low: Expr, high: Expr, negated| Expr::Between {
        expr: Box::new(x),
        low: Box::new(low),
        high: Box::new(high),
        negated,
    };
    assert_eq!(expr("x BETWEEN 1 AND 2 AND y"), Expr::And(vec![between(id("x"), int(1), int(2), false), id("y")]));
    assert_eq!(
        expr("x NOT BETWEEN a + 1 AND b || c"),
        between(id("x"), bin(Add, id("a"), int(1)), bin(Concat, id("b"), id("c")), true)
    );
    assert!(parse_expression("x BETWEEN NOT a AND b").is_err());
}

#[test]
fn like_takes_an_escape_and_is_tests_their_keywords() {
    // Proves [NOT] LIKE ... ESCAPE and every IS form, KNOWN and UNKNOWN mapping to VALUED.
    let like = Expr::Like {
        expr: Box::new(id("a")),
        pattern: Box::new(s("x!%")),
        escape: Some(Box::new(s("!"))),
        negated: true,
    };
    assert_eq!(expr("a NOT LIKE 'x!%' ESCAPE '!'"), like);
    let is = |text, test, negated| (expr(text), Expr::Is { expr: Box::new(id("a")), test, negated });
    for (got, want) in [
        is("a IS NULL", IsTest::Null, false),
        is("a IS NOT MISSING", IsTest::Missing, true),
        is("a IS VALUED", IsTest::Valued, false),
        is("a IS KNOWN", IsTest::Valued, false),
        is("a IS UNKNOWN", IsTest::Valued, true),
        is("a IS NOT UNKNOWN", IsTest::Valued, false),
        is("a IS NOT VALUED", IsTest::Valued, true),
    ] {
        assert_eq!(got, want);
    }
}

#[test]
fn paths_take_fields_computed_names_subscripts_and_slices() {
    // Proves `.name`, `` .`name` ``, `.[expr]`, `[i]`, `[a:b]`, `[a:]`, and that a missing slice start is 0.
    let a = || Box::new(id("a"));
    assert_eq!(expr("a.b.`c d`"), field(field(id("a"), "b"), "c d"));
    assert_eq!(expr("a.[x]"), Expr::DynamicField(a(), Box::new(id("x"))));
    assert_eq!(expr("a[-1]"), Expr::Element(a(), Box::new(Expr::Neg(Box::new(int(1))))));
    assert_eq!(expr("a[1:3]"), Expr::Slice { base: a(), start: Box::new(int(1)), end: Some(Box::new(int(3))) });
    assert_eq!(expr("a[1:]"), Expr::Slice { base: a(), start: Box::new(int(1)), end: None });
    assert_eq!(expr("a[:2]"), Expr::Slice { base: a(), start: Box::new(int(0)), end: Some(Box::new(int(2))) });
    assert_eq!(expr("a[]"), Expr::Slice { base: a(), start: Box::new(int(0)), end: None });
    assert_eq!(expr("meta(b).id"), field(call("meta", vec![id("b")], 1, 1), "id"));
}

fn call(name: &str, args: Vec<Expr>, line: u32, column: u32) -> Expr {
    Expr::Call(Call { name: name.to_string(), args, distinct: false, star: false, pos: Pos { line, column } })
}

#[test]
fn literals_and_parameters() {
    // Proves numbers, strings in both quotes, the keyword literals, and that `?` is numbered apart from `$n`.
    assert_eq!(expr("1.5"), lit(Value::float(1.5)));
    assert_eq!(expr("\"a\" || 'b'"), bin(Concat, s("a"), s("b")));
    assert_eq!(
        expr("[TRUE, false, NULL, missing]"),
        Expr::Array(vec![lit(Value::Bool(true)), lit(Value::Bool(false)), lit(Value::Null), lit(Value::Missing)])
    );
    let pos = |n| Expr::Param(Param::Positional(n));
    assert_eq!(expr("? + $1 + ? + $name"), bin(Add, bin(Add, bin(Add, pos(1), pos(1)), pos(2)), named("name")));
}

#[test]
fn object_members_take_explicit_implicit_and_aliased_names() {
    // Proves `{k: v}`, `{d.name}` (name from the path, kept implicit) and `{x AS y}` (alias as the name).
    let object = expr("{'k': 1, d.name, x AS y}");
    assert_eq!(
        object,
        Expr::Object(vec![(Some(s("k")), int(1)), (None, field(id("d"), "name")), (Some(s("y")), id("x")),])
    );
    let e = parse_expression("{1}").unwrap_err().to_string();
    assert_eq!(e, "Object member missing name or value: 1 (near line 1, column 2)");
}

#[test]
fn case_has_a_simple_and_a_searched_form() {
    // Proves CASE with and without an operand, with and without ELSE.
    let simple = expr("CASE x WHEN 1 THEN 'a' ELSE 'b' END");
    assert_eq!(
        simple,
        Expr::Case(Case {
            operand: Some(Box::new(id("x"))),
            whens: vec![(int(1), s("a"))],
            otherwise: Some(Box::new(s("b")))
        })
    );
    let searched = expr("CASE WHEN x > 1 THEN 'a' END");
    assert_eq!(
        searched,
        Expr::Case(Case { operand: None, whens: vec![(bin(Gt, id("x"), int(1)), s("a"))], otherwise: None })
    );
}

#[test]
fn collection_operators_bind_positions_and_descend_with_within() {
    // Proves ANY / SOME / EVERY / ANY AND EVERY, `pos:var` and WITHIN bindings, and ARRAY / FIRST / OBJECT ... FOR.
    let binding = |name_var: Option<&str>, var: &str, e: Expr, within| Binding {
        name_var: name_var.map(str::to_string),
        var: var.to_string(),
        expr: e,
        within,
    };
    let any = expr("SOME i:v IN a, w WITHIN b SATISFIES v = w END");
    assert_eq!(
        any,
        Expr::Quantified {
            quantifier: Quantifier::Any,
            bindings: vec![binding(Some("i"), "v", id("a"), false), binding(None, "w", id("b"), true)],
            satisfies: Box::new(eq(id("v"), id("w"))),
        }
    );
    assert!(matches!(expr("EVERY v IN a SATISFIES v END"), Expr::Quantified { quantifier: Quantifier::Every, .. }));
    assert!(matches!(
        expr("ANY AND EVERY v IN a SATISFIES v END"),
        Expr::Quantified { quantifier: Quantifier::AnyAndEvery, .. }
    ));
    let array = expr("ARRAY v.x FOR v IN a WHEN v.y END");
    assert_eq!(
        array,
        Expr::ArrayFor {
            kind: ArrayForKind::Array,
            mapping: Box::new(field(id("v"), "x")),
            bindings: vec![binding(None, "v", id("a"), false)],
            when: Some(Box::new(field(id("v"), "y"))),
        }
    );
    assert!(matches!(expr("FIRST v FOR v IN a END"), Expr::ArrayFor { kind: ArrayForKind::First, when: None, .. }));
    assert!(matches!(expr("OBJECT v.k : v.v FOR v IN a END"), Expr::ObjectFor { .. }));
}

#[test]
fn calls_are_lowercased_with_their_position() {
    // Proves names are lowercased and positioned, COUNT(*) and DISTINCT / ALL arguments, REPLACE as a name, and
    // that `*` belongs to COUNT alone.
    let Expr::Call(upper) = expr("  UPPER(a, 1)") else { panic!() };
    assert_eq!(
        (upper.name.as_str(), upper.args, upper.pos),
        ("upper", vec![id("a"), int(1)], Pos { line: 1, column: 1 })
    );
    let Expr::Binary(_, _, lower) = expr("x + \n Lower(a)") else { panic!() };
    assert!(matches!(*lower, Expr::Call(Call { pos: Pos { line: 2, column: 2 }, .. })));
    // Positions do not take part in equality: the same call elsewhere is equal.
    assert_eq!(call("lower", vec![id("a")], 9, 9), *lower);
    let star = Expr::Call(Call {
        name: "count".into(),
        args: vec![],
        distinct: false,
        star: true,
        pos: Pos { line: 1, column: 1 },
    });
    assert_eq!(expr("COUNT(*)"), star);
    assert!(matches!(expr("count(DISTINCT a)"), Expr::Call(Call { distinct: true, .. })));
    assert!(matches!(expr("count(ALL a)"), Expr::Call(Call { distinct: false, .. })));
    assert!(matches!(expr("replace(a, 'x', 'y')"), Expr::Call(Call { ref name, .. }) if name == "replace"));
    assert!(matches!(expr("`my fn`()"), Expr::Call(Call { ref name, .. }) if name == "my fn"));
    let e = parse_expression("SUM(*)").unwrap_err().to_string();
    assert_eq!(e, "Invalid aggregate function SUM(*) (near line 1, column 1).");
}

#[test]
fn subqueries_and_exists_are_expressions() {
    // Proves a parenthesised select is a subquery value, usable with EXISTS and IN.
    let Expr::Exists(inner) = expr("EXISTS (SELECT 1)") else { panic!("not EXISTS") };
    assert!(matches!(*inner, Expr::Subquery(_)));
    assert!(
        matches!(expr("x IN (SELECT RAW y FROM b)"), Expr::In { ref list, .. } if matches!(**list, Expr::Subquery(_)))
    );
    let union = expr("((SELECT 1) UNION (SELECT 2))");
    let Expr::Subquery(select) = union else { panic!("not a subquery") };
    assert!(matches!(select.body, SetExpr::SetOp { op: SetOp::Union, .. }));
}

#[test]
fn a_few_keywords_may_name_things_but_most_may_not() {
    // Proves DEFAULT, USER, SEQUENCE and VECTOR work as identifiers (n1ql.y's permitted_identifiers) while VALUE
    // does not, and that backticks always make an identifier.
    assert_eq!(expr("default.user"), field(id("default"), "user"));
    assert_eq!(expr("`value`"), id("value"));
    assert!(parse_expression("a.value").is_err());
}
