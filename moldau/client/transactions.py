"""The transactional producer: Kafka's ``TransactionManager`` (KIP-98, KIP-360, KIP-447).

A producer with ``transactional.id`` owns one :class:`TransactionManager`. It keeps the Java
client's states (:class:`TxnState`, transitions as ``TransactionManager.State.isTransitionValid``)
and talks to the transaction coordinator (FindCoordinator key type 1) over a connection of
its own:

- ``init_transactions()``: InitProducerId with the transactional id; fences earlier producers
  of the id and waits until their open transaction is completed (the coordinator answers
  CONCURRENT_TRANSACTIONS meanwhile, retried here).
- ``begin_transaction()``: local only.
- The sender asks :meth:`may_send` before draining a partition: a partition not yet in the
  transaction is held while one AddPartitionsToTxn (all new partitions together) runs.
- ``send_offsets_to_transaction()``: AddOffsetsToTxn, then TxnOffsetCommit to the group
  coordinator; the offsets become visible to the group only when the transaction commits.
- ``commit_transaction()``: flush, then EndTxn(commit). ``abort_transaction()``: drop unsent
  batches, wait for those in flight, EndTxn(abort).

Errors are fatal (the producer is unusable: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING on init) or abortable (a
failed produce, INVALID_TXN_STATE, TRANSACTION_ABORTABLE...: abort, then go on). Errors that
made sequence numbers unusable (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER) bump the
epoch after the abort with InitProducerId(pid, epoch) (KIP-360).

Left out: transaction version 2 (KIP-890 part 2: EndTxn v5, implicit partition adds) and
two-phase commit (KIP-939).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .errors import (
    BrokerError,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerFenced,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionStateError,
)
from .group.coordinator import CoordinatorLink
from .group.offsets import as_offset
from .group.types import OffsetAndMetadata
from .retry import backoff_ms
from .tasks import spawn
from .types import ConsumerGroupMetadata, TopicPartition

if TYPE_CHECKING:
    from .producer import Producer

log = logging.getLogger(__name__)

COORDINATOR_TXN = 1

# Highest versions this client sends: AddPartitionsToTxn v4+ is broker-to-broker only, and
# EndTxn v5 / TxnOffsetCommit v5 belong to transaction version 2 (not implemented).
MAX_VERSIONS = {
    ApiKey.INIT_PRODUCER_ID: 5, ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4,
}

FENCED_ERRORS = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})
FATAL_ERRORS = FENCED_ERRORS | {
    ErrorCode.transactional_id_authorization_failed, ErrorCode.cluster_authorization_failed,
}
# Answers that mean "the coordinator moved": look it up again, then retry.
LOOKUP_ERRORS = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
# Answers that mean "not now": retry (Java retries these on every transactional request).
RETRY_ERRORS = frozenset({
    ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
    ErrorCode.request_timed_out, ErrorCode.unknown_topic_or_partition,
    ErrorCode.operation_not_attempted,
})
# Produce errors after which the partition's sequence numbers are unusable (KIP-360).
EPOCH_BUMP_ERRORS = frozenset({
    ErrorCode.unknown_producer_id, ErrorCode.out_of_order_sequence_number,
})


class TxnState(enum.Enum):
    """The Java client's ``TransactionManager.State``."""

    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING_TRANSACTION = "CommittingTransaction"
    ABORTING_TRANSACTION = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.UNINITIALIZED, S.INITIALIZING}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({
        S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(TxnState),
}


def error_kind(code: int, api: ApiKey) -> str:
    """How a transactional request's error code is handled: ``fatal``, ``lookup`` (find the
    coordinator again and retry), ``retry`` or ``abortable``."""
    if code in FATAL_ERRORS:
        return "fatal"
    if code == ErrorCode.invalid_producer_id_mapping and api == ApiKey.INIT_PRODUCER_ID:
        return "fatal"
    if code == ErrorCode.invalid_txn_state and api == ApiKey.END_TXN:
        return "fatal"  # Java: the client and coordinator disagree on the state
    if code in LOOKUP_ERRORS:
        return "lookup"
    if code in RETRY_ERRORS:
        return "retry"
    return "abortable"


class TxnStateMachine:
    """The states and the rules between them, without I/O (unit-tested on their own)."""

    def __init__(self) -> None:
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None

    def transition(self, target: TxnState, error: BaseException | None = None) -> None:
        """Move to ``target``; an invalid transition raises TransactionStateError."""
        if self.state is TxnState.FATAL_ERROR and target is not TxnState.FATAL_ERROR:
            raise self.fatal_error()
        if self.state not in VALID_PREVIOUS[target]:
            raise TransactionStateError(
                f"invalid transaction state transition {self.state.value} -> {target.value}")
        if target in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            self.last_error = error
        elif target is TxnState.READY:
            self.last_error = None
        self.state = target

    def fatal_error(self) -> BaseException:
        cause = self.last_error
        if isinstance(cause, ProducerFenced | BrokerError) or cause is None:
            return cause or ClientError("the producer is in a fatal error state")
        return cause

    def fail(self, error: BaseException, fatal: bool) -> None:
        """Record a failure: fatal always wins; abortable only inside a transaction."""
        if fatal:
            self.transition(TxnState.FATAL_ERROR, error)
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION,
                            TxnState.ABORTABLE_ERROR):
            self.transition(TxnState.ABORTABLE_ERROR, error)

    def require(self, what: str, *allowed: TxnState) -> None:
        """Raise unless the state is one of ``allowed``, saying what to call instead."""
        if self.state in allowed:
            return
        if self.state is TxnState.FATAL_ERROR:
            raise self.fatal_error()
        if self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"{what}: the transaction failed ({self.last_error}); call "
                "abort_transaction() and start a new one", self.last_error)
        hint = {
            TxnState.UNINITIALIZED: "call init_transactions() first",
            TxnState.READY: "call begin_transaction() first",
            TxnState.IN_TRANSACTION: "a transaction is already open",
        }.get(self.state, "another transactional call is still running")
        raise TransactionStateError(f"{what} is not allowed in state {self.state.value}: {hint}")


class TransactionManager:
    """The transactional part of one :class:`~moldau.client.producer.Producer`."""

    def __init__(self, producer: Producer, transactional_id: str) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.machine = TxnStateMachine()
        self.link = CoordinatorLink(producer.cluster, transactional_id, COORDINATOR_TXN)
        self.in_txn: set[TopicPartition] = set()
        self.pending: set[TopicPartition] = set()
        self.started = False  # a partition or offsets were added: EndTxn is needed
        self.bump_epoch = False
        self._adding: asyncio.Task[None] | None = None

    @property
    def state(self) -> TxnState:
        return self.machine.state

    # --- sender hooks -----------------------------------------------------------------------

    def check_send(self) -> None:
        """send() is allowed only inside a transaction."""
        self.machine.require("send()", TxnState.IN_TRANSACTION)

    def may_send(self, tp: TopicPartition) -> bool:
        """Whether the sender may drain ``tp``; schedules AddPartitionsToTxn when needed."""
        if tp in self.in_txn:
            return self.state is not TxnState.FATAL_ERROR
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            return False
        self.pending.add(tp)
        if self._adding is None or self._adding.done():
            self._adding = spawn(self.producer._tasks, self._add_partitions())
        return False

    def on_batch_error(self, exc: BaseException) -> None:
        """A batch failed for good (not retried): the transaction can only be aborted, or,
        fenced, the producer is done."""
        code = getattr(exc, "code", None)
        fatal = code in FATAL_ERRORS
        if code in EPOCH_BUMP_ERRORS:
            self.bump_epoch = True
        self.machine.fail(exc, fatal)
        self.producer._abort_undrained(exc)

    # --- coordinator requests ---------------------------------------------------------------

    async def _call(self, api: ApiKey, what: str, send: Callable[[Any, int], Awaitable[int]],
                    *, link: CoordinatorLink | None = None) -> None:
        """Send one request to the coordinator until it answers NONE.

        ``send(conn, version)`` sends it and returns the error code. Lookup errors find the
        coordinator again, retriable ones wait and retry (CONCURRENT_TRANSACTIONS with a short
        pause, as Java); the time limit is max.block.ms. Others raise BrokerError (fenced
        ones ProducerFenced)."""
        link = link or self.link
        c = self.producer.config
        deadline = time.monotonic() + c["max.block.ms"] / 1000
        attempt = 0
        while True:
            try:
                conn = await link.connection()
                version = min(conn.versions.require(api), MAX_VERSIONS.get(api, 99))
                code = await send(conn, version)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                link.mark_unknown()
                code, error = None, exc
            except BrokerError as exc:  # FindCoordinator itself failed
                if not exc.retriable:
                    raise
                code, error = None, exc
            if code == 0:
                return
            if code is not None:
                kind = error_kind(code, api)
                error = BrokerError(code, context=f"{what} for transactional id "
                                    f"{self.transactional_id!r}")
                if kind == "fatal":
                    if code in FENCED_ERRORS:
                        raise ProducerFenced(code, "another producer with this "
                                             "transactional.id took over", what)
                    raise error
                if kind == "abortable":
                    raise error
                if kind == "lookup":
                    link.mark_unknown()
            pause = 0.02 if code == ErrorCode.concurrent_transactions and attempt < 5 else (
                backoff_ms(attempt, c["retry.backoff.ms"], c["retry.backoff.max.ms"]) / 1000)
            if time.monotonic() + pause >= deadline:
                raise KafkaTimeoutError(
                    f"{what} for transactional id {self.transactional_id!r} did not succeed "
                    f"within max.block.ms={c['max.block.ms']}; last error: {error}") from error
            await asyncio.sleep(pause)
            attempt += 1

    def _fail(self, exc: BaseException) -> None:
        fatal = isinstance(exc, ProducerFenced) or getattr(exc, "code", None) in FATAL_ERRORS
        if self.state is TxnState.INITIALIZING and not fatal and isinstance(
                exc, KafkaTimeoutError) and not self.bump_epoch:
            self.machine.transition(TxnState.UNINITIALIZED)  # init_transactions() may retry
            return
        if self.state is not TxnState.FATAL_ERROR:
            self.machine.fail(exc, fatal or self.state in (
                TxnState.INITIALIZING, TxnState.ABORTING_TRANSACTION))

    # --- the public calls -------------------------------------------------------------------

    async def init_transactions(self) -> None:
        """InitProducerId for the transactional id: fence older producers, get pid/epoch."""
        self.machine.require("init_transactions()", TxnState.UNINITIALIZED)
        self.machine.transition(TxnState.INITIALIZING)
        try:
            await self._init_producer_id(-1, -1)
        except BaseException as exc:
            self._fail(exc)
            raise
        self.machine.transition(TxnState.READY)

    async def _init_producer_id(self, pid: int, epoch: int) -> None:
        p = self.producer
        timeout = p.config["transaction.timeout.ms"]
        answer: dict[str, int] = {}

        async def send(conn: Any, version: int) -> int:
            r = await conn.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": self.transactional_id, "transaction_timeout": timeout,
                "producer_id": pid, "producer_epoch": epoch,
            }, version=version)
            if r.error_code == ErrorCode.invalid_transaction_timeout:
                raise BrokerError(r.error_code, f"transaction.timeout.ms={timeout} is above "
                                  "the broker's transaction.max.timeout.ms; lower it",
                                  "InitProducerId")
            answer.update(producer_id=r.producer_id, producer_epoch=r.producer_epoch)
            return int(r.error_code)

        await self._call(ApiKey.INIT_PRODUCER_ID, "InitProducerId", send)
        p.set_producer_id(answer["producer_id"], answer["producer_epoch"])
        self.bump_epoch = False

    def begin_transaction(self) -> None:
        """Start a transaction (local: the coordinator learns of it with the first add)."""
        self.machine.require("begin_transaction()", TxnState.READY)
        self.in_txn.clear()
        self.pending.clear()
        self.started = False
        self.machine.transition(TxnState.IN_TRANSACTION)

    async def _add_partitions(self) -> None:
        """AddPartitionsToTxn for every held partition, batched; wakes the sender after."""
        p = self.producer
        try:
            while self.pending and self.state in (TxnState.IN_TRANSACTION,
                                                  TxnState.COMMITTING_TRANSACTION):
                batch = sorted(self.pending)
                failed: dict[TopicPartition, int] = {}

                async def send(conn: Any, version: int, batch: list[TopicPartition] = batch,
                               failed: dict[TopicPartition, int] = failed) -> int:
                    topics: dict[str, list[int]] = {}
                    for tp in batch:
                        topics.setdefault(tp.topic, []).append(tp.partition)
                    r = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, {
                        "v3_and_below_transactional_id": self.transactional_id,
                        "v3_and_below_producer_id": p.producer_id,
                        "v3_and_below_producer_epoch": p.producer_epoch,
                        "v3_and_below_topics": [
                            {"name": t, "partitions": ps} for t, ps in topics.items()],
                    }, version=version)
                    failed.clear()
                    worst = 0
                    for t in r.results_by_topic_v3_and_below:
                        for pr in t.results_by_partition:
                            code = int(pr.partition_error_code)
                            if code:
                                failed[TopicPartition(t.name, pr.partition_index)] = code
                            if code and code != ErrorCode.operation_not_attempted and (
                                    not worst or error_kind(code, ApiKey.ADD_PARTITIONS_TO_TXN)
                                    in ("fatal", "abortable")):
                                worst = code
                    return worst or (ErrorCode.operation_not_attempted if failed else 0)

                await self._call(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", send)
                self.in_txn.update(batch)
                self.pending.difference_update(batch)
                self.started = True
                p._wakeup.set()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.debug("AddPartitionsToTxn failed: %s", exc)
            self.pending.clear()
            self._fail(exc)
            p._abort_undrained(exc)

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit ``offsets`` (the next record to read, as for commit()) to the group as part
        of the transaction: AddOffsetsToTxn, then TxnOffsetCommit."""
        self.machine.require("send_offsets_to_transaction()", TxnState.IN_TRANSACTION)
        meta = group_metadata if isinstance(group_metadata, ConsumerGroupMetadata) else (
            ConsumerGroupMetadata(group_metadata))
        wanted = {TopicPartition(*tp): as_offset(v) for tp, v in offsets.items()}
        p = self.producer
        try:
            async def add(conn: Any, version: int) -> int:
                r = await conn.request(ApiKey.ADD_OFFSETS_TO_TXN, {
                    "transactional_id": self.transactional_id,
                    "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                    "group_id": meta.group_id,
                }, version=version)
                return int(r.error_code)

            await self._call(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", add)
            self.started = True
            await self._txn_offset_commit(meta, wanted)
        except BaseException as exc:
            self._fail(exc)
            raise

    async def _txn_offset_commit(self, meta: ConsumerGroupMetadata,
                                 wanted: dict[TopicPartition, OffsetAndMetadata]) -> None:
        p = self.producer
        left = dict(wanted)
        group_link = CoordinatorLink(p.cluster, meta.group_id)

        async def commit(conn: Any, version: int) -> int:
            topics: dict[str, list[TopicPartition]] = {}
            for tp in sorted(left):
                topics.setdefault(tp.topic, []).append(tp)
            r = await conn.request(ApiKey.TXN_OFFSET_COMMIT, {
                "transactional_id": self.transactional_id, "group_id": meta.group_id,
                "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                "generation_id": meta.generation_id, "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": [{"name": t, "partitions": [{
                    "partition_index": tp.partition,
                    "committed_offset": left[tp].offset,
                    "committed_leader_epoch": left[tp].leader_epoch,
                    "committed_metadata": left[tp].metadata,
                } for tp in tps]} for t, tps in topics.items()],
            }, version=version)
            worst = 0
            for t in r.topics:
                for pr in t.partitions:
                    code = int(pr.error_code)
                    tp = TopicPartition(t.name, pr.partition_index)
                    if not code:
                        left.pop(tp, None)
                    elif not worst or error_kind(code, ApiKey.TXN_OFFSET_COMMIT) in (
                            "fatal", "abortable"):
                        worst = code
            return worst

        try:
            await self._call(ApiKey.TXN_OFFSET_COMMIT, f"TxnOffsetCommit to group "
                             f"{meta.group_id!r}", commit, link=group_link)
        finally:
            group_link.close()

    async def commit_transaction(self) -> None:
        """Flush the transaction's records, then commit it (EndTxn)."""
        self.machine.require("commit_transaction()", TxnState.IN_TRANSACTION)
        self.machine.transition(TxnState.COMMITTING_TRANSACTION)
        await self.producer.flush()
        if self.state is TxnState.ABORTABLE_ERROR:
            self.machine.require("commit_transaction()")  # raises the abortable error
        if self.state is TxnState.FATAL_ERROR:
            raise self.machine.fatal_error()
        await self._end(commit=True)

    async def abort_transaction(self) -> None:
        """Drop unsent records, wait for those in flight, abort the transaction (EndTxn)."""
        self.machine.require("abort_transaction()", TxnState.IN_TRANSACTION,
                             TxnState.ABORTABLE_ERROR)
        self.machine.transition(TxnState.ABORTING_TRANSACTION)
        self.pending.clear()
        if self._adding is not None:
            self._adding.cancel()
        self.producer._abort_undrained(TransactionAbortedError(
            "the transaction was aborted before this record was sent"))
        await self.producer.flush()
        await self._end(commit=False)

    async def _end(self, commit: bool) -> None:
        p = self.producer
        what = "EndTxn(commit)" if commit else "EndTxn(abort)"
        try:
            if self.started:
                async def send(conn: Any, version: int) -> int:
                    r = await conn.request(ApiKey.END_TXN, {
                        "transactional_id": self.transactional_id,
                        "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                        "committed": commit,
                    }, version=version)
                    return int(r.error_code)

                await self._call(ApiKey.END_TXN, what, send)
            if not commit and self.bump_epoch:
                self.machine.transition(TxnState.INITIALIZING)
                await self._init_producer_id(p.producer_id, p.producer_epoch)
        except BaseException as exc:
            self._fail(exc)
            raise
        self.in_txn.clear()
        self.machine.transition(TxnState.READY)

    def close(self) -> None:
        if self._adding is not None:
            self._adding.cancel()
        self.link.close()


__all__ = [
    "COORDINATOR_TXN", "ConsumerGroupMetadata", "TransactionManager", "TxnState",
    "TxnStateMachine", "error_kind",
]
