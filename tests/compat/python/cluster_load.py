"""Load for the cluster tests: an SDK writer that runs while nodes join, leave or fail over, and a polling helper."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import UpsertOptions


def wait_for(check, what: str, timeout: float = 30.0, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def documents_not_reading(collection, expected: dict, timeout: float = 60.0) -> list:
    """Reads every key of `expected` until each returns its value or `timeout` passes (any error but
    not-found restarts the round: a vBucket changing hands); returns the keys that still read otherwise
    (absent, or another value)."""
    wrong: list = []

    def all_read():
        wrong.clear()
        for key, value in expected.items():
            try:
                if collection.get(key, timeout=timedelta(seconds=5)).content_as[dict] != value:
                    wrong.append(key)
            except DocumentNotFoundException:
                wrong.append(key)
            except CouchbaseException:
                return False
        return not wrong

    try:
        wait_for(all_read, "every document to read its value", timeout=timeout)
    except AssertionError:
        if not wrong:
            wrong.extend(expected)
    return wrong


class Background:
    """Runs `run` on a thread for the length of a `with` block; `run` loops until `stop_event` is set."""

    def __init__(self, daemon: bool = False):
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=daemon)

    def run(self):
        raise NotImplementedError

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(timeout=30)


class Writer(Background):
    """Upserts `{"i": n}` over `keys` keys (`prefix` + number) in a loop, remembering the last acknowledged value
    of each key, and reads another key after each write: a read older than that key's last acknowledged write (a
    stale copy serving after a takeover) counts as an error. Errors are counted by exception name."""

    def __init__(self, collection, keys: int, prefix: str = "r-", durability=None):
        self.collection, self.keys, self.prefix, self.durability = collection, keys, prefix, durability
        self.acked: dict[str, int] = {}
        self.errors = Counter()
        # The first errors with when they happened (time.monotonic()) and what they said, for a failing test's
        # message; bounded.
        self.first_errors: list[tuple[float, str]] = []
        super().__init__()

    def run(self):
        i = 0
        while not self.stop_event.is_set():
            key = f"{self.prefix}{i % self.keys}"
            try:
                options = UpsertOptions(timeout=timedelta(seconds=5))
                if self.durability:
                    options = UpsertOptions(timeout=timedelta(seconds=5), durability=self.durability)
                self.collection.upsert(key, {"i": i}, options)
                self.acked[key] = i
            except CouchbaseException as e:
                self.record(e)
            other = f"{self.prefix}{(i * 7 + 3) % self.keys}"
            if other in self.acked:
                try:
                    if self.collection.get(other).content_as[dict]["i"] < self.acked[other]:
                        self.errors["StaleRead"] += 1
                except CouchbaseException as e:
                    self.record(e)
            i += 1

    def record(self, e: CouchbaseException):
        self.errors[type(e).__name__] += 1
        if len(self.first_errors) < 10:
            self.first_errors.append((time.monotonic(), f"{type(e).__name__}: {str(e)[:600]}"))

    def __enter__(self):
        super().__enter__()
        wait_for(lambda: len(self.acked) == self.keys, "the writer to cover every key", timeout=60)
        return self
