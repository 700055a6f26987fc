"""One writer at a time per key (a group id, a transactional id): a change is planned,
written and applied under its key's lock.

A coordinator applies a change only once its records are in its log, so while one change of a
group (or transaction) is being written it still shows its state before it. A second change
planned meanwhile would start from that stale state (two joins both taking the next group
epoch, a join into a group whose deletion is being written, an EndTxn racing an
AddPartitionsToTxn); holding the key's lock from planning to applying makes such changes run
one after the other, as Kafka's coordinator runs the events of a partition one after the other
(for transactions the held lock is Kafka's "pending state").

The lock is taken without waiting when it is free (:meth:`KeyLocks.try_hold`), so code that
cannot wait (a JoinGroup answered with a future) claims it before it yields.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class KeyLocks:
    """A lock per key, present only while held."""

    def __init__(self) -> None:
        self._held: dict[str, asyncio.Future[None]] = {}

    def busy(self, key: str) -> bool:
        """Whether a change of ``key`` is being planned, written or applied."""
        return key in self._held

    def try_hold(self, key: str) -> bool:
        """Take the lock if it is free; never waits."""
        if key in self._held:
            return False
        self._held[key] = asyncio.get_running_loop().create_future()
        return True

    def release(self, key: str) -> None:
        released = self._held.pop(key)
        released.set_result(None)

    async def idle(self, key: str) -> None:
        """Wait until nobody holds the lock of ``key``."""
        while (held := self._held.get(key)) is not None:
            await asyncio.shield(held)

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of ``key`` (waiting for it) for the body of a ``with``."""
        while not self.try_hold(key):
            await self.idle(key)
        try:
            yield
        finally:
            self.release(key)
