//! `settee bench` against a real memcached (binary protocol), when the `memcached` binary is installed
//! (`scripts/test.sh` installs it; elsewhere the test prints a notice and passes).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::bench;

struct Memcached {
    child: Child,
    port: u16,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_memcached() -> Option<Memcached> {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).ok()?.port();
    let mut cmd = Command::new("memcached");
    cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-B", "binary", "-m", "64", "-t", "2"]);
    // memcached refuses to run as root unless told which user to run as.
    if running_as_root() {
        cmd.args(["-u", "root"]);
    }
    let child = match cmd.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn() {
        Ok(c) => c,
        Err(_) => {
            println!("NOTICE: memcached is not installed; skipping the memcached test (scripts/test.sh installs it)");
            return None;
        }
    };
    let mc = Memcached { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(mc);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("memcached did not listen on {port} within 10 s");
}

/// Whether this process runs as root, read from /proc so no libc binding is needed.
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// The same pillowfight mix against memcached: every loaded key is found, the run issues exactly
/// connections × cycles × batch operations, and none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pillowfight_against_memcached() {
    let Some(mc) = start_memcached() else { return };
    let spec = format!("memcached://127.0.0.1:{}", mc.port);
    let r = bench(
        &["--spec", &spec, "-I", "2000", "-m", "200", "-M", "200", "-r", "50", "-B", "50", "-t", "2"]
            .into_iter()
            .chain(["--num-cycles", "40", "--key-format", "uuid"])
            .collect::<Vec<_>>(),
    )
    .await;
    assert_eq!((r.load.as_ref().unwrap().ops, r.load.as_ref().unwrap().errors), (2000, 0));
    let run = r.run.as_ref().unwrap();
    assert_eq!((run.ops, run.errors, run.not_found), (2 * 40 * 50, 0, 0));
    assert_eq!(r.target, "memcached");
}
