"""API v3 consumer groups, consumers, assignments and lags, checked against a real consumer
group (moldau's consumer) that joined, read and committed offsets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.client import Consumer, Producer, TopicPartition
from moldau.testing.runner import InProcessBroker

from .test_v3_resources import create, error, ok
from .v3_harness import RestV3, unique


@pytest.fixture(scope="module")
def rest() -> Iterator[RestV3]:
    with InProcessBroker() as node, RestV3(node.bootstrap) as server:
        yield server


@pytest.fixture(scope="module")
def cid(rest: RestV3) -> str:
    return rest.cluster_id


async def _fill(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    async with Producer({"bootstrap.servers": bootstrap}) as producer:
        for partition, count in counts.items():
            for i in range(count):
                producer.send(topic, f"v{i}".encode(), partition=partition)
        await producer.flush()


async def _join(bootstrap: str, group: str, topic: str, client_id: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": client_id, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    await consumer.start()
    consumer.subscribe([topic])
    for _ in range(200):
        await consumer.poll(0.1)
        if len(consumer.assignment()) == 2:
            return consumer
    raise AssertionError(f"the consumer got {consumer.assignment()} after 20 s")


def test_group_consumers_assignments_and_lag(rest: RestV3, cid: str) -> None:
    topic, group = unique(), unique("g")
    ok(create(rest, cid, topic, partitions_count=2), 201)
    rest.call(_fill(rest.bootstrap, topic, {0: 10, 1: 7}))
    consumer = rest.call(_join(rest.bootstrap, group, topic, "lagging-client"))
    try:
        rest.call(consumer.commit({TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 7}))
        member = consumer.member_id
        base = f"{rest.url}/v3/clusters/{cid}/consumer-groups/{group}"

        listed = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups"))
        assert listed["kind"] == "KafkaConsumerGroupList"
        one = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}"))
        assert one in listed["data"]
        assert one == {
            "kind": "KafkaConsumerGroup",
            "metadata": {"self": base,
                         "resource_name": f"crn:///kafka={cid}/consumer-group={group}"},
            "cluster_id": cid, "consumer_group_id": group, "is_simple": False,
            "partition_assignor": one["partition_assignor"], "state": "STABLE",
            "coordinator": {"related": f"{rest.url}/v3/clusters/{cid}/brokers/1"},
            "consumers": {"related": f"{base}/consumers"},
            "lag_summary": {"related": f"{base}/lag-summary"},
        }
        assert one["partition_assignor"] in ("range", "cooperative-sticky", "roundrobin",
                                             "sticky")

        consumers = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                           "consumers"))
        me = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers/"
                                    f"{member}"))
        assert consumers["data"] == [me]
        assert (me["kind"], me["consumer_id"], me["client_id"], me["instance_id"]) == (
            "KafkaConsumer", member, "lagging-client", None)
        assignments = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                             f"consumers/{member}/assignments"))
        assert [(a["topic_name"], a["partition_id"]) for a in assignments["data"]] == [
            (topic, 0), (topic, 1)]
        first = assignments["data"][0]
        assert first["lag"] == {"related": f"{base}/lags/{topic}/partitions/0"}
        assert first["partition"] == {
            "related": f"{rest.url}/v3/clusters/{cid}/topics/{topic}/partitions/0"}
        assert ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers/"
                                      f"{member}/assignments/{topic}/partitions/1")) == (
            assignments["data"][1])

        lags = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/lags"))
        assert lags["kind"] == "KafkaConsumerLagList"
        rows = [(r["topic_name"], r["partition_id"], r["current_offset"], r["log_end_offset"],
                 r["lag"], r["consumer_id"], r["client_id"]) for r in lags["data"]]
        assert rows == [(topic, 0, 3, 10, 7, member, "lagging-client"),
                        (topic, 1, 7, 7, 0, member, "lagging-client")]
        one_lag = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/lags/"
                                         f"{topic}/partitions/0"))
        assert one_lag == lags["data"][0]
        assert one_lag["metadata"]["resource_name"] == (
            f"crn:///kafka={cid}/consumer-group={group}/lag={topic}/partition=0")

        summary = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                         "lag-summary"))
        assert summary == {
            "kind": "KafkaConsumerGroupLagSummary",
            "metadata": {"self": f"{base}/lag-summary", "resource_name":
                         f"crn:///kafka={cid}/consumer-groups={group}/lag-summary"},
            "cluster_id": cid, "consumer_group_id": group,
            "max_lag_consumer_id": member, "max_lag_instance_id": None,
            "max_lag_client_id": "lagging-client", "max_lag_topic_name": topic,
            "max_lag_partition_id": 0, "max_lag": 7, "total_lag": 7,
            "max_lag_consumer": {"related": f"{base}/consumers/{member}"},
            "max_lag_partition": {
                "related": f"{rest.url}/v3/clusters/{cid}/topics/{topic}/partitions/0"},
        }

        # more records arrive: the lag grows by exactly that many
        rest.call(_fill(rest.bootstrap, topic, {1: 5}))
        summary = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                         "lag-summary"))
        assert (summary["max_lag"], summary["total_lag"]) == (7, 12)

        error(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers/"
                                  "nobody"), 404, 404)
        error(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers/"
                                  f"{member}/assignments/{topic}/partitions/9"), 404, 404)
        error(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/lags/{topic}/"
                                  "partitions/9"), 404, 404)
    finally:
        rest.call(consumer.close())

    # the consumer left: the group is empty, its offsets and lag stay, read by nobody
    state = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}"))["state"]
    assert state == "EMPTY"
    assert ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers")
              )["data"] == []
    lags = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/lags"))
    assert [(r["partition_id"], r["lag"], r["consumer_id"]) for r in lags["data"]] == [
        (0, 7, ""), (1, 5, "")]


def test_simple_group_and_unknown_groups(rest: RestV3, cid: str) -> None:
    topic, group = unique(), unique("simple")
    ok(create(rest, cid, topic), 201)
    rest.call(_fill(rest.bootstrap, topic, {0: 4}))

    async def commit_only() -> None:
        async with Consumer({"bootstrap.servers": rest.bootstrap, "group.id": group}) as c:
            c.assign([TopicPartition(topic, 0)])
            await c.commit({TopicPartition(topic, 0): 1})

    rest.call(commit_only())
    data = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}"))
    assert (data["is_simple"], data["state"]) == (True, "EMPTY")
    summary = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                     "lag-summary"))
    assert (summary["max_lag"], summary["total_lag"], summary["max_lag_consumer_id"]) == (
        3, 3, "")

    missing = unique("none")
    for path in ("", "/consumers", "/lags", "/lag-summary", "/consumers/x",
                 "/consumers/x/assignments"):
        error(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{missing}{path}"),
              404, 404)
    groups = ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups"))["data"]
    assert missing not in {g["consumer_group_id"] for g in groups}


def test_group_without_offsets_has_no_lag_summary(rest: RestV3, cid: str) -> None:
    topic, group = unique(), unique("g")
    ok(create(rest, cid, topic, partitions_count=2), 201)
    consumer = rest.call(_join(rest.bootstrap, group, topic, "c"))
    try:
        message = error(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/"
                                            "lag-summary"), 404, 404)
        assert message == "Consumer group offsets could not be found."
        assert ok(rest.request("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/lags")
                  )["data"] == []
    finally:
        rest.call(consumer.close())


