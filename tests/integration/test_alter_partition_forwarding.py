"""AlterPartition through the forwarding controller channel, against scripted controllers:
the request is written in the version the controller speaks (v2: ``new_isr``, v3:
``new_isr_with_epochs``), the answer becomes one result per partition, and a top-level
NOT_CONTROLLER makes the channel send it again to the controller the image names next."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fake_controller import FakePeer

from moldau.broker.metadata.forwarding import ForwardingControllerChannel
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.isr_change import IsrChange, IsrChangeResult
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
    RegisterBrokerRecord,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

T = uuid.UUID(int=5)
CHANGES = [IsrChange(T, 0, 3, 7, (2, 1)), IsrChange(T, 1, 3, 4, (2,))]


def image_of(controller_id: int, ports: dict[int, int]) -> MetadataImage:
    image = MetadataImage()
    for broker_id, port in ports.items():
        image.replay(RegisterBrokerRecord(broker_id, uuid.uuid4(),
                                          [BrokerEndpoint("PLAINTEXT", "127.0.0.1", port)]))
    image.replay(ControllerChangeRecord(controller_id, 1))
    return image


def accept(seen: list[tuple[int, list[tuple[int, int, int, list[int]]]]]) -> Any:
    """A controller that accepts every change (partition 1 refused as stale)."""

    def answer(api: int, version: int, request: Any) -> dict[str, Any]:
        asked = []
        for topic in request.topics:
            for p in topic.partitions:
                isr = ([b.broker_id for b in p.new_isr_with_epochs] if version >= 3
                       else list(p.new_isr))
                asked.append((p.partition_index, p.leader_epoch, p.partition_epoch, isr))
        seen.append((version, asked))
        return {"throttle_time": 0, "error_code": 0, "topics": [
            {"topic_id": T, "partitions": [
                {"partition_index": 0, "error_code": 0, "leader_id": 2, "leader_epoch": 3,
                 "isr": [2, 1], "leader_recovery_state": 0, "partition_epoch": 8},
                {"partition_index": 1, "error_code": E.invalid_update_version,
                 "leader_id": -1, "leader_epoch": -1, "isr": [],
                 "leader_recovery_state": 0, "partition_epoch": -1}]}]}

    return answer


@pytest.mark.parametrize("version", [2, 3])
def test_the_request_follows_the_controllers_version(version: int) -> None:
    async def main() -> list[IsrChangeResult]:
        async with FakePeer({ApiKey.ALTER_PARTITION: (2, version)}, accept(seen)) as peer:
            channel = ForwardingControllerChannel(node_id=2, image=image_of(1, {1: peer.port}),
                                                  listener="PLAINTEXT")
            try:
                return await channel.alter_partition(2, CHANGES)
            finally:
                channel.close()

    seen: list[tuple[int, list[tuple[int, int, int, list[int]]]]] = []
    results = asyncio.run(main())
    assert seen == [(version, [(0, 3, 7, [2, 1]), (1, 3, 4, [2])])]
    assert results == [IsrChangeResult(T, 0, E.none, None, 2, 3, (2, 1), 8),
                       IsrChangeResult(T, 1, E.invalid_update_version)]


def test_not_controller_sends_it_to_the_next_controller() -> None:
    async def main() -> list[IsrChangeResult]:
        image = MetadataImage()

        def deposed(api: int, version: int, request: Any) -> dict[str, Any]:
            image.replay(ControllerChangeRecord(3, 2))  # the new controller is known
            return {"throttle_time": 0, "error_code": E.not_controller, "topics": []}

        apis = {ApiKey.ALTER_PARTITION: (2, 3)}
        async with FakePeer(apis, deposed) as old, FakePeer(apis, accept(seen)) as new:
            for record in image_of(1, {1: old.port, 3: new.port}).brokers.values():
                image.replay(RegisterBrokerRecord(record.broker_id, record.incarnation_id,
                                                  record.endpoints))
            image.replay(ControllerChangeRecord(1, 1))
            channel = ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                                  retry_backoff_ms=20)
            try:
                results = await channel.alter_partition(2, CHANGES)
            finally:
                channel.close()
        assert old.requests == new.requests == [(ApiKey.ALTER_PARTITION,
                                                 "broker-2-to-controller")]
        return results

    seen: list[tuple[int, list[tuple[int, int, int, list[int]]]]] = []
    results = asyncio.run(main())
    assert [r.error for r in results] == [E.none, E.invalid_update_version]
    assert len(seen) == 1
