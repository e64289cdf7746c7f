"""The KV port without an SDK: one authenticated socket (SASL PLAIN, SELECT_BUCKET) and single binary-protocol
requests on it, for tests that must address one node directly (no vBucket routing) or read STAT groups."""

from __future__ import annotations

import socket
import struct
from contextlib import contextmanager

from settee_server import PASSWORD, USERNAME, SetteeServer


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        data += chunk
    return data


def call(sock: socket.socket, opcode: int, key: bytes = b"", value: bytes = b"", vb: int = 0, extras: bytes = b""):
    """Sends one request; returns the first reply as (status, key, value)."""
    body_len = len(extras) + len(key) + len(value)
    sock.sendall(struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, vb, body_len, 0, 0)
                 + extras + key + value)
    return receive(sock)


def receive(sock: socket.socket):
    """The next reply on `sock` as (status, key, value)."""
    head = _read(sock, 24)
    key_len, extras_len = struct.unpack(">H", head[2:4])[0], head[4]
    status, body_len = struct.unpack(">HI", head[6:12])
    body = _read(sock, body_len)
    return status, body[extras_len:extras_len + key_len], body[extras_len + key_len:]


@contextmanager
def session(node: SetteeServer, bucket: str, user: str = USERNAME, password: str = PASSWORD):
    """A socket to `node`'s KV port, authenticated (as the administrator unless told), with `bucket` selected."""
    with socket.create_connection((node.host, node.kv_port), timeout=5) as sock:
        assert call(sock, 0x21, b"PLAIN", f"\0{user}\0{password}".encode())[0] == 0
        assert call(sock, 0x89, bucket.encode())[0] == 0
        yield sock


def stats(sock: socket.socket, group: bytes = b"") -> dict[str, str]:
    """One STAT group (the default group unless told)."""
    status, key, value = call(sock, 0x10, group)
    result = {}
    while key:
        assert status == 0, status
        result[key.decode()] = value.decode()
        status, key, value = receive(sock)
    return result
