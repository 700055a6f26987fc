"""The records of ``__transaction_state``, byte-compatible with Kafka's.

Key (``TransactionLogKey``): int16 version 0, then the transactional id (classic string).
Value (``TransactionLogValue``): int16 version, then ``producer_id i64``, ``producer_epoch
i16``, ``timeout_ms i32``, ``status i8``, ``partitions`` (nullable array of ``topic string,
partition_ids [i32]``), ``last_update_ms i64``, ``start_ms i64``. Version 1 is flexible and
adds tagged fields PreviousProducerId (0), NextProducerId (1) and ClientTransactionVersion (2).

Moldau writes version 0 (what Kafka writes for transactions V1) and reads both; a null value
is a tombstone (an expired transactional id). An Empty transaction is written with null
partitions, as Kafka does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..group.wire import Reader, RecordFormatError, Writer
from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnMetadata, TxnState

TXN_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION_WRITTEN = 0
_TAG_PREVIOUS_PRODUCER_ID = 0
_I64 = struct.Struct(">q")

__all__ = [
    "TXN_STATE_TOPIC",
    "RecordFormatError",
    "TxnValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "metadata_from_value",
]


@dataclass(frozen=True, slots=True)
class TxnValue:
    """A decoded ``TransactionLogValue``."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID


def encode_key(transactional_id: str) -> bytes:
    """The record key of ``transactional_id``."""
    return Writer().i16(KEY_VERSION).string(transactional_id).getvalue()


def decode_key(data: bytes | memoryview) -> str:
    """The transactional id of a key; RecordFormatError for another key version."""
    reader = Reader(data)
    version = reader.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown __transaction_state key version {version}")
    return reader.string()


def encode_value(meta: TxnMetadata) -> bytes:
    """``meta`` as a version-0 value. Raises ValueError for PrepareEpochFence (memory only)
    and for an Empty transaction that holds partitions (a coordinator bug)."""
    if meta.state is TxnState.PREPARE_EPOCH_FENCE:
        raise ValueError("PrepareEpochFence is never written to __transaction_state")
    if meta.state is TxnState.EMPTY and meta.partitions:
        raise ValueError(f"transactional id {meta.transactional_id!r} is Empty but holds "
                         f"{len(meta.partitions)} partitions")
    writer = (Writer().i16(VALUE_VERSION_WRITTEN).i64(meta.producer_id)
              .i16(meta.producer_epoch).i32(meta.timeout_ms).i8(int(meta.state)))
    if meta.state is TxnState.EMPTY:
        writer.array_len(None)
    else:
        topics = meta.topics()
        writer.array_len(len(topics))
        for topic, partitions in topics.items():
            writer.string(topic).array_len(len(partitions))
            for partition in partitions:
                writer.i32(partition)
    return writer.i64(meta.last_update_ms).i64(meta.start_ms).getvalue()


def decode_value(data: bytes | memoryview) -> TxnValue:
    """A value of version 0 or 1; RecordFormatError when it does not decode."""
    version = Reader(data).i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown __transaction_state value version {version}")
    reader = Reader(data, flexible=version >= 1)
    reader.i16()
    producer_id = reader.i64()
    epoch = reader.i16()
    timeout_ms = reader.i32()
    status = reader.i8()
    try:
        state = TxnState(status)
    except ValueError as exc:
        raise RecordFormatError(f"unknown transaction status {status}") from exc
    partitions: set[tuple[str, int]] = set()
    length = reader._length(struct.Struct(">i"))
    for _ in range(length or 0):
        topic = reader.string()
        for _ in range(reader.array_len()):
            partitions.add((topic, reader.i32()))
        reader.skip_tags()
    last_update_ms = reader.i64()
    start_ms = reader.i64()
    previous = NO_PRODUCER_ID
    if version >= 1:
        previous = _read_tags(reader)
    return TxnValue(producer_id, epoch, timeout_ms, state, frozenset(partitions),
                    last_update_ms, start_ms, previous)


def _read_tags(reader: Reader) -> int:
    """The PreviousProducerId tag of a v1 value (-1 when absent); other tags are skipped."""
    previous = NO_PRODUCER_ID
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        size = reader.uvarint()
        raw = reader._take(size)
        if tag == _TAG_PREVIOUS_PRODUCER_ID and size == _I64.size:
            previous = _I64.unpack(raw)[0]
    return previous


def metadata_from_value(transactional_id: str, value: TxnValue) -> TxnMetadata:
    """The metadata a loaded record gives (``last_producer_epoch`` is memory only: -1)."""
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.timeout_ms,
        state=value.state,
        partitions=value.partitions,
        start_ms=value.start_ms,
        last_update_ms=value.last_update_ms,
        last_producer_id=value.previous_producer_id,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )
