"""Golden bytes of ``__transaction_state`` records (Kafka's TransactionLogKey/Value)."""

from __future__ import annotations

import struct

import pytest

from moldau.broker.txn.records import (
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_from_value,
)
from moldau.broker.txn.state import TxnMetadata, TxnState

# Kafka's TransactionLogMessageFormatterTest record: id TXNID, pid 100, epoch 50, timeout
# 500, status 4 (CompleteCommit), no partitions, last update 1000, start 750; written as v0.
GOLDEN_KEY = bytes.fromhex("0000" "0005") + b"TXNID"
GOLDEN_VALUE = bytes.fromhex(
    "0000"                  # value version 0
    "0000000000000064"      # producer id 100
    "0032"                  # producer epoch 50
    "000001f4"              # timeout 500
    "04"                    # status CompleteCommit
    "00000000"              # partitions: empty array
    "00000000000003e8"      # last update 1000
    "00000000000002ee"      # start 750
)
FORMATTER_META = TxnMetadata("TXNID", 100, 50, 500, TxnState.COMPLETE_COMMIT,
                             start_ms=750, last_update_ms=1000)


def test_key_golden_bytes() -> None:
    assert encode_key("TXNID") == GOLDEN_KEY
    assert decode_key(GOLDEN_KEY) == "TXNID"


def test_value_golden_bytes() -> None:
    assert encode_value(FORMATTER_META) == GOLDEN_VALUE
    value = decode_value(GOLDEN_VALUE)
    assert metadata_from_value("TXNID", value) == FORMATTER_META


def test_empty_state_writes_null_partitions() -> None:
    meta = TxnMetadata("t", 7, 0, 60000, TxnState.EMPTY, last_update_ms=5)
    raw = encode_value(meta)
    assert raw[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"
    assert decode_value(raw).partitions == frozenset()


def test_ongoing_round_trip_sorted_by_topic() -> None:
    meta = TxnMetadata("t", 7, 3, 60000, TxnState.ONGOING,
                       partitions=frozenset({("b", 1), ("a", 2), ("a", 0)}),
                       start_ms=10, last_update_ms=11)
    raw = encode_value(meta)
    # topics sorted: a [0, 2], b [1]
    assert b"\x00\x01a\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02" in raw
    assert metadata_from_value("t", decode_value(raw)) == meta


def test_reads_flexible_v1_with_previous_producer_id() -> None:
    raw = (struct.pack(">hqhib", 1, 100, 50, 500, 2)
           + bytes([2, 2]) + b"t" + bytes([3]) + struct.pack(">ii", 0, 4) + bytes([0])
           + struct.pack(">qq", 1000, 750)
           + bytes([2, 0, 8]) + struct.pack(">q", 99) + bytes([2, 2]) + struct.pack(">h", 1))
    value = decode_value(raw)
    assert value.state is TxnState.PREPARE_COMMIT
    assert value.partitions == frozenset({("t", 0), ("t", 4)})
    assert (value.last_update_ms, value.start_ms, value.previous_producer_id) == (1000, 750, 99)


@pytest.mark.parametrize("raw", [b"", b"\x00\x02", GOLDEN_VALUE[:-3],
                                 GOLDEN_VALUE[:16] + b"\x09" + GOLDEN_VALUE[17:]])
def test_bad_values_raise_format_error(raw: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_value(raw)


def test_bad_key_version() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x01\x00\x01x")


def test_memory_only_states_are_never_written() -> None:
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("t", 1, 0, 1, TxnState.PREPARE_EPOCH_FENCE))
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("t", 1, 0, 1, TxnState.EMPTY, partitions=frozenset({("a", 0)})))
