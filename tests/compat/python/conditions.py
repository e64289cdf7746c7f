"""Waiting on a condition with a deadline: the only way a test here waits for time to pass."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_seconds: float, what: str, interval_seconds: float = 0.1) -> T:
    """Call `condition` until it returns something truthy and return that; fail with `what` after the deadline.

    Exceptions raised by `condition` count as "not yet" and the last one is reported on failure.
    """
    deadline = time.monotonic() + timeout_seconds
    last = None
    while True:
        try:
            result = condition()
            if result:
                return result
            last = result
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_seconds}s waiting for {what}; last result: {last!r}")
        time.sleep(interval_seconds)
