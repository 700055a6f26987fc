"""Keyed timers for the coordinators: session expiry, delayed joins, rebalance deadlines,
transaction time-outs.

Each timer has a key (e.g. ``("heartbeat", group, member)``); scheduling a key again replaces
its timer, so a heartbeat simply reschedules its member's expiry. :class:`LoopTimer` runs on the
asyncio loop; :class:`ManualTimer` advances by hand so unit tests walk through timeouts without
sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Protocol

Callback = Callable[[], None]


class Timer(Protocol):
    """What the coordinator needs from a clock and a timer wheel."""

    def now_ms(self) -> int:
        """Wall-clock time in milliseconds (timestamps stored in records)."""
        ...

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        """Run ``callback`` after ``delay_ms``, replacing any timer with the same key."""
        ...

    def cancel(self, key: Hashable) -> None:
        """Drop the timer of ``key`` if there is one."""
        ...

    def is_scheduled(self, key: Hashable) -> bool:
        ...


class LoopTimer:
    """Timers on the running asyncio loop (``loop.call_later``)."""

    def __init__(self, now_ms: Callable[[], int] | None = None) -> None:
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def now_ms(self) -> int:
        return self._now_ms()

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._handles.pop(key, None)
            callback()

        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class ManualTimer:
    """A timer whose clock moves only when :meth:`advance` is called (for tests)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, Callback]] = {}

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        seq = next(self._seq)
        self._live[key] = (seq, callback)
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def advance(self, ms: int) -> None:
        """Move the clock forward, firing due timers in order."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            due, seq, key = heapq.heappop(self._heap)
            live = self._live.get(key)
            if live is None or live[0] != seq:
                continue
            del self._live[key]
            self._now = due
            live[1]()
        self._now = target
