"""Start and stop a real `settee server` process for the compatibility suite.

The suite talks to the server only through the official Couchbase Python SDK; this module is the one place that
knows how the binary is found, which ports it gets, how readiness is detected and how it is stopped.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

REPO_ROOT = Path(__file__).resolve().parents[3]

USERNAME = "Administrator"
PASSWORD = "password"
BUCKET = "default"

# Couchbase's well-known ports. The suite uses them only when SETTEE_COMPAT_DEFAULT_PORTS=1.
DEFAULT_KV_PORT = 11210
DEFAULT_MGMT_PORT = 8091
DEFAULT_QUERY_PORT = 8093

READY_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 15.0


def settee_binary() -> Path:
    """The server binary: $SETTEE_BIN, else the workspace's debug build."""
    explicit = os.environ.get("SETTEE_BIN")
    if explicit:
        return Path(explicit).resolve()
    return REPO_ROOT / "target" / "debug" / "settee"


def free_ports(count: int) -> List[int]:
    """Distinct TCP ports that were free on 127.0.0.1 a moment ago (all sockets are held until every port is known)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_is_free(port: int) -> bool:
    """True if a listener could bind `port` (with SO_REUSEADDR, as servers do, so TIME_WAIT leftovers don't count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def use_default_ports() -> bool:
    return os.environ.get("SETTEE_COMPAT_DEFAULT_PORTS", "") not in ("", "0", "false", "no")


def suite_bucket_type() -> str:
    """The type of the suite's bucket: `ephemeral` (default) or `couchbase` (persistent), from
    SETTEE_COMPAT_BUCKET_TYPE, so the same suite runs against both."""
    value = os.environ.get("SETTEE_COMPAT_BUCKET_TYPE", "ephemeral")
    if value not in ("ephemeral", "couchbase"):
        raise ValueError(f"SETTEE_COMPAT_BUCKET_TYPE must be ephemeral or couchbase, not {value!r}")
    return value


@dataclass
class SetteeServer:
    """One running `settee server` process with its own ports and data directory."""

    kv_port: int
    mgmt_port: int
    query_port: int
    data_dir: Path
    log_path: Path
    bucket: str = BUCKET
    bucket_type: str = field(default_factory=lambda: suite_bucket_type())
    replicas: int = 0
    ram_mb: int = 256
    # The loopback address the node binds and advertises; cluster tests give each node its own 127.0.0.x.
    ip: str = "127.0.0.1"
    # "host:mgmtport" of a cluster member to join on first start (`--join`).
    join: Optional[str] = None
    # The TLS ports (`couchbases://`); 0 keeps each off, so parallel suites never fight over 11207/18091/18093.
    kv_tls_port: int = 0
    mgmt_tls_port: int = 0
    query_tls_port: int = 0
    # More `settee server` flags.
    extra: List[str] = field(default_factory=list)
    # Environment variables set for the process on top of this one's (e.g. the hidden SETTEE_TEST_META_VERSION).
    env: Dict[str, str] = field(default_factory=dict)
    process: Optional[subprocess.Popen] = field(default=None, repr=False)
    _log_file: Optional[object] = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return self.ip

    @property
    def mgmt_addr(self) -> str:
        return f"{self.host}:{self.mgmt_port}"

    @property
    def connection_string(self) -> str:
        """`couchbase://127.0.0.1:K`, or the bare host when the server runs on Couchbase's default KV port."""
        if self.kv_port == DEFAULT_KV_PORT:
            return f"couchbase://{self.host}"
        return f"couchbase://{self.host}:{self.kv_port}"

    @property
    def mgmt_url(self) -> str:
        return f"http://{self.host}:{self.mgmt_port}"

    def command(self) -> List[str]:
        return [
            str(settee_binary()), "server",
            "--data-dir", str(self.data_dir),
            "--host", self.host,
            "--kv-port", str(self.kv_port),
            "--mgmt-port", str(self.mgmt_port),
            "--query-port", str(self.query_port),
            "--kv-tls-port", str(self.kv_tls_port),
            "--mgmt-tls-port", str(self.mgmt_tls_port),
            "--query-tls-port", str(self.query_tls_port),
            "--username", USERNAME,
            "--password", PASSWORD,
            "--bucket", self.bucket,
            "--bucket-type", self.bucket_type,
            "--bucket-ram-mb", str(self.ram_mb),
            "--replicas", str(self.replicas),
        ] + (["--join", self.join] if self.join else []) + self.extra

    def start(self) -> "SetteeServer":
        binary = settee_binary()
        if not binary.is_file():
            raise RuntimeError(f"settee binary not found at {binary}; build it with "
                               f"`cargo build -p settee-server` or set SETTEE_BIN")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command(), stdout=self._log_file, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env={**os.environ, **self.env})
        try:
            self.wait_ready(READY_TIMEOUT_SECONDS)
        except BaseException:
            self.stop()
            raise
        return self

    def http_get(self, path: str, timeout: float = 2.0) -> int:
        """GET on the management port with the administrator's Basic credentials; returns the HTTP status."""
        token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        request = urllib.request.Request(self.mgmt_url + path, headers={"Authorization": f"Basic {token}"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code

    def wait_ready(self, timeout_seconds: float) -> None:
        """Poll `GET /pools` until it answers 200, the process dies, or the deadline passes."""
        deadline = time.monotonic() + timeout_seconds
        last_error = "no attempt"
        while time.monotonic() < deadline:
            code = self.process.poll() if self.process else None
            if code is not None:
                raise RuntimeError(f"settee exited with status {code} before becoming ready; "
                                   f"log tail:\n{self.log_tail()}")
            try:
                status = self.http_get("/pools", timeout=1.0)
                if status == 200:
                    return
                last_error = f"HTTP {status}"
            except (OSError, urllib.error.URLError) as e:
                last_error = repr(e)
            time.sleep(0.1)
        raise RuntimeError(f"settee not ready after {timeout_seconds}s ({last_error}); log tail:\n{self.log_tail()}")

    def stop(self, timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> Optional[int]:
        """SIGTERM, wait with a deadline, SIGKILL as a last resort. Returns the exit status (None if never started)."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_seconds)
                code = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def kill(self) -> None:
        """SIGKILL: the process dies without flushing or closing anything, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def pause(self, timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGSTOP, returning once every thread of the process is stopped. Linux stops a multi-threaded process
        thread by thread as each next enters the kernel, so on a loaded machine a thread can go on running (and,
        say, acknowledge a replicated write) for milliseconds after the signal is sent."""
        assert self.process is not None and self.process.poll() is None, "pause needs a running process"
        self.process.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout_seconds
        while not _all_threads_stopped(self.process.pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"process {self.process.pid} not stopped {timeout_seconds}s after SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        """SIGCONT, undoing [`pause`]."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def new_tls_server(base: Path) -> SetteeServer:
    """A not-yet-started node with its three TLS ports on, all ports free, an ephemeral default bucket, under `base`."""
    kv, mgmt, query, kv_tls, mgmt_tls, query_tls = free_ports(6)
    return SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, kv_tls_port=kv_tls, mgmt_tls_port=mgmt_tls,
                        query_tls_port=query_tls, data_dir=base / "data", log_path=base / "settee.log",
                        bucket_type="ephemeral")


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is in the stopped state (`T` in /proc/<pid>/task/<tid>/stat)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        states = []
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                # The state follows the command name, which is in parentheses and may hold spaces.
                states.append(f.read().rsplit(")", 1)[1].split()[0])
    except (OSError, IndexError):
        return False
    return bool(states) and all(state in ("T", "t") for state in states)


def new_server(base_dir: Optional[Path] = None, default_ports: bool = False, **kwargs) -> SetteeServer:
    """A not-yet-started server on free ports (or Couchbase's default ports) with a fresh data directory."""
    if base_dir is None:
        base_dir = Path(tempfile.mkdtemp(prefix="settee-compat-"))
    if default_ports:
        for port in (DEFAULT_KV_PORT, DEFAULT_MGMT_PORT, DEFAULT_QUERY_PORT):
            if not port_is_free(port):
                raise RuntimeError(f"SETTEE_COMPAT_DEFAULT_PORTS is set but port {port} is in use")
        kv, mgmt, query = DEFAULT_KV_PORT, DEFAULT_MGMT_PORT, DEFAULT_QUERY_PORT
    else:
        kv, mgmt, query = free_ports(3)
    return SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, data_dir=base_dir / "data",
                        log_path=base_dir / "settee.log", **kwargs)


def cluster_servers(base: Path, count: int, first_ip: int = 1) -> List[SetteeServer]:
    """`count` not-yet-started servers for a cluster test: free ports, 127.0.0.<first_ip> onwards, data and logs
    under `base` (n0, n0.log, ...), no bucket of their own."""
    ports = free_ports(3 * count)
    servers = []
    for i in range(count):
        kv, mgmt, query = ports[3 * i:3 * i + 3]
        servers.append(SetteeServer(kv_port=kv, mgmt_port=mgmt, query_port=query, data_dir=base / f"n{i}",
                                    log_path=base / f"n{i}.log", bucket="", ip=f"127.0.0.{first_ip + i}"))
    return servers


def stop_all(servers: List[SetteeServer]) -> None:
    """Stops every server, printing the log tail of any that had exited with an error."""
    for s in servers:
        code = s.stop()
        if code not in (None, 0, -15):
            print(f"\n{s.host} exited with {code}; log tail:\n{s.log_tail()}")
