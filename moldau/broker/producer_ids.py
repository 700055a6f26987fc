"""Producer ids for idempotent producers, handed out from blocks the controller allocates.

As Kafka's ProducerIdManager: the broker asks the controller for a block of ids
(``ProducerIdsRecord`` in the metadata log, :data:`~.metadata.controller.PRODUCER_ID_BLOCK` ids
at a time) and issues ids from it until it is used up, so no id is ever issued twice, across
restarts and, with several brokers, across brokers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from .metadata.channel import ControllerChannel


class ProducerIdManager:
    """Issues the producer ids of one broker (``node_id``)."""

    def __init__(self, node_id: int, controller: ControllerChannel) -> None:
        self.node_id = node_id
        self.controller = controller
        self._block: Iterator[int] = iter(())
        self._refill = asyncio.Lock()  # one block asked for at a time

    async def next_id(self) -> int:
        """A producer id never issued before. Raises KafkaError when a new block is needed
        and the controller cannot allocate it."""
        for producer_id in self._block:
            return producer_id
        async with self._refill:
            for producer_id in self._block:  # another caller refilled it meanwhile
                return producer_id
            self._block = iter(await self.controller.allocate_producer_ids(self.node_id))
            return next(self._block)
