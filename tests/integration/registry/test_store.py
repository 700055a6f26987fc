"""The _schemas topic as the store: created compacted with one partition (replication factor
capped at the live brokers, with a warning); a topic of the wrong shape is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from moldau.client import AdminClient, ConfigResource, NewTopic
from moldau.http import HttpError
from moldau.testing.runner import InProcessBroker

from .registry_harness import RunningRegistry, unique


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


async def _admin(bootstrap: str) -> AdminClient:
    return await AdminClient({"bootstrap.servers": bootstrap}).start()


def test_topic_is_created_compacted_with_one_partition(broker: InProcessBroker,
                                                       caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    with RunningRegistry(broker.bootstrap) as reg:
        topic = reg.topic

    async def inspect() -> tuple[int, str | None, int]:
        admin = await _admin(broker.bootstrap)
        try:
            info = (await admin.describe_topics([topic]))[topic]
            resource = ConfigResource.topic(topic)
            configs = (await admin.describe_configs([resource]))[resource]
            return (len(info.partitions), configs["cleanup.policy"].value,
                    len(info.partitions[0].replicas))
        finally:
            await admin.close()

    assert asyncio.run(inspect()) == (1, "compact", 1)
    assert "replication factor 1" in caplog.text and "only 1 broker(s)" in caplog.text


@pytest.mark.parametrize("partitions, policy, words", [
    (2, "compact", ["exactly 1 partition", "it has 2"]),
    (1, "delete", ["cleanup.policy=delete", "compact"]),
])
def test_a_topic_of_the_wrong_shape_is_refused(broker: InProcessBroker, partitions: int,
                                               policy: str, words: list[str]) -> None:
    topic = unique("_schemas")

    async def create() -> None:
        admin = await _admin(broker.bootstrap)
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1,
                                                {"cleanup.policy": policy})])
        finally:
            await admin.close()

    asyncio.run(create())
    registry = RunningRegistry(broker.bootstrap, kafkastore_topic=topic)
    try:
        with pytest.raises(HttpError) as info:
            registry.start()
        assert info.value.error_code == 50001
        for word in words:
            assert word in info.value.message
    finally:
        registry.stop()
