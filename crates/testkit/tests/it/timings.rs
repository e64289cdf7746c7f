//! Per-command latency (issue 18, item 3) on real nodes: GET_CMD_TIMER answers kv_engine's JSON with counts that
//! follow the traffic and Couchbase's privileges, `/metrics` carries `kv_cmd_duration_seconds`, `settee timings`
//! prints the operations of a real process, and a slow durable write produces the "Slow operation" line.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use settee_client::Connection;
use settee_mcbp::{Magic, Request};
use settee_server::config::BucketTypeArg;
use settee_testkit::{NodeProcess, TestNode, ADMIN, PASSWORD, SDK_FEATURES};

use crate::helpers::{get, req, set, vb};
use crate::metrics::{http_get, parse_exposition};
use crate::security::add_user;

const GET_CMD_TIMER: u8 = 0xf3;
const GET: u8 = 0x00;
const SET: u8 = 0x01;
const HELLO: u8 = 0x1f;

/// GET_CMD_TIMER for `opcode` with `key` as the bucket selector: (status, JSON body when successful).
async fn timer(c: &mut Connection, key: &[u8], opcode: u8) -> (u16, serde_json::Value) {
    let reply = c.call(GET_CMD_TIMER, key, &[opcode], &[], 0, 0).await.expect("GET_CMD_TIMER reply");
    let json = if reply.status == 0 {
        assert_eq!(reply.datatype & 0x01, 0x01, "the reply is flagged JSON");
        serde_json::from_slice(&reply.value).expect("JSON body")
    } else {
        serde_json::Value::Null
    };
    (reply.status, json)
}

fn total(json: &serde_json::Value) -> u64 {
    json["total"].as_u64().expect("total")
}

#[tokio::test]
async fn get_cmd_timer_counts_the_operations_the_bucket_ran() {
    // Proves on a real node: GET_CMD_TIMER's GET and SET totals move by the GETs and SETs made, its `data` rows
    // add up to the total and end at the 100th percentile, the bucket's name and "/all/" select it too, and
    // commands run before SELECT_BUCKET are counted outside the bucket; a bad request is EINVAL and another
    // bucket's name NOT_SUPPORTED, as kv_engine answers.
    let node = TestNode::start().await;
    let mut c = node.connect().await;
    let (_, gets_before) = timer(&mut c, b"", GET).await;
    let (_, sets_before) = timer(&mut c, b"", SET).await;
    for i in 0..5u8 {
        assert_eq!(set(&mut c, &[b'k', i], b"{}", 0, 0).await.status, 0);
    }
    for i in 0..3u8 {
        assert_eq!(get(&mut c, &[b'k', i]).await.status, 0);
    }
    let (status, gets) = timer(&mut c, b"", GET).await;
    assert_eq!(status, 0);
    assert_eq!(total(&gets) - total(&gets_before), 3);
    let (_, sets) = timer(&mut c, b"default", SET).await;
    assert_eq!(total(&sets) - total(&sets_before), 5);
    let rows = sets["data"].as_array().expect("data rows");
    assert_eq!(rows.iter().map(|r| r[1].as_u64().expect("count")).sum::<u64>(), total(&sets));
    assert_eq!(rows.last().expect("a row")[2], 100.0);
    assert!(sets["bucketsLow"].is_u64());
    let (status, all) = timer(&mut c, b"/all/", SET).await;
    assert_eq!(status, 0);
    assert!(total(&all) >= total(&sets));

    let (status, hellos) = timer(&mut c, b"@no bucket@", HELLO).await;
    assert_eq!(status, 0);
    assert!(total(&hellos) >= 1, "our HELLO ran before SELECT_BUCKET");
    let bare = c.call(GET_CMD_TIMER, b"", &[], &[], 0, 0).await.expect("reply");
    assert_eq!(bare.status, 0x04, "no opcode in extras: EINVAL");
    assert_eq!(timer(&mut c, b"other", GET).await.0, 0x83, "another bucket: NOT_SUPPORTED");
    node.stop().await;
}

#[tokio::test]
async fn get_cmd_timer_needs_the_stats_privilege() {
    // Proves the privileges are Couchbase's: a data_reader may not read timings (EACCESS for its bucket and for
    // "/all/"), data_monitoring may read its bucket's, and the commands outside any bucket need the global stats
    // privilege.
    let node = TestNode::start().await;
    add_user(&node, "reader", "password1", "data_reader[default]").await;
    add_user(&node, "monitor", "password2", "data_monitoring[default]").await;
    let addr = node.kv_addr();
    let mut reader = Connection::connect(addr, "reader", "password1", Some("default"), &[]).await.expect("reader");
    assert_eq!(timer(&mut reader, b"", GET).await.0, 0x24);
    assert_eq!(timer(&mut reader, b"/all/", GET).await.0, 0x24);
    let mut monitor = Connection::connect(addr, "monitor", "password2", Some("default"), &[]).await.expect("monitor");
    assert_eq!(timer(&mut monitor, b"", GET).await.0, 0);
    assert_eq!(timer(&mut monitor, b"/all/", GET).await.0, 0);
    assert_eq!(timer(&mut monitor, b"@no bucket@", HELLO).await.0, 0x24);
    node.stop().await;
}

#[tokio::test]
async fn metrics_and_settee_timings_report_a_real_process_operations() {
    // Proves on the real binary: after SETs and GETs over KV, /metrics has kv_cmd_duration_seconds histograms for
    // them (a +Inf bucket equal to _count, a _sum), and `settee timings` prints a row with the count for GET and
    // SET, for the node and with --cluster.
    let node = NodeProcess::start(&["--bucket-ram-mb", "128"]).expect("settee server starts");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], node.kv_port));
    let mut c = connect_when_the_bucket_is_up(addr).await;
    for i in 0..20u8 {
        assert_eq!(set(&mut c, &[b'p', i], b"{\"v\":1}", 0, 0).await.status, 0);
        assert_eq!(get(&mut c, &[b'p', i]).await.status, 0);
    }
    let (status, text) = http_get(node.mgmt_port, "/metrics", Some((ADMIN, PASSWORD))).await;
    assert_eq!(status, 200);
    assert!(text.contains("# TYPE kv_cmd_duration_seconds histogram"), "histogram family in {text}");
    let samples = parse_exposition(&text);
    let count = samples[r#"kv_cmd_duration_seconds_count{bucket="default",opcode="SET"}"#];
    assert!(count >= 20.0, "SET count {count}");
    assert_eq!(samples[r#"kv_cmd_duration_seconds_bucket{bucket="default",opcode="SET",le="+Inf"}"#], count);
    assert!(samples[r#"kv_cmd_duration_seconds_sum{bucket="default",opcode="SET"}"#] > 0.0);

    let host = format!("127.0.0.1:{}", node.kv_port);
    for extra in [&[][..], &["--cluster"][..]] {
        let out = std::process::Command::new(settee_testkit::settee_bin())
            .args(["timings", "--host", &host, "--bucket", "default"])
            .args(extra)
            .output()
            .expect("settee timings runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{extra:?}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        for op in ["GET", "SET"] {
            let row = stdout.lines().find(|l| l.split_whitespace().next() == Some(op));
            let row = row.unwrap_or_else(|| panic!("{extra:?}: no {op} row in {stdout}"));
            let count: u64 = row.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("count column");
            assert!(count >= 20, "{op} count in {row}");
        }
        assert!(stdout.contains("p99.9"), "{stdout}");
    }
}

async fn connect_when_the_bucket_is_up(addr: std::net::SocketAddr) -> Connection {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match Connection::connect(addr, ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await {
            Ok(c) => return c,
            Err(e) => assert!(std::time::Instant::now() < deadline, "bucket not up in 30 s: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every WARN line any thread of this test binary logs once [`capture_warnings`] ran.
static WARNINGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        WARNINGS.lock().expect("log buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends WARN and worse of every thread (the node's KV threads included) to [`WARNINGS`].
fn capture_warnings() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_ansi(false)
        .with_writer(|| Capture)
        .try_init();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_write_slowed_by_the_disk_is_logged_as_a_slow_operation() {
    // Proves the slow-operation log: with fsyncs made slower than the threshold, a persist-level SET succeeds and
    // one WARN "Slow operation" line names SET, its vBucket and the duration; its time is in the SET histogram.
    capture_warnings();
    let dir = settee_testkit::temp_dir("slowop");
    let node = settee_testkit::start_node_in(&dir, |c| {
        c.bucket_type = BucketTypeArg::Couchbase;
        c.slow_op_threshold_ms = 200;
    })
    .await;
    let mut c = Connection::connect(node.kv_addr, ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.expect("kv");
    assert_eq!(set(&mut c, b"warm", b"v", 0, 0).await.status, 0);
    let bucket = node.node.bucket("default").expect("bucket");
    bucket.persistence.as_ref().expect("persistent").faults.set_sync_delay(Duration::from_millis(300));
    let key = b"slow-durable";
    let k = c.key(0, key);
    // persistToMajority (0x03) with a 10 s timeout.
    let framing = [0x13, 0x03, 0x27, 0x10];
    let r =
        Request { magic: Magic::AltClientRequest, framing: &framing, vbucket: vb(key), ..req(SET, &k, &[0; 8], b"v") };
    assert_eq!(c.send(&r).await.expect("reply").status, 0, "the durable write succeeds, slowly");
    bucket.persistence.as_ref().expect("persistent").faults.set_sync_delay(Duration::ZERO);

    let expected = format!("vbucket={}", vb(key));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let line = loop {
        let text = String::from_utf8_lossy(&WARNINGS.lock().expect("log buffer")).into_owned();
        let found = text.lines().find(|l| l.contains("Slow operation") && l.contains(&expected)).map(str::to_owned);
        if let Some(line) = found {
            break line;
        }
        assert!(std::time::Instant::now() < deadline, "no slow-operation line in {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(line.contains("SET") && line.contains("duration_ms=") && line.contains("peer="), "{line}");
    let slow_sets = bucket.timings.snapshot(SET);
    assert!(slow_sets.max_ns >= 300_000_000, "the SET's time is recorded: max {} ns", slow_sets.max_ns);
    node.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
