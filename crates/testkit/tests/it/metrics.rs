//! `GET /metrics` on a real `settee server` process: the exposition text parses, values follow KV traffic, and a
//! scrape without credentials is refused.

use std::collections::BTreeMap;

use base64::Engine;
use settee_testkit::{Connection, NodeProcess, ADMIN, PASSWORD, SDK_FEATURES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::helpers::{get, set};

/// One HTTP/1.1 GET that closes the connection: (status code, body).
pub(crate) async fn http_get(port: u16, path: &str, auth: Option<(&str, &str)>) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect to mgmt");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some((user, password)) = auth {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read answer");
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).expect("status line");
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// Parses Prometheus text exposition (0.0.4) strictly enough to catch malformed lines: every line is a `# HELP` or
/// `# TYPE` comment naming a valid metric, or `name{k="v",...} value` with a float value. Returns each sample as
/// `name{labels}` -> value.
pub(crate) fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
    let valid_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
            let name = rest.split_whitespace().next().unwrap_or("");
            assert!(valid_name(name), "bad name in comment line {line:?}");
            if line.starts_with("# TYPE ") {
                let kind = rest.split_whitespace().nth(1).unwrap_or("");
                assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind), "bad TYPE {line:?}");
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value in {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name = series.split('{').next().unwrap_or("");
        assert!(valid_name(name), "bad metric name in {line:?}");
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            let inner = labels.strip_prefix('{').and_then(|l| l.strip_suffix('}')).expect("braced labels");
            for pair in inner.split(',') {
                let (key, quoted) = pair.split_once('=').unwrap_or_else(|| panic!("bad label in {line:?}"));
                assert!(valid_name(key), "bad label name in {line:?}");
                assert!(quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'), "unquoted {line:?}");
            }
        }
        samples.insert(series.to_owned(), value);
    }
    samples
}

fn sample(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| panic!("no sample {series}"))
}

/// Scrapes until the default bucket's families appear (the process listens before it has created the bucket).
async fn scrape_once_the_bucket_is_up(port: u16) -> BTreeMap<String, f64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, text) = http_get(port, "/metrics", Some((ADMIN, PASSWORD))).await;
        assert_eq!(status, 200);
        let samples = parse_exposition(&text);
        if samples.contains_key(r#"kv_ops{bucket="default",op="set"}"#) || std::time::Instant::now() > deadline {
            return samples;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn metrics_parse_and_follow_kv_traffic_and_need_credentials() {
    // Proves on the real binary: /metrics without credentials is 401; with the admin's it is valid exposition text
    // whose kv_ops, kv_curr_items and kv_curr_connections move with sets, hits and misses made over KV, and which
    // carries the process's CPU and memory.
    let node = NodeProcess::start(&["--bucket-ram-mb", "128"]).expect("settee server starts");
    let (status, _) = http_get(node.mgmt_port, "/metrics", None).await;
    assert_eq!(status, 401, "unauthenticated scrape");
    let (status, _) = http_get(node.mgmt_port, "/metrics", Some((ADMIN, "wrong"))).await;
    assert_eq!(status, 401, "wrong password");

    let before = scrape_once_the_bucket_is_up(node.mgmt_port).await;

    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], node.kv_port));
    let mut c = Connection::connect(addr, ADMIN, PASSWORD, Some("default"), SDK_FEATURES).await.expect("kv connect");
    for key in [b"m1".as_slice(), b"m2", b"m3"] {
        assert_eq!(set(&mut c, key, b"{\"v\":1}", 0, 0).await.status, 0, "set succeeds");
    }
    assert_eq!(get(&mut c, b"m1").await.status, 0);
    assert_eq!(get(&mut c, b"m2").await.status, 0);
    assert_eq!(get(&mut c, b"absent").await.status, 1, "KEY_ENOENT");

    let (status, after) = http_get(node.mgmt_port, "/metrics", Some((ADMIN, PASSWORD))).await;
    assert_eq!(status, 200);
    let after = parse_exposition(&after);
    let moved = |series: &str| sample(&after, series) - sample(&before, series);
    assert_eq!(moved(r#"kv_ops{bucket="default",op="set"}"#), 3.0);
    assert_eq!(moved(r#"kv_ops{bucket="default",op="get",result="hit"}"#), 2.0);
    assert_eq!(moved(r#"kv_ops{bucket="default",op="get",result="miss"}"#), 1.0);
    assert_eq!(moved(r#"kv_curr_items{bucket="default"}"#), 3.0);
    assert!(sample(&after, r#"kv_mem_used_bytes{bucket="default"}"#) > 0.0);
    assert!(sample(&after, "kv_curr_connections") >= 1.0, "our KV connection is open");
    assert_eq!(sample(&after, r#"kv_num_vbuckets{bucket="default",state="active"}"#), 1024.0);
    assert!(sample(&after, r#"sysproc_mem_resident{proc="settee"}"#) > 0.0);
    assert!(after.contains_key(r#"sysproc_cpu_seconds_total{proc="settee",mode="user"}"#));
}

#[test]
fn exposition_parser_rejects_malformed_lines() {
    // Proves the checker above can fail: a sample without a value, a bad name and unquoted labels are caught.
    for bad in ["kv_ops{bucket=\"x\"}", "1bad 2", "kv_ops{bucket=x} 1", "# TYPE kv_ops nonsense"] {
        assert!(std::panic::catch_unwind(|| parse_exposition(bad)).is_err(), "accepted {bad:?}");
    }
    assert_eq!(parse_exposition("# HELP a b\n# TYPE a gauge\na{b=\"c\"} 1.5\n")["a{b=\"c\"}"], 1.5);
}
