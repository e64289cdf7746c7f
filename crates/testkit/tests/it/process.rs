//! The real binary: readiness and clean shutdown on signals.

use std::time::Duration;

use settee_testkit::NodeProcess;

fn stops_cleanly_on(signal: i32) {
    let mut p = NodeProcess::start(&["--bucket-ram-mb", "128"]).expect("settee server starts");
    let status = p.signal_and_wait(signal, Duration::from_secs(10)).expect("exits within 10 s");
    assert!(status.success(), "exit status {status:?}");
}

/// `settee server` exits with status 0 on SIGTERM.
#[test]
fn server_stops_cleanly_on_sigterm() {
    stops_cleanly_on(15);
}

/// `settee server` exits with status 0 on SIGINT.
#[test]
fn server_stops_cleanly_on_sigint() {
    stops_cleanly_on(2);
}
