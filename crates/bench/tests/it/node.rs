//! `settee bench` against a node in the test process (couchbase://: bootstrap, routing, collections).

use settee_bench::{BenchCommand, BenchSubcommand, CompareArgs, PlotArgs};
use settee_testkit::{TestNode, ADMIN, PASSWORD, SDK_FEATURES};

use crate::support::{bench, bench_error, write_result};

fn spec(node: &TestNode) -> String {
    format!("couchbase://{}/default", node.kv_addr())
}

/// A pillowfight mix over 4 connections (2 threads × 2) with a fixed cycle count: the load phase stores every
/// item once, and the run issues exactly connections × cycles × batch operations, all answered without error
/// and without misses (every key was loaded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pillowfight_counts_every_operation() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let r = bench(
        &["--spec", &spec, "-I", "2000", "-m", "10", "-M", "300", "-r", "40", "-B", "25", "-t", "2"]
            .into_iter()
            .chain(["--connections", "2", "--num-cycles", "30"])
            .collect::<Vec<_>>(),
    )
    .await;
    let load = r.load.as_ref().expect("load phase");
    assert_eq!((load.ops, load.errors), (2000, 0));
    assert_eq!(load.operations["set"].ops, 2000);
    let run = r.run.as_ref().expect("run phase");
    assert_eq!((run.ops, run.errors, run.not_found, run.connections), (4 * 30 * 25, 0, 0, 4));
    assert_eq!(run.operations["get"].ops + run.operations["set"].ops, 3000);
    assert!(run.operations["set"].ops > 0 && run.operations["get"].ops > 0);
    assert_eq!((r.target.as_str(), r.workload.as_str()), ("couchbase", "pillowfight"));
    assert!(run.errors_by_kind.is_empty());
    node.stop().await;
}

/// YCSB workloads D (inserts past the loaded records, "latest" reads) and F (read-modify-write) with JSON records
/// and durability majority: every operation succeeds, and D's inserts are new documents the node now holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsb_workloads_d_and_f() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let d = bench(&["--spec", &spec, "--workload", "d", "-I", "500", "-B", "20", "--num-cycles", "50"]).await;
    assert_eq!(d.load.as_ref().unwrap().operations["insert"].ops, 500);
    let run = d.run.as_ref().unwrap();
    assert_eq!((run.ops, run.errors, run.not_found), (1000, 0, 0));
    let inserted = run.operations.get("insert").map_or(0, |o| o.ops);
    assert!(inserted > 0, "5% of 1000 operations insert");
    let items = node.running.node.bucket("default").unwrap().curr_items();
    assert_eq!(items, 500 + inserted);

    let f = bench(
        &["--spec", &spec, "--workload", "f", "-I", "500", "-B", "20", "--num-cycles", "50"]
            .into_iter()
            .chain(["--durability", "majority", "--no-population"])
            .collect::<Vec<_>>(),
    )
    .await;
    let run = f.run.as_ref().unwrap();
    assert_eq!((run.ops, run.errors), (1000, 0));
    assert!(run.operations["rmw"].ops > 0 && run.operations["get"].ops > 0);
    node.stop().await;
}

/// With --collection the keys go to that collection (resolved with GET_COLLECTION_ID): the run succeeds and the
/// documents are in the collection, not in the default one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_keys_land_in_the_collection() {
    let node = TestNode::start().await;
    let bucket = node.running.node.bucket("default").unwrap();
    bucket.edit_manifest(|m| m.create_scope("s")).unwrap();
    bucket.edit_manifest(|m| m.create_collection("s", "c", None, false)).unwrap();
    let spec = spec(&node);
    let r = bench(&["--spec", &spec, "--collection", "s.c", "-I", "100", "-B", "10", "--num-cycles", "5"]).await;
    assert_eq!((r.load.as_ref().unwrap().errors, r.run.as_ref().unwrap().errors), (0, 0));
    let mut c = settee_testkit::Connection::connect(node.kv_addr(), ADMIN, PASSWORD, Some("default"), SDK_FEATURES)
        .await
        .unwrap();
    let key = b"00000000000000000007";
    let vb = settee_client::vbucket_of(key, 1024);
    let in_collection = c.key(8, key);
    assert_eq!(c.call(0x00, &in_collection, &[], &[], vb, 0).await.unwrap().status, 0);
    let in_default = c.key(0, key);
    assert_eq!(c.call(0x00, &in_default, &[], &[], vb, 0).await.unwrap().status, 0x01);
    node.stop().await;
}

/// An open-loop run (--rate-limit) for a fixed duration with JSON documents completes without errors and records
/// a timeline; plot and compare accept its result file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_run_then_plot_and_compare() {
    let node = TestNode::start().await;
    let spec = spec(&node);
    let r = bench(&["--spec", &spec, "--rate-limit", "2000", "-d", "1.5", "-B", "8", "--json-docs", "-I", "300"]).await;
    let run = r.run.as_ref().unwrap();
    assert!(run.ops > 0 && run.errors == 0);
    assert!(!run.timeline.is_empty() && !run.percentiles_us.is_empty());
    node.stop().await;

    let mut other = r.clone();
    other.label = "memcached".into();
    let files = vec![write_result(&r, "a.json"), write_result(&other, "b.json")];
    let svg = files[0].with_file_name("chart.svg");
    let plot = BenchSubcommand::Plot(PlotArgs { files: files.clone(), output: svg.clone(), title: None });
    settee_bench::run(BenchCommand { command: Some(plot), run: empty_run() }).unwrap();
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let table = files[0].with_file_name("table.md");
    let compare =
        BenchSubcommand::Compare(CompareArgs { files, baseline: "memcached".into(), output: Some(table.clone()) });
    settee_bench::run(BenchCommand { command: Some(compare), run: empty_run() }).unwrap();
    let text = std::fs::read_to_string(&table).unwrap();
    assert!(text.contains("| couchbase |") && text.contains("| 1.00 |"), "{text}");
}

fn empty_run() -> settee_bench::RunArgs {
    settee_bench::RunArgs::from_argv(Vec::<String>::new()).unwrap()
}

/// Over `couchbases://` the whole run (bootstrap, the load, a mix) goes over the node's KV TLS port with the node's
/// CA, and the node counts the connections as TLS ones; without `--cacert`, or trusting another CA, the run is
/// refused before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn couchbases_runs_over_the_tls_port_with_the_nodes_ca() {
    let node = TestNode::start_with(|c| {
        let free = settee_testkit::free_port;
        (c.kv_tls_port, c.mgmt_tls_port, c.query_tls_port) = (free(), free(), free());
    })
    .await;
    let tls = node.running.kv_tls_addr.expect("the KV TLS port");
    let spec = format!("couchbases://{tls}/default");
    let dir = settee_testkit::temp_dir("bench-tls");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, node.running.node.tls.ca_pem()).unwrap();
    let ca_arg = ca.to_str().unwrap();
    let r =
        bench(&["--spec", &spec, "--cacert", ca_arg, "-I", "300", "-B", "10", "-t", "2", "--num-cycles", "20"]).await;
    assert_eq!((r.load.as_ref().unwrap().ops, r.load.as_ref().unwrap().errors), (300, 0));
    let run = r.run.as_ref().unwrap();
    assert_eq!((run.ops, run.errors, run.not_found), (2 * 20 * 10, 0, 0));
    assert_eq!(node.running.node.bucket("default").unwrap().curr_items(), 300);

    let refused = bench_error(&["--spec", &spec, "-I", "10", "--num-cycles", "1"]).await;
    assert!(refused.contains("--cacert"), "{refused}");
    let stranger = TestNode::start_with(|c| c.kv_tls_port = settee_testkit::free_port()).await;
    let other = dir.join("other.pem");
    std::fs::write(&other, stranger.running.node.tls.ca_pem()).unwrap();
    let wrong = bench_error(&["--spec", &spec, "--cacert", other.to_str().unwrap(), "-I", "10"]).await;
    assert!(wrong.contains("certificate"), "{wrong}");
    stranger.stop().await;
    node.stop().await;
}

/// With `--retry-tmpfail`, a load into a couchbase bucket whose small quota fills with values its disk has not
/// taken yet gets TMPFAIL answers (counted as retries) and still writes every item, without an error; this is how
/// the scale benchmark loads more items than the quota holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmpfail_answers_are_retried_until_every_item_is_written() {
    let dir = settee_testkit::temp_dir("bench-tmpfail");
    let node = settee_testkit::start_node_in(&dir, |c| {
        c.bucket_type = settee_server::config::BucketTypeArg::Couchbase;
        c.bucket_ram_mb = 100;
    })
    .await;
    let spec = format!("couchbase://{}/default", node.kv_addr);
    // 300 values of 1 MB: three times the quota, written 64 at a time, faster than the flusher drains them.
    let args = ["--spec", &spec, "-I", "300", "-m", "1000000", "-M", "1000000", "-B", "64", "--populate-only"];
    let r = bench(&args.into_iter().chain(["--retry-tmpfail"]).collect::<Vec<_>>()).await;
    let load = r.load.as_ref().expect("load phase");
    assert_eq!((load.ops, load.errors), (300, 0), "{:?}", load.errors_by_kind);
    assert!(load.retries > 0, "the quota never refused a write: the test proves nothing on this machine");
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
