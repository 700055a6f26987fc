"""Which controller a cluster broker's handlers reach (the local one while the image names this
broker, else the one it names, switching when it changes), and the receiving side: a
forwarded admin request that reaches a broker which is not the active controller is answered
NOT_CONTROLLER, for every admin API the forwarding channel sends, so the sender refreshes and
retries instead of the request bouncing between brokers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire
from test_controller_forwarding import ListStore, image_of

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.forwarding import ForwardingControllerChannel, forwarding_client_id
from moldau.broker.metadata.records import (
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ControllerChangeRecord,
    RegisterBrokerRecord,
)
from moldau.broker.metadata.selection import ActiveControllerChannel
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.processes import closed_port
from moldau.testing.runner import BrokerProcess, InProcessBroker

_ZERO = uuid.UUID(int=0)


def test_the_channel_follows_the_controller_the_image_names() -> None:
    with BrokerProcess() as remote_process:
        async def main() -> None:
            # This broker is 2; broker 1 (another process) is the active controller at first.
            image = image_of(1, {1: remote_process.port(), 2: 1})
            local = Controller(image, ListStore(), default_partitions=lambda: 1,
                               default_replication_factor=lambda: 1)
            remote = ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                                 request_timeout_ms=20_000)
            selected = ActiveControllerChannel(node_id=2, image=image, local=local,
                                               remote=remote)
            try:
                assert not selected.is_active and selected.current() is remote
                [there] = await selected.create_topics([TopicSpec("far", 2)])
                assert there.error == E.none and "far" not in image.topics_by_name
                # The image names this broker now: the next change is made here.
                image.replay(ControllerChangeRecord(2, 2))
                assert selected.is_active and selected.current() is local
                [here] = await selected.create_topics([TopicSpec("near", 3)])
                assert here.error == E.none and len(image.topics_by_name["near"].partitions) == 3
                # And back to the other one.
                image.replay(ControllerChangeRecord(1, 3))
                assert await selected.delete_topics(["far"]) == {"far": (E.none, None)}
            finally:
                selected.close()

        asyncio.run(main())
        with Wire(remote_process.port()) as wire:
            names = {t["name"] for t in wire.call(ApiKey.METADATA, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})["topics"]}
    assert names == set()  # "far" was created there, then deleted there; "near" never went


def test_a_change_forwarded_before_this_broker_became_controller_is_made_here() -> None:
    """Right after start-up the image names no controller, so a change (an auto-creation by
    the first client) goes to the forwarding channel; when the election then makes THIS
    broker the controller, the change is made by the local controller at once instead of
    waiting the forwarding time-out for a controller that is itself (seen in a fresh clone's
    make test: 30 s, and the client's first produce timed out)."""
    async def main() -> None:
        image = image_of(-1, {2: 1})
        local = Controller(image, ListStore(), default_partitions=lambda: 1,
                           default_replication_factor=lambda: 1)
        remote = ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                             request_timeout_ms=30_000, retry_backoff_ms=20)
        selected = ActiveControllerChannel(node_id=2, image=image, local=local, remote=remote)
        try:
            assert selected.current() is remote
            change = asyncio.ensure_future(selected.create_topics([TopicSpec("first", 1)]))
            await asyncio.sleep(0.2)
            assert not change.done()  # no controller yet: it waits
            image.replay(ControllerChangeRecord(2, 1))
            [result] = await asyncio.wait_for(change, 5)
            assert result.error == E.none and "first" in image.topics_by_name
        finally:
            selected.close()

    asyncio.run(main())

def test_a_change_waits_while_the_elected_controller_catches_up() -> None:
    """The image names this broker (``/controller`` is its) before the election's winner has
    read what the previous controller wrote and armed its store. A change asked for in that gap
    waits for the arming instead of answering NOT_CONTROLLER, which librdkafka's CreateTopics
    hands to the application (seen in CI: a topic created right after a controller failover
    failed with NOT_CONTROLLER)."""
    async def main() -> None:
        image = image_of(2, {2: 1})
        local = Controller(image, ListStore(), default_partitions=lambda: 1,
                           default_replication_factor=lambda: 1)
        remote = ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                             request_timeout_ms=30_000)
        armed = False
        selected = ActiveControllerChannel(node_id=2, image=image, local=local, remote=remote,
                                           local_ready=lambda: armed)
        try:
            change = asyncio.ensure_future(selected.create_topics([TopicSpec("early", 1)]))
            await asyncio.sleep(0.3)
            assert not change.done()  # elected, not armed yet: it waits
            armed = True
            [result] = await asyncio.wait_for(change, 5)
            assert result.error == E.none and "early" in image.topics_by_name
        finally:
            selected.close()

    asyncio.run(main())



@pytest.fixture
def deposed_broker() -> Iterator[InProcessBroker]:
    """A broker (id 1) whose image names broker 5 the active controller."""
    with InProcessBroker() as broker:
        broker.call(broker.broker.image.replay, ControllerChangeRecord(5, 7))
        broker.call(broker.broker.image.replay, RegisterBrokerRecord(
            5, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1)]))
        yield broker


REQUESTS: list[tuple[ApiKey, int, dict[str, Any], str, str]] = [
    (ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout": 1000, "validate_only": False}, "topics", "error_code"),
    (ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "t", "topic_id": _ZERO}],
                               "timeout": 1000}, "responses", "error_code"),
    (ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "t", "count": 3, "assignments": None}],
                                   "timeout": 1000, "validate_only": False},
     "results", "error_code"),
    (ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": "t",
         "configs": [{"name": "retention.ms", "value": "1"}]}], "validate_only": False},
     "responses", "error_code"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": "t",
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]}],
        "validate_only": False}, "responses", "error_code"),
]


@pytest.mark.parametrize(("api", "version", "body", "entries", "field"), REQUESTS,
                         ids=[r[0].name for r in REQUESTS])
def test_a_forwarded_request_to_a_broker_that_is_not_the_controller_gets_not_controller(
        deposed_broker: InProcessBroker, api: ApiKey, version: int, body: dict[str, Any],
        entries: str, field: str) -> None:
    port = deposed_broker.broker.bound_port()
    with Wire(port, client_id=forwarding_client_id(3)) as wire:
        answer = wire.call(api, version, body)
    [entry] = answer[entries]
    assert entry[field] == E.not_controller
    assert "not the active controller" in entry["error_message"]
    # Nothing was changed here.
    assert "t" not in deposed_broker.broker.image.topics_by_name


def test_a_client_request_to_a_broker_that_is_not_the_controller_is_not_refused(
        deposed_broker: InProcessBroker) -> None:
    # Clients' admin requests are the broker's to send on (here: to its own channel);
    # only forwarded ones are refused.
    port = deposed_broker.broker.bound_port()
    api, version, body, entries, field = REQUESTS[0]
    with Wire(port, client_id="adminclient-1") as wire:
        [entry] = wire.call(api, version, body)[entries]
    assert entry[field] != E.not_controller


def test_a_change_waiting_for_a_dead_controller_is_made_here_once_this_broker_is_elected(
) -> None:
    # The controller died with a request for producer ids (a new idempotent producer's) on
    # its way to it, and ZooKeeper elected this broker: the local controller makes the change
    # at once, not after the forwarding's request timeout (20 s here).
    async def main() -> None:
        with closed_port() as dead:
            image = image_of(1, {1: dead, 2: 1})
            local = Controller(image, ListStore(), default_partitions=lambda: 1,
                               default_replication_factor=lambda: 1)
            remote = ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                                 request_timeout_ms=20_000,
                                                 retry_backoff_ms=20)
            selected = ActiveControllerChannel(node_id=2, image=image, local=local,
                                               remote=remote)
            pending = asyncio.ensure_future(selected.allocate_producer_ids(2))
            topics = asyncio.ensure_future(selected.create_topics([TopicSpec("late", 2)]))
            await asyncio.sleep(0.3)  # refused, and refused again
            assert not pending.done() and not topics.done()
            image.replay(ControllerChangeRecord(2, 2))
            block = await asyncio.wait_for(pending, 5)
            [created] = await asyncio.wait_for(topics, 5)
            selected.close()
        assert len(block) > 0 and image.next_producer_id == block.stop
        assert created.error == E.none and "late" in image.topics_by_name

    asyncio.run(main())
