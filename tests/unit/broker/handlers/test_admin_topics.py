"""CreateTopics, DeleteTopics, CreatePartitions and InitProducerId against a fake node: the
controller's answers reach the client with Kafka's codes and messages, and what the answer
says is what the metadata image (and the store behind it) holds."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from moldau.broker.metadata.records import TopicRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import FakeNode, call, fake_node


def topic(name: str, partitions: int = -1, factor: int = -1, *,
          configs: dict[str, str] | None = None,
          assignments: dict[int, list[int]] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor,
            "assignments": [{"partition_index": p, "broker_ids": b}
                            for p, b in (assignments or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


async def create(node: FakeNode, *topics: dict[str, Any], validate_only: bool = False,
                 version: int = 7) -> dict[str, Any]:
    answer = await call(node, ApiKey.CREATE_TOPICS, version,
                        {"topics": list(topics), "timeout": 30_000,
                         "validate_only": validate_only})
    return {t["name"]: t for t in answer["topics"]}


def test_create_topics_answers_what_was_created(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]},
                               settings={"num.partitions": 4})
        answers = await create(node, topic("a", configs={"retention.ms": "1000"}),
                               topic("b", 2, 2), topic("dup"), topic("dup"),
                               topic("bad/name"), topic("c", 1, 3), topic("__consumer_offsets"))
        a = answers["a"]
        assert (a["error_code"], a["num_partitions"], a["replication_factor"]) == (E.none, 4, 1)
        assert a["topic_id"] == node.image.topics_by_name["a"].topic_id
        assert {c["name"]: c["value"] for c in a["configs"]}["retention.ms"] == "1000"
        assert node.image.topic_configs["a"] == {"retention.ms": "1000"}
        assert [len(p.replicas) for p in node.image.topics_by_name["b"].partitions.values()] \
            == [2, 2]
        assert answers["dup"]["error_code"] == E.invalid_request  # answered once
        assert answers["bad/name"]["error_code"] == E.invalid_topic_exception
        assert answers["c"]["error_code"] == E.invalid_replication_factor
        assert "3" in answers["c"]["error_message"] and "2" in answers["c"]["error_message"]
        assert answers["__consumer_offsets"]["error_code"] == E.invalid_request
        assert sorted(node.image.topics_by_name) == ["a", "b"]
        assert [r.name for r in node.store.records if isinstance(r, TopicRecord)] == ["a", "b"]
        again = await create(node, topic("a"))
        assert again["a"]["error_code"] == E.topic_already_exists
        await node.close()

    asyncio.run(main())


def test_validate_only_creates_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        before = len(node.store.records)
        answer = await create(node, topic("v", 3, 1), validate_only=True)
        assert (answer["v"]["error_code"], answer["v"]["num_partitions"]) == (E.none, 3)
        assert answer["v"]["topic_id"] is None  # all zeros on the wire; kio reads it as None
        assert "v" not in node.image.topics_by_name and len(node.store.records) == before
        assert not (tmp_path / "data" / "v-0").exists()
        await node.close()

    asyncio.run(main())


def test_delete_topics_by_name_and_id(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        await create(node, topic("x", 2), topic("y"))
        assert (tmp_path / "data" / "x-1").exists()
        y_id = node.image.topics_by_name["y"].topic_id
        answer = await call(node, ApiKey.DELETE_TOPICS, 6, {"topics": [
            {"name": "x", "topic_id": uuid.UUID(int=0)},
            {"name": None, "topic_id": y_id},
            {"name": "missing", "topic_id": uuid.UUID(int=0)},
            {"name": None, "topic_id": uuid.uuid4()}], "timeout": 30_000})
        codes = sorted((r["name"] or "", r["error_code"]) for r in answer["responses"])
        assert codes == [("", E.unknown_topic_id), ("missing", E.unknown_topic_or_partition),
                         ("x", E.none), ("y", E.none)]
        assert node.image.topics_by_name == {}
        assert "x-1" not in {lg.topic + "-" + str(lg.partition)
                             for lg in node.log_manager.all_logs()}
        await node.close()

    asyncio.run(main())


def test_delete_topics_can_be_disabled(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path, settings={"delete.topic.enable": "false"})
        await create(node, topic("x"))
        answer = await call(node, ApiKey.DELETE_TOPICS, 5,
                            {"topic_names": ["x"], "timeout": 30_000})
        [response] = answer["responses"]
        assert response["error_code"] == E.topic_deletion_disabled
        assert "delete.topic.enable=true" in response["error_message"]
        assert "x" in node.image.topics_by_name
        await node.close()

    asyncio.run(main())


def test_create_partitions(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        await create(node, topic("g", 1))

        async def grow(name: str, count: int, validate_only: bool = False) -> tuple[int, str]:
            answer = await call(node, ApiKey.CREATE_PARTITIONS, 3, {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": 30_000, "validate_only": validate_only})
            [result] = answer["results"]
            return result["error_code"], result["error_message"] or ""

        assert (await grow("g", 3, validate_only=True))[0] == E.none
        assert len(node.image.topics_by_name["g"].partitions) == 1
        assert (await grow("g", 3))[0] == E.none
        assert sorted(node.image.topics_by_name["g"].partitions) == [0, 1, 2]
        code, message = await grow("g", 2)
        assert code == E.invalid_partitions and "3 partition(s)" in message
        assert (await grow("nope", 2))[0] == E.unknown_topic_or_partition
        await node.close()

    asyncio.run(main())


def test_init_producer_id_hands_out_ids_from_controller_blocks(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path)
        body = {"transactional_id": None, "transaction_timeout": 60_000,
                "producer_id": -1, "producer_epoch": -1}
        ids = [(await call(node, ApiKey.INIT_PRODUCER_ID, 4, body))["producer_id"]
               for _ in range(3)]
        assert ids == [0, 1, 2] and node.image.next_producer_id == 1000
        bumped = await call(node, ApiKey.INIT_PRODUCER_ID, 4,
                            {**body, "producer_id": 1, "producer_epoch": 4})
        assert (bumped["producer_id"], bumped["producer_epoch"]) == (1, 5)
        # A second node's manager gets the next block from the same controller.
        other = node.producer_ids.__class__(2, node.controller)
        assert await other.next_id() == 1000 and node.image.next_producer_id == 2000
        transactional = await call(node, ApiKey.INIT_PRODUCER_ID, 4,
                                   {**body, "transactional_id": "tx"})
        assert transactional["error_code"] == E.coordinator_not_available
        await node.close()

    asyncio.run(main())
