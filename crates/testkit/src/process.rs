//! A real `settee server` process on free ports.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `settee` binary: `$SETTEE_BIN`, or the workspace's debug build.
pub fn settee_bin() -> PathBuf {
    if let Ok(p) = std::env::var("SETTEE_BIN") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("target/debug/settee")
}

/// A TCP port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

pub struct NodeProcess {
    pub child: Child,
    pub kv_port: u16,
    pub mgmt_port: u16,
    pub query_port: u16,
    /// The KV, management and query TLS ports, when started with `start_with_tls`.
    pub tls_ports: Option<(u16, u16, u16)>,
    pub data_dir: PathBuf,
}

impl NodeProcess {
    /// Starts the binary with `extra` flags and its TLS ports off, and waits (up to 30 s) until the KV port accepts
    /// connections.
    pub fn start(extra: &[&str]) -> anyhow::Result<NodeProcess> {
        NodeProcess::launch(extra, None)
    }

    /// As `start`, with the TLS ports on, on free ports.
    pub fn start_with_tls(extra: &[&str]) -> anyhow::Result<NodeProcess> {
        NodeProcess::launch(extra, Some((free_port(), free_port(), free_port())))
    }

    fn launch(extra: &[&str], tls_ports: Option<(u16, u16, u16)>) -> anyhow::Result<NodeProcess> {
        let data_dir = crate::temp_dir("proc");
        let (kv, mgmt, query) = (free_port(), free_port(), free_port());
        let (kv_tls, mgmt_tls, query_tls) = tls_ports.unwrap_or((0, 0, 0));
        let child = Command::new(settee_bin())
            .args(["server", "--host", "127.0.0.1"])
            .args(["--kv-port", &kv.to_string(), "--mgmt-port", &mgmt.to_string(), "--query-port", &query.to_string()])
            .args(["--kv-tls-port", &kv_tls.to_string(), "--mgmt-tls-port", &mgmt_tls.to_string()])
            .args(["--query-tls-port", &query_tls.to_string()])
            .arg("--data-dir")
            .arg(&data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let p = NodeProcess { child, kv_port: kv, mgmt_port: mgmt, query_port: query, tls_ports, data_dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", mgmt)).is_ok()
                && std::net::TcpStream::connect(("127.0.0.1", kv)).is_ok()
            {
                return Ok(p);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        anyhow::bail!("settee server did not start listening within 30 s")
    }

    /// Sends `signal` (e.g. libc SIGTERM = 15) and waits up to `wait` for the process to exit.
    pub fn signal_and_wait(&mut self, signal: i32, wait: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
