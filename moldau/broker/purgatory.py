"""Delayed operations keyed by partition (Kafka's purgatory), event-driven.

A long-poll fetch or an acks=all produce waits on the keys of the partitions it touches;
``notify(key)`` (called on append, high-watermark or ISR change) wakes every waiter of that key,
which then re-checks its own condition. No timers poll: a waiter sleeps until an event or its
own deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class _Expired(Exception):
    """A waiter's deadline passed before any of its keys was notified."""


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(_Expired())


class Purgatory:
    """Waiters per key; a waiter is an asyncio future resolved by ``notify``."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    def watch(self, keys: Iterable[Hashable]) -> asyncio.Future[None]:
        """A future resolved the next time any of ``keys`` is notified."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        return future

    def forget(self, keys: Iterable[Hashable], future: asyncio.Future[None]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[key]

    def notify(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if not waiters:
            return
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait(self, keys: list[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout_s`` passes; True if notified.

        The waiter is registered before the first ``await``: a notify from any code that runs
        after this call (even before the caller's task is scheduled) wakes it."""
        if timeout_s <= 0:
            return False
        return await self.wait_on(keys, self.watch(keys), timeout_s)

    async def wait_on(self, keys: list[Hashable], future: asyncio.Future[None],
                      timeout_s: float) -> bool:
        """Wait on ``future`` from :meth:`watch` (``keys`` as given there) for at most
        ``timeout_s``; True if notified, also if that happened before this call. The future
        is forgotten either way.

        One timer handle per wait (``asyncio.wait_for`` plus ``shield`` cost a task and two
        more futures on every long-poll fetch)."""
        if future.done() or timeout_s <= 0:
            self.forget(keys, future)
            return future.done() and not future.cancelled()
        timer = future.get_loop().call_later(timeout_s, _expire, future)
        try:
            await future
            return True
        except _Expired:
            return False
        finally:
            timer.cancel()
            self.forget(keys, future)

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())
