"""Produce, Fetch and ListOffsets against a fake node whose partitions live in a tmp dir: what
is produced is fetched back byte for byte, offsets and watermarks move as Kafka's do, and a
partition this node does not lead or know is answered with Kafka's error, never a crash."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from moldau.broker.metadata.channel import TopicSpec
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import build_batch, iter_decoded

from .fakes import FakeConnection, FakeNode, call, fake_node, start


async def two_brokers(tmp_path: Path) -> FakeNode:
    node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]})
    results = await node.controller.create_topics([
        TopicSpec("t", assignments={0: [1], 1: [1]}),
        TopicSpec("elsewhere", assignments={0: [2]}),  # led by broker 2, not hosted here
    ])
    assert [r.error for r in results] == [E.none, E.none]
    return node


def produce(topic: str, partition: int, values: list[bytes], now_ms: int, *,
            acks: int = 1) -> dict[str, Any]:
    batch = build_batch([(None, v, [], now_ms + i) for i, v in enumerate(values)])
    return {"transactional_id": None, "acks": acks, "timeout": 30_000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": batch}]}]}


def fetch(topic_id: uuid.UUID, partition: int, offset: int, *, max_wait_ms: int = 0,
          replica_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    # v15+ names the replica in replica_state.
    return {"replica_state": {"replica_id": replica_id, "replica_epoch": -1},
            "max_wait": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, "current_leader_epoch": epoch,
                 "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def list_offsets(topic: str, partition: int, timestamp: int) -> dict[str, Any]:
    return {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition,
                                        "current_leader_epoch": -1, "timestamp": timestamp}]}]}


def produced(answer: dict[str, Any]) -> tuple[int, int]:
    [topic] = answer["responses"]
    [partition] = topic["partition_responses"]
    return partition["error_code"], partition["base_offset"]


def fetched(answer: dict[str, Any]) -> tuple[int, int, list[bytes]]:
    [topic] = answer["responses"]
    [partition] = topic["partitions"]
    values = [r.value for b in iter_decoded(partition["records"] or b"") for r in b.records]
    return partition["error_code"], partition["high_watermark"], values


def test_what_is_produced_is_fetched_and_listed(tmp_path: Path) -> None:
    async def main() -> None:
        node = await two_brokers(tmp_path)
        now = node.time_ms()
        first = await call(node, ApiKey.PRODUCE, 9, produce("t", 1, [b"a", b"b", b"c"], now))
        second = await call(node, ApiKey.PRODUCE, 9, produce("t", 1, [b"d"], now + 10))
        assert (produced(first), produced(second)) == ((E.none, 0), (E.none, 3))
        topic_id = node.image.topics_by_name["t"].topic_id
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 1, 1))
        assert fetched(answer) == (E.none, 4, [b"a", b"b", b"c", b"d"])  # whole batches
        answers = {}
        for name, timestamp in (("earliest", -2), ("latest", -1), ("at", now + 1),
                                ("after", now + 100)):
            listed = await call(node, ApiKey.LIST_OFFSETS, 7, list_offsets("t", 1, timestamp))
            [p] = listed["topics"][0]["partitions"]
            answers[name] = (p["error_code"], p["offset"])
        assert answers == {"earliest": (E.none, 0), "latest": (E.none, 4),
                           "at": (E.none, 1), "after": (E.none, -1)}
        await node.close()

    asyncio.run(main())


def test_partitions_not_led_here_get_kafkas_errors(tmp_path: Path) -> None:
    async def main() -> None:
        node = await two_brokers(tmp_path)
        now = node.time_ms()
        cases = {
            "unknown": produce("nope", 0, [b"x"], now),
            "elsewhere": produce("elsewhere", 0, [b"x"], now),
            "no partition 5": produce("t", 5, [b"x"], now),
            "internal": produce("__consumer_offsets", 0, [b"x"], now),
        }
        codes = {name: produced(await call(node, ApiKey.PRODUCE, 9, body))[0]
                 for name, body in cases.items()}
        assert codes == {"unknown": E.unknown_topic_or_partition,
                         "elsewhere": E.not_leader_or_follower,
                         "no partition 5": E.unknown_topic_or_partition,
                         "internal": E.invalid_topic_exception}
        elsewhere = node.image.topics_by_name["elsewhere"].topic_id
        assert fetched(await call(node, ApiKey.FETCH, 16, fetch(elsewhere, 0, 0)))[0] == \
            E.not_leader_or_follower
        assert fetched(await call(node, ApiKey.FETCH, 16, fetch(uuid.uuid4(), 0, 0)))[0] == \
            E.unknown_topic_id
        listed = await call(node, ApiKey.LIST_OFFSETS, 7, list_offsets("elsewhere", 0, -1))
        assert listed["topics"][0]["partitions"][0]["error_code"] == E.not_leader_or_follower
        await node.close()

    asyncio.run(main())


def test_bad_acks_and_a_failed_acks_0_produce(tmp_path: Path) -> None:
    async def main() -> None:
        node = await two_brokers(tmp_path)
        now = node.time_ms()
        bad = await call(node, ApiKey.PRODUCE, 9, produce("t", 0, [b"x"], now, acks=2))
        assert produced(bad)[0] == E.invalid_required_acks
        quiet = FakeConnection()
        ok = await call(node, ApiKey.PRODUCE, 9, produce("t", 0, [b"x"], now, acks=0),
                        connection=quiet)
        assert ok is None and quiet.closed == []  # acks=0: no answer
        failed = await call(node, ApiKey.PRODUCE, 9, produce("nope", 0, [b"x"], now, acks=0),
                            connection=quiet)
        # No answer either; closing the connection tells the client something went wrong.
        assert failed is None and len(quiet.closed) == 1
        await node.close()

    asyncio.run(main())


def test_a_long_poll_is_answered_when_records_arrive(tmp_path: Path) -> None:
    async def main() -> None:
        node = await two_brokers(tmp_path)
        topic_id = node.image.topics_by_name["t"].topic_id
        parked = start(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, max_wait_ms=30_000))
        assert parked.waits
        waiting = asyncio.ensure_future(parked.answer())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await call(node, ApiKey.PRODUCE, 9, produce("t", 0, [b"late"], node.time_ms()))
        answer = await asyncio.wait_for(waiting, 10)  # generous: woken, not timed out
        assert fetched(answer) == (E.none, 1, [b"late"])
        await node.close()

    asyncio.run(main())


def test_a_fetch_from_a_broker_that_is_not_a_replica_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        node = await two_brokers(tmp_path)
        topic_id = node.image.topics_by_name["t"].topic_id
        epoch = node.image.topics_by_name["t"].partitions[0].leader_epoch
        answer = await call(node, ApiKey.FETCH, 16,
                            fetch(topic_id, 0, 0, replica_id=2, epoch=epoch))
        assert fetched(answer)[0] == E.unknown_leader_epoch  # broker 2 is not a replica
        await node.close()

    asyncio.run(main())
