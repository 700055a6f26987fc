"""Requests a client sent just before it closed its socket are still handled (as Kafka's
Selector keeps a closed channel until the requests already read from it are processed; only
the answers are lost).

Before: ``connection_lost`` cancelled the request in progress and dropped the frames queued
behind it, so a consumer that committed and closed while a Fetch of its was parked in a long
poll lost the commit, and anything else it had sent behind that Fetch. A long-poll Fetch in
progress is still dropped (it only reads); anything else in progress gets a bounded grace
period; the broker's request memory goes back to zero on every path.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker_wire import (
    Wire,
    create_topic,
    fetch_all,
    fetch_body,
    make_batch,
    produce_body,
    request_frame,
)

from moldau.broker import connection as connection_module
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.runner import InProcessBroker

TOPIC = "closing"
GRACE_S = 1.0  # DRAIN_GRACE_S for this module: a parked JoinGroup is given up after it


@pytest.fixture(scope="module")
def node() -> Iterator[InProcessBroker]:
    # A JoinGroup waits out the initial rebalance delay: long enough to outlast GRACE_S.
    settings = {"group.initial.rebalance.delay.ms": 60_000, "offsets.topic.num.partitions": 1}
    with InProcessBroker(settings=settings) as broker:
        with Wire(broker.broker.bound_port()) as wire:
            create_topic(wire, TOPIC)
            # Create and load __consumer_offsets now (FindCoordinator creates it, as Kafka
            # does): the commits under test must not meet COORDINATOR_LOAD_IN_PROGRESS.
            found = wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": "warm-up", "key_type": 0})
            assert found["error_code"] == ErrorCode.none, found
            wait_for("the group coordinator is ready", lambda: wire.call(
                ApiKey.OFFSET_COMMIT, 8, commit_body("warm-up", 1),
            )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.none)
        yield broker


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "DRAIN_GRACE_S", GRACE_S)


def commit_body(group: str, offset: int) -> dict[str, Any]:
    """OffsetCommit v8 of a standalone consumer (no generation), partition 0 of TOPIC."""
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def committed(wire: Wire, group: str) -> int:
    answer = wire.call(ApiKey.OFFSET_FETCH, 8, {
        "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        "require_stable": True})
    [group_answer] = answer["groups"]
    assert group_answer["error_code"] == ErrorCode.none, answer
    partition = group_answer["topics"][0]["partitions"][0]
    assert partition["error_code"] == ErrorCode.none, answer
    return int(partition["committed_offset"])


def send_and_leave(port: int, frames: list[bytes], how: str) -> None:
    """Send ``frames`` in one write and leave at once, reading nothing: ``shutdown`` closes
    only the sending side (then waits for the broker to close), ``close`` the socket."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        sock.sendall(b"".join(frames))
        if how == "shutdown":
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # answers are not sent to a client that left
                pass
    finally:
        sock.close()


def frame(api: int, version: int, body: dict[str, Any]) -> bytes:
    return request_frame(api, version, body, client_id="leaving-client")


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


def drained(node: InProcessBroker, connections_before: int) -> None:
    """Every connection that left is gone and its request memory is back in the pool."""
    wait_for("the connections that left are dropped",
             lambda: node.call(lambda: len(node.broker.connections)) <= connections_before)
    wait_for("the request memory pool is back to zero",
             lambda: node.call(lambda: node.broker.memory_pool.used) == 0)


def open_connections(node: InProcessBroker) -> int:
    return node.call(lambda: len(node.broker.connections))


@pytest.mark.parametrize("how", ["shutdown", "close"])
def test_an_offset_commit_sent_just_before_leaving_is_kept(node: InProcessBroker,
                                                           how: str) -> None:
    port = node.broker.bound_port()
    before = open_connections(node)
    group = f"leaving-{how}"
    send_and_leave(port, [frame(ApiKey.OFFSET_COMMIT, 8, commit_body(group, 42))], how)
    with Wire(port) as wire:
        wait_for("the commit is visible", lambda: committed(wire, group) == 42)
    drained(node, before)


@pytest.mark.parametrize("how", ["shutdown", "close"])
def test_requests_behind_a_long_poll_are_handled_in_order(node: InProcessBroker,
                                                          how: str) -> None:
    """What a consumer does when it closes: a Fetch is parked (60 s here), then it commits
    and leaves. The Fetch only reads, so it is given up at once, not waited for; the commit,
    Produce and commit queued behind it used to be dropped with it. The memory of the frame
    it was still sending goes back to the pool."""
    port = node.broker.bound_port()
    before = open_connections(node)
    group = f"behind-a-long-poll-{how}"
    value = f"sent by a client that left ({how})".encode()
    end = fetch_all(port, TOPIC).high_watermark
    started = time.monotonic()
    send_and_leave(port, [
        frame(ApiKey.FETCH, 12, fetch_body(TOPIC, 0, end, max_wait_ms=60_000, min_bytes=1)),
        frame(ApiKey.OFFSET_COMMIT, 8, commit_body(group, 7)),
        frame(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, make_batch([value]), acks=1)),
        frame(ApiKey.OFFSET_COMMIT, 8, commit_body(group, 8)),
        (1 << 20).to_bytes(4, "big") + bytes(100_000),  # a frame cut off: never handled
    ], how)
    with Wire(port) as wire:
        wait_for("the last commit is visible", lambda: committed(wire, group) == 8)
    assert value in [r[2] for r in fetch_all(port, TOPIC).records]
    drained(node, before)
    assert time.monotonic() - started < 50, "the long poll was waited for"


def test_parked_joins_are_given_up_after_the_grace_period(node: InProcessBroker) -> None:
    """JoinGroups parked in the initial rebalance delay (60 s here) hold a connection whose
    client left only for DRAIN_GRACE_S: the first is given up then, the second (queued behind
    it) at once, and the Produce behind both is handled."""
    port = node.broker.bound_port()
    before = open_connections(node)
    members = {}
    with Wire(port) as wire:
        for group in ("parked-a", "parked-b"):
            first = wire.call(ApiKey.JOIN_GROUP, 5, join_body(group, ""))
            assert first["error_code"] == ErrorCode.member_id_required, first
            members[group] = first["member_id"]
    value = b"behind parked joins"
    started = time.monotonic()
    send_and_leave(port, [
        frame(ApiKey.JOIN_GROUP, 5, join_body("parked-a", members["parked-a"])),
        frame(ApiKey.JOIN_GROUP, 5, join_body("parked-b", members["parked-b"])),
        frame(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, make_batch([value]), acks=1)),
    ], "shutdown")
    wait_for("the produce behind the joins is handled",
             lambda: value in [r[2] for r in fetch_all(port, TOPIC).records])
    assert time.monotonic() - started >= GRACE_S * 0.9, "the first join was not waited for"
    drained(node, before)


def join_body(group: str, member_id: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 60_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
