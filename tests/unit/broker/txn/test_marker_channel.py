"""TxnMarkerChannel: markers go to each partition's leader (the local MarkerWriter or a peer
by WriteTxnMarkers), answers follow the retry table of design §7.2, and the coordinator hears
of a transaction only once every partition has its marker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from moldau.broker.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from moldau.broker.metadata.records import BrokerEndpoint
from moldau.broker.txn import channel as channel_module
from moldau.broker.txn.channel import PendingMarkers, TxnMarker, TxnMarkerChannel
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import decode_response, encode_request, request_schema
from moldau.wire.errors import KafkaConnectionError

E = ErrorCode
NODE = 1


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel_module, "RETRY_FIRST_S", 0.01)
    monkeypatch.setattr(channel_module, "RETRY_MAX_S", 0.05)


def image(leaders: Mapping[tuple[str, int], int]) -> MetadataImage:
    img = MetadataImage()
    for (topic, index), leader in leaders.items():
        t = img.topics_by_name.get(topic)
        if t is None:
            t = TopicImage(topic, uuid.uuid4())
            img.topics_by_name[topic] = img.topics_by_id[t.topic_id] = t
        t.partitions[index] = PartitionState(index, [1, 2, 3], [1, 2, 3], leader, 0, 0)
    for b in (1, 2, 3):
        img.brokers[b] = BrokerRegistration(b, uuid.uuid4(),
                                            [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9)],
                                            None, False)
    return img


class FakeWriter:
    """The local MarkerWriter: answers from a script per (pid, tp), NONE when it runs out."""

    def __init__(self, script: Mapping[tuple[str, int], list[ErrorCode]] | None = None) -> None:
        self.calls: list[list[TxnMarker]] = []
        self.script = {k: list(v) for k, v in (script or {}).items()}

    async def write(self, markers: Sequence[TxnMarker]) -> dict[Any, ErrorCode]:
        self.calls.append(list(markers))
        out = {}
        for m in markers:
            for tp in m.tps:
                answers = self.script.get(tp)
                out[(m.pid, tp)] = answers.pop(0) if answers else E.none
        return out


class Completions:
    def __init__(self, answers: list[Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.answers = list(answers or [])
        self.event = asyncio.Event()

    async def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        self.event.set()
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer


def pending(tps: Sequence[tuple[str, int]], *, txn_id: str = "tx", pid: int = 7,
            commit: bool = True, coord_partition: int = 3) -> PendingMarkers:
    return PendingMarkers(txn_id, coord_partition, 5, pid, 2, commit, frozenset(tps))


async def until(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def run(coro: Any) -> None:
    asyncio.run(coro)


def test_local_partitions_get_one_marker_and_the_coordinator_completes() -> None:
    async def main() -> None:
        writer, done = FakeWriter(), Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1, ("a", 1): 1}),
                              writer=writer, complete=done)
        ch.enqueue(pending([("a", 0), ("a", 1)]))
        await until(lambda: done.calls)
        assert done.calls == [("tx", 7, 2, True, 5)]
        assert writer.calls == [[TxnMarker(7, 2, True, 5, (("a", 0), ("a", 1)))]]
        assert ch.pending() == []
        await ch.close()
    run(main())


def test_retriable_answers_retry_until_the_marker_lands() -> None:
    async def main() -> None:
        writer = FakeWriter({("a", 0): [E.not_leader_or_follower, E.request_timed_out,
                                        E.not_enough_replicas, E.coordinator_load_in_progress,
                                        E.corrupt_message]})
        done = Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1, ("b", 0): 1}),
                              writer=writer, complete=done)
        ch.enqueue(pending([("a", 0), ("b", 0)], commit=False))
        await until(lambda: done.calls)
        assert done.calls == [("tx", 7, 2, False, 5)]
        assert len(writer.calls) == 6  # both at first, then a-0 alone five more times
        assert all(m.tps == (("a", 0),) for call in writer.calls[1:] for m in call)
        await ch.close()
    run(main())


@pytest.mark.parametrize("code", [E.invalid_producer_epoch, E.transaction_coordinator_fenced])
def test_superseded_transactions_stop_without_completion(code: ErrorCode) -> None:
    async def main() -> None:
        writer, done = FakeWriter({("a", 0): [code]}), Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1}), writer=writer,
                              complete=done)
        ch.enqueue(pending([("a", 0)]))
        await until(lambda: writer.calls)
        await asyncio.sleep(0.1)
        assert done.calls == [] and ch.pending() == [] and len(writer.calls) == 1
        await ch.close()
    run(main())


def test_dropped_partitions_and_gone_topics_do_not_hold_the_transaction() -> None:
    async def main() -> None:
        writer, done = FakeWriter({("a", 0): [E.unsupported_for_message_format]}), Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1}), writer=writer,
                              complete=done)
        ch.enqueue(pending([("a", 0), ("gone", 0)]))
        await until(lambda: done.calls)
        assert [m.tps for call in writer.calls for m in call] == [(("a", 0),)]
        await ch.close()
    run(main())


def test_leaderless_partition_waits_for_a_leader() -> None:
    async def main() -> None:
        img = image({("a", 0): -1})
        writer, done = FakeWriter(), Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=lambda: img, writer=writer, complete=done)
        ch.enqueue(pending([("a", 0)]))
        await asyncio.sleep(0.2)  # several backoffs: still no leader, nothing written
        assert writer.calls == [] and done.calls == [] and len(ch.pending()) == 1
        img.topics_by_name["a"].partitions[0].leader = NODE
        ch.wake()
        await until(lambda: done.calls)
        assert len(writer.calls) == 1
        await ch.close()
    run(main())


def test_remove_partition_forgets_its_transactions() -> None:
    async def main() -> None:
        writer = FakeWriter({("a", 0): [E.not_leader_or_follower] * 1000})
        done = Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1}), writer=writer,
                              complete=done)
        ch.enqueue(pending([("a", 0)], coord_partition=3, txn_id="x"))
        ch.enqueue(pending([("a", 0)], coord_partition=4, txn_id="y", pid=8))
        await until(lambda: len(writer.calls) >= 2)
        ch.remove_partition(3)
        assert [p.txn_id for p in ch.pending()] == ["y"]
        calls = len(writer.calls)
        await asyncio.sleep(0.2)
        assert all(m.pid == 8 for call in writer.calls[calls + 1:] for m in call)
        await ch.close()
    run(main())


def test_one_marker_per_producer_per_request_and_reenqueue_replaces() -> None:
    async def main() -> None:
        writer, done = FakeWriter(), Completions()
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1, ("a", 1): 1}),
                              writer=writer, complete=done)
        ch.enqueue(pending([("a", 0)], txn_id="x", pid=1))
        ch.enqueue(pending([("a", 1)], txn_id="y", pid=2))
        # The same transaction again (a new coordinator epoch): replaces the first.
        ch.enqueue(PendingMarkers("x", 3, 6, 1, 2, True, frozenset({("a", 0)})))
        await until(lambda: len(done.calls) == 2)
        assert sorted(done.calls) == [("x", 1, 2, True, 6), ("y", 2, 2, True, 5)]
        first = writer.calls[0]
        assert sorted(m.pid for m in first) == [1, 2]
        assert all(m.coordinator_epoch == 6 for call in writer.calls for m in call
                   if m.pid == 1)
        await ch.close()
    run(main())


def test_completion_retries_coordinator_not_available_and_gives_up_on_not_coordinator(
) -> None:
    async def main() -> None:
        done = Completions([E.coordinator_not_available,
                            KafkaError(E.coordinator_not_available), None])
        ch = TxnMarkerChannel(node_id=NODE, image=image({("a", 0): 1}), writer=FakeWriter(),
                              complete=done)
        ch.enqueue(pending([("a", 0)]))
        await until(lambda: len(done.calls) == 3)
        await asyncio.sleep(0.1)
        assert len(done.calls) == 3
        gone = Completions([KafkaError(E.not_coordinator), None])
        ch.complete = gone
        ch.enqueue(pending([("a", 0)], txn_id="z"))
        await until(lambda: gone.calls)
        await asyncio.sleep(0.1)
        assert len(gone.calls) == 1
        await ch.close()
    run(main())


class FakeVersions:
    def require(self, api_key: int, min_version: int = 0) -> int:
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        return 2


class FakeConnection:
    """A peer that answers WriteTxnMarkers through the real codec (request encoded, response
    decoded by kio) from a per-(pid, tp) script."""

    def __init__(self, script: dict[tuple[str, int], list[ErrorCode]]) -> None:
        self.versions = FakeVersions()
        self.script = script
        self.requests: list[Any] = []

    async def request(self, api_key: int, body: dict[str, Any], *, version: int,
                      timeout_ms: int) -> Any:
        from moldau.protocol.entities import build
        entity = build(request_schema(api_key, version), body, strict=True)
        encode_request(api_key, version, 1, "x", entity)  # it must encode
        self.requests.append(entity)
        return _answer(entity, self.script, version)


def _answer(entity: Any, script: dict[tuple[str, int], list[ErrorCode]], version: int) -> Any:
    from moldau.protocol.entities import build
    from moldau.protocol.messages import encode_response, response_schema
    markers = []
    for m in entity.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                answers = script.get((t.name, p))
                code = answers.pop(0) if answers else E.none
                parts.append({"partition_index": p, "error_code": code})
            topics.append({"name": t.name, "partitions": parts})
        markers.append({"producer_id": m.producer_id, "topics": topics})
    schema = response_schema(ApiKey.WRITE_TXN_MARKERS, version)
    body = build(schema, {"markers": markers})
    frame = encode_response(ApiKey.WRITE_TXN_MARKERS, version, 1, body)
    return decode_response(ApiKey.WRITE_TXN_MARKERS, version, bytes(frame)[4:])[1]


class FakePeers:
    def __init__(self, conns: dict[int, Any]) -> None:
        self.conns = conns
        self.dropped: list[int] = []

    async def get(self, broker_id: int, purpose: str) -> Any:
        conn = self.conns[broker_id]
        if isinstance(conn, list):
            conn = conn.pop(0)
        if isinstance(conn, Exception):
            raise conn
        return conn

    def drop(self, broker_id: int, purpose: str) -> None:
        self.dropped.append(broker_id)


def test_remote_leaders_get_write_txn_markers_and_connection_failures_retry() -> None:
    async def main() -> None:
        peer2 = FakeConnection({("b", 0): [E.not_enough_replicas]})
        peer3 = FakeConnection({})
        refused = KafkaConnectionError("127.0.0.1:9", "refused", "refused")
        peers = FakePeers({2: peer2, 3: [refused, peer3]})
        writer, done = FakeWriter(), Completions()
        ch = TxnMarkerChannel(node_id=NODE,
                              image=image({("a", 0): 1, ("b", 0): 2, ("b", 1): 2,
                                           ("c", 0): 3}),
                              writer=writer, peers=peers,  # type: ignore[arg-type]
                              complete=done)
        ch.enqueue(pending([("a", 0), ("b", 0), ("b", 1), ("c", 0)]))
        await until(lambda: done.calls)
        assert done.calls == [("tx", 7, 2, True, 5)]
        assert [m.tps for m in writer.calls[0]] == [(("a", 0),)]
        first = peer2.requests[0].markers[0]
        assert (first.producer_id, first.producer_epoch, first.transaction_result,
                first.coordinator_epoch) == (7, 2, True, 5)
        assert [(t.name, list(t.partition_indexes)) for t in first.topics] == [("b", [0, 1])]
        assert [list(t.partition_indexes) for t in peer2.requests[1].markers[0].topics] == [[0]]
        assert len(peer3.requests) == 1
        await ch.close()
    run(main())
