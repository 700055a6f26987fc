"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a fake node: a change is
answered with Kafka's code and message, and a describe afterwards shows the value with its
source (topic override, dynamic broker config, static config, default)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.configs import ConfigSource
from moldau.broker.metadata.records import BROKER_RESOURCE, TOPIC_RESOURCE
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import FakeNode, call, fake_node, start

SET, DELETE, APPEND = 0, 1, 2


async def node_with_topic(tmp_path: Path) -> FakeNode:
    node = await fake_node(tmp_path, settings={"log.retention.hours": 48})
    [made] = await node.controller.create_topics([TopicSpec("t")])
    assert made.error == E.none
    return node


async def describe(node: FakeNode, resource_type: int, name: str, *keys: str) -> dict[str, Any]:
    answer = await call(node, ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configuration_keys": list(keys) or None}],
        "include_synonyms": False, "include_documentation": False})
    [result] = answer["results"]
    return result


def values(result: dict[str, Any]) -> dict[str, tuple[str | None, int]]:
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


async def incremental(node: FakeNode, resource_type: int, name: str,
                      *ops: tuple[str, int, str | None],
                      validate_only: bool = False) -> tuple[int, str | None]:
    answer = await call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configs": [{"name": k, "config_operation": op, "value": v}
                                   for k, op, v in ops]}],
        "validate_only": validate_only})
    [result] = answer["responses"]
    return result["error_code"], result["error_message"]


def test_topic_configs_change_and_describe_with_their_source(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topic(tmp_path)
        before = values(await describe(node, TOPIC_RESOURCE, "t", "retention.ms"))
        # The static broker synonym (log.retention.hours=48) supplies the topic's value.
        assert before == {"retention.ms": (str(48 * 3600 * 1000),
                                           ConfigSource.STATIC_BROKER_CONFIG)}
        assert await incremental(node, TOPIC_RESOURCE, "t", ("retention.ms", SET, "1000"),
                                 ("cleanup.policy", APPEND, "compact")) == (E.none, None)
        after = values(await describe(node, TOPIC_RESOURCE, "t", "retention.ms",
                                      "cleanup.policy"))
        assert after == {"retention.ms": ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                         "cleanup.policy": ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)}
        # The partition's log follows the change.
        assert node.replica_manager.get("t", 0).log.config.retention_ms == 1000
        code, message = await incremental(node, TOPIC_RESOURCE, "t",
                                          ("retention.ms", SET, "soon"))
        assert code == E.invalid_config and "retention.ms" in message and "soon" in message
        assert node.image.topic_configs["t"]["retention.ms"] == "1000"
        await node.close()

    asyncio.run(main())


def test_alter_configs_replaces_every_topic_override(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topic(tmp_path)
        await incremental(node, TOPIC_RESOURCE, "t", ("retention.ms", SET, "1000"))

        async def alter(configs: dict[str, str], validate_only: bool = False) -> int:
            answer = await call(node, ApiKey.ALTER_CONFIGS, 2, {"resources": [
                {"resource_type": TOPIC_RESOURCE, "resource_name": "t",
                 "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "validate_only": validate_only})
            return answer["responses"][0]["error_code"]

        assert await alter({"segment.ms": "60000"}, validate_only=True) == E.none
        assert node.image.topic_configs["t"] == {"retention.ms": "1000"}
        assert await alter({"segment.ms": "60000"}) == E.none
        assert node.image.topic_configs["t"] == {"segment.ms": "60000"}  # retention.ms gone
        await node.close()

    asyncio.run(main())


def test_broker_configs_for_this_node_and_the_cluster_default(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topic(tmp_path)
        assert await incremental(node, BROKER_RESOURCE, "", ("log.retention.ms", SET,
                                                             "7200000")) == (E.none, None)
        assert await incremental(node, BROKER_RESOURCE, "1", ("log.retention.ms", SET,
                                                              "3600000")) == (E.none, None)
        described = values(await describe(node, BROKER_RESOURCE, "1", "log.retention.ms"))
        assert described == {"log.retention.ms": ("3600000",
                                                  ConfigSource.DYNAMIC_BROKER_CONFIG)}
        # The topic without an override of its own follows the broker's dynamic value.
        topic = values(await describe(node, TOPIC_RESOURCE, "t", "retention.ms"))
        assert topic == {"retention.ms": ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG)}
        other = await describe(node, BROKER_RESOURCE, "2")
        assert other["error_code"] == E.invalid_request
        assert "ask" in other["error_message"] and "that broker" in other["error_message"]
        code, _ = await incremental(node, BROKER_RESOURCE, "7", ("log.retention.ms", SET, "1"))
        assert code == E.broker_id_not_registered
        await node.close()

    asyncio.run(main())


def test_unknown_topics_and_resource_types(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topic(tmp_path)
        missing = await describe(node, TOPIC_RESOURCE, "nope")
        assert missing["error_code"] == E.unknown_topic_or_partition
        code, _ = await incremental(node, TOPIC_RESOURCE, "nope", ("retention.ms", SET, "1"))
        assert code == E.unknown_topic_or_partition
        code, message = await incremental(node, 16, "x", ("k", SET, "v"))
        assert code == E.invalid_request and "supported" in message
        await node.close()

    asyncio.run(main())


def test_a_resource_repeated_thousands_of_times_is_answered_each_time_and_built_once(
        tmp_path: Path) -> None:
    """Kafka answers a repeated resource once per occurrence. The live fuzzer's 5 KiB request
    repeating the broker resource 1,000 times took the broker past 400 MiB while each copy was
    described and built on its own: the answer is the same object for each copy."""
    async def main() -> None:
        node = await node_with_topic(tmp_path)
        resources = [{"resource_type": BROKER_RESOURCE, "resource_name": "1",
                      "configuration_keys": None}] * 3000 + [
            {"resource_type": TOPIC_RESOURCE, "resource_name": "t",
             "configuration_keys": ["retention.ms"]},
            {"resource_type": BROKER_RESOURCE, "resource_name": "1",
             "configuration_keys": ["log.retention.ms"]}]
        started = start(node, ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": resources, "include_synonyms": False,
            "include_documentation": False})
        results = started.result.results
        assert len(results) == 3002
        assert all(r is results[0] for r in results[:3000])
        assert len(results[0].configs) > 100  # every broker key, described once
        assert results[3001] is not results[0] and [c.name for c in results[3001].configs] == [
            "log.retention.ms"]
        answer = await started.answer()
        assert [r["resource_name"] for r in answer["results"]] == ["1"] * 3000 + ["t", "1"]
        assert answer["results"][2999] == answer["results"][0]
        assert values(answer["results"][3000]) == {
            "retention.ms": ("172800000", ConfigSource.STATIC_BROKER_CONFIG)}
        await node.close()

    asyncio.run(main())
