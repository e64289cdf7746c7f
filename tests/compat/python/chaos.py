"""The recovery schedule of issue 21 (item 4) against real `settee server` processes, driven by the official Python
SDK: three nodes on 127.0.0.x with one replica, `majority` writes and CAS updates on 16 keys with a recorded
history, while one node is killed with SIGKILL and auto-failed-over (5 s), restarted and delta-recovered, another
is gracefully failed over and fully recovered, then a swap rebalance (a fourth node in, one out).

After the schedule every node must still answer: no bucket stuck in TMPFAIL (`ep_persistence_failed`), every
rebalance ended without an error, the SDK's KV pings and reads of every key succeed, raw KV requests to every
node are answered; and no acknowledged write is lost (each key holds its last acknowledged value or a later
attempted one, and no read returned a value older than one acknowledged before it started).

`test_chaos.py` runs it once in the compatibility suite; `scripts/chaos.sh N` runs it N times and keeps the logs
of failed runs. Run directly: `python chaos.py [runs] [seed]`.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CasMismatchException, CouchbaseException
from couchbase.options import GetOptions, PingOptions, ReplaceOptions, UpsertOptions

import kv_raw
import settee_server
from cluster_load import Background, wait_for
from sdk_connect import connect
from settee_server import SetteeServer
from test_cluster import otp, rest

BUCKET = "chaos"
KEYS = 16
WORKERS = 4
MAJORITY = ServerDurability(DurabilityLevel.MAJORITY)
OP_TIMEOUT = timedelta(seconds=5)
# How long a rebalance may run before the schedule calls it hung (each wait inside it is bounded well below).
REBALANCE_LIMIT_SECONDS = 240.0
# A fresh KV connection (SASL, SELECT_BUCKET, NOOP) taking longer than this is a stalled KV service (the socket
# timeout is 5 s, so a probe that gives up shows as about 5 s).
KV_STALL_SECONDS = 4.0
# After the schedule, how long every node gets to answer again.
RECOVERY_SECONDS = 45.0


@dataclass
class History:
    """Per key: every value attempted, the last acknowledged one, and the reads that went back in time."""

    attempted: dict = field(default_factory=lambda: {f"c-{k}": {0} for k in range(KEYS)})
    acked: dict = field(default_factory=lambda: {f"c-{k}": 0 for k in range(KEYS)})
    stale_reads: list = field(default_factory=list)
    ops: int = 0
    failures: dict = field(default_factory=dict)
    # (monotonic time, ok) of every operation, for the availability timeline.
    timeline: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, e: Exception):
        with self.lock:
            name = type(e).__name__
            self.failures[name] = self.failures.get(name, 0) + 1
            self.timeline.append((time.monotonic(), False))

    def succeeded(self):
        with self.lock:
            self.ops += 1
            self.timeline.append((time.monotonic(), True))


class Workload:
    """WORKERS threads, each owning KEYS / WORKERS keys, so that the operations on one key are sequential: each
    write carries the next number for its key (an upsert with `majority`, or a CAS replace with `majority` from
    the value just read), then the key is read back. The history says what was acknowledged."""

    def __init__(self, collection, history: History, seed: int):
        self.collection, self.history = collection, history
        self.stop = threading.Event()
        self.rng = random.Random(seed)
        self.threads = [threading.Thread(target=self.run, args=(w,), daemon=True) for w in range(WORKERS)]

    def run(self, worker: int):
        keys = [f"c-{k}" for k in range(worker, KEYS, WORKERS)]
        rng = random.Random(self.rng.random())
        next_value = {k: 1 for k in keys}
        h = self.history
        while not self.stop.is_set():
            key = rng.choice(keys)
            value = next_value[key]
            next_value[key] += 1
            with h.lock:
                h.attempted[key].add(value)
                acked_before = h.acked[key]
            try:
                if rng.random() < 0.5:
                    self.collection.upsert(key, {"n": value}, UpsertOptions(durability=MAJORITY, timeout=OP_TIMEOUT))
                else:
                    current = self.collection.get(key, GetOptions(timeout=OP_TIMEOUT))
                    options = ReplaceOptions(cas=current.cas, durability=MAJORITY, timeout=OP_TIMEOUT)
                    self.collection.replace(key, {"n": value}, options)
                with h.lock:
                    h.acked[key] = value
                    acked_before = value
                h.succeeded()
            except CasMismatchException:
                h.succeeded()
            except CouchbaseException as e:
                h.failed(e)
            try:
                got = self.collection.get(key, GetOptions(timeout=OP_TIMEOUT)).content_as[dict]["n"]
                if got < acked_before or got not in h.attempted[key]:
                    with h.lock:
                        h.stale_reads.append((key, acked_before, got))
                h.succeeded()
            except CouchbaseException as e:
                h.failed(e)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


class KvProbe(Background):
    """Every 0.5 s, a fresh KV connection to each running node (SASL, SELECT_BUCKET, NOOP): the longest a node
    took to answer, so a node whose KV service stops answering (as the SDK saw in issue 21) shows even when the
    SDK hides it behind retries."""

    def __init__(self, nodes: list[SetteeServer]):
        self.nodes = nodes
        self.slowest: dict[str, float] = {}
        super().__init__(daemon=True)

    def run(self):
        while not self.stop_event.wait(0.5):
            for node in self.nodes:
                if node.process is None or node.process.poll() is not None:
                    continue
                started = time.monotonic()
                try:
                    with kv_raw.session(node, BUCKET) as sock:
                        kv_raw.call(sock, 0x0A)
                except (OSError, AssertionError, ConnectionError):
                    pass
                took = time.monotonic() - started
                self.slowest[node.host] = max(self.slowest.get(node.host, 0.0), took)


@dataclass
class Outcome:
    """What one run found: `problems` is empty when the run passed."""

    problems: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    history: History | None = None

    def problem(self, text: str):
        print(f"  PROBLEM: {text}", flush=True)
        self.problems.append(text)


def cluster_nodes(ips: list[str], base: Path) -> list[SetteeServer]:
    """Not-yet-started nodes on free ports with a couchbase default bucket type, each after the first joining it."""
    ports = settee_server.free_ports(3 * len(ips))
    nodes = [SetteeServer(kv_port=ports[3 * i], mgmt_port=ports[3 * i + 1], query_port=ports[3 * i + 2],
                          data_dir=base / f"n{i}", log_path=base / f"n{i}.log", bucket="", bucket_type="couchbase",
                          ip=ip) for i, ip in enumerate(ips)]
    for n in nodes[1:]:
        n.join = nodes[0].mgmt_addr
    return nodes


class Orchestrator:
    """Management calls through the first node: rebalances (waited for, with every failure recorded)."""

    def __init__(self, nodes: list[SetteeServer], outcome: Outcome):
        self.nodes, self.outcome = nodes, outcome
        self.started = time.monotonic()

    def log(self, text: str):
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)

    def membership(self, node: SetteeServer) -> str:
        status, pool = rest(self.nodes[0], "GET", "/pools/default")
        assert status == 200, pool
        return next(n for n in pool["nodes"] if n["hostname"] == node.mgmt_addr)["clusterMembership"]

    def wait_healthy(self, nodes: list[SetteeServer]):
        """Until the orchestrator's probes see every one of `nodes` (a rebalance needing a node it has not seen
        for 3 s is refused, as Couchbase refuses one with an unhealthy node)."""
        def healthy():
            status, pool = rest(self.nodes[0], "GET", "/pools/default")
            seen = {n["hostname"]: n["status"] for n in pool["nodes"]} if status == 200 else {}
            return all(seen.get(n.mgmt_addr) == "healthy" for n in nodes)

        wait_for(healthy, "the nodes to look healthy", timeout=30, interval=0.2)

    def rebalance(self, what: str, known: list[SetteeServer], ejected: list[SetteeServer]):
        """Runs a rebalance to its end; one refused, failed or still running after REBALANCE_LIMIT_SECONDS is a
        problem of the outcome."""
        names = lambda nodes: ",".join(otp(n) for n in nodes)  # noqa: E731
        self.wait_healthy([n for n in known if n not in ejected])
        started = time.monotonic()
        status, body = rest(self.nodes[0], "POST", "/controller/rebalance",
                            {"knownNodes": names(known), "ejectedNodes": names(ejected)})
        if status != 200:
            self.outcome.problem(f"{what}: rebalance refused: {body}")
            return
        task = None
        while time.monotonic() - started < REBALANCE_LIMIT_SECONDS:
            _, tasks = rest(self.nodes[0], "GET", "/pools/default/tasks")
            task = tasks[0]
            if task["status"] != "running":
                break
            time.sleep(0.25)
        seconds = time.monotonic() - started
        self.outcome.timings[what] = round(seconds, 1)
        if task is None or task["status"] == "running":
            self.outcome.problem(f"{what}: rebalance still running after {seconds:.0f} s: {task}")
        elif "errorMessage" in task:
            self.outcome.problem(f"{what}: rebalance failed after {seconds:.0f} s: {task['errorMessage']}")
        else:
            self.log(f"{what}: rebalance done in {seconds:.1f} s ({task['movesDone']} moves)")


class Chaos(Orchestrator):
    def __init__(self, base: Path, seed: int):
        self.base, self.seed = base, seed
        self.rng = random.Random(seed)
        super().__init__(cluster_nodes([f"127.0.0.{21 + i}" for i in range(4)], base), Outcome())

    def form(self):
        for n in self.nodes[:3]:
            n.start()
        self.rebalance("formation", self.nodes[:3], [])
        status, body = rest(self.nodes[0], "POST", "/pools/default/buckets",
                            {"name": BUCKET, "bucketType": "couchbase", "ramQuota": 128, "replicaNumber": 1})
        assert status == 202, body
        status, body = rest(self.nodes[0], "POST", "/settings/autoFailover", {"enabled": "true", "timeout": 5})
        assert status == 200, body

    def kill_and_delta_recover(self, victim: SetteeServer):
        self.log(f"SIGKILL {victim.host}")
        victim.kill()
        wait_for(lambda: self.membership(victim) == "inactiveFailed", "auto-failover of the killed node",
                 timeout=60, interval=0.2)
        self.log(f"{victim.host} auto-failed-over")
        time.sleep(self.rng.uniform(0.5, 3.0))
        # The restarted process logs beside the first one's log, which stays for a post-mortem.
        victim.log_path = victim.log_path.with_suffix(".restarted.log")
        victim.start()
        self.log(f"{victim.host} restarted")
        time.sleep(self.rng.uniform(0.0, 2.0))
        status, body = rest(self.nodes[0], "POST", "/controller/setRecoveryType",
                            {"otpNode": otp(victim), "recoveryType": "delta"})
        assert status == 200, body
        self.rebalance("delta recovery", self.nodes[:3], [])

    def graceful_and_full_recover(self, node: SetteeServer):
        self.log(f"graceful failover of {node.host}")
        status, body = rest(self.nodes[0], "POST", "/controller/startGracefulFailover", {"otpNode": otp(node)})
        if status != 200:
            self.outcome.problem(f"graceful failover of {node.host} failed: {body}")
            return
        time.sleep(self.rng.uniform(0.5, 2.0))
        status, body = rest(self.nodes[0], "POST", "/controller/setRecoveryType",
                            {"otpNode": otp(node), "recoveryType": "full"})
        assert status == 200, body
        self.rebalance("full recovery", self.nodes[:3], [])

    def swap(self, leaving: SetteeServer):
        self.nodes[3].start()
        self.log(f"swap: {self.nodes[3].host} in, {leaving.host} out")
        self.rebalance("swap", self.nodes, [leaving])

    def members(self) -> list[SetteeServer]:
        status, pool = rest(self.nodes[0], "GET", "/pools/default")
        listed = {n["hostname"] for n in pool["nodes"]}
        return [n for n in self.nodes if n.mgmt_addr in listed]

    def check_nodes_answer(self, collection, bucket, members: list[SetteeServer]):
        """Every member answers raw KV (NOOP, STAT) without a failed store; the SDK pings every KV endpoint and
        reads every key."""
        deadline = time.monotonic() + RECOVERY_SECONDS
        for node in members:
            try:
                with kv_raw.session(node, BUCKET) as sock:
                    assert kv_raw.call(sock, 0x0A)[0] == 0, "NOOP"
                    stats = kv_raw.stats(sock)
                if stats.get("ep_persistence_failed") != "0":
                    self.outcome.problem(f"{node.host}: the bucket's persistence failed (TMPFAIL until restart)")
            except (OSError, AssertionError, ConnectionError) as e:
                self.outcome.problem(f"{node.host}: raw KV request failed: {e!r}")
        pinged = None
        while time.monotonic() < deadline:
            report = bucket.ping(PingOptions(timeout=timedelta(seconds=5)))
            states = {e.remote: e.state.value for eps in report.endpoints.values() for e in eps}
            pinged = states
            if states and all(s == "ok" for s in states.values()) and len(states) >= len(members):
                break
            time.sleep(1)
        else:
            self.outcome.problem(f"SDK KV pings did not all succeed within {RECOVERY_SECONDS:.0f} s: {pinged}")
        for k in range(KEYS):
            key = f"c-{k}"
            while True:
                try:
                    collection.get(key, GetOptions(timeout=OP_TIMEOUT))
                    break
                except CouchbaseException as e:
                    if time.monotonic() > deadline:
                        self.outcome.problem(f"reading {key} still fails after the schedule: {e!r}")
                        break
                    time.sleep(0.5)

    def check_history(self, collection, history: History):
        lost = []
        for key, acked in history.acked.items():
            try:
                got = collection.get(key, GetOptions(timeout=OP_TIMEOUT)).content_as[dict]["n"]
            except CouchbaseException as e:
                self.outcome.problem(f"final read of {key} failed: {e!r}")
                continue
            if got < acked or got not in history.attempted[key]:
                lost.append((key, acked, got))
        if lost:
            self.outcome.problem(f"acknowledged writes lost (key, acked, read): {lost}")
        if history.stale_reads:
            self.outcome.problem(f"reads older than an acknowledged write: {history.stale_reads[:10]}")

    def check_logs(self):
        for log in sorted(self.base.glob("*.log")):
            text = log.read_text(errors="replace")
            for marker in ("persistence failed", "panicked at", "rejected record"):
                if marker in text:
                    line = next(line for line in text.splitlines() if marker in line)
                    self.outcome.problem(f"{log.name}: {line[:300]}")

    def longest_outage(self, history: History) -> float:
        """The longest stretch with operations attempted and none succeeding."""
        longest, last_ok = 0.0, None
        for t, ok in sorted(history.timeline):
            if ok:
                last_ok = t
            elif last_ok is not None:
                longest = max(longest, t - last_ok)
        return longest

    def run(self) -> Outcome:
        self.log(f"seed {self.seed}, logs in {self.base}")
        self.form()
        cluster = connect(self.nodes[0])
        try:
            cluster.wait_until_ready(timedelta(seconds=30))
            bucket = cluster.bucket(BUCKET)
            collection = bucket.default_collection()
            for k in range(KEYS):
                collection.upsert(f"c-{k}", {"n": 0}, UpsertOptions(durability=MAJORITY, timeout=OP_TIMEOUT))
            history = History()
            self.outcome.history = history
            killed, drained = self.rng.sample(self.nodes[1:3], 2)
            probe = KvProbe(self.nodes)
            with probe, Workload(collection, history, self.seed):
                time.sleep(self.rng.uniform(1.0, 3.0))
                self.kill_and_delta_recover(killed)
                self.graceful_and_full_recover(drained)
                self.swap(self.rng.choice([killed, drained]))
                time.sleep(1.0)
            members = self.members()
            if len(members) != 3:
                self.outcome.problem(f"{len(members)} nodes in the cluster after the swap, not 3")
            self.check_nodes_answer(collection, bucket, members)
            self.check_history(collection, history)
            self.outcome.timings["longest outage"] = round(self.longest_outage(history), 1)
            self.outcome.timings["slowest KV probe"] = {h: round(t, 2) for h, t in probe.slowest.items()}
            stalled = {h: t for h, t in probe.slowest.items() if t > KV_STALL_SECONDS}
            if stalled:
                self.outcome.problem(f"KV service did not answer a fresh connection for over {KV_STALL_SECONDS} s: {stalled}")
            self.log(f"{history.ops} operations, failures {history.failures}, timings {self.outcome.timings}")
        finally:
            cluster.close()
            for n in self.nodes:
                n.stop()
            self.check_logs()
        return self.outcome


def run_once(seed: int, keep: Path | None = None) -> Outcome:
    """One run in a fresh directory; its logs are copied to `keep/seed-<seed>` when the run found problems."""
    base = Path(tempfile.mkdtemp(prefix="settee-chaos-"))
    try:
        outcome = Chaos(base, seed).run()
    except Exception as e:  # noqa: BLE001 - a crash of the schedule itself is a failed run too
        outcome = Outcome(problems=[f"the schedule failed: {e!r}"])
    if outcome.problems and keep is not None:
        dest = keep / f"seed-{seed}"
        shutil.copytree(base, dest, ignore=shutil.ignore_patterns("n?"), dirs_exist_ok=True)
        print(f"  logs kept in {dest}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    return outcome


def main(argv: list[str]) -> int:
    runs = int(argv[1]) if len(argv) > 1 else 1
    first_seed = int(argv[2]) if len(argv) > 2 else int(time.time())
    keep = Path(tempfile.gettempdir()) / "settee-chaos-failures"
    keep.mkdir(exist_ok=True)
    failed = []
    for i in range(runs):
        seed = first_seed + i
        print(f"== run {i + 1}/{runs} (seed {seed})", flush=True)
        outcome = run_once(seed, keep)
        if outcome.problems:
            failed.append((seed, outcome.problems))
    print(json.dumps({"runs": runs, "failed": len(failed), "failures": failed}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
