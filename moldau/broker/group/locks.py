"""One writer at a time per group: a change is planned, written and applied under its lock.

The coordinator applies a change only once its records are in ``__consumer_offsets``, so while
one change of a group is being written the group still shows its state before it. A second
change planned meanwhile would start from that stale state (two joins both taking the next
group epoch, a join into a group whose deletion is being written); holding the group's lock from
planning to applying makes such changes run one after the other, as Kafka's coordinator runs
the events of a partition one after the other.

The lock is taken without waiting when it is free (:meth:`GroupLocks.try_hold`), so code that
cannot wait (a JoinGroup answered with a future) claims it before it yields.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class GroupLocks:
    """A lock per group id, present only while held."""

    def __init__(self) -> None:
        self._held: dict[str, asyncio.Future[None]] = {}

    def busy(self, group_id: str) -> bool:
        """Whether a change of ``group_id`` is being planned, written or applied."""
        return group_id in self._held

    def try_hold(self, group_id: str) -> bool:
        """Take the lock if it is free; never waits."""
        if group_id in self._held:
            return False
        self._held[group_id] = asyncio.get_running_loop().create_future()
        return True

    def release(self, group_id: str) -> None:
        released = self._held.pop(group_id)
        released.set_result(None)

    async def idle(self, group_id: str) -> None:
        """Wait until nobody holds the lock of ``group_id``."""
        while (held := self._held.get(group_id)) is not None:
            await asyncio.shield(held)

    @asynccontextmanager
    async def hold(self, group_id: str) -> AsyncIterator[None]:
        """Hold the lock of ``group_id`` (waiting for it) for the body of a ``with``."""
        while not self.try_hold(group_id):
            await self.idle(group_id)
        try:
            yield
        finally:
            self.release(group_id)
