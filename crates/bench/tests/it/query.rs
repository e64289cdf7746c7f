//! `settee bench` query workloads against a node in the test process: YCSB E (scans through the query service,
//! inserts over KV) and `--query` (point lookups by key or by field, pages, counts), the query port found in the
//! cluster map.

use settee_bench::{BenchCommand, RunArgs};
use settee_testkit::TestNode;

use crate::support::{bench, rest};

fn spec(node: &TestNode) -> String {
    format!("couchbase://{}/default", node.kv_addr())
}

/// YCSB E over 2 connections: the load phase inserts every record over KV, the bench creates the primary index,
/// and the run issues exactly connections × cycles operations, all answered. Every scan starts at a key that
/// exists, so it returns at least one row and at most --scan-length; every insert is a new document on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_e_scans_through_the_query_service_and_inserts_over_kv() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let r = bench(
        &["--spec", &spec, "--workload", "e", "-I", "300", "--connections", "2", "--num-cycles", "40"]
            .into_iter()
            .chain(["--scan-length", "10"])
            .collect::<Vec<_>>(),
    )
    .await;
    assert_eq!(r.load.as_ref().unwrap().operations["insert"].ops, 300);
    let run = r.run.as_ref().unwrap();
    assert_eq!((run.ops, run.errors, run.connections), (80, 0, 2), "{:?}", run.errors_by_kind);
    let scan = &run.operations["scan"];
    assert!(scan.ops > 60, "95% of the operations scan: {}", scan.ops);
    assert!((scan.ops..=scan.ops * 10).contains(&scan.rows), "{} rows from {} scans", scan.rows, scan.ops);
    let inserted = run.operations.get("insert").map_or(0, |o| o.ops);
    let items = node.running.node.bucket("default").unwrap().curr_items();
    assert_eq!(items, 300 + inserted);
    assert_eq!(r.workload, "ycsb-e");
    node.stop().await;
}

/// Point lookups by USE KEYS and by META().id each find their one document; lookups of records never loaded are
/// misses, not errors; pages return up to --scan-length rows from every offset; COUNT(*) answers one row per query.
/// The second and later runs find the primary index the first one created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_pages_and_counts_through_the_query_service() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let run = |mode: &'static str, extra: &'static [&'static str]| {
        let spec = spec.clone();
        async move {
            let mut argv = vec!["--spec", &spec, "--query", mode, "--connections", "2", "--num-cycles", "25"];
            argv.extend_from_slice(extra);
            bench(&argv).await
        }
    };
    let r = run("use-keys", &["-I", "200"]).await;
    assert_eq!(r.load.as_ref().unwrap().operations["insert"].ops, 200, "query workloads load YCSB records");
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!((lookups.ops, lookups.rows, lookups.errors, lookups.not_found), (50, 50, 0, 0));
    assert_eq!(r.workload, "query-use-keys");

    let r = run("meta-id", &["-I", "200", "-n"]).await;
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!((lookups.ops, lookups.rows, lookups.errors, lookups.not_found), (50, 50, 0, 0));

    let r = run("use-keys", &["-I", "400", "-n", "--seed", "3"]).await;
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!(lookups.errors, 0);
    assert!(lookups.not_found > 0 && lookups.rows > 0, "half the keys were never loaded");
    assert_eq!(lookups.rows + lookups.not_found, 50);

    let r = run("page", &["-I", "200", "-n", "--scan-length", "20"]).await;
    let pages = &r.run.as_ref().unwrap().operations["page"];
    assert_eq!((pages.ops, pages.errors), (50, 0));
    assert!((50..=50 * 20).contains(&pages.rows), "{} rows", pages.rows);

    let r = run("count", &["-I", "200", "-n"]).await;
    let counts = &r.run.as_ref().unwrap().operations["count"];
    assert_eq!((counts.ops, counts.rows, counts.errors), (50, 50, 0));
    node.stop().await;
}

/// Lookups by field0's value find their one document through the secondary index the bench creates (the keyspace
/// has no primary index, so nothing else could answer), covered or not, with small records shaped by
/// --field-count/--field-length; the values are a function of the record, so lookups of records never loaded
/// miss. The second run finds the index the first one created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_lookups_go_through_a_secondary_index_on_field0() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let shape = ["--field-count", "3", "--field-length", "20", "--connections", "2", "--num-cycles", "25"];
    let run = |mode: &'static str, extra: &'static [&'static str]| {
        let spec = spec.clone();
        async move {
            let mut argv = vec!["--spec", &spec, "--query", mode];
            argv.extend_from_slice(&shape);
            argv.extend_from_slice(extra);
            bench(&argv).await
        }
    };
    let r = run("field-eq", &["-I", "200"]).await;
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!((lookups.ops, lookups.rows, lookups.errors, lookups.not_found), (50, 50, 0, 0));
    let (status, body) = rest(
        node.running.query_addr,
        "POST",
        "/query/service",
        "statement=SELECT%20RAW%20name%20FROM%20system:indexes",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("bench_field0") && !body.contains("#primary"), "{body}");

    let r = run("field-eq-covered", &["-I", "200", "-n"]).await;
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!((lookups.ops, lookups.rows, lookups.errors, lookups.not_found), (50, 50, 0, 0));

    let r = run("field-eq", &["-I", "400", "-n", "--seed", "3"]).await;
    let lookups = &r.run.as_ref().unwrap().operations["lookup"];
    assert_eq!(lookups.errors, 0);
    assert!(lookups.not_found > 0 && lookups.rows > 0, "half the records were never loaded");
    assert_eq!(lookups.rows + lookups.not_found, 50);
    node.stop().await;
}

/// A user who may read the bucket over KV but not query it: the run stops before it starts, with the query
/// service's error code in the message, instead of counting every query as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_query_privileges_gets_a_clear_error() {
    let node = TestNode::start().await;
    let user = "/settings/rbac/users/local/kvonly";
    let (status, body) = rest(node.running.mgmt_addr, "PUT", user, "password=secret1&roles=data_reader[default]").await;
    assert_eq!(status, 200, "{body}");
    let argv = ["--spec", &spec(&node), "-u", "kvonly", "-p", "secret1", "--query", "count", "-n", "-c", "1", "-q"];
    let args = RunArgs::from_argv(argv).unwrap();
    let err = tokio::task::spawn_blocking(move || settee_bench::run(BenchCommand { command: None, run: args }))
        .await
        .unwrap()
        .expect_err("the query service refuses the user");
    assert!(err.to_string().contains("13014"), "{err}");
    node.stop().await;
}
