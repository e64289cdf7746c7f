use std::path::PathBuf;

use settee_bench::{BenchCommand, BenchResult, RunArgs};

/// Runs `settee bench` with `argv` (plus `--json` to a temp file and `--quiet`) on a blocking thread, so a node
/// under test keeps running on the test's runtime, and returns the result file's contents.
pub async fn bench(argv: &[&str]) -> BenchResult {
    let json = settee_testkit::temp_dir("bench").join("result.json");
    let mut args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    args.extend(["--json".into(), json.display().to_string(), "--quiet".into()]);
    let run = RunArgs::from_argv(&args).expect("valid options");
    tokio::task::spawn_blocking(move || settee_bench::run(BenchCommand { command: None, run }))
        .await
        .expect("bench thread")
        .expect("bench run succeeds");
    settee_bench::read_result(&json).expect("result file")
}

/// Writes `result` to a fresh file and returns its path.
pub fn write_result(result: &BenchResult, name: &str) -> PathBuf {
    let path = settee_testkit::temp_dir("bench-out").join(name);
    std::fs::write(&path, serde_json::to_vec(result).unwrap()).unwrap();
    path
}
