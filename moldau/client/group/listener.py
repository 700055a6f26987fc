"""Rebalance callbacks: what the application hears when its partitions change.

Callbacks run inside ``poll()`` (and ``close()``/``unsubscribe()``), on the consumer's event
loop, so they may call the consumer (``await consumer.commit()``, ``seek()``). Each gets the
set of partitions concerned and may be a plain function or a coroutine function.

- ``on_revoke``: the partitions are about to go (rebalance, unsubscribe, close). Positions
  are still valid: commit here for at-least-once without duplicates across owners.
- ``on_assign``: partitions were added; positions are set from committed offsets (else
  ``auto.offset.reset``) and may be changed with ``seek()`` here.
- ``on_lost``: the partitions already belong to someone else (the session expired, the
  member was fenced, ``max.poll.interval.ms`` passed); committing them would fail. Defaults
  to ``on_revoke``, as in the Java client.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..types import TopicPartition

log = logging.getLogger(__name__)

Callback = Callable[[set[TopicPartition]], Any]


class RebalanceListener:
    """Subclass and override, or build from callables with :meth:`of`."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        """Partitions about to be taken away (their positions are still valid)."""

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        """Partitions added to this member."""

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        """Partitions already owned by others; by default the same as revoked."""
        return self.on_partitions_revoked(partitions)

    @staticmethod
    def of(on_assign: Callback | None = None, on_revoke: Callback | None = None,
           on_lost: Callback | None = None) -> RebalanceListener:
        """A listener calling the given functions (any may be None)."""
        return _Callbacks(on_assign, on_revoke, on_lost)


class _Callbacks(RebalanceListener):
    def __init__(self, on_assign: Callback | None, on_revoke: Callback | None,
                 on_lost: Callback | None) -> None:
        self._assign, self._revoke, self._lost = on_assign, on_revoke, on_lost

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        return self._revoke(partitions) if self._revoke else None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        return self._assign(partitions) if self._assign else None

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        if self._lost is not None:
            return self._lost(partitions)
        return self.on_partitions_revoked(partitions)


def make_listener(listener: RebalanceListener | None, on_assign: Callback | None,
                  on_revoke: Callback | None, on_lost: Callback | None) -> RebalanceListener:
    """The listener of subscribe(): an object, or callables, or nothing."""
    if listener is not None:
        if any((on_assign, on_revoke, on_lost)):
            raise ValueError("give either listener= or on_assign/on_revoke/on_lost, not both")
        return listener
    return _Callbacks(on_assign, on_revoke, on_lost)


async def invoke(listener: RebalanceListener, event: str,
                 partitions: set[TopicPartition]) -> BaseException | None:
    """Call ``on_partitions_<event>``; await it if it is a coroutine. Returns what it raised
    (the rebalance goes on: the caller decides when to surface the error)."""
    method = getattr(listener, f"on_partitions_{event}")
    try:
        result = method(set(partitions))
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        log.error("rebalance listener on_partitions_%s(%s) raised: %r", event,
                  sorted(partitions), exc)
        return exc
    return None
