"""The forwarding controller channel (a broker that is not the active controller sends
metadata changes to the one the image names), tested from the sending side: against a real
broker acting as the controller, whose answers must equal the local controller's, and against
scripted peers that move the controller, refuse, or never answer."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import pytest
from fake_controller import FakePeer

from moldau.broker.metadata.channel import ControllerChannel, TopicSpec
from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.forwarding import (
    ForwardingControllerChannel,
    forwarded_by,
    forwarding_client_id,
)
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ControllerChangeRecord,
    RegisterBrokerRecord,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.errors import KafkaError
from moldau.testing.metadata_store import ListStore
from moldau.testing.processes import closed_port
from moldau.testing.runner import BrokerProcess, InProcessBroker
from moldau.wire.connection import BrokerConnection

SET, DELETE = 0, 1


def image_of(controller_id: int, ports: Mapping[int, int],
             listener: str = "PLAINTEXT") -> MetadataImage:
    """The metadata a broker (id 2) holds: brokers at 127.0.0.1:port, the active one."""
    image = MetadataImage()
    for broker_id, port in ports.items():
        image.replay(RegisterBrokerRecord(broker_id, uuid.uuid4(),
                                          [BrokerEndpoint(listener, "127.0.0.1", port)]))
    image.replay(ControllerChangeRecord(controller_id, 1))
    return image


def channel(image: MetadataImage, timeout_ms: int = 10_000) -> ForwardingControllerChannel:
    return ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                       request_timeout_ms=timeout_ms, retry_backoff_ms=20)




async def _script(controller: ControllerChannel) -> list[Any]:
    """One admin session, every answer as plain data (topic ids left out: they are random)."""
    answers: list[Any] = []

    def topics(results: Any) -> None:
        answers.append([{k: v for k, v in asdict(r).items() if k != "topic_id"}
                        for r in results])

    topics(await controller.create_topics([
        TopicSpec("a", 3, configs={"retention.ms": "60000"}), TopicSpec("bad/name"),
        TopicSpec("b", 1, 3), TopicSpec("c", configs={"retention.ms": "soon"}),
        TopicSpec("d", assignments={0: [1], 1: [1]})]))
    topics(await controller.create_topics([TopicSpec("a"), TopicSpec("v", 2)],
                                          validate_only=True))
    answers.append(await controller.create_partitions("a", 5, None))
    answers.append(await controller.create_partitions("a", 2, None))
    answers.append(await controller.create_partitions("nope", 2, None))
    answers.append(await controller.create_partitions("d", 3, [[1]], validate_only=True))
    answers.append(await controller.alter_configs(TOPIC_RESOURCE, "a",
                                                  {"segment.ms": "600000"}, replace=True))
    answers.append(await controller.alter_configs(TOPIC_RESOURCE, "a",
                                                  {"retention.ms": "1000"}))
    answers.append(await controller.incremental_alter_configs(
        TOPIC_RESOURCE, "a", [("segment.ms", DELETE, None), ("cleanup.policy", SET, "compact")]))
    answers.append(await controller.incremental_alter_configs(
        TOPIC_RESOURCE, "a", [("retention.ms", SET, "later")]))
    answers.append(await controller.incremental_alter_configs(
        BROKER_RESOURCE, "1", [("log.retention.ms", SET, "3600000")]))
    answers.append(await controller.incremental_alter_configs(
        BROKER_RESOURCE, "9", [("log.retention.ms", SET, "3600000")]))
    answers.append(await controller.delete_topics(["d", "missing"]))
    return answers


def test_forwarded_changes_are_answered_as_the_local_controller_answers() -> None:
    # The active controller is another process: a broker started with `moldau serve`.
    with BrokerProcess() as controller_process:
        port = controller_process.port()

        async def local() -> list[Any]:
            controller = Controller(MetadataImage(), ListStore(),
                                    default_partitions=lambda: 1,
                                    default_replication_factor=lambda: 1)
            await controller.register_broker(1, [BrokerEndpoint("PLAINTEXT", "h", 1)], None)
            return await _script(controller)

        async def forwarded() -> tuple[list[Any], Any, Any]:
            forwarding = channel(image_of(1, {1: port}))
            try:
                answers = await _script(forwarding)
            finally:
                forwarding.close()
            # What the controller holds now, as any client would read it.
            conn = BrokerConnection("127.0.0.1", port)
            await conn.connect()
            try:
                metadata = await conn.request(ApiKey.METADATA, {
                    "topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
                configs = await conn.request(ApiKey.DESCRIBE_CONFIGS, {
                    "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": "a",
                                   "configuration_keys": ["retention.ms", "cleanup.policy",
                                                          "segment.ms"]}],
                    "include_synonyms": False, "include_documentation": False})
            finally:
                conn.close()
            return answers, metadata, configs

        expected = asyncio.run(local())
        answers, metadata, configs = asyncio.run(forwarded())
    for number, (want, got) in enumerate(zip(expected, answers, strict=True)):
        assert got == want, f"answer {number}"
    assert answers[0][0]["error"] == E.none and answers[0][2]["error"] != E.none
    assert [(t.name, len(t.partitions)) for t in metadata.topics] == [("a", 5)]
    described = {c.name: (c.value, c.config_source) for c in configs.results[0].configs}
    assert described == {"retention.ms": ("1000", 1), "cleanup.policy": ("compact", 1),
                         "segment.ms": ("604800000", 5)}  # 1 topic override, 5 default


def test_a_deposed_controller_makes_the_channel_follow_the_new_one() -> None:
    async def main() -> None:
        image = MetadataImage()

        def deposed(api: int, version: int, request: Any) -> dict[str, Any]:
            # The metadata update naming the new controller arrives meanwhile.
            image.replay(ControllerChangeRecord(3, 2))
            return {"throttle_time": 0, "topics": [
                {"name": t.name, "error_code": E.not_controller, "error_message": None,
                 "num_partitions": -1, "replication_factor": -1, "configs": []}
                for t in request.topics]}

        def active(api: int, version: int, request: Any) -> dict[str, Any]:
            return {"throttle_time": 0, "topics": [
                {"name": t.name, "error_code": 0, "error_message": None,
                 "topic_id": uuid.UUID(int=42), "num_partitions": 4,
                 "replication_factor": 1, "configs": []} for t in request.topics]}

        apis = {ApiKey.CREATE_TOPICS: (2, 7)}
        async with FakePeer(apis, deposed) as old, FakePeer(apis, active) as new:
            for record in image_of(1, {1: old.port, 3: new.port}).brokers.values():
                image.replay(RegisterBrokerRecord(record.broker_id, record.incarnation_id,
                                                  record.endpoints))
            image.replay(ControllerChangeRecord(1, 1))
            forwarding = channel(image)
            [result] = await forwarding.create_topics([TopicSpec("t", 4)])
            forwarding.close()
        assert (result.error, result.num_partitions) == (E.none, 4)
        assert old.requests == [(ApiKey.CREATE_TOPICS, "broker-2-to-controller")]
        assert new.requests == [(ApiKey.CREATE_TOPICS, "broker-2-to-controller")]

    asyncio.run(main())


def test_an_unreachable_controller_is_tried_again_until_one_answers() -> None:
    async def main() -> None:
        def answer(api: int, version: int, request: Any) -> dict[str, Any]:
            return {"throttle_time": 0, "results": [
                {"name": t.name, "error_code": 0, "error_message": None}
                for t in request.topics]}

        async with FakePeer({ApiKey.CREATE_PARTITIONS: (0, 3)}, answer) as peer:
            with closed_port() as dead:
                image = image_of(1, {1: dead, 3: peer.port})
                forwarding = channel(image)
                pending = asyncio.ensure_future(forwarding.create_partitions("t", 3, None))
                await asyncio.sleep(0.2)  # refused, and refused again
                assert not pending.done() and peer.requests == []
                image.replay(ControllerChangeRecord(3, 2))
                assert await asyncio.wait_for(pending, 10) == (E.none, None)
                forwarding.close()
        assert peer.requests == [(ApiKey.CREATE_PARTITIONS, "broker-2-to-controller")]

    asyncio.run(main())


@pytest.mark.parametrize(("controller_id", "listener", "reason"), [
    (-1, "PLAINTEXT", "no active controller is known"),
    (7, "PLAINTEXT", "broker 7, is not registered"),
    (1, "INTERNAL", "has no endpoint on listener PLAINTEXT (inter.broker.listener.name)"),
])
def test_no_reachable_controller_times_out_with_the_reason(controller_id: int, listener: str,
                                                           reason: str) -> None:
    async def main() -> None:
        forwarding = channel(image_of(controller_id, {1: 9}, listener=listener),
                             timeout_ms=300)
        [result] = await forwarding.create_topics([TopicSpec("t")])
        assert result.error == E.request_timed_out
        assert "within 300 ms" in (result.message or "") and reason in (result.message or "")
        code, message = (await forwarding.delete_topics(["t"]))["t"]
        assert code == E.request_timed_out and reason in (message or "")

    asyncio.run(main())


def test_producer_id_blocks_come_from_the_controller() -> None:
    async def main() -> None:
        answers = iter([{"throttle_time": 0, "error_code": 0, "producer_id_start": 5000,
                         "producer_id_len": 1000},
                        {"throttle_time": 0, "error_code": E.broker_id_not_registered,
                         "producer_id_start": -1, "producer_id_len": 0}])
        async with FakePeer({ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0)},
                            lambda api, version, request: next(answers)) as peer:
            forwarding = channel(image_of(1, {1: peer.port}))
            assert await forwarding.allocate_producer_ids(2) == range(5000, 6000)
            with pytest.raises(KafkaError) as refused:
                await forwarding.allocate_producer_ids(2)
            assert refused.value.code == E.broker_id_not_registered
            forwarding.close()

    asyncio.run(main())


def test_a_controller_without_the_api_is_refused_at_once() -> None:
    # A peer that does not serve AllocateProducerIds: the channel says so instead of
    # retrying until its timeout.
    async def main() -> None:
        async with FakePeer({ApiKey.CREATE_TOPICS: (2, 7)}, lambda *_: {}) as peer:
            forwarding = channel(image_of(1, {1: peer.port}))
            with pytest.raises(KafkaError) as refused:
                await asyncio.wait_for(forwarding.allocate_producer_ids(2), 5)
            assert refused.value.code == E.unsupported_version
            forwarding.close()

    asyncio.run(main())


def test_a_moldau_controller_hands_out_producer_id_blocks() -> None:
    # AllocateProducerIds (key 67) is served by the active controller.
    with InProcessBroker() as node:
        async def main() -> list[range]:
            forwarding = channel(image_of(1, {1: node.broker.bound_port()}))
            try:
                return [await forwarding.allocate_producer_ids(2) for _ in range(2)]
            finally:
                forwarding.close()

        first, second = asyncio.run(main())
        assert len(first) == len(second) == 1000 and second.start == first.stop
        assert node.broker.image.next_producer_id == second.stop


def test_forwarded_requests_are_recognised_by_their_client_id() -> None:
    assert forwarded_by(forwarding_client_id(12)) == 12
    for other in (None, "", "rdkafka", "broker-x-to-controller", "broker-3-to-replica"):
        assert forwarded_by(other) is None


def test_a_frozen_controller_is_left_once_the_image_names_another() -> None:
    # A controller that accepts connections but answers nothing (frozen, SIGSTOP): once the
    # image names another controller the change goes there, not at the request timeout.
    async def main() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while await reader.read(65536):
                    pass
            writer.close()

        def answer(api: int, version: int, request: Any) -> dict[str, Any]:
            return {"throttle_time": 0, "results": [
                {"name": t.name, "error_code": 0, "error_message": None}
                for t in request.topics]}

        frozen = await asyncio.start_server(silent, "127.0.0.1", 0)
        try:
            async with FakePeer({ApiKey.CREATE_PARTITIONS: (0, 3)}, answer) as peer:
                image = image_of(1, {1: frozen.sockets[0].getsockname()[1], 3: peer.port})
                forwarding = channel(image, timeout_ms=20_000)
                pending = asyncio.ensure_future(forwarding.create_partitions("t", 3, None))
                await asyncio.sleep(0.3)
                assert not pending.done() and peer.requests == []
                image.replay(ControllerChangeRecord(3, 2))
                assert await asyncio.wait_for(pending, 5) == (E.none, None)
                forwarding.close()
        finally:
            frozen.close()
            await frozen.wait_closed()
        assert peer.requests == [(ApiKey.CREATE_PARTITIONS, "broker-2-to-controller")]

    asyncio.run(main())
