"""Fetch requests from brokers (replica id >= 0) that are not replicas of a partition get
Kafka's per-partition error, never a crash.

The single node's partitions have no replicas but the node itself, so every broker id is a
stranger here and is answered as Kafka answers a broker that is not among a partition's
replicas (``Partition.followerReplicaOrThrow``): UNKNOWN_LEADER_EPOCH with a current leader
epoch, NOT_LEADER_OR_FOLLOWER without; unknown topics and partitions keep their own codes. Every
version served is tried, v15+ with the replica id in the ReplicaState tagged field. (Before
issue 11's fix the handler raised and the connection was closed without an answer; fetches
from real replicas are tested in tests/unit/broker/handlers/test_follower_fetch.py and
tests/cluster/test_replication.py.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, create_topic, fetch_raw, make_batch, metadata, produce

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import InProcessBroker

TOPIC = "follower-fetch"
VERSIONS = [4, 5, 7, 9, 11, 12, 13, 14, 15, 16]


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


@pytest.fixture(scope="module")
def topic(broker: InProcessBroker) -> dict[str, Any]:
    """The test topic (2 partitions, a record in partition 0) as Metadata v12 describes it."""
    with Wire(broker.broker.bound_port()) as wire:
        create_topic(wire, TOPIC, partitions=2)
        assert produce(wire, TOPIC, 0, make_batch([b"v"]))["error_code"] == E.none
        [entry] = metadata(wire, [TOPIC], allow_create=False)["topics"]
    return entry


def fetch_body(version: int, replica_id: int,
               topics: list[tuple[str | uuid.UUID, list[tuple[int, int]]]]) -> dict[str, Any]:
    """A Fetch request body of ``version`` from ``replica_id``; topics are
    (name or id, [(partition, current leader epoch)])."""
    body: dict[str, Any] = {
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "cluster_id": None,
        "topics": [{"topic": key if isinstance(key, str) else "",
                    "topic_id": key if isinstance(key, uuid.UUID) else None,
                    "partitions": [{"partition": p, "current_leader_epoch": epoch,
                                    "fetch_offset": 0, "last_fetched_epoch": -1,
                                    "log_start_offset": 0, "partition_max_bytes": 1 << 20,
                                    "replica_directory_id": None}
                                   for p, epoch in parts]}
                   for key, parts in topics],
    }
    if version >= 15:
        body["replica_state"] = {"replica_id": replica_id, "replica_epoch": 3}
    else:
        body["replica_id"] = replica_id
    return body


def errors_of(response: dict[str, Any]) -> list[list[tuple[int, int]]]:
    assert response.get("error_code", E.none) == E.none, response  # top-level code from v7
    out = []
    for topic in response["responses"]:
        row = []
        for p in topic["partitions"]:
            # An error answer carries no data and no offsets.
            assert not p["records"], p
            assert p["high_watermark"] == -1, p
            row.append((p["partition_index"], p["error_code"]))
        out.append(row)
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("replica_id", [1, 2, 1000])
def test_a_follower_fetch_gets_an_error_code_at_every_version(
        broker: InProcessBroker, topic: dict[str, Any], version: int, replica_id: int) -> None:
    by_id = version >= 13
    key: str | uuid.UUID = topic["topic_id"] if by_id else TOPIC
    unknown: str | uuid.UUID = uuid.uuid4() if by_id else "no-such-topic"
    epoch = topic["partitions"][0]["leader_epoch"]
    with_epochs = version >= 9  # current_leader_epoch is in the request from v9
    parts = [(0, -1), (1, epoch if with_epochs else -1), (7, -1)]
    with Wire(broker.broker.bound_port()) as wire:
        response = wire.call(ApiKey.FETCH, version,
                             fetch_body(version, replica_id, [(key, parts), (unknown, [(0, -1)])]))
        known, missing = errors_of(response)
        assert known == [
            (0, E.not_leader_or_follower),
            (1, E.unknown_leader_epoch if with_epochs else E.not_leader_or_follower),
            (7, E.unknown_topic_or_partition),
        ], (version, response)
        assert missing == [(0, E.unknown_topic_id if by_id else E.unknown_topic_or_partition)]
        # The same connection still serves a consumer.
        entry = fetch_raw(wire, TOPIC, 0, 0)
        assert entry["error_code"] == E.none and entry["records"], entry


def test_a_follower_fetch_naming_a_session_gets_fetch_session_id_not_found(
        broker: InProcessBroker, topic: dict[str, Any]) -> None:
    with Wire(broker.broker.bound_port()) as wire:
        body = fetch_body(12, 2, [(TOPIC, [(0, -1)])])
        body["session_id"] = 77
        response = wire.call(ApiKey.FETCH, 12, body)
        assert response["error_code"] == E.fetch_session_id_not_found, response
