"""Transaction administration: what ``kafka-transactions.sh`` (and ``moldau transactions``)
needs from the Admin API (KIP-664).

- ``describe_transactions``: DescribeTransactions (65) to each id's coordinator (batched
  FindCoordinator key type 1).
- ``list_transactions``: ListTransactions (66) to every broker (each knows only the
  transactions of the ``__transaction_state`` partitions it leads); v1 duration filter,
  v2 transactional-id pattern.
- ``describe_producers``: DescribeProducers (61) to each partition's leader, or one broker.
- ``abort_transaction``: WriteTxnMarkers (27) ABORT to the partition's leader, as Kafka's
  ``Admin.abortTransaction``: for a hanging transaction whose coordinator forgot it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from . import kio_fixes  # noqa: F401 - DescribeTransactions start time of -1
from .admin_types import AdminError
from .errors import BrokerError
from .leaders import for_each_leader
from .types import TopicPartition

if TYPE_CHECKING:
    from .cluster import Cluster

COORDINATOR_TXN = 1



@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One row of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions of one id. ``start_time_ms`` is -1 without an open transaction."""

    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


def _ms(value: Any) -> int:
    """kio decodes some millisecond fields as timedelta/datetime; the CLI wants ints."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


class TransactionAdmin:
    """Mixed into :class:`~moldau.client.admin.AdminClient`."""

    cluster: Cluster
    _timeout_ms: int

    async def _retrying(self, what: str, op: Any) -> Any:  # provided by AdminClient
        raise NotImplementedError

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, raise_errors: bool = True,
    ) -> dict[str, TransactionDescription | BrokerError]:
        """State of each transactional id at its coordinator (TRANSACTIONAL_ID_NOT_FOUND for
        an unknown one)."""
        pending = list(dict.fromkeys(transactional_ids))
        results: dict[str, TransactionDescription | BrokerError] = {}

        async def attempt() -> None:
            nonlocal pending
            found = await self.cluster.find_coordinators(pending, COORDINATOR_TXN)
            by_node: dict[int, list[str]] = {}
            for tid in pending:
                by_node.setdefault(found[tid].node_id, []).append(tid)
            retry: list[str] = []
            last = 0
            for node, ids in by_node.items():
                conn = await self.cluster.connection(node)
                r = await conn.request(ApiKey.DESCRIBE_TRANSACTIONS,
                                       {"transactional_ids": ids})
                for s in r.transaction_states:
                    code = int(s.error_code)
                    if (code and ErrorCode(code).retriable) or code in (
                            ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
                        retry.append(s.transactional_id)
                        last = code
                    elif code:
                        results[s.transactional_id] = BrokerError(
                            code, context=f"describe transactional id {s.transactional_id!r}")
                    else:
                        results[s.transactional_id] = TransactionDescription(
                            node, s.transactional_id, int(s.producer_id), int(s.producer_epoch),
                            s.transaction_state, _ms(s.transaction_timeout),
                            _ms(s.transaction_start_time),
                            tuple(TopicPartition(t.topic, p)
                                  for t in s.topics for p in t.partitions))
            pending = retry
            if retry:
                raise BrokerError(last, context=f"DescribeTransactions of {retry}")

        await self._retrying("DescribeTransactions", attempt)
        failed = {k: v for k, v in results.items() if isinstance(v, BrokerError)}
        if failed and raise_errors:
            raise AdminError("describe_transactions", failed)  # type: ignore[arg-type]
        return results

    async def list_transactions(
        self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
        duration_ms: int = -1, pattern: str | None = None,
    ) -> list[TransactionListing]:
        """Transactions of every broker, filtered by state names (Ongoing, PrepareCommit...),
        producer ids, open longer than ``duration_ms`` (v1+) or ids matching the regular
        expression ``pattern`` (v2+)."""
        await self.cluster.refresh()
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_ms, "transactional_id_pattern": pattern}
        out: list[TransactionListing] = []
        for node in sorted(self.cluster.brokers):
            async def send(node: int = node) -> Any:
                conn = await self.cluster.connection(node)
                version = conn.versions.require(ApiKey.LIST_TRANSACTIONS)
                if (duration_ms >= 0 and version < 1) or (pattern is not None and version < 2):
                    need = 2 if pattern is not None else 1
                    raise BrokerError(ErrorCode.unsupported_version,
                                      f"broker {node} serves ListTransactions v{version}; "
                                      f"the filter needs v{need}", "list_transactions")
                r = await conn.request(ApiKey.LIST_TRANSACTIONS, body, version=version)
                if r.error_code:
                    raise BrokerError(r.error_code, context=f"ListTransactions on {node}")
                return r

            r = await self._retrying("ListTransactions", send)
            out.extend(TransactionListing(s.transactional_id, int(s.producer_id),
                                          s.transaction_state, node)
                       for s in r.transaction_states)
        return sorted(out, key=lambda t: t.transactional_id)

    async def describe_producers(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], *,
        broker_id: int | None = None,
    ) -> dict[TopicPartition, list[ProducerState] | BrokerError]:
        """Active producers of each partition, asked of its leader (or of ``broker_id``,
        e.g. a follower)."""
        wanted = {TopicPartition(*tp): None for tp in partitions}

        async def call(node: int, batch: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
            topics: dict[str, list[int]] = {}
            for tp in batch:
                topics.setdefault(tp.topic, []).append(tp.partition)
            conn = await self.cluster.connection(broker_id if broker_id is not None else node)
            r = await conn.request(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            out: dict[TopicPartition, Any] = {}
            for t in r.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = BrokerError(p.error_code, p.error_message or "",
                                              f"describe producers of {tp}")
                        continue
                    out[tp] = [ProducerState(
                        int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                        int(s.last_timestamp), int(s.coordinator_epoch),
                        int(s.current_txn_start_offset)) for s in p.active_producers]
            return out

        return await for_each_leader(self.cluster, wanted, call, timeout_ms=self._timeout_ms,
                                     what="DescribeProducers")

    async def abort_transaction(self, partition: TopicPartition | tuple[str, int],
                                producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Write an ABORT marker for ``producer_id`` on ``partition`` (its leader), ending a
        hanging transaction there. The epochs must be the producer's current ones
        (``describe_producers``), else the leader refuses with INVALID_PRODUCER_EPOCH or
        TRANSACTION_COORDINATOR_FENCED."""
        tp = TopicPartition(*partition)

        async def call(node: int, batch: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
            conn = await self.cluster.connection(node)
            r = await conn.request(ApiKey.WRITE_TXN_MARKERS, {"markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch,
                "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
            }]})
            out: dict[TopicPartition, Any] = {}
            for m in r.markers:
                for t in m.topics:
                    for p in t.partitions:
                        code = int(p.error_code)
                        out[TopicPartition(t.name, p.partition_index)] = BrokerError(
                            code, context=f"abort of producer {producer_id} on {tp}"
                        ) if code else None
            return out

        result = await for_each_leader(self.cluster, {tp: None}, call,
                                       timeout_ms=self._timeout_ms, what="WriteTxnMarkers")
        error = result.get(tp)
        if isinstance(error, BrokerError):
            raise error


__all__ = ["ProducerState", "TransactionAdmin", "TransactionDescription", "TransactionListing"]
