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

Left out: Produce v11+ (v12/13 transaction verification and topic ids); recompression when a
topic's ``compression.type`` differs from the batch's codec is done by the partition layer.
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.encoders.produce import PartitionProduceResult, encode_produce_response
from ...protocol.errors import ErrorCode
from ...protocol.produce_request import ProduceRequestData, decode_produce_request
from ..dispatch import RawResponse, RequestContext, handler
from .metadata import leader_endpoints

# KIP-951: the version from which a NOT_LEADER_OR_FOLLOWER answer carries the current leader.
_HINTS_VERSION = 10


# The body is read by a hand-written decoder (record sets stay slices of the frame), not kio.
@handler(ApiKey.PRODUCE, 3, 10, decoder=decode_produce_request)
def handle_produce(ctx: RequestContext, request: ProduceRequestData) -> Any:
    manager = ctx.broker.replica_manager
    acks = request.acks
    transactional_id = request.transactional_id
    results: list[tuple[str, list[PartitionProduceResult]]] = []
    pending = []
    failed = False
    for name, partition_records in request.topics:
        partitions: list[PartitionProduceResult] = []
        for index, records in partition_records:
            if acks not in (0, 1, -1):
                outcome = manager.reject(ErrorCode.invalid_required_acks,
                                         f"acks must be 0, 1 or -1 (all), got {acks}")
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
