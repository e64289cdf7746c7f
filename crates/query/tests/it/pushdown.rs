//! Planner tests for what is pushed into secondary index scans: each statement's EXPLAIN over the corpus dataset
//! with its secondary indexes (corpus.rs) shows covering (`covers`, no Fetch), `limit` and `offset` in the
//! IndexScan3, COUNT as IndexCountScan2, MIN as the first entry, and ORs as UnionScan; and none of them where they
//! would change a result. `indexes.sqlt` checks the same statements' results against full scans.

use serde_json::{json, Value as Json};
use settee_query::Engine;

/// The operators of a statement's plan, in order.
fn operators(stmt: &str) -> Vec<Json> {
    let ds = super::corpus::load_indexed();
    let rows =
        super::corpus::run(&ds, &Engine::new(), &format!("EXPLAIN {stmt}")).unwrap_or_else(|e| panic!("{stmt}: {e}"));
    let plan: Json = serde_json::from_str(&rows[0].field("plan").to_json_string()).expect("plan JSON");
    plan["~children"].as_array().cloned().unwrap_or_default()
}

fn names(ops: &[Json]) -> Vec<&str> {
    ops.iter().map(|o| o["#operator"].as_str().unwrap_or("")).collect()
}

/// The plan's first IndexScan3 (or IndexCountScan2).
fn scan(ops: &[Json]) -> Json {
    ops.iter()
        .find(|o| matches!(o["#operator"].as_str(), Some("IndexScan3" | "IndexCountScan2")))
        .cloned()
        .unwrap_or_else(|| panic!("no index scan in {ops:?}"))
}

#[test]
fn covering_scan_reads_no_document_when_the_index_holds_every_field() {
    // Proves a statement reading only index keys and the document id gets Couchbase's covering IndexScan3 (its
    // `covers` texts, no Fetch), functional and composite keys included.
    let ops = operators("SELECT META().id AS k, category FROM products WHERE category IN ['lamps', 'sofas']");
    assert_eq!(
        ops[0],
        json!({"#operator": "IndexScan3", "bucket": "shop", "scope": "inventory", "keyspace": "products",
            "namespace": "default", "index": "ix_category", "using": "gsi", "spans": "index keys",
            "covers": ["cover ((`products`.`category`))", "cover ((meta(`products`).`id`))"]})
    );
    assert_eq!(names(&ops), ["IndexScan3", "Filter", "InitialProject"]);
    let ops = operators("SELECT RAW LOWER(p.name) FROM products AS p WHERE LOWER(p.name) LIKE 'product 1%'");
    assert_eq!(scan(&ops)["covers"], json!(["cover (lower((`p`.`name`)))", "cover ((meta(`p`).`id`))"]));
    assert!(!names(&ops).contains(&"Fetch"));
    let ops = operators("SELECT price * 2 AS twice FROM products WHERE price BETWEEN 140 AND 170 ORDER BY id");
    assert_eq!(scan(&ops)["covers"].as_array().map(Vec::len), Some(3));
    assert!(!names(&ops).contains(&"Fetch"));
}

#[test]
fn partial_index_conditions_and_exact_any_predicates_are_filter_covers() {
    // Proves a partial index's `x = value` condition covers `x` with that value, and an ANY the array index's
    // spans answer exactly is covered as true (Couchbase's `filter_covers`).
    let ops = operators("SELECT price, discontinued FROM products WHERE discontinued = true AND price < 100");
    assert_eq!(scan(&ops)["index"], "ix_disc");
    assert_eq!(scan(&ops)["filter_covers"], json!({"cover ((`products`.`discontinued`))": true}));
    assert!(!names(&ops).contains(&"Fetch"));
    let ops = operators("SELECT RAW META().id FROM products WHERE ANY t IN tags SATISFIES t = 'tag2' END");
    assert_eq!(
        scan(&ops)["filter_covers"],
        json!({"cover (any `t` in (`products`.`tags`) satisfies (`t` = \"tag2\") end)": true})
    );
    assert_eq!(names(&ops), ["IndexScan3", "DistinctScan", "Filter", "InitialProject"]);
}

#[test]
fn scans_fetch_when_the_block_reads_more_than_the_index_holds() {
    // Proves covering is refused when the block reads the whole document, a field that is no key, an array key's
    // array, the document's metadata beyond its id, or anything through a correlated subquery.
    for stmt in [
        "SELECT * FROM products WHERE category = 'lamps'",
        "SELECT name FROM products WHERE category = 'lamps'",
        "SELECT p FROM products AS p WHERE category = 'lamps'",
        "SELECT tags FROM products WHERE ANY t IN tags SATISFIES t = 'tag2' END",
        "SELECT META().cas FROM products WHERE category = 'lamps'",
        "SELECT (SELECT RAW p.name FROM [1] AS x) AS n FROM products AS p WHERE p.category = 'lamps'",
        "SELECT RAW category FROM products WHERE category = 'lamps' AND name IS VALUED",
    ] {
        let ops = operators(stmt);
        assert!(scan(&ops).get("covers").is_none(), "{stmt}: {ops:?}");
        assert!(names(&ops).contains(&"Fetch"), "{stmt}");
    }
}

#[test]
fn limit_and_offset_go_into_an_exact_scan_in_the_right_order() {
    // Proves LIMIT and OFFSET are pushed into the IndexScan3 (the Offset operator goes, the Limit stays) when the
    // spans are the whole WHERE clause and the index gives ORDER BY's order, covered or not.
    let ops = operators("SELECT price, id FROM products WHERE price > 100 ORDER BY price, id LIMIT 3 OFFSET 2");
    assert_eq!((scan(&ops)["limit"].clone(), scan(&ops)["offset"].clone()), (json!("3"), json!("2")));
    assert_eq!(names(&ops), ["IndexScan3", "Filter", "InitialProject", "Limit"]);
    let ops = operators("SELECT RAW name FROM products WHERE category = 'lamps' ORDER BY META().id LIMIT $n OFFSET $1");
    assert_eq!((scan(&ops)["limit"].clone(), scan(&ops)["offset"].clone()), (json!("$n"), json!("$1")));
    assert_eq!(names(&ops), ["IndexScan3", "Fetch", "Filter", "InitialProject", "Limit"]);
    let ops = operators("SELECT created FROM orders WHERE status = 'paid' ORDER BY created LIMIT 3");
    assert_eq!(scan(&ops)["limit"], "3");
    let ops = operators("SELECT RAW id FROM products WHERE price < 60 ORDER BY price OFFSET 3");
    assert_eq!(names(&ops), ["IndexScan3", "Filter", "InitialProject"]);
    assert_eq!(scan(&ops)["offset"], "3");
}

#[test]
fn limit_stays_out_of_scans_whose_entries_are_not_the_rows() {
    // Proves no pushdown where the scan's entries are not the block's rows in order: a conjunct the index cannot
    // answer, an order the index does not give, DISTINCT, grouping, an array index, a LET variable named like
    // the indexed field.
    for stmt in [
        "SELECT RAW META().id FROM products WHERE price > 50 AND category = 'chairs' ORDER BY price LIMIT 2",
        "SELECT RAW price FROM products WHERE price > 150 ORDER BY price DESC, id LIMIT 2",
        "SELECT RAW price FROM products WHERE price > 150 ORDER BY name LIMIT 2",
        "SELECT DISTINCT RAW status FROM orders WHERE status > 'm' ORDER BY status LIMIT 2",
        "SELECT status, COUNT(*) AS n FROM orders WHERE status IS VALUED GROUP BY status ORDER BY status LIMIT 2",
        "SELECT RAW META().id FROM products WHERE ANY t IN tags SATISFIES t = 'tag2' END LIMIT 2",
        "SELECT RAW 1 FROM products AS p LET category = 'x' WHERE p.category = 'lamps' AND category = 'x' LIMIT 1",
    ] {
        let ops = operators(stmt);
        assert!(scan(&ops).get("limit").is_none(), "{stmt}: {ops:?}");
    }
}

#[test]
fn count_of_an_exact_scan_is_an_index_count_scan() {
    // Proves COUNT(*), COUNT of a constant and COUNT of the leading key (when the spans leave out its NULLs) are
    // counted by the index (IndexCountScan2, IndexCountProject) with nothing read, and that a count that could
    // differ is not: NULL keys in the spans, an array index, a filter the index cannot answer, a second aggregate.
    let ops = operators("SELECT COUNT(*) FROM products WHERE price > 100");
    assert_eq!(names(&ops), ["IndexCountScan2", "IndexCountProject"]);
    assert_eq!(
        ops[0],
        json!({"#operator": "IndexCountScan2", "bucket": "shop", "scope": "inventory", "keyspace": "products",
            "namespace": "default", "index": "ix_price", "using": "gsi", "spans": "index keys",
            "covers": ["cover ((`products`.`price`))", "cover ((`products`.`id`))", "cover ((meta(`products`).`id`))"]})
    );
    for stmt in [
        "SELECT RAW COUNT(1) FROM default:`types` WHERE v > 'a'",
        "SELECT RAW COUNT(v) FROM default:`types` WHERE v < 1",
        "SELECT RAW COUNT(*) FROM default:`types` WHERE v IS NOT MISSING",
        "SELECT RAW COUNT(*) FROM default:`types` WHERE i IN [1, 3, 99]",
    ] {
        assert_eq!(names(&operators(stmt))[0], "IndexCountScan2", "{stmt}");
    }
    for stmt in [
        "SELECT RAW COUNT(v) FROM default:`types` WHERE v IS NOT MISSING",
        "SELECT RAW COUNT(*) FROM products WHERE ANY t IN tags SATISFIES t = 'tag1' END",
        "SELECT RAW COUNT(*) FROM default:`types` WHERE i < 10 AND v IS VALUED",
        "SELECT COUNT(*), MAX(v) FROM default:`types` WHERE v < 1",
        "SELECT RAW COUNT(DISTINCT v) FROM default:`types` WHERE v < 1",
    ] {
        assert!(!names(&operators(stmt)).contains(&"IndexCountScan2"), "{stmt}");
    }
}

#[test]
fn min_of_the_leading_key_reads_the_first_entry() {
    // Proves MIN of the leading key over spans without NULLs reads one entry (limit 1, index_order on key 0), and
    // over spans that hold NULLs (IS NOT MISSING) reads them all, as MAX does.
    let ops = operators("SELECT MIN(i) FROM default:`types` WHERE i > 5 AND i < 10");
    assert_eq!((scan(&ops)["limit"].clone(), scan(&ops)["index_order"].clone()), (json!("1"), json!([{"keypos": 0}])));
    assert_eq!(
        names(&ops),
        ["IndexScan3", "Filter", "InitialGroup", "IntermediateGroup", "FinalGroup", "InitialProject"]
    );
    let ops = operators("SELECT MIN(v) FROM default:`types` WHERE v IS NOT MISSING");
    assert!(scan(&ops).get("limit").is_none() && scan(&ops).get("covers").is_some(), "{ops:?}");
}

#[test]
fn max_of_the_leading_key_reads_the_last_entry_first() {
    // Proves MAX of the leading key reads one entry from the top of the index (limit 1, a descending index_order),
    // NULLs in the spans included, since every value sorts above them; MAX of a second key reads every entry.
    for stmt in
        ["SELECT MAX(i) FROM default:`types` WHERE i > 5 AND i < 10", "SELECT MAX(v) FROM default:`types` WHERE v >= 0"]
    {
        let ops = operators(stmt);
        assert_eq!(
            (scan(&ops)["limit"].clone(), scan(&ops)["index_order"].clone()),
            (json!("1"), json!([{"desc": true, "keypos": 0}])),
            "{stmt}"
        );
    }
    let ops = operators("SELECT MAX(id) FROM products WHERE price > 100");
    assert!(scan(&ops).get("limit").is_none(), "{ops:?}");
}

#[test]
fn offset_and_limit_go_into_a_primary_scan_without_a_where_clause() {
    // Proves a page of a keyspace in id order (no WHERE) skips its offset inside the PrimaryScan3, before any
    // document is fetched (the Offset operator goes, the Limit stays), ascending or descending; with a WHERE the
    // rows are not the scan's ids and nothing is pushed.
    let ops = operators("SELECT RAW META().id FROM products ORDER BY META().id LIMIT 3 OFFSET 4");
    assert_eq!(names(&ops), ["PrimaryScan3", "Fetch", "InitialProject", "Limit"]);
    assert_eq!((ops[0]["offset"].clone(), ops[0]["limit"].clone()), (json!("4"), json!("3")));
    let ops = operators("SELECT RAW META().id FROM products ORDER BY META().id DESC LIMIT $n OFFSET $1");
    assert_eq!(
        (ops[0]["offset"].clone(), ops[0]["limit"].clone(), ops[0]["index_order"].clone()),
        (json!("$1"), json!("$n"), json!([{"desc": true, "keypos": 0}]))
    );
    let ops = operators(
        "SELECT RAW META().id FROM products WHERE discontinued IS MISSING ORDER BY META().id LIMIT 3 OFFSET 4",
    );
    assert!(names(&ops).contains(&"Offset") && ops[0].get("offset").is_none(), "{ops:?}");
}

#[test]
fn descending_order_reads_the_index_from_the_top() {
    // Proves ORDER BY ... DESC over an index's keys (or META().id over the primary index) drops the sort and pushes
    // LIMIT and OFFSET into a scan that reads from its highest entry down; mixed directions keep the sort.
    let ops =
        operators("SELECT price, id FROM products WHERE price > 100 ORDER BY price DESC, id DESC LIMIT 3 OFFSET 1");
    assert_eq!(names(&ops), ["IndexScan3", "Filter", "InitialProject", "Limit"]);
    assert_eq!(
        (scan(&ops)["index_order"].clone(), scan(&ops)["limit"].clone(), scan(&ops)["offset"].clone()),
        (json!([{"desc": true, "keypos": 0}]), json!("3"), json!("1"))
    );
    let ops = operators("SELECT RAW META().id FROM products ORDER BY META().id DESC LIMIT 3");
    assert!(!names(&ops).contains(&"Order"), "{ops:?}");
    let ops = operators("SELECT price, id FROM products WHERE price > 100 ORDER BY price DESC, id LIMIT 3");
    assert!(names(&ops).contains(&"Order"), "{ops:?}");
}

#[test]
fn let_variables_named_like_fields_neither_narrow_nor_order_a_scan() {
    // Proves a WHERE conjunct or ORDER BY term that reads a LET variable named like an indexed field is not taken
    // for the field: it chooses no index and leaves the sort in place (both gave wrong results before).
    let ops = operators("SELECT RAW price FROM products LET price = 0 - price WHERE price < -180");
    assert_eq!(names(&ops)[0], "PrimaryScan3");
    let ops =
        operators("SELECT RAW price FROM products AS p LET price = 0 - p.price WHERE p.price > 150 ORDER BY price");
    assert_eq!(scan(&ops)["index"], "ix_price");
    assert!(names(&ops).contains(&"Order"));
}

#[test]
fn or_reads_the_union_of_one_scan_per_term() {
    // Proves an OR whose terms different indexes serve reads a UnionScan of their IndexScan3s, then fetches and
    // filters; an OR of equalities on one key reads one scan; an OR with a term no index serves does not use one.
    let ops = operators("SELECT * FROM products WHERE category = 'lamps' OR price < 30");
    assert_eq!(names(&ops), ["UnionScan", "Fetch", "Filter", "InitialProject"]);
    let indexes: Vec<&str> =
        ops[0]["scans"].as_array().unwrap().iter().map(|s| s["index"].as_str().unwrap_or("")).collect();
    assert_eq!(indexes, ["ix_category", "ix_price"]);
    let ops = operators("SELECT * FROM orders WHERE (status = 'new' AND created < '2025-04') OR customer = 'c1'");
    assert_eq!(names(&ops)[0], "UnionScan");
    let ops = operators("SELECT * FROM products WHERE category = 'lamps' OR category = 'sofas'");
    assert_eq!(names(&ops), ["IndexScan3", "Fetch", "Filter", "InitialProject"]);
    let ops = operators("SELECT * FROM products WHERE category = 'lamps' OR stock.store = 1");
    assert_eq!(names(&ops)[0], "PrimaryScan3");
}
