//! `settee bench` against a cluster that changes under it (nodes in this process, driven through the REST API as
//! an administrator would): like an SDK it follows the pushed node lists and maps and sends NOT_MY_VBUCKET
//! requests again, so a rebalance shows up as retries and latency, never as errors.

use std::time::Duration;

use settee_testkit::TestNode;

use crate::support::{bench, bench_in_background, rest, wait_for};

const REBALANCE_LIMIT: Duration = Duration::from_secs(120);

fn spec(node: &TestNode) -> String {
    format!("couchbase://{}/default", node.kv_addr())
}

/// Starts a rebalance on `orchestrator` (ejecting `ejected`, a `host:mgmtport`, if any) and waits until it is
/// done; fails the test if it reports an error.
async fn rebalance(orchestrator: &TestNode, ejected: &str) {
    let mgmt = orchestrator.running.mgmt_addr;
    let (status, body) =
        rest(mgmt, "POST", "/controller/rebalance", &format!("knownNodes=&ejectedNodes={ejected}")).await;
    assert_eq!(status, 200, "rebalance refused: {body}");
    wait_for("the rebalance to finish", REBALANCE_LIMIT, async || {
        let (_, tasks) = rest(mgmt, "GET", "/pools/default/tasks", "").await;
        !tasks.contains("\"running\"")
    })
    .await;
    let (_, tasks) = rest(mgmt, "GET", "/pools/default/tasks", "").await;
    assert!(!tasks.contains("errorMessage"), "the rebalance failed: {tasks}");
}

/// Starts a bench run of `seconds` against `spec` and waits until it has connected to `node` (one connection per
/// thread and node, besides the bootstrap connection).
async fn start_run(spec: &str, seconds: &str, node: &TestNode) -> tokio::task::JoinHandle<settee_bench::BenchResult> {
    let connections = || node.running.node.kv_connections.load(std::sync::atomic::Ordering::Relaxed);
    let before = connections();
    let argv = ["--spec", spec, "-I", "2000", "-m", "10", "-M", "100", "-r", "50", "--no-population"]
        .into_iter()
        .chain(["-B", "4", "-t", "2", "--rate-limit", "1000", "-d", seconds, "--timeout", "20"])
        .collect::<Vec<_>>();
    let client = bench_in_background(&argv);
    wait_for("the bench to connect", Duration::from_secs(30), async || connections() >= before + 2).await;
    client
}

/// GETs and SETs node `n` has served in the default bucket.
fn served(n: &TestNode) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    n.running.node.bucket("default").map_or(0, |b| b.stats().cmd_get.load(Relaxed) + b.stats().cmd_set.load(Relaxed))
}

/// The bench bootstraps from a one-node cluster and runs open loop (1,000 ops/s, 50% sets) while a second node
/// joins (a new node list, pushed to the bench's connections: it opens a connection to the new node) and a
/// rebalance moves half of the vBuckets to it (the bench sees NOT_MY_VBUCKET while each step's takeover holds its
/// vBuckets and until the new map reaches it). Every operation succeeds, some were retried, and the new node
/// served requests for the vBuckets it took over. Then a second run while that node is rebalanced out again and
/// stopped: its connections close, it leaves the map, and still no operation fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebalance_in_and_out_costs_retries_not_errors() {
    let a = TestNode::start().await;
    let spec = spec(&a);
    let load = bench(&["--spec", &spec, "-I", "2000", "-m", "10", "-M", "100", "--populate-only", "-B", "50"]).await;
    assert_eq!(load.load.as_ref().unwrap().errors, 0);

    // Many moves at once, so the rebalance fits well inside the run.
    let (status, body) = rest(a.running.mgmt_addr, "POST", "/settings/rebalance", "rebalanceMovesPerNode=64").await;
    assert_eq!(status, 200, "{body}");
    // Rebalance in: the bench starts with one node.
    let client = start_run(&spec, "10", &a).await;
    let b = TestNode::start_with(|c| c.join = Some(a.running.mgmt_addr.to_string())).await;
    rebalance(&a, "").await;
    assert!(!client.is_finished(), "the rebalance ended while the bench ran");
    let r = client.await.unwrap();
    let run_in = r.run.as_ref().unwrap();
    assert_eq!((run_in.errors, &run_in.errors_by_kind), (0, &Default::default()), "no operation failed");
    assert!(run_in.retries > 0, "takeovers and the new map cost retries");
    assert!(run_in.ops > 5000, "the run kept going: {} operations", run_in.ops);
    assert!(served(&b) > 1000, "b served the vBuckets it took over: {} requests", served(&b));

    // Rebalance out, then stop the ejected node.
    let client = start_run(&spec, "8", &b).await;
    rebalance(&a, &b.running.mgmt_addr.to_string()).await;
    b.stop().await;
    assert!(!client.is_finished(), "the rebalance and the stop ended while the bench ran");
    let r = client.await.unwrap();
    let run_out = r.run.as_ref().unwrap();
    assert_eq!((run_out.errors, &run_out.errors_by_kind), (0, &Default::default()), "no operation failed");
    assert!(run_out.retries > 0);
    a.stop().await;
}

/// A node that stops while the map still lists it (no failover) fails the bench's connections as it always did:
/// after a short grace in which the bench asks the other node for the map, the run reports the operations that
/// were in flight or waiting for that node as lost connections, and the connections stop early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_while_listed_fails_the_connections() {
    let a = TestNode::start().await;
    let spec = spec(&a);
    bench(&["--spec", &spec, "-I", "2000", "-m", "10", "-M", "100", "--populate-only", "-B", "50"]).await;
    let b = TestNode::start_with(|c| c.join = Some(a.running.mgmt_addr.to_string())).await;
    rebalance(&a, "").await;
    let client = start_run(&spec, "6", &b).await;
    let served_before = served(&a);
    wait_for("traffic on a", Duration::from_secs(10), async || served(&a) > served_before + 500).await;
    b.stop().await;
    let r = client.await.unwrap();
    let run = r.run.as_ref().unwrap();
    assert!(run.errors > 0, "operations for b failed");
    assert_eq!(run.errors_by_kind.keys().collect::<Vec<_>>(), ["connection lost"], "{:?}", run.errors_by_kind);
    assert!(run.ops < 5000, "the connections stopped early: {} of 6000 operations", run.ops);
    a.stop().await;
}
