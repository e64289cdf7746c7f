use std::path::PathBuf;
use std::time::{Duration, Instant};

use settee_bench::{BenchCommand, BenchResult, RunArgs};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs `settee bench` with `argv` (plus `--json` to a temp file and `--quiet`) on a blocking thread, so a node
/// under test keeps running on the test's runtime, and returns the result file's contents.
pub async fn bench(argv: &[&str]) -> BenchResult {
    bench_in_background(argv).await.expect("bench thread")
}

/// Starts `settee bench` as [`bench`] does, for a test that changes the cluster while it runs.
pub fn bench_in_background(argv: &[&str]) -> tokio::task::JoinHandle<BenchResult> {
    let json = settee_testkit::temp_dir("bench").join("result.json");
    let mut args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    args.extend(["--json".into(), json.display().to_string(), "--quiet".into()]);
    let run = RunArgs::from_argv(&args).expect("valid options");
    tokio::task::spawn_blocking(move || {
        settee_bench::run(BenchCommand { command: None, run }).expect("bench run succeeds");
        settee_bench::read_result(&json).expect("result file")
    })
}

/// Runs `settee bench` with `argv` expecting it to fail, and returns the error's text.
pub async fn bench_error(argv: &[&str]) -> String {
    let mut args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    args.push("--quiet".into());
    let run = RunArgs::from_argv(&args).expect("valid options");
    let outcome = tokio::task::spawn_blocking(move || settee_bench::run(BenchCommand { command: None, run }));
    match outcome.await.expect("bench thread") {
        Ok(()) => panic!("settee bench {argv:?} succeeded"),
        Err(e) => format!("{e:#}"),
    }
}

/// Writes `result` to a fresh file and returns its path.
pub fn write_result(result: &BenchResult, name: &str) -> PathBuf {
    let path = settee_testkit::temp_dir("bench-out").join(name);
    std::fs::write(&path, serde_json::to_vec(result).unwrap()).unwrap();
    path
}

/// One REST call as the administrator (HTTP/1.1, `Connection: close`); returns the status and the body.
pub async fn rest(addr: std::net::SocketAddr, method: &str, path: &str, form: &str) -> (u16, String) {
    // Base64 of "Administrator:password" (settee_testkit::ADMIN and PASSWORD).
    const AUTH: &str = "QWRtaW5pc3RyYXRvcjpwYXNzd29yZA==";
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("management port");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {AUTH}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.unwrap();
    let status = reply.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// Waits until `check` holds, polling every 20 ms, and fails the test after `limit`.
pub async fn wait_for(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
