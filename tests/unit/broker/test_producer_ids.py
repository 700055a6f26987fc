"""ProducerIdManager (Kafka 3.5+'s RPCProducerIdManager): InitProducerId never waits on the
controller while ids are at hand, the next block is fetched in the background once 90% of the
current one is issued, and with no id at hand the answer is COORDINATOR_LOAD_IN_PROGRESS
after a short bounded wait instead of a hang. The controller here is a stand-in channel whose
answers the test releases (the real forwarding channel is tests/cluster/test_producer_ids.py's
subject)."""

from __future__ import annotations

import asyncio

import pytest

from moldau.broker.producer_ids import ProducerIdManager
from moldau.protocol.errors import ErrorCode, KafkaError


class GatedController:
    """Hands out blocks of ``size`` ids, each only once the test opens the gate."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.asked = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: KafkaError | None = None
        self._next = 0

    async def allocate_producer_ids(self, broker_id: int, count: int = 0) -> range:
        self.asked += 1
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        start, self._next = self._next, self._next + self.size
        return range(start, start + self.size)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_ids_are_unique_and_the_next_block_is_prefetched_at_90_percent() -> None:
    async def main() -> None:
        controller = GatedController(size=10)
        manager = ProducerIdManager(1, controller)  # type: ignore[arg-type]
        ids = [await manager.next_id()]
        assert controller.asked == 1
        ids += [await manager.next_id() for _ in range(7)]  # 8 of 10 issued
        assert controller.asked == 1
        ids.append(await manager.next_id())  # the 9th: 90% -> prefetch
        await asyncio.sleep(0)
        assert controller.asked == 2
        # The controller now stops answering: the prefetched block carries on.
        controller.gate.clear()
        ids += [await asyncio.wait_for(manager.next_id(), 0.1) for _ in range(10)]
        assert ids == list(range(19))
        assert controller.asked == 3  # the prefetch of the third block, still pending

    run(main())


def test_no_block_at_hand_answers_coordinator_load_in_progress_after_a_bounded_wait() -> None:
    async def main() -> None:
        controller = GatedController(size=10)
        controller.gate.clear()
        manager = ProducerIdManager(1, controller, block_wait_s=0.2)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(KafkaError) as caught:
            await asyncio.wait_for(manager.next_id(), 5)
        assert caught.value.code == ErrorCode.coordinator_load_in_progress
        assert loop.time() - started < 2
        assert "has not answered yet" in caught.value.message
        # A second caller does not ask the controller again while the first request runs.
        with pytest.raises(KafkaError):
            await manager.next_id()
        assert controller.asked == 1
        controller.gate.set()
        await asyncio.sleep(0.01)
        assert await manager.next_id() == 0

    run(main())


def test_a_refused_block_is_asked_for_again_at_the_next_request() -> None:
    async def main() -> None:
        controller = GatedController(size=10)
        controller.fail = KafkaError(ErrorCode.not_controller, "no controller")
        manager = ProducerIdManager(1, controller, block_wait_s=0.2)  # type: ignore[arg-type]
        with pytest.raises(KafkaError) as caught:
            await manager.next_id()
        assert caught.value.code == ErrorCode.coordinator_load_in_progress
        assert "no controller" in caught.value.message
        controller.fail = None
        assert await manager.next_id() == 0
        assert controller.asked == 2

    run(main())


def test_a_cancelled_caller_does_not_cancel_the_block_request() -> None:
    async def main() -> None:
        controller = GatedController(size=10)
        controller.gate.clear()
        manager = ProducerIdManager(1, controller, block_wait_s=5)  # type: ignore[arg-type]
        waiter = asyncio.ensure_future(manager.next_id())
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert manager.fetching
        controller.gate.set()
        await asyncio.sleep(0.01)
        assert await manager.next_id() == 0
        assert controller.asked == 1

    run(main())
