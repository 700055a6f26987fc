"""Group request bodies build and encode at every version the client speaks, and results
decode for every version (no sockets)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.serial import entity_reader

from moldau.client.group import requests
from moldau.client.group.consumer_protocol import encode_subscription
from moldau.client.group.offsets import commit_body, fetch_body, fetch_result
from moldau.client.group.types import OffsetAndMetadata
from moldau.client.types import TopicPartition as TP
from moldau.client.versions import client_range
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import (
    encode_body,
    encode_request,
    request_schema,
    response_schema,
)

TOPIC_ID = uuid.uuid4()
IDS = {"t": TOPIC_ID}
OFFSETS = {TP("t", 0): OffsetAndMetadata(5, "m", 3), TP("t", 1): OffsetAndMetadata(9)}

BODIES: dict[int, Any] = {
    ApiKey.JOIN_GROUP: requests.join_group(
        "g", "m", "inst", 10000, 30000, [("range", encode_subscription(["t"]))],
        protocol_type="consumer"),
    ApiKey.SYNC_GROUP: requests.sync_group("g", 3, "m", "inst", "range", [("m", b"x")],
                                               protocol_type="consumer"),
    ApiKey.HEARTBEAT: requests.heartbeat("g", 3, "m", None),
    ApiKey.LEAVE_GROUP: requests.leave_group("g", "m", "closing"),
    ApiKey.OFFSET_COMMIT: commit_body("g", 3, "m", None, OFFSETS, IDS),
    ApiKey.OFFSET_FETCH: fetch_body("g", list(OFFSETS), IDS),
    ApiKey.LIST_GROUPS: requests.list_groups(["Stable"], ["classic"]),
    ApiKey.DESCRIBE_GROUPS: requests.describe_groups(["g"]),
    ApiKey.DELETE_GROUPS: requests.delete_groups(["g"]),
    ApiKey.OFFSET_DELETE: requests.offset_delete("g", {"t": [0, 1]}),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: requests.consumer_group_heartbeat(
        "g", "m", 0, rebalance_ms=30000, topics=["t"], owned=[]),
}


def _request(api_key: int, version: int, body: dict[str, Any]) -> Any:
    """``body`` built at ``version`` as the client's connection builds it (strict)."""
    return build(request_schema(api_key, version), body, strict=True)  # type: ignore[arg-type]


def _versions() -> list[tuple[int, int]]:
    out = []
    for key in BODIES:
        low, high = client_range(key)  # type: ignore[misc]
        out.extend((key, v) for v in range(low, high + 1)
                   if request_schema(key, v) is not None)
    return out


@pytest.mark.parametrize(("api_key", "version"), _versions(),
                         ids=lambda x: str(x))
def test_every_version_builds_and_encodes(api_key: int, version: int) -> None:
    entity = _request(api_key, version, BODIES[api_key])
    frame = encode_request(api_key, version, 7, "client", entity)
    assert len(frame) > 10


def test_version_specific_fields() -> None:
    join_v4 = _request(ApiKey.JOIN_GROUP, 4, BODIES[ApiKey.JOIN_GROUP])
    join_v5 = _request(ApiKey.JOIN_GROUP, 5, BODIES[ApiKey.JOIN_GROUP])
    assert not hasattr(join_v4, "group_instance_id") and join_v5.group_instance_id == "inst"
    leave_v2 = _request(ApiKey.LEAVE_GROUP, 2, BODIES[ApiKey.LEAVE_GROUP])
    leave_v3 = _request(ApiKey.LEAVE_GROUP, 3, BODIES[ApiKey.LEAVE_GROUP])
    assert leave_v2.member_id == "m" and leave_v3.members[0].member_id == "m"
    commit_v10 = _request(ApiKey.OFFSET_COMMIT, 10, BODIES[ApiKey.OFFSET_COMMIT])
    assert commit_v10.topics[0].topic_id == TOPIC_ID
    partitions = commit_v10.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch,
             p.committed_metadata) for p in partitions] == [(0, 5, 3, "m"), (1, 9, -1, "")]
    fetch_all = _request(ApiKey.OFFSET_FETCH, 8, fetch_body("g", None, {}))
    assert fetch_all.groups[0].topics is None  # null topics: every committed partition


def _fetch_response(version: int, group_error: int, partitions: list[tuple[int, int, int]]
                    ) -> Any:
    """An OffsetFetch response of ``version`` with (partition, offset, error) rows."""
    rows = [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "metadata": "md" if o >= 0 else None, "error_code": e} for p, o, e in partitions]
    topic = {"name": "t", "topic_id": TOPIC_ID, "partitions": rows}
    return build(response_schema(ApiKey.OFFSET_FETCH, version), {  # type: ignore[arg-type]
        "throttle_time": 0, "error_code": group_error, "topics": [topic],
        "groups": [{"group_id": "g", "topics": [topic], "error_code": group_error}],
    })


@pytest.mark.parametrize("version", [1, 2, 7, 8, 10])
def test_fetch_result_every_layout(version: int) -> None:
    response = _fetch_response(version, 0, [(0, 5, 0), (1, -1, 0), (2, -1, 3)])
    error, values = fetch_result(response, version, {TOPIC_ID: "t"})
    assert error == 0
    assert values == {TP("t", 0): OffsetAndMetadata(5, "md", -1), TP("t", 1): None,
                      TP("t", 2): 3}


def test_fetch_result_v1_lifts_a_coordinator_error() -> None:
    # v1 has no group error field: Kafka puts it on every partition.
    response = _fetch_response(1, 0, [(0, -1, 16), (1, -1, 16)])
    error, _values = fetch_result(response, 1, {})
    assert error == 16  # NOT_COORDINATOR


def test_responses_decode_through_kio() -> None:
    # The reader side of the consumer heartbeat answer is what kip848 consumes.
    schema = response_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    value = build(schema, {  # type: ignore[arg-type]
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "member_id": "m",
        "member_epoch": 4, "heartbeat_interval": 300,
        "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [1, 2]}]},
    })
    raw = encode_body(value)
    decoded, _ = entity_reader(schema)(memoryview(raw), 0)  # type: ignore[arg-type]
    assert decoded.member_epoch == 4
    assert list(decoded.assignment.topic_partitions[0].partitions) == [1, 2]
