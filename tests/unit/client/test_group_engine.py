"""The generic join engine's request flow and error rules against a scripted coordinator
(no sockets): protocol type and metadata in the requests, the leader's assignment,
MEMBER_ID_REQUIRED, rejoins, coordinator errors, fatal answers with the protocol's hint,
heartbeat answers, local session expiry, LeaveGroup."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace as NS
from typing import Any

import pytest

from moldau.client.errors import BrokerError, KafkaConnectionError
from moldau.client.group.engine import (
    GroupEngine,
    JoinedMember,
    JoinSettings,
    State,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


class Coordinator:
    """Answers requests from a script: ``{api_key: [answer or exception, ...]}``."""

    def __init__(self, script: dict[int, list[Any]]) -> None:
        self.group_id = "g"
        self.script = script
        self.sent: list[tuple[int, dict[str, Any]]] = []
        self.unknown_marks = 0
        self.known = True

    async def connection(self) -> Any:
        return NS(versions=NS(require=lambda *a, **k: 5))

    async def request(self, api_key: int, body: dict[str, Any], **_kw: Any) -> Any:
        self.sent.append((api_key, body))
        answer = self.script[api_key].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def mark_unknown(self) -> None:
        self.unknown_marks += 1


class Protocol:
    protocol_type = "sr"
    fatal_hints = {ErrorCode.inconsistent_group_protocol: "no common sr protocol"}

    def __init__(self) -> None:
        self.members: list[JoinedMember] = []

    async def metadata(self) -> list[tuple[str, bytes]]:
        return [("v0", b'{"host":"h"}')]

    async def assign(self, protocol: str, members: Sequence[JoinedMember]) -> dict[str, bytes]:
        self.members = list(members)
        return {m.member_id: f"{protocol}->{m.member_id}".encode() for m in members}


def join_answer(code: int = 0, member: str = "m1", leader: str = "m1", generation: int = 4,
                members: Sequence[Any] = ()) -> Any:
    return NS(error_code=code, member_id=member, leader=leader, generation_id=generation,
              protocol_name="v0", members=list(members))


def sync_answer(code: int = 0, assignment: bytes = b"A") -> Any:
    return NS(error_code=code, assignment=assignment)


def engine(script: dict[int, list[Any]], **settings: Any) -> tuple[GroupEngine, Coordinator,
                                                                   list[Any]]:
    coordinator = Coordinator(script)
    events: list[Any] = []
    eng = GroupEngine(coordinator, Protocol(), JoinSettings(  # type: ignore[arg-type]
        session_timeout_ms=settings.pop("session_timeout_ms", 1000),
        rebalance_timeout_ms=2000, heartbeat_interval_ms=10, retry_backoff_ms=1,
        retry_backoff_max_ms=2, **settings),
        wake=lambda: events.append("wake"), on_fatal=events.append)
    return eng, coordinator, events


def test_leader_joins_with_the_given_member_id_and_assigns() -> None:
    members = [NS(member_id="m1", group_instance_id=None, metadata=b"one"),
               NS(member_id="m2", group_instance_id="i2", metadata=b"two")]
    eng, coord, _events = engine({
        ApiKey.JOIN_GROUP: [join_answer(ErrorCode.member_id_required, member="m1", leader=""),
                            join_answer(members=members)],
        ApiKey.SYNC_GROUP: [sync_answer(assignment=b"v0->m1")]})
    joined = asyncio.run(eng.join())
    assert (joined.generation, joined.member_id, joined.leader_id, joined.protocol,
            joined.assignment, joined.is_leader) == (4, "m1", "m1", "v0", b"v0->m1", True)
    (k1, first), (k2, second), (k3, sync) = coord.sent
    assert (k1, k2, k3) == (ApiKey.JOIN_GROUP, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP)
    assert (first["member_id"], second["member_id"]) == ("", "m1")
    assert first["protocol_type"] == "sr" == sync["protocol_type"]
    assert first["protocols"] == [{"name": "v0", "metadata": b'{"host":"h"}'}]
    assert eng.protocol.members == [JoinedMember("m1", None, b"one"),  # type: ignore[attr-defined]
                                    JoinedMember("m2", "i2", b"two")]
    assert sync["assignments"] == [{"member_id": "m1", "assignment": b"v0->m1"},
                                   {"member_id": "m2", "assignment": b"v0->m2"}]


def test_followers_send_no_assignment_and_errors_rejoin() -> None:
    eng, coord, _events = engine({
        ApiKey.JOIN_GROUP: [join_answer(ErrorCode.not_coordinator),
                            join_answer(member="m2", leader="m1"),
                            join_answer(member="m3", leader="m1")],
        ApiKey.SYNC_GROUP: [sync_answer(ErrorCode.unknown_member_id), sync_answer()]})
    eng.member_id = "old"
    joined = asyncio.run(eng.join())
    assert coord.unknown_marks == 1  # NOT_COORDINATOR: look the coordinator up again
    joins = [body["member_id"] for key, body in coord.sent if key == ApiKey.JOIN_GROUP]
    assert joins == ["old", "old", ""]  # UNKNOWN_MEMBER_ID forgot the member id
    syncs = [body["assignments"] for key, body in coord.sent if key == ApiKey.SYNC_GROUP]
    assert syncs == [[], []]
    assert (joined.member_id, joined.is_leader) == ("m3", False)


def test_fatal_answers_raise_with_the_protocols_hint() -> None:
    eng, _coord, _events = engine({
        ApiKey.JOIN_GROUP: [join_answer(ErrorCode.inconsistent_group_protocol)]})
    with pytest.raises(BrokerError, match="no common sr protocol") as raised:
        asyncio.run(eng.join())
    assert raised.value.code == ErrorCode.inconsistent_group_protocol
    eng, _coord, _events = engine({
        ApiKey.JOIN_GROUP: [join_answer(ErrorCode.invalid_session_timeout)]})
    with pytest.raises(BrokerError, match=r"group\.min\.session\.timeout\.ms"):
        asyncio.run(eng.join())


async def _heartbeats(eng: GroupEngine, until: Any) -> None:
    task = asyncio.get_running_loop().create_task(eng.heartbeat_loop())
    try:
        async with asyncio.timeout(5):
            while not until():
                await asyncio.sleep(0.005)
    finally:
        task.cancel()


def test_heartbeat_answers() -> None:
    eng, _coord, events = engine({ApiKey.HEARTBEAT: [
        NS(error_code=0), NS(error_code=ErrorCode.rebalance_in_progress),
        NS(error_code=ErrorCode.unknown_member_id)]})
    eng.member_id, eng.generation, eng.rejoin_needed = "m1", 3, False
    eng.complete()
    asyncio.run(_heartbeats(eng, lambda: eng.state is State.UNJOINED))
    assert events == ["wake", "wake"]  # a rebalance, then the lost membership
    assert (eng.member_id, eng.generation, eng.lost, eng.rejoin_needed) == ("", -1, True, True)

    eng, _coord, events = engine(
        {ApiKey.HEARTBEAT: [NS(error_code=ErrorCode.fenced_instance_id)]}, instance_id="i1")
    eng.member_id = "m1"
    eng.complete()
    asyncio.run(_heartbeats(eng, lambda: bool(events)))
    (fatal,) = events
    assert isinstance(fatal, BrokerError) and fatal.code == ErrorCode.fenced_instance_id


def test_unanswered_heartbeats_expire_the_membership_locally_when_asked() -> None:
    down = [KafkaConnectionError("h:1", "closed", "down") for _ in range(500)]
    eng, coord, _events = engine({ApiKey.HEARTBEAT: list(down)}, session_timeout_ms=100,
                                 expire_locally=True)
    eng.member_id = "m1"
    eng.complete()
    asyncio.run(_heartbeats(eng, lambda: eng.lost))
    assert eng.state is State.UNJOINED and coord.unknown_marks >= 1
    # Without expire_locally (the consumer) the member keeps its assignment meanwhile.
    eng, coord, _events = engine({ApiKey.HEARTBEAT: list(down)}, session_timeout_ms=100)
    eng.member_id = "m1"
    eng.complete()
    asyncio.run(_heartbeats(eng, lambda: coord.unknown_marks >= 1))
    assert eng.state is State.STABLE and not eng.lost


def test_leave_group_is_sent_by_dynamic_members_only() -> None:
    eng, coord, _events = engine({ApiKey.LEAVE_GROUP: [NS(error_code=0)]})
    eng.member_id, eng.generation = "m1", 2
    asyncio.run(eng.leave("stopping"))
    assert [k for k, _b in coord.sent] == [ApiKey.LEAVE_GROUP]
    assert (eng.member_id, eng.generation, eng.state) == ("", -1, State.UNJOINED)
    eng, coord, _events = engine({}, instance_id="static-1")
    eng.member_id = "m1"
    asyncio.run(eng.leave("stopping"))
    assert coord.sent == [] and eng.member_id == "m1"  # its session keeps its assignment
