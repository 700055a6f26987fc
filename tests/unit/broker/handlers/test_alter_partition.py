"""AlterPartition (56) on the active controller, through the handler path a connection uses:
a valid ISR change is committed as one PartitionChangeRecord (ISR, partition epoch + 1) and
answered with the new state; each of Kafka's refusals comes back on its partition, and a
broker that is not the controller answers NOT_CONTROLLER at the top level."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import FakeNode, call, fake_node

T_ID = uuid.UUID("00000000-0000-0000-0000-0000000000ab")
BROKERS = {1: ["PLAINTEXT"], 2: ["PLAINTEXT"], 3: ["PLAINTEXT"]}


def run(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """A synchronous test running ``test`` in its own event loop."""

    @functools.wraps(test)
    def sync(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return sync


async def node_with_topic(tmp_path: Path, controller_id: int = 1) -> FakeNode:
    node = await fake_node(tmp_path, brokers=BROKERS, controller_id=controller_id,
                           groups=False)
    for record in (TopicRecord("t", T_ID), PartitionRecord(T_ID, 0, [1, 2, 3], [1, 2, 3], 1)):
        node.image.replay(record)
    return node


def body(version: int, isr: list[int], *, broker_id: int = 1, leader_epoch: int = 0,
         partition_epoch: int = 0, topic_id: uuid.UUID = T_ID) -> dict[str, Any]:
    partition: dict[str, Any] = {"partition_index": 0, "leader_epoch": leader_epoch,
                                 "partition_epoch": partition_epoch,
                                 "leader_recovery_state": 0}
    if version >= 3:
        partition["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": -1} for b in isr]
    else:
        partition["new_isr"] = isr
    return {"broker_id": broker_id, "broker_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [partition]}]}


def only(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["error_code"] == E.none
    [topic] = answer["topics"]
    [partition] = topic["partitions"]
    return partition


@pytest.mark.parametrize("version", [2, 3])
@run
async def test_a_shrink_is_committed_and_answered_with_the_new_state(
        tmp_path: Path, version: int) -> None:
    node = await node_with_topic(tmp_path)
    try:
        p = only(await call(node, ApiKey.ALTER_PARTITION, version, body(version, [1, 2])))
        assert (p["error_code"], p["leader_id"], p["leader_epoch"], list(p["isr"]),
                p["partition_epoch"]) == (E.none, 1, 0, [1, 2], 1)
        state = node.image.topics_by_id[T_ID].partitions[0]
        assert (state.isr, state.partition_epoch, state.leader_epoch) == ([1, 2], 1, 0)
        assert node.store.records[-1] == PartitionChangeRecord(T_ID, 0, isr=[1, 2])
        # ... and expanded again from the new partition epoch.
        p = only(await call(node, ApiKey.ALTER_PARTITION, version,
                            body(version, [1, 2, 3], partition_epoch=1)))
        assert (list(p["isr"]), p["partition_epoch"]) == ([1, 2, 3], 2)
    finally:
        await node.close()


@run
async def test_the_same_isr_writes_nothing_and_answers_the_state(tmp_path: Path) -> None:
    node = await node_with_topic(tmp_path)
    try:
        written = len(node.store.records)
        p = only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2, 3])))
        assert (p["error_code"], list(p["isr"]), p["partition_epoch"]) == (E.none, [1, 2, 3], 0)
        assert len(node.store.records) == written
    finally:
        await node.close()


@pytest.mark.parametrize(("change", "error"), [
    ({"partition_epoch": 5}, E.invalid_update_version),
    ({"leader_epoch": 1}, E.fenced_leader_epoch),
    ({"broker_id": 2}, E.not_leader_or_follower),
    ({"topic_id": uuid.UUID(int=99)}, E.unknown_topic_id),
    ({"isr": [2, 3]}, E.invalid_request),  # leaves out the leader
    ({"isr": [1, 4]}, E.invalid_request),  # 4 is not a replica
    ({"isr": [1, 1]}, E.invalid_request),
    ({"isr": []}, E.invalid_request),
])
@run
async def test_refusals_change_nothing(tmp_path: Path, change: dict[str, Any],
                                       error: E) -> None:
    node = await node_with_topic(tmp_path)
    try:
        written = len(node.store.records)
        args = {"isr": [1, 2], **change}
        p = only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, args.pop("isr"), **args)))
        assert p["error_code"] == error
        state = node.image.topics_by_id[T_ID].partitions[0]
        assert (state.isr, state.partition_epoch) == ([1, 2, 3], 0)
        assert len(node.store.records) == written
    finally:
        await node.close()


@run
async def test_a_fenced_broker_may_not_join_but_may_stay(tmp_path: Path) -> None:
    node = await node_with_topic(tmp_path)
    try:
        only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2])))
        node.image.replay(BrokerRegistrationChangeRecord(3, fenced=True))
        p = only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2, 3],
                                                                   partition_epoch=1)))
        assert p["error_code"] == E.ineligible_replica
        # Broker 2 is fenced but already in the ISR: the leader may keep it.
        node.image.replay(BrokerRegistrationChangeRecord(2, fenced=True))
        node.image.replay(BrokerRegistrationChangeRecord(3, fenced=False))
        p = only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2, 3],
                                                                   partition_epoch=1)))
        assert (p["error_code"], list(p["isr"])) == (E.none, [1, 2, 3])
        # A broker in controlled shutdown is ineligible too.
        node.controller.ineligible_replicas.add(3)
        only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2], partition_epoch=2)))
        p = only(await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2, 3],
                                                                   partition_epoch=3)))
        assert p["error_code"] == E.ineligible_replica
    finally:
        await node.close()


@run
async def test_a_broker_that_is_not_the_controller_answers_not_controller(
        tmp_path: Path) -> None:
    node = await node_with_topic(tmp_path, controller_id=2)
    try:
        answer = await call(node, ApiKey.ALTER_PARTITION, 3, body(3, [1, 2]))
        assert (answer["error_code"], answer["topics"]) == (E.not_controller, [])
        assert node.image.topics_by_id[T_ID].partitions[0].isr == [1, 2, 3]
    finally:
        await node.close()


@run
async def test_a_partition_listed_twice_is_changed_once(tmp_path: Path) -> None:
    node = await node_with_topic(tmp_path)
    try:
        request = body(3, [1, 2])
        twice = dict(request["topics"][0]["partitions"][0],
                     new_isr_with_epochs=[{"broker_id": 1, "broker_epoch": -1}])
        request["topics"][0]["partitions"].append(twice)
        answer = await call(node, ApiKey.ALTER_PARTITION, 3, request)
        first, second = answer["topics"][0]["partitions"]
        assert (first["error_code"], list(first["isr"])) == (E.none, [1, 2])
        assert second["error_code"] == E.invalid_request
        state = node.image.topics_by_id[T_ID].partitions[0]
        assert (state.isr, state.partition_epoch) == ([1, 2], 1)
    finally:
        await node.close()
