"""Every group API at every version served, on the wire, against an in-process broker.

Real clients each use one version per API (tests/integration/test_groups_clients*.py); this
module sends kio-encoded requests for every version Moldau advertises, so each response
encodes and carries what that version defines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, create_topic

from moldau.protocol.api_keys import ApiKey as K
from moldau.protocol.entities import to_ms
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import InProcessBroker

SETTINGS = {"group.min.session.timeout.ms": 1000, "offsets.topic.num.partitions": 3,
            "group.consumer.heartbeat.interval.ms": 700}


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings=SETTINGS) as b:
        with Wire(b.broker.bound_port()) as w:
            create_topic(w, "t")  # commits name it: Kafka refuses offsets of unknown topics
        yield b


@pytest.fixture
def wire(broker: InProcessBroker) -> Iterator[Wire]:
    with Wire(broker.broker.bound_port()) as w:
        yield w


def find(wire: Wire, version: int, key: str, key_type: int = 0) -> list[dict[str, Any]]:
    if version >= 4:
        got = wire.call(K.FIND_COORDINATOR, version,
                        {"key_type": key_type, "coordinator_keys": [key]})
        return got["coordinators"]
    body: dict[str, Any] = {"key": key}
    if version >= 1:
        body["key_type"] = key_type
    return [wire.call(K.FIND_COORDINATOR, version, body)]


def test_find_coordinator_every_version(broker: InProcessBroker, wire: Wire) -> None:
    port = broker.broker.bound_port()
    for version in range(7):
        [answer] = find(wire, version, f"group-{version}")
        assert answer["error_code"] == E.none, (version, answer)
        assert (answer["node_id"], answer["host"], answer["port"]) == (1, "127.0.0.1", port)
    batched = wire.call(K.FIND_COORDINATOR, 4, {"key_type": 0,
                                                "coordinator_keys": ["a", "b", "c"]})
    assert [c["key"] for c in batched["coordinators"]] == ["a", "b", "c"]
    # key type 1: the transaction coordinator (issue 14), this broker on a single node
    [txn] = find(wire, 3, "txn-id", key_type=1)
    assert (txn["error_code"], txn["node_id"], txn["port"]) == (E.none, 1, port), txn
    [bad] = find(wire, 6, "x", key_type=7)
    assert bad["error_code"] == E.invalid_request


def test_find_coordinator_answers_with_the_listener_of_the_request() -> None:
    settings = {**SETTINGS,
                "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT"}
    with InProcessBroker(settings=settings) as b:
        external = b.broker.bound_port("EXTERNAL")
        assert external != b.broker.bound_port("PLAINTEXT")
        with Wire(external) as w:
            [answer] = find(w, 3, "some-group")
            assert answer["port"] == external


def join(wire: Wire, version: int, group: str, member_id: str = "",
         instance: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"group_id": group, "session_timeout": 10_000,
                            "rebalance_timeout": 10_000, "member_id": member_id,
                            "group_instance_id": instance, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b"\x00\x00sub"}]}
    return wire.call(K.JOIN_GROUP, version, body)


def joined_member(wire: Wire, version: int, group: str) -> dict[str, Any]:
    first = join(wire, version, group)
    if version >= 4:
        assert first["error_code"] == E.member_id_required
        first = join(wire, version, group, first["member_id"])
    assert first["error_code"] == E.none, first
    return first


def test_classic_group_lifecycle_every_version(wire: Wire) -> None:
    for version in range(8):
        group = f"classic-v{version}"
        joined = joined_member(wire, version, group)
        member, generation = joined["member_id"], joined["generation_id"]
        assert generation == 1 and joined["leader"] == member
        assert joined["members"][0]["metadata"] == b"\x00\x00sub"
        if version >= 7:
            assert joined["protocol_type"] == "consumer"
        sync_version = min(version, 5)
        body: dict[str, Any] = {"group_id": group, "generation_id": generation,
                                "member_id": member,
                                "assignments": [{"member_id": member, "assignment": b"A"}]}
        if sync_version >= 5:
            body.update(protocol_type="consumer", protocol_name="range")
        synced = wire.call(K.SYNC_GROUP, sync_version, body)
        assert synced["error_code"] == E.none and synced["assignment"] == b"A"
        hb_version = min(version, 4)
        beat = wire.call(K.HEARTBEAT, hb_version, {"group_id": group,
                                                   "generation_id": generation,
                                                   "member_id": member})
        assert beat["error_code"] == E.none
        stale = wire.call(K.HEARTBEAT, hb_version, {"group_id": group,
                                                    "generation_id": generation + 1,
                                                    "member_id": member})
        assert stale["error_code"] == E.illegal_generation
        leave_version = min(version, 5)
        if leave_version >= 3:
            left = wire.call(K.LEAVE_GROUP, leave_version, {
                "group_id": group, "members": [{"member_id": member},
                                               {"member_id": "ghost"}]})
            assert left["error_code"] == E.none
            assert [m["error_code"] for m in left["members"]] == [E.none, E.unknown_member_id]
        else:
            left = wire.call(K.LEAVE_GROUP, leave_version, {"group_id": group,
                                                            "member_id": member})
            assert left["error_code"] == E.none
        after = wire.call(K.HEARTBEAT, hb_version, {"group_id": group,
                                                    "generation_id": generation,
                                                    "member_id": member})
        assert after["error_code"] == E.unknown_member_id


def commit_body(version: int, group: str, offset: int, generation: int = -1,
                member: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"group_id": group, "generation_id_or_member_epoch": generation,
                            "member_id": member, "topics": [{"name": "t", "partitions": [
                                {"partition_index": 0, "committed_offset": offset,
                                 "committed_leader_epoch": 4,
                                 "committed_metadata": f"m{offset}"}]}]}
    if version <= 4:
        body["retention_time"] = -1
    return body


def fetched(wire: Wire, version: int, group: str) -> tuple[int, int, str]:
    if version >= 8:
        got = wire.call(K.OFFSET_FETCH, version, {
            "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": "t", "partition_indexes": [0]}]}],
            "require_stable": True})
        partition = got["groups"][0]["topics"][0]["partitions"][0]
    else:
        got = wire.call(K.OFFSET_FETCH, version, {
            "group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}],
            "require_stable": True})
        partition = got["topics"][0]["partitions"][0]
    assert partition["error_code"] == E.none
    return (partition["committed_offset"], partition.get("committed_leader_epoch", -1),
            partition["metadata"])


def test_offset_commit_and_fetch_every_version(wire: Wire) -> None:
    for version in range(2, 10):
        group = f"offsets-v{version}"
        got = wire.call(K.OFFSET_COMMIT, version, commit_body(version, group, 10 + version))
        assert got["topics"][0]["partitions"][0]["error_code"] == E.none
        for fetch_version in range(1, 10):
            offset, epoch, metadata = fetched(wire, fetch_version, group)
            assert offset == 10 + version and metadata == f"m{10 + version}"
            if fetch_version >= 5:
                assert epoch == (4 if version >= 6 else -1)
    # All committed partitions (null topics) and several groups in one request.
    both = wire.call(K.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "offsets-v2", "topics": None},
        {"group_id": "unknown-group", "topics": None}], "require_stable": False})
    assert [len(g["topics"]) for g in both["groups"]] == [1, 0]
    # A commit from a member of a group it is not in.
    member_group = "offsets-member"
    joined = joined_member(wire, 5, member_group)
    bad = wire.call(K.OFFSET_COMMIT, 8, commit_body(8, member_group, 1, joined["generation_id"],
                                                    "not-a-member"))
    assert bad["topics"][0]["partitions"][0]["error_code"] == E.unknown_member_id
    too_long = commit_body(8, "meta", 1)
    too_long["topics"][0]["partitions"][0]["committed_metadata"] = "x" * 5000
    got = wire.call(K.OFFSET_COMMIT, 8, too_long)
    assert got["topics"][0]["partitions"][0]["error_code"] == E.offset_metadata_too_large


def test_describe_list_delete_every_version(wire: Wire) -> None:
    joined = joined_member(wire, 5, "described")
    wire.call(K.SYNC_GROUP, 3, {"group_id": "described", "generation_id": 1,
                                "member_id": joined["member_id"],
                                "assignments": [{"member_id": joined["member_id"],
                                                 "assignment": b"ASSIGNED"}]})
    wire.call(K.OFFSET_COMMIT, 8, commit_body(8, "empty-one", 1))
    for version in range(6):
        got = wire.call(K.DESCRIBE_GROUPS, version, {"groups": ["described", "nope"],
                                                     "include_authorized_operations": True})
        described, unknown = got["groups"]
        assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
        assert described["members"][0]["member_assignment"] == b"ASSIGNED"
        assert described["members"][0]["client_host"] == "/127.0.0.1"
        assert unknown["group_state"] == "Dead" and unknown["error_code"] == E.none
        if version >= 3:
            assert described["authorized_operations"] > 0
    for version in range(6):
        body: dict[str, Any] = {}
        if version >= 4:
            body["states_filter"] = ["Stable"]
        if version >= 5:
            body["types_filter"] = ["classic"]
        got = wire.call(K.LIST_GROUPS, version, body)
        names = {g["group_id"] for g in got["groups"]}
        assert "described" in names
        assert ("empty-one" in names) == (version < 4)
    deleted = wire.call(K.DELETE_GROUPS, 0, {"groups_names": ["described", "empty-one", "zz"]})
    assert [r["error_code"] for r in deleted["results"]] == \
        [E.non_empty_group, E.none, E.group_id_not_found]
    for version in (1, 2):
        wire.call(K.OFFSET_COMMIT, 8, commit_body(8, f"del-{version}", 1))
        got = wire.call(K.DELETE_GROUPS, version, {"groups_names": [f"del-{version}"]})
        assert got["results"][0]["error_code"] == E.none


def test_offset_delete(wire: Wire) -> None:
    wire.call(K.OFFSET_COMMIT, 8, commit_body(8, "od", 3))
    got = wire.call(K.OFFSET_DELETE, 0, {"group_id": "od", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert got["error_code"] == E.none
    assert got["topics"][0]["partitions"][0]["error_code"] == E.none
    assert fetched(wire, 8, "od")[0] == -1
    missing = wire.call(K.OFFSET_DELETE, 0, {"group_id": "od-none", "topics": []})
    assert missing["error_code"] == E.group_id_not_found


def consumer_heartbeat(wire: Wire, version: int, body: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {"instance_id": None, "rack_id": None, "rebalance_timeout": -1,
                            "subscribed_topic_names": None, "server_assignor": None,
                            "topic_partitions": None}
    if version >= 1:
        base["subscribed_topic_regex"] = None
    return wire.call(K.CONSUMER_GROUP_HEARTBEAT, version, {**base, **body})


def test_consumer_group_heartbeat_and_describe_every_version(wire: Wire) -> None:
    create_topic(wire, "kip848", 4)
    for version in (0, 1):
        group = f"cg-v{version}"
        member_id = "" if version == 0 else f"member-{version}"
        got = consumer_heartbeat(wire, version, {
            "group_id": group, "member_id": member_id, "member_epoch": 0,
            "rebalance_timeout": 30_000, "subscribed_topic_names": ["kip848"],
            "topic_partitions": []})
        assert got["error_code"] == E.none, got
        assert got["member_epoch"] == 1 and to_ms(got["heartbeat_interval"]) == 700
        assert got["member_id"] if version == 0 else got["member_id"] == member_id
        assigned = got["assignment"]["topic_partitions"]
        assert sorted(assigned[0]["partitions"]) == [0, 1, 2, 3]
        for describe_version in (0, 1):
            described = wire.call(K.CONSUMER_GROUP_DESCRIBE, describe_version, {
                "group_ids": [group, "nope"], "include_authorized_operations": False})
            cg, nope = described["groups"]
            assert cg["group_state"] == "Stable" and cg["group_epoch"] == 1
            assert cg["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == \
                "kip848"
            assert nope["error_code"] == E.group_id_not_found
        left = consumer_heartbeat(wire, version, {"group_id": group,
                                                  "member_id": got["member_id"],
                                                  "member_epoch": -1})
        assert left["error_code"] == E.none and left["member_epoch"] == -1
    bad = consumer_heartbeat(wire, 1, {"group_id": "cg-bad", "member_id": "m",
                                       "member_epoch": 0, "rebalance_timeout": 1000,
                                       "subscribed_topic_regex": "(", "topic_partitions": []})
    assert bad["error_code"] == E.invalid_regular_expression and bad["error_message"]
