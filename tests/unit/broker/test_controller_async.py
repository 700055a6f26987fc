"""The controller's operations are asynchronous (a store may wait for the network, and a
forwarding broker waits for the active controller): they run one at a time, each from its
validation to its last listener, and to their end even when the caller is cancelled. The
active controller's id comes from the image, not from the node's own id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from moldau.broker.metadata.channel import ControllerChannel
from moldau.broker.metadata.controller import Controller, TopicSpec
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
    MetadataRecord,
    decode_record,
)
from moldau.protocol.errors import ErrorCode
from moldau.storage.errors import KafkaStorageError


class GatedStore:
    """A store whose appends wait while :attr:`gate` is closed (a write in flight)."""

    def __init__(self) -> None:
        self.records: list[MetadataRecord] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0
        self.broken = False

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.waiting += 1
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        if self.broken:
            raise KafkaStorageError("append to .../__cluster_metadata-0 failed: No space")
        self.records.extend(records)
        return len(self.records) - 1


async def _controller() -> tuple[Controller, GatedStore]:
    store = GatedStore()
    controller = Controller(MetadataImage(), store, default_partitions=lambda: 2,
                            default_replication_factor=lambda: 1)
    await controller.register_broker(1, [BrokerEndpoint("PLAINTEXT", "h", 9092)], None)
    return controller, store


async def _until(condition: object) -> None:
    for _ in range(1000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_operations_run_one_at_a_time() -> None:
    async def main() -> None:
        controller, store = await _controller()
        store.gate.clear()
        first = asyncio.ensure_future(controller.create_topics([TopicSpec("t")]))
        await _until(lambda: store.waiting == 1)
        # Validated while the first one is being written, it would pass too and the topic
        # would be created twice.
        second = asyncio.ensure_future(controller.create_topics([TopicSpec("t")]))
        for _ in range(20):
            await asyncio.sleep(0)
        assert store.waiting == 1 and not second.done()
        store.gate.set()
        [made], [again] = await first, await second
        assert made.error == ErrorCode.none
        assert again.error == ErrorCode.topic_already_exists
        assert len(controller.image.topics_by_name["t"].partitions) == 2

    asyncio.run(main())


def test_an_operation_runs_to_its_end_when_its_caller_is_cancelled() -> None:
    async def main() -> None:
        controller, store = await _controller()
        applied: list[int] = []
        controller.listeners.append(lambda _image, records: applied.append(len(records)))
        store.gate.clear()
        caller = asyncio.ensure_future(controller.create_topics([TopicSpec("t")]))
        await _until(lambda: store.waiting == 1)
        caller.cancel()  # the client went away while the batch was being written
        await asyncio.sleep(0)
        assert caller.cancelled()
        store.gate.set()
        await _until(lambda: "t" in controller.image.topics_by_name)
        assert applied == [3]  # the batch that reached the store reached image and listeners
        assert [r.TYPE for r in store.records[1:]] == ["TopicRecord", "PartitionRecord",
                                                       "PartitionRecord"]

    asyncio.run(main())


def test_a_failure_nobody_waits_for_any_more_is_logged(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    async def main() -> None:
        controller, store = await _controller()
        store.gate.clear()
        store.broken = True
        caller = asyncio.ensure_future(controller.allocate_producer_ids(1))
        await _until(lambda: store.waiting == 1)
        caller.cancel()
        await asyncio.sleep(0)
        store.gate.set()
        await _until(lambda: store.waiting == 0)
        for _ in range(5):
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="moldau.broker.metadata.controller"):
        asyncio.run(main())
    [record] = caplog.records
    assert "went away was refused" in record.getMessage()
    assert "No space" in record.getMessage()


def test_the_controller_is_a_controller_channel() -> None:
    async def main() -> ControllerChannel:
        controller, _store = await _controller()
        return controller

    channel: ControllerChannel = asyncio.run(main())
    for name in ("create_topics", "delete_topics", "create_partitions", "alter_configs",
                 "incremental_alter_configs", "allocate_producer_ids"):
        assert asyncio.iscoroutinefunction(getattr(channel, name)), name


def test_the_controller_id_comes_from_the_image() -> None:
    image = MetadataImage()
    assert (image.controller_id, image.controller_epoch) == (-1, -1)
    record = ControllerChangeRecord(3, 7)
    image.replay(decode_record(record.encode()))
    assert (image.controller_id, image.controller_epoch) == (3, 7)
    image.replay(ControllerChangeRecord(-1, 8))  # no controller while an election runs
    assert image.controller_id == -1 and image.offset == -1  # not a record of the log


def test_records_from_another_store_follow_the_serial_order_and_the_same_listeners() -> None:
    """Controller.follow (what a ZooKeeper watch showed) waits for the operation in flight,
    diffs against the image it left, replays and tells the same listeners as a commit, with
    offsets that keep advancing; commit_with plans inside the serial order too."""

    async def scenario() -> None:
        controller, store = await _controller()
        seen: list[tuple[str, int]] = []
        controller.listeners.append(
            lambda image, records: seen.extend((r.TYPE, image.offset) for r in records))
        store.gate.clear()
        create = asyncio.ensure_future(controller.create_topics([TopicSpec("a")]))
        await _until(lambda: store.waiting == 1)
        planned_against: list[set[str]] = []

        def change(image: MetadataImage) -> list[MetadataRecord]:
            planned_against.append(set(image.topics_by_name))
            return [ControllerChangeRecord(2, 5)]

        follow = asyncio.ensure_future(controller.follow(change))
        nothing = asyncio.ensure_future(controller.follow(lambda image: None))
        planned = asyncio.ensure_future(controller.commit_with(
            lambda image: [ControllerChangeRecord(3, 6)] if image.controller_id == 2 else []))
        await asyncio.sleep(0.01)
        assert planned_against == []  # waits for the commit in flight
        store.gate.set()
        [result] = await create
        assert result.error == ErrorCode.none
        assert await follow == [ControllerChangeRecord(2, 5)]
        assert await nothing is None
        assert await planned == [ControllerChangeRecord(3, 6)]
        assert planned_against == [{"a"}]
        assert [t for t, _ in seen] == ["TopicRecord", "PartitionRecord", "PartitionRecord",
                                        "ControllerChangeRecord", "ControllerChangeRecord"]
        offsets = [o for _, o in seen]
        assert offsets == sorted(offsets) and offsets[3] == offsets[2] + 1
        assert (controller.image.controller_id, controller.image.controller_epoch) == (3, 6)

    asyncio.run(scenario())
