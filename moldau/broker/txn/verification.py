"""Asking the transaction coordinator whether partitions are in a transaction: :class:`TxnVerifier`.

KIP-890 part 1 (Kafka's ``AddPartitionsToTxnManager``). Before a transactional producer's
first batch on a partition is appended, the partition's leader checks with the transaction's
coordinator that the producer added the partition to its ongoing transaction (a hanging
transaction otherwise: a late or stray batch would open a transaction no coordinator knows
of, holding the last stable offset forever). TxnOffsetCommit asks the same for its
``__consumer_offsets`` partition.

``verify(txn_id, pid, epoch, tps) -> {tp: ErrorCode}`` finds the coordinator as clients do:
the ``__transaction_state`` partition ``abs(javaHash(txn_id)) % partitions`` and its leader in
the image. When this broker leads it, the local coordinator answers directly
(``TransactionCoordinator.verify``). Otherwise AddPartitionsToTxn v4-5 with ``verify_only``
goes to the leader over :class:`~..peers.PeerConnections`: one request in flight per
coordinator broker, the calls that arrive meanwhile batched into the next (one entry per
transactional id; a second call for the same id with another producer id or epoch waits for
the request after).

Answers are the coordinator's per partition: NONE (in the transaction), INVALID_TXN_STATE
(not added), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH (an older
epoch), CONCURRENT_TRANSACTIONS (the transaction is completing), NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE (no coordinator to ask now: also
when the metadata has no ``__transaction_state`` or no leader for the partition), and
NETWORK_EXCEPTION when the coordinator's broker could not be reached or did not answer. Each
caller maps them to its own API's codes (Produce: KAFKA-15987, ``handlers/produce.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...wire.errors import ClientError
from ..group.partitioning import partition_for
from ..metadata.image import MetadataImage
from ..peers import PeerConnections

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: The purpose of the verifier's peer connections (``broker-<id>-to-txn-verification``).
PURPOSE = "txn-verification"


class LocalVerify(Protocol):
    """The local transaction coordinator's check (``TransactionCoordinator.verify``)."""

    def verify(self, txn_id: str, pid: int, epoch: int, tps: Collection[TopicPartition]
               ) -> Any:
        """``{tp: ErrorCode}`` (or an awaitable of it); may raise KafkaError."""
        ...


@dataclass(eq=False)
class _Call:
    txn_id: str
    pid: int
    epoch: int
    tps: frozenset[TopicPartition]
    future: asyncio.Future[dict[TopicPartition, ErrorCode]]


@dataclass(eq=False)
class _Destination:
    calls: list[_Call] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class TxnVerifier:
    """Verifies partitions against their transaction's coordinator, local or remote."""

    def __init__(self, *, node_id: int, image: Callable[[], MetadataImage] | MetadataImage,
                 peers: PeerConnections | None = None, coordinator: LocalVerify | None = None,
                 request_timeout_ms: int = 30_000) -> None:
        self.node_id = node_id
        self._image = image if callable(image) else (lambda: image)
        self.peers = peers
        #: Set once the transaction coordinator is built (None: nothing local to ask).
        self.coordinator = coordinator
        self.request_timeout_ms = request_timeout_ms
        self._destinations: dict[int, _Destination] = {}
        self._closed = False

    def coordinator_of(self, txn_id: str) -> tuple[int, int] | ErrorCode:
        """(``__transaction_state`` partition, its leader) for ``txn_id``, or the error."""
        topic = self._image().topics_by_name.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return ErrorCode.coordinator_not_available
        partition = partition_for(txn_id, len(topic.partitions))
        state = topic.partitions.get(partition)
        if state is None or state.leader < 0:
            return ErrorCode.coordinator_not_available
        return partition, state.leader

    async def verify(self, txn_id: str, pid: int, epoch: int,
                     tps: Collection[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Each partition's answer: NONE when it is in the ongoing transaction of
        ``txn_id`` at producer ``pid`` and ``epoch``."""
        wanted = frozenset(tps)
        if not wanted:
            return {}
        found = self.coordinator_of(txn_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(wanted, found)
        _partition, leader = found
        if leader == self.node_id:
            return await self._local(txn_id, pid, epoch, wanted)
        if self.peers is None or self._closed:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        future: asyncio.Future[dict[TopicPartition, ErrorCode]] = \
            asyncio.get_running_loop().create_future()
        dest = self._destinations.setdefault(leader, _Destination())
        dest.calls.append(_Call(txn_id, pid, epoch, wanted, future))
        if dest.task is None:
            dest.task = asyncio.ensure_future(self._drain(leader, dest))
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Stop the requests in flight (node stop); their callers get
        COORDINATOR_NOT_AVAILABLE."""
        self._closed = True
        tasks = [d.task for d in self._destinations.values() if d.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for dest in self._destinations.values():
            for call in dest.calls:
                _resolve(call, {}, ErrorCode.coordinator_not_available)

    async def _local(self, txn_id: str, pid: int, epoch: int,
                     tps: frozenset[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        coordinator = self.coordinator
        if coordinator is None:
            return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        try:
            result = coordinator.verify(txn_id, pid, epoch, tps)
            if inspect.isawaitable(result):
                result = await result
        except KafkaError as exc:
            return dict.fromkeys(tps, exc.code)
        except Exception:
            # A bug in the coordinator must not take the producer's connection down with it:
            # the produce gets a retriable answer, the log the traceback.
            log.exception("verifying transactional id %r with the local coordinator failed",
                          txn_id)
            return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        return {tp: ErrorCode(int(result.get(tp, ErrorCode.invalid_txn_state)))
                for tp in tps}

    async def _drain(self, broker_id: int, dest: _Destination) -> None:
        try:
            while dest.calls:
                batch = _take(dest)
                if not batch:
                    continue
                try:
                    answers, top = await self._send(broker_id, batch), ErrorCode.none
                except asyncio.CancelledError:
                    for call in batch:
                        _resolve(call, {}, ErrorCode.coordinator_not_available)
                    raise
                except (ClientError, KafkaError, OSError) as exc:
                    log.info("verifying transactions with broker %d failed: %s", broker_id,
                             exc)
                    answers = {}
                    top = exc.code if isinstance(exc, KafkaError) \
                        else ErrorCode.network_exception
                except Exception:
                    log.exception("verifying transactions with broker %d failed", broker_id)
                    answers, top = {}, ErrorCode.unknown_server_error
                for call in batch:
                    _resolve(call, answers.get(call.txn_id, {}), top)
        finally:
            dest.task = None

    async def _send(self, broker_id: int, batch: list[_Call]
                    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        assert self.peers is not None
        conn = await self.peers.get(broker_id, PURPOSE)
        version = conn.versions.require(ApiKey.ADD_PARTITIONS_TO_TXN, 4,
                                        what="transaction verification (KIP-890)")
        merged: dict[str, tuple[int, int, set[TopicPartition]]] = {}
        for call in batch:
            merged.setdefault(call.txn_id, (call.pid, call.epoch, set()))[2].update(call.tps)
        try:
            response = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN,
                                          _request(merged), version=version,
                                          timeout_ms=self.request_timeout_ms)
        except (ClientError, OSError):
            self.peers.drop(broker_id, PURPOSE)
            raise
        if response.error_code:
            raise KafkaError(ErrorCode(int(response.error_code)),
                             f"broker {broker_id} answered AddPartitionsToTxn with "
                             f"{ErrorCode(int(response.error_code)).name.upper()}")
        answers: dict[str, dict[TopicPartition, ErrorCode]] = {}
        for txn in response.results_by_transaction:
            out = answers.setdefault(txn.transactional_id, {})
            for topic in txn.topic_results:
                for part in topic.results_by_partition:
                    out[(topic.name, part.partition_index)] = \
                        ErrorCode(int(part.partition_error_code))
        return answers


def _take(dest: _Destination) -> list[_Call]:
    """The calls of the next request: one (pid, epoch) per transactional id."""
    batch: list[_Call] = []
    later: list[_Call] = []
    seen: dict[str, tuple[int, int]] = {}
    for call in dest.calls:
        if call.future.done():
            continue  # its caller went away
        key = seen.setdefault(call.txn_id, (call.pid, call.epoch))
        (batch if key == (call.pid, call.epoch) else later).append(call)
    dest.calls = later
    return batch


def _resolve(call: _Call, answers: Mapping[TopicPartition, ErrorCode],
             default: ErrorCode) -> None:
    if call.future.done():
        return
    if default != ErrorCode.none:
        call.future.set_result(dict.fromkeys(call.tps, default))
        return
    # A partition the coordinator did not answer for is not known to be in the transaction.
    call.future.set_result({tp: answers.get(tp, ErrorCode.invalid_txn_state)
                            for tp in call.tps})


def _request(merged: Mapping[str, tuple[int, int, set[TopicPartition]]]) -> dict[str, Any]:
    """An AddPartitionsToTxn (v4-5) verify_only request body."""
    transactions = []
    for txn_id, (pid, epoch, tps) in merged.items():
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        transactions.append({
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "verify_only": True,
            "topics": [{"name": t, "partitions": sorted(p)} for t, p in sorted(by_topic.items())],
        })
    return {"transactions": transactions}
