"""TxnVerifier: the local coordinator answers directly; a remote one gets AddPartitionsToTxn
v4 verify_only, one request in flight per broker with calls batched into the next; failures
become per-partition codes the callers map."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from moldau.broker.group.partitioning import partition_for
from moldau.broker.metadata.image import MetadataImage, PartitionState, TopicImage
from moldau.broker.txn.verification import TxnVerifier
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import (
    decode_response,
    encode_request,
    encode_response,
    request_schema,
    response_schema,
)
from moldau.wire.errors import KafkaConnectionError

E = ErrorCode
PARTITIONS = 5


def image(leaders: dict[int, int] | None = None) -> MetadataImage:
    img = MetadataImage()
    t = TopicImage("__transaction_state", uuid.uuid4())
    for p in range(PARTITIONS):
        leader = (leaders or {}).get(p, 1)
        t.partitions[p] = PartitionState(p, [1, 2, 3], [1, 2, 3], leader, 0, 0)
    img.topics_by_name[t.name] = img.topics_by_id[t.topic_id] = t
    return img


class LocalCoordinator:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def verify(self, txn_id: str, pid: int, epoch: int, tps: Any) -> dict[Any, ErrorCode]:
        self.calls.append((txn_id, pid, epoch, frozenset(tps)))
        if epoch != 3:
            raise KafkaError(E.producer_fenced)
        return {tp: E.none if tp[0] == "in" else E.invalid_txn_state for tp in tps}


class Versions:
    def require(self, api_key: int, min_version: int = 0, *, what: str = "") -> int:
        assert api_key == ApiKey.ADD_PARTITIONS_TO_TXN and min_version == 4
        return 4


class Peer:
    """A coordinator broker answering verify_only requests through kio's codec; each request
    waits for ``gate`` so calls pile up behind it."""

    def __init__(self, fail_first: bool = False) -> None:
        self.versions = Versions()
        self.requests: list[Any] = []
        self.gate = asyncio.Event()
        self.fail_first = fail_first

    async def request(self, api_key: int, body: dict[str, Any], *, version: int,
                      timeout_ms: int) -> Any:
        entity = build(request_schema(api_key, version), body, strict=True)
        encode_request(api_key, version, 1, "x", entity)
        self.requests.append(entity)
        await self.gate.wait()
        if self.fail_first:
            self.fail_first = False
            raise KafkaConnectionError("127.0.0.1:9", "closed", "connection lost")
        results = []
        for txn in entity.transactions:
            assert txn.verify_only
            topics = [{"name": t.name, "results_by_partition": [
                {"partition_index": p,
                 "partition_error_code": E.none if t.name == "in" else E.invalid_txn_state}
                for p in t.partitions]} for t in txn.topics]
            results.append({"transactional_id": txn.transactional_id, "topic_results": topics})
        schema = response_schema(api_key, version)
        frame = encode_response(api_key, version, 1, build(schema, {
            "throttle_time": 0, "error_code": 0, "results_by_transaction": results}))
        return decode_response(api_key, version, bytes(frame)[4:])[1]


class Peers:
    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.dropped = 0

    async def get(self, broker_id: int, purpose: str) -> Peer:
        assert broker_id == 2 and purpose == "txn-verification"
        return self.peer

    def drop(self, broker_id: int, purpose: str) -> None:
        self.dropped += 1


def test_local_coordinator_answers_directly() -> None:
    async def main() -> None:
        coordinator = LocalCoordinator()
        v = TxnVerifier(node_id=1, image=image(), coordinator=coordinator)
        got = await v.verify("t", 9, 3, [("in", 0), ("out", 1)])
        assert got == {("in", 0): E.none, ("out", 1): E.invalid_txn_state}
        assert await v.verify("t", 9, 2, [("in", 0)]) == {("in", 0): E.producer_fenced}
        assert await v.verify("t", 9, 3, []) == {}
        v.coordinator = None
        assert await v.verify("t", 9, 3, [("in", 0)]) == {("in", 0): E.coordinator_not_available}
        v.coordinator = Broken()
        assert await v.verify("t", 9, 3, [("in", 0)]) == {("in", 0): E.coordinator_not_available}
    asyncio.run(main())


class Broken:
    async def verify(self, *args: Any) -> dict[Any, ErrorCode]:
        raise RuntimeError("a bug")


def test_no_coordinator_partition_or_leader_is_coordinator_not_available() -> None:
    async def main() -> None:
        v = TxnVerifier(node_id=1, image=MetadataImage(), coordinator=LocalCoordinator())
        assert await v.verify("t", 9, 3, [("in", 0)]) == {("in", 0): E.coordinator_not_available}
        leaderless = image(dict.fromkeys(range(PARTITIONS), -1))
        v = TxnVerifier(node_id=1, image=leaderless, coordinator=LocalCoordinator())
        assert await v.verify("t", 9, 3, [("in", 0)]) == {("in", 0): E.coordinator_not_available}
    asyncio.run(main())


def test_remote_calls_batch_behind_the_request_in_flight() -> None:
    async def main() -> None:
        peer = Peer()
        v = TxnVerifier(node_id=1, image=image(dict.fromkeys(range(PARTITIONS), 2)),
                        peers=Peers(peer))  # type: ignore[arg-type]
        first = asyncio.ensure_future(v.verify("a", 1, 0, [("in", 0)]))
        await asyncio.sleep(0.01)
        assert len(peer.requests) == 1
        # While it is in flight: three more calls, two of them for the same transaction.
        more = [asyncio.ensure_future(v.verify("b", 2, 0, [("in", 1), ("out", 0)])),
                asyncio.ensure_future(v.verify("c", 3, 0, [("in", 2)])),
                asyncio.ensure_future(v.verify("c", 3, 0, [("in", 3)]))]
        await asyncio.sleep(0.01)
        assert len(peer.requests) == 1
        peer.gate.set()
        assert await first == {("in", 0): E.none}
        assert await more[0] == {("in", 1): E.none, ("out", 0): E.invalid_txn_state}
        assert await more[1] == {("in", 2): E.none}
        assert await more[2] == {("in", 3): E.none}
        assert len(peer.requests) == 2
        second = peer.requests[1].transactions
        assert sorted(t.transactional_id for t in second) == ["b", "c"]
        c = next(t for t in second if t.transactional_id == "c")
        assert [(t.name, list(t.partitions)) for t in c.topics] == [("in", [2, 3])]
    asyncio.run(main())


def test_remote_failure_is_network_exception_and_drops_the_connection() -> None:
    async def main() -> None:
        peer = Peer(fail_first=True)
        peers = Peers(peer)
        v = TxnVerifier(node_id=1, image=image(dict.fromkeys(range(PARTITIONS), 2)),
                        peers=peers)  # type: ignore[arg-type]
        peer.gate.set()
        assert await v.verify("a", 1, 0, [("in", 0)]) == {("in", 0): E.network_exception}
        assert peers.dropped == 1
        assert await v.verify("a", 1, 0, [("in", 0)]) == {("in", 0): E.none}
    asyncio.run(main())


def test_the_coordinator_partition_is_the_clients_choice() -> None:
    async def main() -> None:
        target = partition_for("my-txn", PARTITIONS)
        leaders = dict.fromkeys(range(PARTITIONS), 2)
        leaders[target] = 1
        coordinator = LocalCoordinator()
        v = TxnVerifier(node_id=1, image=image(leaders), coordinator=coordinator)
        assert v.coordinator_of("my-txn") == (target, 1)
        assert await v.verify("my-txn", 1, 3, [("in", 0)]) == {("in", 0): E.none}
        assert coordinator.calls
    asyncio.run(main())
