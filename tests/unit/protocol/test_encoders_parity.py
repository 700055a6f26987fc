"""The hand-written Produce and Fetch response encoders equal kio's writer, byte for byte."""

from __future__ import annotations

import uuid

import pytest

from moldau.protocol.encoders.fetch import FetchPartitionData, encode_fetch_response
from moldau.protocol.encoders.produce import PartitionProduceResult, encode_produce_response
from moldau.protocol.entities import build
from moldau.protocol.messages import encode_body, response_schema
from moldau.protocol.records.codec import build_batch

RECORDS = build_batch([(b"k", b"value", [("h", b"1")], 1_700_000_000_000)])


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_response_matches_kio(version: int) -> None:
    partitions = [
        PartitionProduceResult(0, 0, 42, -1, 0),
        PartitionProduceResult(1, 10, -1, -1, -1, "too big", [(0, "batch 0 too big"), (1, None)]),
        PartitionProduceResult(2, 0, 7, 1_700_000_000_123, 3),
    ]
    ours = encode_produce_response(version, [("topic-a", partitions), ("b", [])], throttle_ms=5)
    data = {
        "responses": [
            {"name": "topic-a", "partition_responses": [
                {"index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
                 "log_append_time": p.log_append_time_ms, "log_start_offset": p.log_start_offset,
                 "error_message": p.error_message,
                 "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                                   for i, m in p.record_errors]}
                for p in partitions]},
            {"name": "b", "partition_responses": []},
        ],
        "throttle_time": 5,
    }
    expected = encode_body(build(response_schema(0, version), data))
    assert ours == expected


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_response_matches_kio(version: int) -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    partitions = [
        FetchPartitionData(0, 0, 100, 100, 0, None, -1, RECORDS),
        FetchPartitionData(1, 1, -1, -1, -1, None, -1, None),
        FetchPartitionData(2, 0, 5, 4, 0, [(7, 3), (9, 4)], -1, b""),
    ]
    topic = topic_id if version >= 13 else "events"
    ours = b"".join(encode_fetch_response(version, [(topic, partitions)], session_id=9,
                                          throttle_ms=1))
    data = {
        "throttle_time": 1, "error_code": 0, "session_id": 9,
        "responses": [{
            "topic": "events", "topic_id": topic_id,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code,
                 "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
                 "log_start_offset": p.log_start_offset,
                 "aborted_transactions": None if p.aborted_transactions is None else [
                     {"producer_id": a, "first_offset": b} for a, b in p.aborted_transactions],
                 "preferred_read_replica": p.preferred_read_replica, "records": p.records}
                for p in partitions],
        }],
    }
    expected = encode_body(build(response_schema(1, version), data))
    assert ours == expected


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("partition", [
    PartitionProduceResult(3, 0, 1_000_000, -1, 12),
    PartitionProduceResult(0, 6, -1, -1, -1),  # an error without a message
    PartitionProduceResult(7, 0, 5, 1_700_000_000_123, 0),
])
@pytest.mark.parametrize("name", ["t", "a-much-longer-topic-name-" * 6])
def test_single_partition_fast_path_matches_kio(version: int, partition: PartitionProduceResult,
                                               name: str) -> None:
    for throttle in (0, 250):
        ours = encode_produce_response(version, [(name, [partition])], throttle_ms=throttle)
        data = {"responses": [{"name": name, "partition_responses": [
            {"index": partition.index, "error_code": partition.error_code,
             "base_offset": partition.base_offset,
             "log_append_time": partition.log_append_time_ms,
             "log_start_offset": partition.log_start_offset, "error_message": None,
             "record_errors": []}]}], "throttle_time": throttle}
        assert ours == encode_body(build(response_schema(0, version), data))


NODES = [(2, "b2.example", 9093, None), (3, "b3", 9094, "rack-c")]


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_leader_hints_match_kio(version: int) -> None:
    """KIP-951: a partition's current leader and the leaders' endpoints (v10+; older
    versions have no such fields and write nothing)."""
    for partitions, nodes in (
        ([PartitionProduceResult(0, 6, current_leader=(2, 7))], NODES[:1]),
        ([PartitionProduceResult(0, 6, current_leader=(2, 7)),
          PartitionProduceResult(1, 0, 5, -1, 0),
          PartitionProduceResult(2, 6, current_leader=(-1, -1))], NODES),
        ([PartitionProduceResult(0, 6, current_leader=(3, 1))], []),
    ):
        ours = encode_produce_response(version, [("t", partitions)], node_endpoints=nodes)
        data: dict[str, object] = {"responses": [{"name": "t", "partition_responses": [
            {"index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
             "log_append_time": p.log_append_time_ms, "log_start_offset": p.log_start_offset,
             "error_message": None, "record_errors": [],
             **({"current_leader": {"leader_id": p.current_leader[0],
                                    "leader_epoch": p.current_leader[1]}}
                if p.current_leader and version >= 10 else {})}
            for p in partitions]}], "throttle_time": 0}
        if version >= 10:
            data["node_endpoints"] = [{"node_id": n, "host": h, "port": port, "rack": r}
                                      for n, h, port, r in nodes]
        assert ours == encode_body(build(response_schema(0, version), data))


@pytest.mark.parametrize("version", range(12, 17))
def test_fetch_leader_hints_match_kio(version: int) -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    partitions = [
        FetchPartitionData(0, 6, current_leader=(2, 4)),
        FetchPartitionData(1, 0, 100, 100, 0, None, -1, RECORDS),
        FetchPartitionData(2, 74, current_leader=(3, 9)),
    ]
    topic = topic_id if version >= 13 else "events"
    ours = b"".join(encode_fetch_response(version, [(topic, partitions)], node_endpoints=NODES))
    data: dict[str, object] = {
        "throttle_time": 0, "error_code": 0, "session_id": 0,
        "responses": [{
            "topic": "events", "topic_id": topic_id,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code,
                 "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
                 "log_start_offset": p.log_start_offset, "aborted_transactions": None,
                 "preferred_read_replica": -1, "records": p.records,
                 **({"current_leader": {"leader_id": p.current_leader[0],
                                        "leader_epoch": p.current_leader[1]}}
                    if p.current_leader else {})}
                for p in partitions],
        }],
    }
    if version >= 16:
        data["node_endpoints"] = [{"node_id": n, "host": h, "port": port, "rack": r}
                                  for n, h, port, r in NODES]
    assert ours == b"".join([encode_body(build(response_schema(1, version), data))])
