"""The :class:`~.controller.Controller`'s operations on partition leadership: ISR changes a
leader asks for (AlterPartition, KIP-497) and leader elections an administrator asks for
(ElectLeaders, KIP-460). The rules are pure functions (:mod:`.isr_change`,
:mod:`.leader_election`); this mixin runs them against the image and commits the records."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...protocol.errors import ErrorCode
from .image import MetadataImage
from .isr_change import IsrChange, IsrChangeResult, partition_state_of, plan_isr_changes
from .leader_election import Results, plan_elections
from .records import MetadataRecord
from .validation import Problem


class LeadershipControl:
    """Leadership operations of the :class:`~.controller.Controller` (which provides the
    image, the serial runner, the commit and the completion of reassignments)."""

    image: MetadataImage
    ineligible_replicas: set[int]
    _one_at_a_time: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]
    _try_commit: Callable[[Sequence[MetadataRecord]], Awaitable[Problem]]
    _complete_reassignments: Callable[[set[tuple[uuid.UUID, int]] | None], Awaitable[None]]

    async def alter_partition(self, broker_id: int, changes: Sequence[IsrChange]
                              ) -> list[IsrChangeResult]:
        """ISR changes a partition leader asks for (AlterPartition): each validated on its own
        (:mod:`.isr_change`), the valid ones committed as one batch; each answered with the
        partition's state after it, or why it was refused."""

        async def run() -> list[IsrChangeResult]:
            problems, records = plan_isr_changes(self.image, broker_id, changes,
                                                 ineligible=self.ineligible_replicas)
            failed = await self._try_commit(records)
            results = [partition_state_of(self.image, change.topic_id, change.partition,
                                          *(problem or failed or (ErrorCode.none, None)))
                       for change, problem in zip(changes, problems, strict=True)]
            if failed is None and records:
                # A replica joining the ISR may complete a reassignment (Kafka's controller
                # checks on every ISR change); the leader's answer is the ISR change itself.
                await self._complete_reassignments(
                    {(c.topic_id, c.partition) for c in changes})
            return results

        return await self._one_at_a_time(run)

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None) -> Results:
        """ElectLeaders: PREFERRED or UNCLEAN elections of ``partitions`` (None: all), planned
        and answered by :mod:`.leader_election`, committed as one batch."""

        async def run() -> Results:
            plan = plan_elections(self.image, election_type, partitions,
                                  self.ineligible_replicas)
            failed = await self._try_commit(plan.records)
            if failed is not None:
                return {tp: failed if code == ErrorCode.none else (code, message)
                        for tp, (code, message) in plan.results.items()}
            return plan.results

        return await self._one_at_a_time(run)
