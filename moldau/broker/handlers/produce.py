"""Produce (key 0), versions 3-10.

Each partition's record set is validated once (magic 2 only -> UNSUPPORTED_FOR_MESSAGE_FORMAT,
CRC-32C -> CORRUPT_MESSAGE, ``max.message.bytes`` -> MESSAGE_TOO_LARGE; every record, as
Kafka's LogValidator: a count, framing or offset delta that disagrees with the header ->
INVALID_RECORD, compressed data that does not decompress -> CORRUPT_MESSAGE, or that expands
past 16 x ``max.message.bytes`` -> MESSAGE_TOO_LARGE, a record without a key in a
``cleanup.policy=compact`` topic -> INVALID_RECORD; record timestamps -> INVALID_TIMESTAMP:
``broker/produce_validation.py``), checked against the idempotent producer's state (retries
of an appended batch are answered with the original offsets; gaps get
OUT_OF_ORDER_SEQUENCE_NUMBER), and appended as opaque bytes with offsets patched in place.
acks=0 sends no response (and closes the connection if a partition failed, as Kafka does, so
the client notices); acks=1 answers after the leader's append;
acks=all waits until the ISR has the batch, subject to ``min.insync.replicas``
(NOT_ENOUGH_REPLICAS otherwise). Internal topics cannot be written by clients.

A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION
when the metadata does not know it); from v10 the answer carries Kafka's KIP-951 hint, the
partition's current leader and epoch from the metadata image plus that leader's endpoint on
the request's listener, so the client redirects without a Metadata round trip.

Transactions (KIP-98, KIP-890 part 1): transactional records in a request without a
``transactional_id`` fail the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as
KafkaApis). With ``transaction.partition.verification.enable`` (default true) a transactional
batch whose producer has no ongoing transaction on the partition is verified first: the
partition takes a verification guard from its producer state, the transaction's coordinator
is asked whether the partition was added (:class:`~..txn.verification.TxnVerifier`, local or
AddPartitionsToTxn v4 verify_only), and the batch is appended with the guard only then (a
marker or an epoch bump meanwhile voids the guard: INVALID_TXN_STATE). Only such a request
is answered by a coroutine; it copies its record sets (they are slices of a reused receive
buffer) and holds back the produce requests pipelined behind it on its connection until it
has appended, so appends keep the connection's order. The coordinator's answers become
Produce v3-10 codes as Kafka's (KAFKA-15987): INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH and
INVALID_PRODUCER_ID_MAPPING as they are, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (older
clients do not know it), everything else (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, an unreachable coordinator) as the
retriable NOT_ENOUGH_REPLICAS.

Left out: Produce v11+ (v12/13 transaction verification and topic ids); recompression when a
topic's ``compression.type`` differs from the batch's codec is done by the partition layer.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.encoders.produce import PartitionProduceResult, encode_produce_response
from ...protocol.errors import ErrorCode
from ...protocol.produce_request import ProduceRequestData, decode_produce_request
from ...protocol.records.batch import HEADER_SIZE, BatchHeader, read_header
from ..dispatch import RawResponse, RequestContext, handler
from .metadata import leader_endpoints

# KIP-951: the version from which a NOT_LEADER_OR_FOLLOWER answer carries the current leader.
_HINTS_VERSION = 10

VERIFICATION_KEY = "transaction.partition.verification.enable"

# What a verification answer becomes in Produce v3-10 (KAFKA-15987); the rest are retriable.
_KEPT = frozenset({ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_epoch,
                   ErrorCode.invalid_producer_id_mapping})

Key = tuple[str, int]


# The body is read by a hand-written decoder (record sets stay slices of the frame), not kio.
@handler(ApiKey.PRODUCE, 3, 10, decoder=decode_produce_request)
def handle_produce(ctx: RequestContext, request: ProduceRequestData) -> Any:
    unnamed = request.transactional_id is None and _has_transactional_records(request)
    if unnamed:
        # KafkaApis: a transactional batch names its transactional id in the request.
        refused = {(name, index): (ErrorCode.transactional_id_authorization_failed,
                                   "Transactional records need the request's transactional_id "
                                   "(the producer's transactional.id)")
                   for name, partitions in request.topics for index, _records in partitions}
        return _produce(ctx, request, refused)
    verifying = _to_verify(ctx, request) if request.acks != 0 else {}
    if verifying:
        return DeferredAppend(_verify_then_produce(ctx, _copied(request), verifying))
    return _produce(ctx, request)


def _produce(ctx: RequestContext, request: ProduceRequestData,
             refused: dict[Key, tuple[ErrorCode, str]] | None = None,
             guards: dict[Key, Any] | None = None) -> Any:
    """Append every partition's records (or answer its refusal) and answer: at once, or a
    coroutine that waits for the ISR (acks=all)."""
    manager = ctx.broker.replica_manager
    acks = request.acks
    transactional_id = request.transactional_id
    results: list[tuple[str, list[PartitionProduceResult]]] = []
    pending = []
    failed = False
    for name, partition_records in request.topics:
        partitions: list[PartitionProduceResult] = []
        for index, records in partition_records:
            refusal = refused.get((name, index)) if refused else None
            if refusal is not None:
                outcome = manager.reject(*refusal)
            elif acks not in (0, 1, -1):
                outcome = manager.reject(ErrorCode.invalid_required_acks,
                                         f"acks must be 0, 1 or -1 (all), got {acks}")
            elif guards and (name, index) in guards:
                outcome = manager.append_records(
                    name, index, records, acks=acks, transactional_id=transactional_id,
                    verification_guard=guards[(name, index)],
                )
            else:
                outcome = manager.append_records(
                    name, index, records, acks=acks, transactional_id=transactional_id,
                )
            failed = failed or outcome.error != ErrorCode.none
            partitions.append(outcome.result(index))
            if outcome.wait_for_offset is not None:
                pending.append((name, index, outcome, partitions, len(partitions) - 1))
        results.append((name, partitions))
    if acks == 0:
        if failed:
            # The client expects no answer; closing tells it something went wrong (Kafka).
            ctx.connection.close("closing connection after a failed acks=0 produce")
        return None
    if pending:
        # The wait is timed from the append (Kafka's DelayedProduce), not from when this
        # answer's turn comes: produce requests pipelined on one connection wait together.
        deadline = time.monotonic() + request.timeout_ms / 1000
        return _await_replication(ctx, results, pending, deadline)
    return _encode(ctx, results)


def _encode(ctx: RequestContext, results: list[tuple[str, list[PartitionProduceResult]]]
            ) -> RawResponse:
    """The answer, with leader hints for NOT_LEADER_OR_FOLLOWER partitions (v10+)."""
    if ctx.version < _HINTS_VERSION:
        return RawResponse(encode_produce_response(ctx.version, results))
    manager = ctx.broker.replica_manager
    leaders = []
    for name, partitions in results:
        for position, result in enumerate(partitions):
            if result.error_code == ErrorCode.not_leader_or_follower:
                hint = manager.current_leader(name, result.index)
                partitions[position] = result._replace(current_leader=hint)
                leaders.append(hint[0])
    nodes = leader_endpoints(ctx.broker.image, leaders, ctx.listener) if leaders else []
    return RawResponse(encode_produce_response(ctx.version, results, node_endpoints=nodes))


async def _await_replication(ctx: RequestContext, results: list[Any], pending: list[Any],
                             deadline: float) -> RawResponse:
    manager = ctx.broker.replica_manager
    for topic, index, outcome, partitions, position in pending:
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        error = await manager.wait_for_isr(topic, index, outcome.wait_for_offset, left_ms)
        if error != ErrorCode.none:
            partitions[position] = outcome.failed(index, error)
    return _encode(ctx, results)


# --- transactions (KIP-98 / KIP-890 part 1) ---------------------------------------------------
class DeferredAppend:
    """The answer of a produce request whose appends wait for transaction verification.

    The connection holds back the produce requests pipelined behind it until it is awaited
    to its end (``defers_append``): they must not be appended before it."""

    defers_append = True
    __slots__ = ("_coro",)

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro

    def __await__(self) -> Generator[Any, None, Any]:
        return self._coro.__await__()

    def close(self) -> None:
        """Let go without awaiting (the connection went away first)."""
        self._coro.close()


def _first_header(records: Any) -> BatchHeader | None:
    """The first batch's header; None when there is none to read or it is not a magic-2
    batch (the append answers what is wrong with it: an old message format has no
    transactional bit, whatever the byte at that place holds)."""
    if records is None or len(records) < HEADER_SIZE:
        return None
    header = read_header(records, 0)
    return header if header.magic == 2 else None


def _has_transactional_records(request: ProduceRequestData) -> bool:
    # Produce v3+ carries one batch per partition (Kafka refuses more), so its first batch
    # says whether the records are transactional, as Kafka's check does.
    for _name, partitions in request.topics:
        for _index, records in partitions:
            header = _first_header(records)
            if header is not None and header.is_transactional:
                return True
    return False


def _to_verify(ctx: RequestContext, request: ProduceRequestData
               ) -> dict[Key, tuple[int, int, Any]]:
    """The partitions whose transactional batch opens a transaction there, with the
    producer's (id, epoch) and the partition, when verification is on."""
    broker = ctx.broker
    if request.transactional_id is None or not broker.config[VERIFICATION_KEY]:
        return {}
    verifier = getattr(broker, "txn_verifier", None)
    if verifier is None:
        return {}
    manager = broker.replica_manager
    found: dict[Key, tuple[int, int, Any]] = {}
    for name, partitions in request.topics:
        for index, records in partitions:
            header = _first_header(records)
            if header is None or not header.is_transactional or header.is_control:
                continue
            partition = manager.leader_partition(name, index)
            if isinstance(partition, ErrorCode):
                continue  # the append answers it
            if header.producer_id in partition.log.producer_state.ongoing_txns:
                continue  # the coordinator verified the transaction's first batch here
            found[(name, index)] = (header.producer_id, header.producer_epoch, partition)
    return found


def _copied(request: ProduceRequestData) -> ProduceRequestData:
    """``request`` with record sets of its own: they are slices of the connection's receive
    buffer, which later bytes overwrite while the verification is under way."""
    topics = [(name, [(index, None if records is None else bytes(records))
                      for index, records in partitions])
              for name, partitions in request.topics]
    return request._replace(topics=topics)


def verification_error(code: ErrorCode) -> ErrorCode:
    """A verification answer as Produce v3-10 reports it (KAFKA-15987)."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return code if code in _KEPT else ErrorCode.not_enough_replicas


async def _verify_then_produce(ctx: RequestContext, request: ProduceRequestData,
                               verifying: dict[Key, tuple[int, int, Any]]) -> Any:
    txn_id = request.transactional_id
    assert txn_id is not None
    # Guards are taken before asking: a marker or an epoch bump meanwhile voids them.
    guards = {key: partition.log.producer_state.begin_verification(pid)
              for key, (pid, _epoch, partition) in verifying.items()}
    producers: dict[tuple[int, int], list[Key]] = {}
    for key, (pid, epoch, _partition) in verifying.items():
        producers.setdefault((pid, epoch), []).append(key)
    refused: dict[Key, tuple[ErrorCode, str]] = {}
    for (pid, epoch), keys in producers.items():
        answers = await ctx.broker.txn_verifier.verify(txn_id, pid, epoch, keys)
        for key in keys:
            code = answers.get(key, ErrorCode.invalid_txn_state)
            if code != ErrorCode.none:
                refused[key] = (verification_error(code), _refusal_message(txn_id, key, code))
    result = _produce(ctx, request, refused, guards)
    if result is not None and type(result) is not RawResponse:
        result = await result
    return result


def _refusal_message(txn_id: str, key: Key, code: ErrorCode) -> str:
    if code == ErrorCode.invalid_txn_state:
        return (f"Partition {key[0]}-{key[1]} was not added to the transaction of "
                f"transactional id {txn_id!r} (AddPartitionsToTxn first)")
    return (f"verifying transactional id {txn_id!r} for {key[0]}-{key[1]} with its "
            f"coordinator failed: {code.name.upper()}")
