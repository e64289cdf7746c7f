//! The corpus dataset: a small shop, generated here (no external data), with the shapes SQL++ must handle:
//! missing and null fields, mixed number types, nested objects and arrays, several collections, references
//! between documents for joins, and a bucket of values of every type for collation.

use settee_query::datastore::{KeyspaceName, MemDatastore};
use settee_query::value::Value;

fn j(text: &str) -> Value {
    Value::from_json(text.as_bytes()).expect("dataset JSON")
}

const CATEGORIES: [&str; 4] = ["chairs", "sofas", "tables", "lamps"];

/// Loads the dataset into a new datastore, every collection with a primary index.
pub fn load() -> MemDatastore {
    let ds = MemDatastore::new();
    let products = KeyspaceName::new("shop", "inventory", "products");
    for i in 0..20u32 {
        // Every fifth product has no category, every seventh a null one; prices alternate int and float.
        let category = match i {
            i if i % 5 == 4 => String::new(),
            i if i % 7 == 6 => r#","category":null"#.to_string(),
            i => format!(r#","category":"{}""#, CATEGORIES[(i % 4) as usize]),
        };
        let price = if i % 2 == 0 { format!("{}", 10 * (i + 1)) } else { format!("{}.5", 10 * (i + 1)) };
        let tags: Vec<String> = (0..(i % 4)).map(|t| format!("\"tag{}\"", (i + t) % 6)).collect();
        let discontinued = match i % 3 {
            0 => r#","discontinued":false"#,
            1 => r#","discontinued":true"#,
            _ => "",
        };
        let reviews: Vec<String> =
            (0..(i % 3)).map(|r| format!(r#"{{"rating":{},"user":"c{}"}}"#, 1 + (i + r) % 5, (i + r) % 10)).collect();
        let doc = format!(
            r#"{{"id":{i},"name":"product {i:02}","price":{price}{category},"tags":[{}],"stock":{{"warehouse":{},"store":{}}}{discontinued},"reviews":[{}]}}"#,
            tags.join(","),
            (i * 7) % 13,
            (i * 3) % 5,
            reviews.join(","),
        );
        ds.put(&products, &format!("p{i:02}"), j(&doc));
    }
    let customers = KeyspaceName::new("shop", "inventory", "customers");
    let cities = ["Paris", "Lyon", "Oslo", "Rome", "Lima"];
    for i in 0..10u32 {
        let vip = if i % 4 == 0 { "true" } else { "false" };
        let email = if i == 3 { String::new() } else { format!(r#","email":"c{i}@example.com""#) };
        let doc = format!(
            r#"{{"name":"Customer {i}","vip":{vip}{email},"address":{{"city":"{}","zip":"{:05}"}},"signup":"2024-0{}-1{}T10:00:00Z"}}"#,
            cities[(i % 5) as usize],
            1000 + i * 37,
            1 + i % 9,
            i % 10,
        );
        ds.put(&customers, &format!("c{i}"), j(&doc));
    }
    let orders = KeyspaceName::new("shop", "inventory", "orders");
    for i in 0..30u32 {
        let lines: Vec<String> = (0..(1 + i % 3))
            .map(|l| format!(r#"{{"product":"p{:02}","qty":{}}}"#, (i * 3 + l * 5) % 20, 1 + (i + l) % 4))
            .collect();
        let status = ["new", "paid", "shipped"][(i % 3) as usize];
        let doc = format!(
            r#"{{"customer":"c{}","status":"{status}","lines":[{}],"created":"2025-{:02}-{:02}"}}"#,
            i % 10,
            lines.join(","),
            1 + i % 12,
            1 + i % 28,
        );
        ds.put(&orders, &format!("o{i:02}"), j(&doc));
    }
    let types = KeyspaceName::new("types", "_default", "_default");
    let values = [
        "null",
        "false",
        "true",
        "-1",
        "0",
        "0.5",
        "1",
        "10",
        "\"\"",
        "\"A\"",
        "\"a\"",
        "\"b\"",
        "[]",
        "[1]",
        "[1,2]",
        "[2]",
        "{}",
        r#"{"a":1}"#,
        r#"{"b":0}"#,
        r#"{"a":1,"b":1}"#,
    ];
    for (i, v) in values.iter().enumerate() {
        ds.put(&types, &format!("v{i:02}"), j(&format!(r#"{{"i":{i},"v":{v}}}"#)));
    }
    // One document with no `v` at all: v is MISSING.
    ds.put(&types, "v99", j(r#"{"i":99}"#));
    for ks in [&products, &customers, &orders, &types] {
        add_primary(&ds, ks);
    }
    ds.add_collection(&KeyspaceName::new("shop", "inventory", "empty"));
    ds
}

fn add_primary(ds: &MemDatastore, ks: &KeyspaceName) {
    use settee_query::datastore::{CreateIndexRequest, Datastore};
    use settee_query::index::IndexDef;
    let def = IndexDef {
        id: format!("primary-{ks}"),
        name: "#primary".into(),
        keyspace: ks.clone(),
        is_primary: true,
        keys: vec![],
        condition: None,
        partition: None,
        num_replica: 0,
    };
    ds.create_index(CreateIndexRequest { def, defer_build: false }).expect("primary index");
}
