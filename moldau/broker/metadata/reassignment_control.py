"""The controller's reassignment operations (KIP-455): a part of
:class:`~.controller.Controller`, kept apart for size; the rules are in :mod:`.reassignment`.

Each runs as one controller operation (after every operation started before it), so it plans
against the image the previous one left; the records go through the controller's commit path
(preparers, store, replay, listeners) like any other change.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...protocol.errors import ErrorCode
from .channel import Outcome
from .image import MetadataImage
from .reassignment import (
    OngoingReassignment,
    ReassignmentRequest,
    list_reassignments,
    plan_completions,
    plan_reassignments,
)
from .records import MetadataRecord
from .validation import Problem

log = logging.getLogger(__name__)

#: Seconds before a completion that failed (a store error) is tried again.
COMPLETION_RETRY_S = 1.0


class ReassignmentControl:
    """Reassignment operations of the :class:`~.controller.Controller` (which provides the
    image, the serial runner and the commit)."""

    image: MetadataImage
    ineligible_replicas: set[int]
    _one_at_a_time: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]
    _try_commit: Callable[[Sequence[MetadataRecord]], Awaitable[Problem]]

    def _eligible_leaders(self) -> set[int]:
        return {b.broker_id for b in self.image.live_brokers()} - self.ineligible_replicas

    async def _complete_reassignments(self, only: set[tuple[uuid.UUID, int]] | None = None
                                      ) -> None:
        records = plan_completions(self.image, self._eligible_leaders(), only)
        problem = await self._try_commit(records)
        if problem is not None:
            log.warning("completing %d reassignment(s) failed: %s", len(records), problem[1])
            # No other ISR change may come to trigger it again: retry soon. A deposed
            # controller leaves it to the next one, which completes moves when elected.
            if problem[0] != ErrorCode.not_controller:
                self._retry_completion()
        elif records:
            log.info("controller: completed the reassignment of %d partition(s)", len(records))

    def _retry_completion(self) -> None:
        if getattr(self, "_completion_retry", None) is not None:
            return

        async def retry() -> None:
            await asyncio.sleep(COMPLETION_RETRY_S)
            self._completion_retry = None
            await self.complete_reassignments()

        self._completion_retry: asyncio.Task[None] | None = asyncio.ensure_future(retry())

    async def complete_reassignments(self) -> None:
        """Complete every reassignment whose target replicas are all in the ISR (run after a
        controller election, which may find one the previous controller left)."""
        await self._one_at_a_time(self._complete_reassignments)

    async def alter_partition_reassignments(self, requests: Sequence[ReassignmentRequest]
                                            ) -> list[Outcome]:
        """Start, redirect or cancel (target None) the reassignment of partitions; one
        outcome per request, in order. Those whose targets are already in the ISR (or a
        cancellation back to in-sync replicas) complete at once."""

        async def run() -> list[Outcome]:
            problems, records = plan_reassignments(self.image, requests,
                                                   self._eligible_leaders())
            failed = await self._try_commit(records)
            if failed is None and records:
                await self._complete_reassignments(
                    {(r.topic_id, r.partition_id) for r in records  # type: ignore[attr-defined]
                     })
            return [problem or failed or (ErrorCode.none, None) for problem in problems]

        return await self._one_at_a_time(run)

    async def list_partition_reassignments(
            self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        """The reassignments in progress (all, or of the named topics' partitions)."""
        return list_reassignments(self.image, wanted)

