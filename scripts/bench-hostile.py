#!/usr/bin/env python3
"""Usage: scripts/bench-hostile.py SETTEE_BIN BASE_PORT (uses BASE_PORT..BASE_PORT+2). BENCHMARKS.md "Hostile clients:
memory". RSS of one settee node under the hostile-client cases of issue 17's numbers: a flood of connections that never
authenticate, and clients that request large values and never read the replies. Prints one line per step."""
import base64, json, os, socket, struct, subprocess, sys, time, urllib.request
BIN, BASE = sys.argv[1], int(sys.argv[2])
KV, MGMT, Q = BASE, BASE + 1, BASE + 2
data = f"/tmp/flood-{BASE}"
subprocess.run(["rm", "-rf", data])
srv = subprocess.Popen([BIN, "server", "--data-dir", data, "--host", "127.0.0.1", "--kv-port", str(KV),
                        "--mgmt-port", str(MGMT), "--query-port", str(Q), "--kv-tls-port", "0", "--mgmt-tls-port", "0",
                        "--query-tls-port", "0", "--bucket-type", "ephemeral", "--bucket-ram-mb", "1024"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "SETTEE_LOG": "warn"})
def rss():
    return int([l for l in open(f"/proc/{srv.pid}/status") if l.startswith("VmRSS:")][0].split()[1]) // 1024
def call(s, op, key=b"", value=b"", extras=b""):
    s.sendall(struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(extras)+len(key)+len(value), 0, 0)
              + extras + key + value)
    head = b""
    while len(head) < 24: head += s.recv(24 - len(head))
    n = struct.unpack(">I", head[8:12])[0]; body = b""
    while len(body) < n: body += s.recv(n - len(body))
    return struct.unpack(">H", head[6:8])[0]
for _ in range(100):
    try: urllib.request.urlopen(f"http://127.0.0.1:{MGMT}/pools", timeout=1); break
    except Exception: time.sleep(0.2)
time.sleep(1)
def session():
    s = socket.create_connection(("127.0.0.1", KV)); assert call(s, 0x21, b"PLAIN", b"\0Administrator\0password") == 0
    assert call(s, 0x89, b"default") == 0; return s
print(f"idle: rss {rss()} MiB", flush=True)
# 1. 9,000 connections that never authenticate, half silent, half with a partial header.
flood = []
for i in range(9000):
    try:
        c = socket.create_connection(("127.0.0.1", KV), timeout=5)
        if i % 2: c.send(b"\x80\x01\x00")
        flood.append(c)
    except OSError as e:
        print("connect failed at", i, e); break
time.sleep(3)
t0 = time.time(); ok = session(); call(ok, 0x0a); took = (time.time() - t0) * 1000
print(f"flood: {len(flood)} unauthenticated connections open, rss {rss()} MiB; a legitimate client's login + NOOP "
      f"took {took:.1f} ms", flush=True)
for c in flood: c.close()
flood = []; time.sleep(3)
print(f"after the flood: rss {rss()} MiB", flush=True)
# 2. 1 MiB value, then 50 clients each pipelining 200 GETs of it without reading a byte.
big = os.urandom(1 << 20)
assert call(ok, 0x01, b"big", big, extras=bytes(8)) == 0
req = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 3, 0, 0, 0, 3, 0, 0) + b"big"
stuck = []
for _ in range(50):
    s = session(); s.setblocking(False)
    try: s.send(req * 200)
    except BlockingIOError: pass
    stuck.append(s)
time.sleep(5)
t0 = time.time(); call(ok, 0x00, b"big"); took = (time.time() - t0) * 1000
print(f"never-reading: 50 clients x 200 pipelined GETs of a 1 MiB value (200 MiB each requested), rss {rss()} MiB; "
      f"another client's GET took {took:.1f} ms", flush=True)
for s in stuck: s.close()
time.sleep(3)
print(f"after: rss {rss()} MiB", flush=True)
srv.terminate(); srv.wait()
