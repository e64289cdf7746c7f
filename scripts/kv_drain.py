#!/usr/bin/env python3
"""Waits until a settee node's disk write queue is empty, over the KV binary protocol (STAT ep_queue_size).

Usage: kv_drain.py KV_PORT [--persisted]
Prints how long the drain took; with --persisted, waits further until STAT ep_total_persisted stops moving (the
last flusher round's fsync is done) and prints that count instead (0 from a binary without the stat).
Shared by scripts/bench-persistence.sh, bench-flusher.sh and bench-vs-memcached.sh (its settee-ejected target).
"""
import socket
import struct
import sys
import time


def call(s, op, key=b"", value=b""):
    s.sendall(struct.pack(">BBHBBHIIQ", 0x80, op, len(key), 0, 0, 0, len(key) + len(value), 0, 0) + key + value)
    out = {}
    while True:
        hdr = b""
        while len(hdr) < 24:
            hdr += s.recv(24 - len(hdr))
        _, _, klen, elen, _, status, blen, _, _ = struct.unpack(">BBHBBHIIQ", hdr)
        body = b""
        while len(body) < blen:
            body += s.recv(blen - len(body))
        if status != 0:
            sys.exit(f"opcode {op:#x} failed with status {status:#x}")
        if op != 0x10 or klen == 0:
            return out
        out[body[elen:elen + klen].decode()] = body[elen + klen:].decode()


def main():
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    call(s, 0x21, b"PLAIN", b"\0Administrator\0password")
    call(s, 0x89, b"default")
    start = time.time()
    while int(call(s, 0x10).get("ep_queue_size", "0")) > 0:
        time.sleep(0.1)
    if "--persisted" not in sys.argv[2:]:
        print(f"disk write queue drained in {time.time() - start:.1f} s")
        return
    # The queue empties when the last round takes its items; the count moves once that round's fsync is done.
    persisted = None
    while True:
        now = call(s, 0x10).get("ep_total_persisted", "0")
        if now == persisted:
            break
        persisted = now
        time.sleep(0.3)
    print(persisted)


main()
