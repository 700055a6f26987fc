"""Transaction markers (control batches): bytes as Kafka writes them, and the round trip."""

from __future__ import annotations

import io
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kio.schema.end_txn_marker.v0 import EndTxnMarker as KioEndTxnMarker
from kio.serial import entity_writer
from kio.static.primitive import i32

from moldau.protocol.records.batch import read_header
from moldau.protocol.records.codec import build_batch, decode_batch
from moldau.protocol.records.control import (
    EndTxnMarker,
    build_end_txn_marker,
    marker_value,
    parse_end_txn_marker,
)

# A COMMIT marker of producer 4242 epoch 7, coordinator epoch 3, at timestamp 1700000000000,
# laid out by hand from Kafka's RecordBatch v2 and EndTransactionMarker formats.
GOLDEN_COMMIT = bytes.fromhex(
    "0000000000000000"  # base offset
    "00000042"  # batch length 49 + 17
    "ffffffff"  # partition leader epoch
    "02"  # magic
) + b"\x00\x00\x00\x00" + bytes.fromhex(  # crc (checked separately)
    "0030"  # attributes: transactional | control
    "00000000"  # last offset delta
    "0000018bcfe56800" "0000018bcfe56800"  # first / max timestamp
    "0000000000001092"  # producer id 4242
    "0007"  # producer epoch
    "ffffffff"  # base sequence -1
    "00000001"  # one record
    "20"  # record length 16 (zigzag)
    "00" "00" "00"  # attributes, timestamp delta, offset delta
    "08" "00000001"  # key: 4 bytes, version 0, type 1 COMMIT
    "0c" "000000000003"  # value: 6 bytes, version 0, coordinator epoch 3
    "00"  # no headers
)


def _without_crc(data: bytes) -> bytes:
    return data[:17] + b"\x00\x00\x00\x00" + data[21:]


def test_commit_marker_golden_bytes() -> None:
    built = build_end_txn_marker(4242, 7, 3, True, 1_700_000_000_000)
    assert _without_crc(built) == GOLDEN_COMMIT
    # kafka-python, an independent reader, agrees on the CRC and the control attributes.
    batch = DefaultRecordBatch(built)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, -1)


def test_value_is_kio_end_txn_marker_v0() -> None:
    out = io.BytesIO()
    entity_writer(KioEndTxnMarker)(out, KioEndTxnMarker(coordinator_epoch=i32(123456)))
    assert marker_value(123456) == struct.pack(">h", 0) + out.getvalue()


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("coordinator_epoch", [0, 5, 2**31 - 1])
def test_round_trip(commit: bool, coordinator_epoch: int) -> None:
    built = build_end_txn_marker(9, 32766, coordinator_epoch, commit, 1, base_offset=77,
                                 partition_leader_epoch=4)
    h = read_header(built)
    assert h.is_control and h.is_transactional and h.base_offset == 77
    assert h.partition_leader_epoch == 4 and h.record_count == 1
    assert parse_end_txn_marker(built) == EndTxnMarker(commit, coordinator_epoch)
    assert parse_end_txn_marker(b"junk" + built, 4) == EndTxnMarker(commit, coordinator_epoch)


def test_other_control_types_are_not_markers() -> None:
    # KRaft's LeaderChange (type 2) is a control record that ends no transaction.
    leader_change = build_batch([(struct.pack(">hh", 0, 2), b"\x00\x00", (), 1)], control=True)
    assert parse_end_txn_marker(leader_change) is None
    assert decode_batch(leader_change).header.is_control
