"""Controlled shutdown: the ControlledShutdown handler of the active controller (over TCP),
and a cluster broker that stops asking the controller to move leadership off it first —
retried per controlled.shutdown.max.retries / retry.backoff.ms, then giving up with Kafka's
"unclean shutdown" warning — and on SIGTERM of `moldau serve`."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path

import pytest

from moldau.broker.controlled_shutdown import send_controlled_shutdown
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.protocol import controlled_shutdown as codec
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.processes import closed_port
from moldau.testing.runner import BrokerProcess, InProcessBroker


def ask(port: int, broker_id: int) -> codec.ControlledShutdownResponse:
    return asyncio.run(send_controlled_shutdown(
        "127.0.0.1", port, codec.ControlledShutdownRequest(broker_id), "test", 20))


def test_the_active_controller_answers_controlled_shutdown() -> None:
    with InProcessBroker() as controller:
        port = controller.broker.bound_port()
        # This node is its own controller and leads nothing another replica could take.
        assert ask(port, 1) == codec.ControlledShutdownResponse(E.none, ())
        assert ask(port, 9).error_code == E.broker_not_available
        # A partition with a second replica still led by broker 1 is reported as remaining
        # (no other broker runs here to take it).
        topic_id = uuid.uuid4()
        controller.call(controller.broker.image.replay, TopicRecord("two", topic_id))
        controller.call(controller.broker.image.replay,
                        PartitionRecord(topic_id, 0, [1, 2], [1, 2], 1))
        assert ask(port, 1).remaining_partitions == (("two", 0),)
        # Not the controller any more: NOT_CONTROLLER.
        controller.call(controller.broker.image.replay, ControllerChangeRecord(4, 9))
        assert ask(port, 1).error_code == E.not_controller


def in_cluster(zookeeper_connect: str, **settings: object) -> InProcessBroker:
    return InProcessBroker(node_id=2, settings={
        "zookeeper.connect": zookeeper_connect, "controlled.shutdown.max.retries": 2,
        "controlled.shutdown.retry.backoff.ms": 100, **settings})


def name_controller(broker: InProcessBroker, controller_id: int, port: int) -> None:
    image = broker.broker.image
    broker.call(image.replay, RegisterBrokerRecord(
        controller_id, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", "127.0.0.1", port)]))
    broker.call(image.replay, ControllerChangeRecord(controller_id, 5))


def test_a_stopping_broker_asks_the_active_controller_first(
        zookeeper_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with InProcessBroker() as controller:
        # The controller (broker 1) knows broker 2.
        controller.call(controller.broker.image.replay, RegisterBrokerRecord(
            2, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1)]))
        broker = in_cluster(zookeeper_connect).start()
        name_controller(broker, 1, controller.broker.bound_port())
        broker.stop()
    assert "controlled shutdown of broker 2 requested" in caplog.text
    assert "controlled shutdown succeeded (attempt 1 of 2)" in caplog.text


def test_remaining_partitions_are_retried_then_the_broker_stops_anyway(
        zookeeper_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with InProcessBroker() as controller:
        image = controller.broker.image
        controller.call(image.replay, RegisterBrokerRecord(
            2, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1)]))
        topic_id = uuid.uuid4()
        controller.call(image.replay, TopicRecord("stuck", topic_id))
        controller.call(image.replay, PartitionRecord(topic_id, 0, [2, 1], [2, 1], 2))
        broker = in_cluster(zookeeper_connect).start()
        name_controller(broker, 1, controller.broker.bound_port())
        broker.stop()
    assert caplog.text.count("controlled shutdown of broker 2 requested") == 2
    assert ("controlled shutdown attempt 2 of 2 failed: 1 partition(s) are still led by "
            "this broker: stuck-0") in caplog.text
    assert "Proceeding to do an unclean shutdown" in caplog.text


def test_an_unreachable_controller_does_not_hold_the_shutdown(
        zookeeper_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    broker = in_cluster(zookeeper_connect).start()
    with closed_port() as dead:
        name_controller(broker, 1, dead)
        began = time.monotonic()
        broker.stop()
    assert time.monotonic() - began < 30
    assert "could not be asked" in caplog.text
    assert "Proceeding to do an unclean shutdown" in caplog.text


def test_controlled_shutdown_can_be_turned_off(
        zookeeper_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    broker = in_cluster(zookeeper_connect, **{"controlled.shutdown.enable": False}).start()
    with closed_port() as dead:
        name_controller(broker, 1, dead)
        broker.stop()
    assert "controlled shutdown" not in caplog.text


def test_sigterm_does_a_controlled_shutdown(zookeeper_connect: str, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", settings={"zookeeper.connect": zookeeper_connect})
    with broker:
        pass  # __exit__ sends SIGTERM and waits
    log = broker.log_text()
    assert "controlled shutdown succeeded (attempt 1 of 3)" in log
    assert log.index("controlled shutdown succeeded") < log.index("shut down completed")
