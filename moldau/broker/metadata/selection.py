"""The controller channel of a cluster broker: the local controller while this broker is the
active one, the forwarding channel to the active controller otherwise.

:class:`ActiveControllerChannel` decides per change, from the image
(``MetadataImage.controller_id``, which follows ``/controller``), so it switches the moment
the image names another controller: no handler holds on to a stale choice. A change already
sent to a controller that then loses its place is answered NOT_CONTROLLER by it and sent
again by the forwarding channel to the one the image names next. A change that was being
forwarded when the image came to name THIS broker (the controller it waited for died and
ZooKeeper elected this one) comes back here (:class:`~.forwarding.ControllerIsLocal`) and is
made by the local controller, at once rather than at the forwarding's request timeout.

The image names this broker a moment before its local controller may write: the election's
winner first reads what the previous controller wrote, and only then arms its store
(``local_ready``). A change asked for in that gap waits for it (at most the forwarding
channel's request timeout, then the local controller answers NOT_CONTROLLER) instead of being
refused at once: librdkafka's admin client hands a NOT_CONTROLLER from CreateTopics to the
application, so a controller failover would otherwise reach users as an error.

A single node never builds this: its handlers get the local controller itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from .channel import PRODUCER_ID_BLOCK, ControllerChannel, Outcome, TopicResult, TopicSpec
from .forwarding import ControllerIsLocal, ForwardingControllerChannel
from .image import MetadataImage
from .isr_change import IsrChange, IsrChangeResult
from .reassignment import OngoingReassignment, ReassignmentRequest

_T = TypeVar("_T")
# How often a change waiting for the local controller to arm looks again.
_READY_POLL_S = 0.05


class ActiveControllerChannel:
    """A :class:`~.channel.ControllerChannel` that follows the active controller."""

    def __init__(self, *, node_id: int, image: MetadataImage, local: ControllerChannel,
                 remote: ForwardingControllerChannel,
                 local_ready: Callable[[], bool] = lambda: True) -> None:
        self.node_id = node_id
        self.image = image
        self.local = local
        self.remote = remote
        #: Whether the local controller may write now (its store armed by the election).
        self.local_ready = local_ready

    @property
    def is_active(self) -> bool:
        """Whether the image names this broker the active controller."""
        return self.image.controller_id == self.node_id

    def current(self) -> ControllerChannel:
        """Where a change asked for now goes."""
        return self.local if self.is_active else self.remote

    async def _until_local_ready(self) -> None:
        """While the image names this broker but its controller is not armed yet, wait until
        it is, the image names another, or the forwarding request timeout has passed."""
        deadline = time.monotonic() + self.remote.request_timeout_ms / 1000
        while self.is_active and not self.local_ready() and time.monotonic() < deadline:
            await asyncio.sleep(_READY_POLL_S)

    async def _make(self, change: Callable[[ControllerChannel], Awaitable[_T]]) -> _T:
        """``change`` made through the current channel; again through the local controller
        when the forwarding channel finds the image naming this broker meanwhile."""
        while True:
            await self._until_local_ready()
            try:
                return await change(self.current())
            except ControllerIsLocal:
                continue

    async def create_topics(self, specs: Sequence[TopicSpec], *,
                            validate_only: bool = False) -> list[TopicResult]:
        return await self._make(
            lambda c: c.create_topics(specs, validate_only=validate_only))

    async def delete_topics(self, names: Sequence[str]) -> dict[str, Outcome]:
        return await self._make(lambda c: c.delete_topics(names))

    async def create_partitions(self, name: str, total: int,
                                assignments: list[list[int]] | None, *,
                                validate_only: bool = False) -> Outcome:
        return await self._make(lambda c: c.create_partitions(
            name, total, assignments, validate_only=validate_only))

    async def alter_configs(self, resource_type: int, name: str,
                            changes: Mapping[str, str | None], *, replace: bool = False,
                            validate_only: bool = False) -> Outcome:
        return await self._make(lambda c: c.alter_configs(
            resource_type, name, changes, replace=replace, validate_only=validate_only))

    async def incremental_alter_configs(self, resource_type: int, name: str,
                                        ops: Sequence[tuple[str, int, str | None]], *,
                                        validate_only: bool = False) -> Outcome:
        return await self._make(lambda c: c.incremental_alter_configs(
            resource_type, name, ops, validate_only=validate_only))

    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK) -> range:
        return await self._make(lambda c: c.allocate_producer_ids(broker_id, count))

    async def alter_partition(self, broker_id: int, changes: Sequence[IsrChange]
                              ) -> list[IsrChangeResult]:
        return await self._make(lambda c: c.alter_partition(broker_id, changes))

    async def alter_partition_reassignments(self, requests: Sequence[ReassignmentRequest]
                                            ) -> list[Outcome]:
        return await self._make(lambda c: c.alter_partition_reassignments(requests))

    async def list_partition_reassignments(
            self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        return await self._make(lambda c: c.list_partition_reassignments(wanted))

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], Outcome]:
        return await self._make(lambda c: c.elect_leaders(election_type, partitions))

    def close(self) -> None:
        """Close the connection to a remote controller, if one is open."""
        self.remote.close()
