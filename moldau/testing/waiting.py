"""Waiting in tests for something that happens in another process or thread.

Tests wait for the event with a generous bound and never assert a tight latency: the bound
only turns "never" into a failure that says what did not happen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, *,
             interval: float = 0.05) -> T:
    """Call ``condition`` every ``interval`` seconds until it returns something truthy, and
    return that; AssertionError naming ``what`` when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
