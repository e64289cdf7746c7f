//! The statement corpus: every `tests/corpus/*.sqlt` file holds statements with their expected results over the
//! generated dataset (`dataset.rs`), run through the parser, planner and executor as the service runs them.
//!
//! File format: `=== name` starts a case; the statement follows until a `---` line, which says what to expect:
//! `--- rows` (exactly these rows in this order), `--- rows unordered` (the same rows in any order), or
//! `--- error <code>` (the statement fails with that Couchbase error code). The expectation's JSON follows
//! (rows as one JSON array); after `--- error`, a text that follows must be part of the error's message. Lines starting with `#` outside a case are comments. Cases run with the query context
//! `default:shop.inventory`, named parameters `$n` = 3 and `$s` = "Paris", and positional parameters `[5, "p0%"]`.
//!
//! A case may hold several statements separated by lines `;;`: they run in order, each as its own request, against
//! the same engine and dataset (so a PREPARE is visible to a later EXECUTE, and a DML statement's changes to a
//! later SELECT). The first statement that fails is the case's outcome; otherwise the last statement's rows are
//! compared.

use std::collections::HashMap;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use settee_query::datastore::MemDatastore;
use settee_query::exec::Cx;
use settee_query::functions::FnContext;
use settee_query::plan::parse_query_context;
use settee_query::value::Value;
use settee_query::{Engine, QueryError, Sink, StatementEnv};

/// One case of a corpus file.
struct Case {
    file: String,
    name: String,
    /// The statements, in order (most cases have one).
    statements: Vec<String>,
    expect: Expect,
}

enum Expect {
    Rows {
        rows: Vec<Value>,
        ordered: bool,
    },
    /// The error code, and a text the message must contain.
    Error(u32, Option<String>),
}

fn parse_file(file: &str, text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("=== ") else { continue };
        let mut statement = String::new();
        let mut header = String::new();
        for l in lines.by_ref() {
            if l.starts_with("---") {
                header = l.to_string();
                break;
            }
            statement.push_str(l);
            statement.push('\n');
        }
        let mut body = String::new();
        while let Some(l) = lines.peek() {
            if l.starts_with("=== ") {
                break;
            }
            if !l.starts_with('#') {
                body.push_str(l);
                body.push('\n');
            }
            lines.next();
        }
        let words: Vec<&str> = header.split_whitespace().collect();
        let expect = match words.as_slice() {
            ["---", "error", code] => {
                let text = body.trim();
                Expect::Error(code.parse().expect("error code"), (!text.is_empty()).then(|| text.to_string()))
            }
            ["---", "rows"] | ["---", "rows", "unordered"] => {
                let rows = match Value::from_json(body.trim().as_bytes()) {
                    Ok(Value::Array(a)) => a.iter().cloned().collect(),
                    other => panic!("{file}: case {name}: expected rows must be a JSON array: {other:?}"),
                };
                Expect::Rows { rows, ordered: words.len() == 2 }
            }
            _ => panic!("{file}: case {name}: bad expectation line {header:?}"),
        };
        let statements = split_statements(&statement);
        assert!(!statements.is_empty(), "{file}: case {name} has no statement");
        cases.push(Case { file: file.to_string(), name: name.trim().to_string(), statements, expect });
    }
    cases
}

/// Splits a case's text at lines that hold only `;;`.
fn split_statements(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in text.lines() {
        if line.trim() == ";;" {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// Runs a case's statements in order over one engine and dataset: the first error, or the last one's rows.
fn run_all(ds: &MemDatastore, engine: &Engine, statements: &[String]) -> Result<Vec<Value>, QueryError> {
    let mut rows = Vec::new();
    for text in statements {
        rows = run(ds, engine, text)?;
    }
    Ok(rows)
}

struct Collect(Vec<Value>);

impl Sink for Collect {
    fn start(&mut self, _: Option<&str>, _: &serde_json::Value) -> Result<(), QueryError> {
        Ok(())
    }
    fn row(&mut self, value: &Value, _: Option<&[Arc<str>]>) -> Result<bool, QueryError> {
        self.0.push(value.clone());
        Ok(true)
    }
}

/// Runs one statement as the service would, over `ds`.
pub fn run(ds: &MemDatastore, engine: &Engine, text: &str) -> Result<Vec<Value>, QueryError> {
    let named: HashMap<String, Value> =
        [("n".to_string(), Value::int(3)), ("s".to_string(), Value::string("Paris"))].into();
    let positional = vec![Value::int(5), Value::string("p0%")];
    let state = AtomicU8::new(0);
    let clock = || 1_700_000_000_000_000_000i64;
    let random = || 42u64;
    let fnctx = FnContext { now_nanos: clock(), clock: &clock, random: &random };
    let cx = Cx::new(ds, &named, &positional, fnctx, &state);
    let env = StatementEnv { context: parse_query_context("default:shop.inventory")?, ..Default::default() };
    let stmt = settee_query::parse(text)?;
    let mut out = Collect(Vec::new());
    engine.execute(&stmt, text, &env, &cx, &mut out)?;
    if let Some(e) = cx.dml_errors.borrow().first() {
        return Err(e.clone());
    }
    Ok(out.0)
}

fn show(rows: &[Value]) -> String {
    format!("[{}]", rows.iter().map(Value::to_json_string).collect::<Vec<_>>().join(", "))
}

#[test]
fn corpus_statements_give_their_expected_results() {
    // Proves every corpus case: each runs against a fresh copy of the dataset (DML cases change it), and all
    // failures are reported together.
    run_corpus(super::dataset::load, &[]);
}

/// Secondary indexes over the fields the corpus filters on; with them, the planner reads through an index
/// wherever a predicate allows.
const SECONDARY_INDEXES: &[&str] = &[
    "CREATE INDEX ix_category ON products(category)",
    "CREATE INDEX ix_price ON products(price, id)",
    "CREATE INDEX ix_id ON products(id)",
    "CREATE INDEX ix_name ON products(LOWER(name))",
    "CREATE INDEX ix_tags ON products(DISTINCT ARRAY t FOR t IN tags END)",
    "CREATE INDEX ix_ratings ON products(DISTINCT ARRAY r.rating FOR r IN reviews END)",
    "CREATE INDEX ix_disc ON products(price) WHERE discontinued = true",
    "CREATE INDEX ix_city ON customers(address.city)",
    "CREATE INDEX ix_cust_name ON customers(name)",
    "CREATE INDEX ix_customer ON orders(customer)",
    "CREATE INDEX ix_status ON orders(status, created)",
    "CREATE INDEX ix_lines ON orders(DISTINCT ARRAY l.product FOR l IN lines END)",
    "CREATE INDEX ix_v ON default:`types`(v)",
    "CREATE INDEX ix_i ON default:`types`(i)",
    // A second key that some documents lack (MISSING in their entries), and INCLUDE MISSING.
    "CREATE INDEX ix_cat_disc ON products(category, discontinued)",
    "CREATE INDEX ix_email ON customers(email INCLUDE MISSING, name)",
];

/// The dataset with the secondary indexes.
pub fn load_indexed() -> MemDatastore {
    let ds = super::dataset::load();
    let engine = Engine::new();
    for stmt in SECONDARY_INDEXES {
        run(&ds, &engine, stmt).unwrap_or_else(|e| panic!("{stmt}: {e}"));
    }
    ds
}

#[test]
fn corpus_statements_give_the_same_results_through_secondary_indexes() {
    // Proves indexes never change results: every corpus case (but those that list or explain indexes) gives its
    // expected full-scan result again with secondary indexes on every field the corpus filters on.
    // (A prepared statement that fails once its keyspace has no index left still has one here.)
    run_corpus(
        load_indexed,
        &["ddl.sqlt", "system.sqlt", "explain.sqlt", "prepared_statement_fails_when_its_index_is_dropped"],
    );
}

#[test]
fn predicates_on_indexed_keys_read_through_the_index() {
    // Proves the planner uses secondary indexes where a predicate allows: equality, IN, ranges, LIKE prefixes,
    // functional keys, array keys through ANY, composite prefixes and a partial index whose WHERE the query
    // repeats; and keeps the primary index when nothing applies.
    let ds = load_indexed();
    let engine = Engine::new();
    let uses = |stmt: &str| -> String {
        let rows = run(&ds, &engine, &format!("EXPLAIN {stmt}")).unwrap_or_else(|e| panic!("{stmt}: {e}"));
        let plan = rows[0].field("plan").to_json_string();
        let scans: Vec<&str> =
            ["IndexScan3", "PrimaryScan3", "KeyScan"].into_iter().filter(|s| plan.contains(s)).collect();
        let index = plan.split("\"index\":\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string();
        format!("{} {index}", scans.join(","))
    };
    assert_eq!(uses("SELECT * FROM products WHERE category = 'lamps'"), "IndexScan3 ix_category");
    assert_eq!(uses("SELECT * FROM products AS p WHERE p.category IN ['a', 'b']"), "IndexScan3 ix_category");
    assert_eq!(uses("SELECT * FROM products WHERE price > 100 AND price <= 150"), "IndexScan3 ix_price");
    assert_eq!(uses("SELECT * FROM products WHERE LOWER(name) LIKE 'product 1%'"), "IndexScan3 ix_name");
    assert_eq!(
        uses("SELECT * FROM products AS p WHERE ANY x IN p.tags SATISFIES x = 'tag2' END"),
        "IndexScan3 ix_tags"
    );
    assert_eq!(uses("SELECT * FROM orders WHERE status = 'new' AND created >= '2025-06'"), "IndexScan3 ix_status");
    assert_eq!(uses("SELECT * FROM products WHERE discontinued = true AND price < 50"), "IndexScan3 ix_disc");
    assert_eq!(uses("SELECT * FROM customers AS c WHERE c.address.city = $s"), "IndexScan3 ix_city");
    assert_eq!(uses("SELECT * FROM products WHERE stock.store = 1"), "PrimaryScan3 #primary");
    assert_eq!(uses("SELECT * FROM products USE INDEX (ix_id) WHERE id = 3"), "IndexScan3 ix_id");
}

#[test]
fn rows_in_index_order_are_not_sorted_again() {
    // Proves ORDER BY is dropped when the scan's index already gives that order (so LIMIT stops the scan early):
    // META().id over the primary index, a prefix of a secondary index's keys; and kept when the order differs,
    // mixes directions, places NULLs against the index order, or names a projection alias.
    let ds = load_indexed();
    let engine = Engine::new();
    let sorts = |stmt: &str| -> bool {
        let rows = run(&ds, &engine, &format!("EXPLAIN {stmt}")).unwrap_or_else(|e| panic!("{stmt}: {e}"));
        rows[0].field("plan").to_json_string().contains("\"Order\"")
    };
    assert!(!sorts("SELECT * FROM products WHERE META().id >= 'p05' ORDER BY META().id LIMIT 3"));
    assert!(!sorts("SELECT * FROM products WHERE price > 100 ORDER BY price, id LIMIT 3"));
    assert!(sorts("SELECT * FROM products WHERE price > 100 ORDER BY id LIMIT 3"));
    // Descending orders read the index from its top down; NULLS FIRST on a descending order has no index order.
    assert!(!sorts("SELECT * FROM products WHERE META().id >= 'p05' ORDER BY META().id DESC LIMIT 3"));
    assert!(!sorts("SELECT * FROM products WHERE price > 100 ORDER BY price DESC, id DESC LIMIT 3"));
    assert!(sorts("SELECT * FROM products WHERE price > 100 ORDER BY price DESC, id LIMIT 3"));
    assert!(sorts("SELECT * FROM products WHERE price > 100 ORDER BY price DESC NULLS FIRST LIMIT 3"));
    assert!(sorts("SELECT -price AS price FROM products WHERE price > 100 ORDER BY price"));
}

fn run_corpus(load: fn() -> MemDatastore, skip: &[&str]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("corpus dir").flatten().map(|e| e.path()).collect();
    files.sort();
    // SETTEE_CORPUS=<text> runs only the files or cases whose name contains the text (for working on one file).
    let only = std::env::var("SETTEE_CORPUS").unwrap_or_default();
    let mut failures = Vec::new();
    let mut count = 0;
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "sqlt")) {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        if skip.contains(&file.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("read corpus file");
        for case in parse_file(&file, &text) {
            if (!file.contains(&only) && !case.name.contains(&only)) || skip.contains(&case.name.as_str()) {
                continue;
            }
            count += 1;
            let ds = load();
            let engine = Engine::new();
            let got = run_all(&ds, &engine, &case.statements);
            let problem = match (&case.expect, got) {
                (Expect::Error(code, text), Err(e))
                    if e.code() == *code && text.as_ref().is_none_or(|t| e.to_string().contains(t.as_str())) =>
                {
                    None
                }
                (Expect::Error(code, text), Err(e)) => {
                    Some(format!("expected error {code} {}, got {} {e}", text.as_deref().unwrap_or(""), e.code()))
                }
                (Expect::Error(code, _), Ok(rows)) => Some(format!("expected error {code}, got rows {}", show(&rows))),
                (Expect::Rows { .. }, Err(e)) => Some(format!("failed: {} {e}", e.code())),
                (Expect::Rows { rows: want, ordered }, Ok(mut got)) => {
                    let mut want = want.clone();
                    if !ordered {
                        want.sort();
                        got.sort();
                    }
                    let same = want.len() == got.len()
                        && want.iter().zip(&got).all(|(a, b)| a.to_json_string() == b.to_json_string());
                    (!same).then(|| format!("expected {}\n     got {}", show(&want), show(&got)))
                }
            };
            if let Some(p) = problem {
                let text = case.statements.iter().map(|s| s.trim()).collect::<Vec<_>>().join("\n  ;;\n  ");
                failures.push(format!("{} / {}:\n  {}  {}", case.file, case.name, text, p));
            }
        }
    }
    assert!(count > 0, "no corpus cases found in {}", dir.display());
    assert!(failures.is_empty(), "{} of {count} corpus cases failed:\n\n{}", failures.len(), failures.join("\n\n"));
}
