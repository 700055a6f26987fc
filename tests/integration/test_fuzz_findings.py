"""Defects the live fuzzer (tests/faults/fuzz/live.py) found, each over a raw socket.

Every request here used to leave the broker without an answer: a handler raised (the
connection closed), or the response could not be encoded and was skipped while the
connection stayed open, so the next response arrived in its place. Each test checks the
Kafka answer and that the same connection still serves the next request in order.

- a Fetch v13+ naming the all-zero topic id (kio reads it as None): UNKNOWN_TOPIC_ID;
- a response that cannot be encoded: the connection is closed, the cause logged, and no
  later response takes its place;
- a 32,767-character client id: the member id handed out (client id + "-" + UUID) still fits
  JoinGroup v0-5's string;
- Metadata v10-11 naming a topic by id: INVALID_REQUEST, as Kafka answers;
- error messages that quote a 32,767-character topic name (Produce v8, CreatePartitions v1):
  bounded, so the response fits;
- a record whose timestamp (base + delta) passes 2^63 - 1: it wraps as in Kafka, so
  ListOffsets can answer;
- group ids, member ids, instance ids and protocol names longer than a ``__consumer_offsets``
  record can hold (flexible requests allow them): refused with a Kafka error instead of a
  failed record write (OffsetCommit, DeleteGroups, JoinGroup, ConsumerGroupHeartbeat), so
  ListGroups v0-2 and DescribeGroups v0-4 never have to show them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, create_topic, make_batch, produce, produce_body
from record_shapes import batch, record

from moldau.broker import dispatch
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import MAX_ERROR_MESSAGE
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import InProcessBroker

TOPIC = "findings"
LONG = 40_000  # characters: more than any classic (int16-length) string holds


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
        with Wire(b.broker.bound_port()) as wire:
            create_topic(wire, TOPIC)
            deadline = time.monotonic() + 30
            while wire.call(ApiKey.FIND_COORDINATOR, 2,
                            {"key": "g", "key_type": 0})["error_code"] != E.none:
                assert time.monotonic() < deadline, "no group coordinator within 30 s"
                time.sleep(0.1)
        yield b


@pytest.fixture
def wire(broker: InProcessBroker) -> Iterator[Wire]:
    with Wire(broker.broker.bound_port(), timeout=30) as w:
        yield w


def still_serves(wire: Wire) -> None:
    """The connection answers the next request, with the next correlation id."""
    response = wire.call(ApiKey.API_VERSIONS, 0, {})
    assert response["error_code"] == E.none


def fetch_by_id(topic_id: uuid.UUID, version: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "cluster_id": None,
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20, "replica_directory_id": None}]}]}


@pytest.mark.parametrize("version", [13, 14, 15, 16])
def test_fetch_naming_the_zero_topic_id_gets_unknown_topic_id(wire: Wire, version: int) -> None:
    response = wire.call(ApiKey.FETCH, version, fetch_by_id(uuid.UUID(int=0), version))
    [topic] = response["responses"]
    assert topic["topic_id"] is None  # the all-zero id echoed (kio reads it as None)
    assert [p["error_code"] for p in topic["partitions"]] == [E.unknown_topic_id], response
    still_serves(wire)


def test_a_response_that_cannot_be_encoded_closes_the_connection(
        broker: InProcessBroker, wire: Wire, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = dispatch.REGISTRY[ApiKey.DESCRIBE_CLUSTER]

    def unencodable(ctx: Any, request: Any) -> Any:
        # A None in a non-nullable string: kio's writer raises.
        return dataclasses.replace(spec.fn(ctx, request), cluster_id=None)

    first = wire.frame(ApiKey.API_VERSIONS, 0, {})
    bad = wire.frame(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    after = wire.frame(ApiKey.API_VERSIONS, 0, {})
    monkeypatch.setitem(dispatch.REGISTRY, ApiKey.DESCRIBE_CLUSTER,
                        dispatch.HandlerSpec(spec.api_key, spec.min_version, spec.max_version,
                                             unencodable, spec.decoder))
    with caplog.at_level(logging.ERROR, logger="moldau.broker.connection"):
        wire.send(first[1] + bad[1] + after[1])
        answered = wire.read_frame_or_close("the ApiVersions before the bad response")
        assert answered is not None and int.from_bytes(answered[:4], "big") == first[0]
        # Nothing more: neither the bad response nor the next one in its place.
        assert wire.read_frame_or_close("after a response that cannot be encoded") is None
    assert any("cannot encode the response to api 60 v0" in r.getMessage() and r.exc_info
               for r in caplog.records), caplog.text


def test_a_client_id_of_32767_characters_still_gets_an_encodable_member_id(
        broker: InProcessBroker) -> None:
    client_id = "c" * 32767
    with Wire(broker.broker.bound_port(), client_id=client_id, timeout=30) as wire:
        response = wire.call(ApiKey.JOIN_GROUP, 3, {
            "group_id": "long-client", "session_timeout": 10000, "rebalance_timeout": 1000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert response["error_code"] == E.none, response
        member_id = response["member_id"]
        assert len(member_id.encode()) <= 32767 and member_id.startswith("c" * 1000)
        assert response["leader"] == member_id
        still_serves(wire)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_naming_a_topic_by_id_is_an_invalid_request(
        wire: Wire, version: int) -> None:
    topic_id = uuid.uuid4()
    response = wire.call(ApiKey.METADATA, version, {
        "topics": [{"name": None, "topic_id": topic_id}, {"name": TOPIC, "topic_id": None}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in response["topics"]] == [
        ("", topic_id, E.invalid_request), (TOPIC, None, E.invalid_request)]
    still_serves(wire)


def test_produce_to_a_topic_named_with_32767_characters_is_answered(wire: Wire) -> None:
    name = "v" * 32767
    response = wire.call(ApiKey.PRODUCE, 8, produce_body(name, 0, make_batch([b"x"])))
    [topic] = response["responses"]
    [partition] = topic["partition_responses"]
    assert partition["error_code"] != E.none, partition
    message = partition["error_message"]
    assert message is None or len(message) <= MAX_ERROR_MESSAGE, len(message)
    still_serves(wire)


def test_create_partitions_of_a_topic_named_with_32767_characters_is_answered(
        wire: Wire) -> None:
    name = "p" * 32767
    response = wire.call(ApiKey.CREATE_PARTITIONS, 1, {
        "topics": [{"name": name, "count": 2, "assignments": None}], "timeout_ms": 5000,
        "validate_only": False})
    [result] = response["results"]
    assert result["error_code"] == E.unknown_topic_or_partition, result["error_code"]
    assert name[:100] in result["error_message"]
    assert len(result["error_message"]) <= MAX_ERROR_MESSAGE
    still_serves(wire)


def test_offset_commit_for_a_group_id_no_record_key_holds_is_refused(wire: Wire) -> None:
    response = wire.call(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": "g" * LONG, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [{
            "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]})
    errors = [p["error_code"] for t in response["topics"] for p in t["partitions"]]
    assert errors == [E.invalid_group_id], response
    still_serves(wire)
    groups = wire.call(ApiKey.LIST_GROUPS, 0, {})
    assert all(len(g["group_id"]) < LONG for g in groups["groups"])


def test_delete_groups_of_a_group_id_no_record_key_holds_is_refused(wire: Wire) -> None:
    response = wire.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["d" * LONG]})
    assert [r["error_code"] for r in response["results"]] == [E.invalid_group_id]
    still_serves(wire)


def join_v6(group: str, *, instance: str | None = None, protocol: str = "range",
            protocol_type: str = "consumer") -> dict[str, Any]:
    return {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 1000,
            "member_id": "", "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": protocol, "metadata": b""}]}


@pytest.mark.parametrize("field", ["group_id", "instance", "protocol", "protocol_type"])
def test_join_group_with_strings_no_group_record_holds_is_refused(
        wire: Wire, field: str) -> None:
    if field == "group_id":
        body, error = join_v6("j" * LONG), E.invalid_group_id
    else:
        body, error = join_v6(f"join-{field}", **{field: "x" * LONG}), E.invalid_request
    response = wire.call(ApiKey.JOIN_GROUP, 6, body)
    assert response["error_code"] == error, response["error_code"]
    still_serves(wire)
    for version in (0, 2):
        groups = wire.call(ApiKey.LIST_GROUPS, version, {})
        assert all(len(g["group_id"]) < LONG and len(g["protocol_type"]) < LONG
                   for g in groups["groups"])


@pytest.mark.parametrize("field", ["member_id", "instance_id"])
def test_consumer_group_heartbeat_with_ids_no_record_holds_is_refused(
        wire: Wire, field: str) -> None:
    body: dict[str, Any] = {
        "group_id": f"kip848-{field}", "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 5000,
        "subscribed_topic_names": [TOPIC], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []}
    body[field] = "m" * LONG
    response = wire.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
    assert response["error_code"] == E.invalid_request, response
    assert "bytes long" in response["error_message"]
    still_serves(wire)
    described = wire.call(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [f"kip848-{field}"],
                                                      "include_authorized_operations": False})
    assert described["groups"][0]["members"] == []


def test_list_offsets_over_a_record_whose_timestamp_overflows_is_answered(wire: Wire) -> None:
    """Base timestamp + delta past 2^63 - 1: Kafka's long addition wraps, and so does ours,
    so ListOffsets can answer (the record's wrapped timestamp is negative: skipped)."""
    create_topic(wire, "overflowing-timestamps")
    base = (1 << 63) - 6
    records = record(0, ts_delta=10) + record(1, ts_delta=0)
    blob = batch(records, count=2, base_timestamp=base, max_timestamp=base)
    assert produce(wire, "overflowing-timestamps", 0, blob)["error_code"] == E.none
    for version in (3, 7):
        response = wire.call(ApiKey.LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": 0, "topics": [{
                "name": "overflowing-timestamps", "partitions": [{
                    "partition_index": 0, "current_leader_epoch": -1, "timestamp": 0}]}]})
        [entry] = response["topics"][0]["partitions"]
        assert (entry["error_code"], entry["offset"], entry["timestamp"]) == (E.none, 1, base)
    still_serves(wire)


def test_after_all_of_the_above_a_produce_still_works(wire: Wire) -> None:
    assert produce(wire, TOPIC, 0, make_batch([b"after"]))["error_code"] == E.none
