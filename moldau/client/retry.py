"""Exponential backoff with jitter, as Kafka clients do (retry.backoff.ms, retry.backoff.max.ms)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .errors import KafkaTimeoutError

T = TypeVar("T")

JITTER = 0.2


def backoff_ms(attempt: int, initial_ms: int, max_ms: int, rand: float | None = None) -> float:
    """Pause before retry number ``attempt`` (0-based): initial·2^attempt, capped, ±20 %."""
    base = min(float(max_ms), initial_ms * (2 ** min(attempt, 30)))
    if max_ms < initial_ms:
        base = float(initial_ms)
    r = random.random() if rand is None else rand
    return base * (1 - JITTER + 2 * JITTER * r)


def is_retriable(exc: BaseException) -> bool:
    """Kafka's classification: retriable broker codes, lost connections, timeouts."""
    return bool(getattr(exc, "retriable", False))


async def call_with_retries(
    op: Callable[[], Awaitable[T]],
    *,
    timeout_ms: int,
    initial_ms: int,
    max_ms: int,
    what: str,
    before_retry: Callable[[BaseException], Awaitable[None]] | None = None,
    limit: str | None = None,
) -> T:
    """Run ``op`` until it succeeds, a non-retriable error occurs or ``timeout_ms`` passes.

    ``before_retry`` runs after a retriable failure (e.g. to refresh metadata). On time-out
    the last error is chained to the :class:`KafkaTimeoutError`, whose message names the
    time limit as ``limit`` (e.g. ``default.api.timeout.ms=60000``) or ``<timeout_ms> ms``.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    attempt = 0
    while True:
        try:
            return await op()
        except Exception as exc:
            if not is_retriable(exc):
                raise
            pause = backoff_ms(attempt, initial_ms, max_ms) / 1000
            if time.monotonic() + pause >= deadline:
                raise KafkaTimeoutError(
                    f"{what} did not succeed within {limit or f'{timeout_ms} ms'}; "
                    f"last error: {exc}"
                ) from exc
            if before_retry is not None:
                await before_retry(exc)
            await asyncio.sleep(pause)
            attempt += 1


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event`` up to ``timeout`` seconds; True if it was set.

    Uses ``asyncio.timeout`` rather than ``wait_for``: on Python 3.11 ``wait_for`` can
    swallow a cancellation that arrives as the inner wait completes, which would keep a
    background loop alive after close().
    """
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
        return True
    except TimeoutError:
        return False
