"""Producer ids for idempotent producers, handed out from blocks the controller allocates.

As Kafka's ProducerIdManager: the broker asks the controller for a block of ids
(``ProducerIdsRecord`` in the metadata log, :data:`~.metadata.controller.PRODUCER_ID_BLOCK` ids
at a time) and issues ids from it until it is used up, so no id is ever issued twice, across
restarts and, with several brokers, across brokers.

As Kafka 3.5+'s RPCProducerIdManager, InitProducerId does not wait on the controller in the
common case: once 90% of the current block is issued, the next block is asked for in the
background, so it is there when the current one runs out. With no id at hand (the first
request after a start, or the controller did not answer the prefetch), the request waits at
most :data:`BLOCK_WAIT_S` for the block being asked for, then fails with
COORDINATOR_LOAD_IN_PROGRESS, which clients retry, while the request to the controller goes
on: a dead or frozen controller never holds an InitProducerId for the forwarding time-out.
Kafka answers at once there; the short wait keeps the first InitProducerId after a start
(a local controller answers in microseconds) from costing every client a retry.
"""

from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode, KafkaError
from .metadata.channel import ControllerChannel

log = logging.getLogger(__name__)

#: Kafka's ProducerIdManager.PidPrefetchThreshold: the share of a block issued before the
#: next one is asked for.
PREFETCH_THRESHOLD = 0.9
#: How long an InitProducerId with no id at hand waits for the block being fetched.
BLOCK_WAIT_S = 1.0


class ProducerIdManager:
    """Issues the producer ids of one broker (``node_id``)."""

    def __init__(self, node_id: int, controller: ControllerChannel, *,
                 block_wait_s: float = BLOCK_WAIT_S) -> None:
        self.node_id = node_id
        self.controller = controller
        self.block_wait_s = block_wait_s
        self._block: range = range(0)
        self._next = 0  # index in _block of the next id to issue
        self._prefetched: range | None = None
        self._request: asyncio.Task[None] | None = None
        self._last_failure = ""

    @property
    def fetching(self) -> bool:
        """Whether a block is being asked for right now."""
        return self._request is not None and not self._request.done()

    async def next_id(self) -> int:
        """A producer id never issued before. Raises KafkaError COORDINATOR_LOAD_IN_PROGRESS
        (retriable) when none is at hand within :attr:`block_wait_s`."""
        producer_id = self._claim()
        if producer_id is not None:
            return producer_id
        self._ask_for_block()
        request = self._request
        if request is not None and not request.done():
            # shield: a caller that gives up does not cancel the request for everyone
            await asyncio.wait([asyncio.shield(request)], timeout=self.block_wait_s)
        producer_id = self._claim()
        if producer_id is not None:
            return producer_id
        reason = ("the controller has not answered yet" if self.fetching
                  else self._last_failure or "no block yet")
        raise KafkaError(ErrorCode.coordinator_load_in_progress,
                         f"broker {self.node_id} has no producer id block: {reason}; "
                         f"retry shortly")

    def _claim(self) -> int | None:
        """The next id of the current block (moving to the prefetched block when it is used
        up), asking for the next block once :data:`PREFETCH_THRESHOLD` of it is issued."""
        if self._next >= len(self._block):
            if self._prefetched is None:
                return None
            self._block, self._prefetched, self._next = self._prefetched, None, 0
            if not self._block:
                return None
        producer_id = self._block[self._next]
        self._next += 1
        if self._next >= len(self._block) * PREFETCH_THRESHOLD:
            self._ask_for_block()
        return producer_id

    def _ask_for_block(self) -> None:
        if self._prefetched is not None or self.fetching:
            return
        self._request = asyncio.get_running_loop().create_task(
            self._fetch_block(), name=f"producer-id-block-{self.node_id}")

    async def _fetch_block(self) -> None:
        try:
            block = await self.controller.allocate_producer_ids(self.node_id)
        except KafkaError as exc:
            self._last_failure = exc.message or exc.code.name
            log.warning("broker %d could not get a block of producer ids from the "
                        "controller: %s (asked again at the next InitProducerId)",
                        self.node_id, self._last_failure)
            return
        except (OSError, TimeoutError) as exc:
            self._last_failure = f"{type(exc).__name__}: {exc}"
            log.warning("broker %d could not reach the controller for a block of producer "
                        "ids: %s (asked again at the next InitProducerId)", self.node_id,
                        self._last_failure)
            return
        except Exception:  # a background task: nobody else would ever see the failure
            self._last_failure = "an unexpected error (see the broker's log)"
            log.exception("broker %d failed to get a block of producer ids", self.node_id)
            return
        self._last_failure = ""
        self._prefetched = block
