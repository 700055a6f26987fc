"""Admin requests through any broker of a ZooKeeper cluster (real `moldau serve` processes):
a broker that is not the controller forwards them to the active controller over the
inter-broker listener and answers what the controller answered; producer-id blocks come from
the controller too; a forwarded request that reaches a non-controller gets NOT_CONTROLLER;
and when the controller dies the channel follows the new one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire

from moldau.broker.metadata.forwarding import forwarding_client_id
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import BrokerProcess
from moldau.testing.waiting import wait_for

_ZERO = uuid.UUID(int=0)


def metadata(port: int, client_id: str = "test") -> dict[str, Any]:
    with Wire(port, client_id=client_id) as wire:
        return wire.call(ApiKey.METADATA, 12, {"topics": None,
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})


def create_topics(port: int, *names: str, partitions: int = 3,
                  client_id: str = "admin") -> list[dict[str, Any]]:
    with Wire(port, client_id=client_id) as wire:
        return wire.call(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": n, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []} for n in names],
            "timeout": 30000, "validate_only": False})["topics"]


@pytest.fixture
def three(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[BrokerProcess]]:
    """Three brokers as seed 003 starts them (KAFKA_BROKER_ID, KAFKA_ZOOKEEPER_CONNECT);
    broker 1 first, so it is the controller."""
    brokers = []
    try:
        for node_id in (1, 2, 3):
            broker = BrokerProcess(tmp_path / f"data-{node_id}", node_id=node_id, env={
                "KAFKA_BROKER_ID": str(node_id), "KAFKA_ZOOKEEPER_CONNECT": zookeeper_connect,
                "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": "4000"})
            del broker.settings["node.id"]
            brokers.append(broker)
            broker.start(60)
            if node_id == 1:
                wait_for(lambda b=broker: "broker 1 is the active controller" in b.log_text(),
                         30, "broker 1 to become the controller")
        wait_for(lambda: all(len(metadata(b.port())["brokers"]) == 3 for b in brokers), 30,
                 "every broker to see three brokers")
        yield brokers
    finally:
        for broker in brokers:
            broker.close()


def test_admin_requests_work_through_any_broker(three: list[BrokerProcess]) -> None:
    _controller, second, third = three
    assert {metadata(b.port())["controller_id"] for b in three} == {1}
    [made] = create_topics(second.port(), "via-two", partitions=6)
    assert (made["error_code"], made["num_partitions"]) == (E.none, 6)
    [again] = create_topics(third.port(), "via-two")
    assert again["error_code"] == E.topic_already_exists  # the controller's own answer
    # Every broker learns it from ZooKeeper.
    for broker in three:
        wait_for(lambda b=broker: any(t["name"] == "via-two" for t in metadata(b.port())
                                      ["topics"]), 30, f"broker {broker} to see the topic")
    with Wire(third.port()) as wire:
        [gone] = wire.call(ApiKey.DELETE_TOPICS, 6, {
            "topics": [{"name": "via-two", "topic_id": _ZERO}], "timeout": 30000})["responses"]
    assert gone["error_code"] == E.none
    wait_for(lambda: all("via-two" not in {t["name"] for t in metadata(b.port())["topics"]}
                         for b in three), 30, "every broker to forget the topic")


def test_producer_ids_come_from_the_controller_through_any_broker(
        three: list[BrokerProcess]) -> None:
    ids = []
    for broker in three:
        with Wire(broker.port()) as wire:
            answer = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout_ms": 60000,
                "producer_id": -1, "producer_epoch": -1})
        assert answer["error_code"] == E.none, answer
        ids.append(answer["producer_id"])
    # One block per broker, never the same id twice.
    assert len({i // 1000 for i in ids}) == 3


def test_a_forwarded_request_to_a_non_controller_gets_not_controller(
        three: list[BrokerProcess]) -> None:
    [answer] = create_topics(three[2].port(), "bounced", client_id=forwarding_client_id(2))
    assert answer["error_code"] == E.not_controller
    assert "bounced" not in {t["name"] for t in metadata(three[0].port())["topics"]}
    # The controller itself takes a forwarded request.
    [taken] = create_topics(three[0].port(), "taken", client_id=forwarding_client_id(2))
    assert taken["error_code"] == E.none


def test_the_channel_follows_a_new_controller_after_the_old_one_dies(
        three: list[BrokerProcess]) -> None:
    controller, second, third = three
    controller.kill()
    new = wait_for(lambda: metadata(third.port())["controller_id"] in (2, 3) and
                   metadata(third.port())["controller_id"], 30, "a new controller")
    via = third if new == 2 else second  # a broker that is not the new controller
    [made] = wait_for(lambda: [t for t in create_topics(via.port(), "after")
                               if t["error_code"] in (E.none, E.topic_already_exists)],
                      30, "topic creation through a non-controller")
    assert made["error_code"] in (E.none, E.topic_already_exists)
    wait_for(lambda: "after" in {t["name"] for t in metadata(via.port())["topics"]}, 30,
             "the topic to appear")
