"""Controlled shutdown: the ControlledShutdown handler of the active controller (over TCP),
and a cluster broker that stops asking the controller to move leadership off it first —
retried per controlled.shutdown.max.retries / retry.backoff.ms, then giving up with Kafka's
"unclean shutdown" warning — and on SIGTERM of `moldau serve`."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire
from kazoo.client import KazooClient

from moldau.broker.controlled_shutdown import send_controlled_shutdown
from moldau.broker.metadata.records import (
    ControllerChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from moldau.protocol import controlled_shutdown as codec
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.processes import closed_port
from moldau.testing.runner import BrokerProcess, InProcessBroker
from moldau.testing.waiting import wait_for


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


def cluster_broker(tmp_path: Path, connect: str, node_id: int, **settings: object
                   ) -> BrokerProcess:
    return BrokerProcess(tmp_path / f"data-{node_id}", node_id=node_id, settings={
        "zookeeper.connect": connect, "zookeeper.session.timeout.ms": 4000,
        "controlled.shutdown.retry.backoff.ms": 100, **settings})


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str
            ) -> Iterator[Callable[..., BrokerProcess]]:
    """Start cluster brokers; broker 1, started first, is waited for as the controller."""
    started: list[BrokerProcess] = []

    def start(node_id: int, **settings: object) -> BrokerProcess:
        broker = cluster_broker(tmp_path, zookeeper_connect, node_id, **settings)
        started.append(broker)
        broker.start(60)
        if node_id == 1:
            wait_for(lambda: "broker 1 is the active controller" in broker.log_text(), 30,
                     "broker 1 to become the controller")
        return broker

    yield start
    for broker in started:
        broker.close()


def metadata(port: int) -> dict[str, Any]:
    with Wire(port) as wire:
        return wire.call(ApiKey.METADATA, 12, {"topics": None,
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})


def create_topic(port: int, name: str, assignment: list[list[int]]) -> None:
    with Wire(port) as wire:
        [answer] = wire.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
            "name": name, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": p, "broker_ids": replicas}
                            for p, replicas in enumerate(assignment)],
            "configs": []}], "timeout": 30000, "validate_only": False})["topics"]
    assert answer["error_code"] == E.none, answer


def leaders(port: int, topic: str) -> dict[int, int]:
    for entry in metadata(port)["topics"]:
        if entry["name"] == topic:
            return {p["partition_index"]: p["leader_id"] for p in entry["partitions"]}
    return {}


def test_sigterm_moves_leadership_to_another_replica_first(
        cluster: Callable[..., BrokerProcess], kazoo_client: KazooClient) -> None:
    controller = cluster(1)
    leaving = cluster(2)
    wait_for(lambda: len(metadata(controller.port())["brokers"]) == 2, 30, "two brokers")
    create_topic(controller.port(), "moved", [[2, 1], [2, 1], [1, 2]])
    wait_for(lambda: leaders(controller.port(), "moved") == {0: 2, 1: 2, 2: 1}, 30,
             "the topic's leaders")
    before = json.loads(kazoo_client.get("/brokers/topics/moved/partitions/0/state")[0])
    assert leaving.stop() == 0
    log = leaving.log_text()
    assert "controlled shutdown succeeded (attempt 1 of 3)" in log
    assert log.index("controlled shutdown succeeded") < log.index("shut down completed")
    assert "controlled shutdown of broker 2 requested" in controller.log_text()
    after = json.loads(kazoo_client.get("/brokers/topics/moved/partitions/0/state")[0])
    assert after["leader"] == 1 and after["leader_epoch"] == before["leader_epoch"] + 1
    assert leaders(controller.port(), "moved") == {0: 1, 1: 1, 2: 1}


def test_partitions_no_replica_can_take_are_retried_then_the_broker_stops_anyway(
        cluster: Callable[..., BrokerProcess]) -> None:
    controller = cluster(1)
    leaving = cluster(2, **{"controlled.shutdown.max.retries": 2})
    other = cluster(3)
    wait_for(lambda: len(metadata(controller.port())["brokers"]) == 3, 30, "three brokers")
    create_topic(controller.port(), "stuck", [[2, 3]])
    other.kill()  # broker 3 leaves the ISR when its session expires: nobody can take over
    wait_for(lambda: len(metadata(controller.port())["brokers"]) == 2, 30,
             "broker 3's session to expire")
    assert leaving.stop() == 0
    log = leaving.log_text()
    assert ("controlled shutdown attempt 2 of 2 failed: 1 partition(s) are still led by "
            "this broker: stuck-0") in log
    assert "Proceeding to do an unclean shutdown" in log
    assert controller.log_text().count("controlled shutdown of broker 2 requested") == 2


def test_an_unreachable_controller_does_not_hold_the_shutdown(
        cluster: Callable[..., BrokerProcess]) -> None:
    # The controller advertises an inter-broker address nobody listens on (a mistake an
    # operator can make): every attempt is refused, and the broker stops anyway.
    with closed_port() as dead:
        internal = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL"}
        controller = cluster(1, **internal, **{
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{dead}"})
        leaving = cluster(2, **internal, **{"controlled.shutdown.max.retries": 2})
        wait_for(lambda: len(metadata(controller.port())["brokers"]) == 2, 30, "two brokers")
        began = time.monotonic()
        assert leaving.stop() == 0
    assert time.monotonic() - began < 30
    log = leaving.log_text()
    assert f"the active controller (broker 1 at 127.0.0.1:{dead}) could not be asked" in log
    assert "Proceeding to do an unclean shutdown" in log


def test_controlled_shutdown_can_be_turned_off(cluster: Callable[..., BrokerProcess]) -> None:
    controller = cluster(1)
    leaving = cluster(2, **{"controlled.shutdown.enable": False})
    wait_for(lambda: len(metadata(controller.port())["brokers"]) == 2, 30, "two brokers")
    assert leaving.stop() == 0
    assert "controlled shutdown" not in leaving.log_text()
    assert "controlled shutdown" not in controller.log_text()


def test_sigterm_does_a_controlled_shutdown(zookeeper_connect: str, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", settings={"zookeeper.connect": zookeeper_connect})
    with broker:
        # Alone, it becomes the controller; stopped before that it would retry after
        # controlled.shutdown.retry.backoff.ms (right, but not what this test is about).
        wait_for(lambda: "broker 1 is the active controller" in broker.log_text(), 30,
                 "the broker to become the controller")
    # __exit__ sent SIGTERM and waited
    log = broker.log_text()
    assert "controlled shutdown succeeded (attempt 1 of 3)" in log
    assert log.index("controlled shutdown succeeded") < log.index("shut down completed")
