"""Control batches: the COMMIT and ABORT markers that end a transaction on a partition.

A marker is a RecordBatch v2 with the transactional (0x10) and control (0x20) attributes, the
transaction's producer id and epoch, base sequence -1 and exactly one record (Kafka's
``EndTransactionMarker``):

* key: int16 version (0) + int16 control type (0 ABORT, 1 COMMIT);
* value: int16 version (0) + Kafka's ``EndTxnMarker`` v0 data, i.e. int32 coordinator epoch.

Other control types (KRaft's LeaderChange 2, snapshot header 3 and footer 4, ...) do not end
transactions: :func:`parse_end_txn_marker` returns None for them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import batch as B
from .codec import build_batch, decode_batch

ABORT = 0
COMMIT = 1
CURRENT_CONTROL_VERSION = 0
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(slots=True, frozen=True)
class EndTxnMarker:
    """The decoded record of a transaction marker."""

    is_commit: bool
    coordinator_epoch: int


def marker_key(commit: bool) -> bytes:
    """The control record key of a COMMIT or ABORT marker."""
    return _KEY.pack(CURRENT_CONTROL_VERSION, COMMIT if commit else ABORT)


def marker_value(coordinator_epoch: int) -> bytes:
    """The control record value: version 0 plus ``EndTxnMarker`` v0 (coordinator epoch)."""
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = B.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One control batch ending ``producer_id``'s transaction (base offset set by the log)."""
    return build_batch(
        [(marker_key(commit), marker_value(coordinator_epoch), (), timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=B.NO_SEQUENCE,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_end_txn_marker(
    batch: bytes | bytearray | memoryview, pos: int = 0
) -> EndTxnMarker | None:
    """Decode the single control record of a control batch at ``pos`` (None if empty/unknown).

    Only transaction markers (type 0 ABORT, 1 COMMIT) end transactions; other control types
    return None, and so does a batch the cleaner emptied.
    """
    decoded = decode_batch(batch, pos)
    if not decoded.records:
        return None
    record = decoded.records[0]
    if record.key is None or len(record.key) < _KEY.size:
        return None
    _version, ctype = _KEY.unpack_from(record.key, 0)
    if ctype not in (ABORT, COMMIT):
        return None
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= _VALUE.size:
        coordinator_epoch = _VALUE.unpack_from(record.value, 0)[1]
    return EndTxnMarker(is_commit=ctype == COMMIT, coordinator_epoch=coordinator_epoch)
