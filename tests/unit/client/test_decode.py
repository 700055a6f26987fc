"""Column decoding of record batches and the consumer's buffer draining."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.client.decode import batch_payload, decode_columns
from moldau.client.errors import RecordCorruptError
from moldau.client.fetcher import take_batches
from moldau.client.subscription import FetchedData, PartitionState
from moldau.client.types import TopicPartition
from moldau.protocol.records import batch as B
from moldau.protocol.records.codec import build_batch, decode_records
from moldau.protocol.records.compression import Codec

TP = TopicPartition("t", 0)

records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=300),
        st.none() | st.binary(max_size=3000),
        st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)),
                 max_size=3),
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1, max_size=40,
)


def check_against_reference(blob: bytes) -> None:
    """decode_columns gives what the reference decoder (decode_records) gives for ``blob``."""
    header = B.read_header(blob)
    payload = batch_payload(blob, 0, header)
    cols = decode_columns(payload, header)
    ref = decode_records(payload, header)
    assert cols.offsets == [r.offset for r in ref]
    assert cols.timestamps == [r.timestamp for r in ref]
    assert cols.keys == [r.key for r in ref]
    assert cols.values == [r.value for r in ref]
    hdrs = cols.headers if cols.headers is not None else [[] for _ in ref]
    assert hdrs == [r.headers for r in ref]
    assert cols.last_offset == header.base_offset + header.last_offset_delta


@settings(max_examples=150, deadline=None)
@given(records_strategy, st.sampled_from(list(Codec)), st.integers(0, 2**40))
def test_columns_match_reference_decoder(records, codec, base_offset) -> None:
    blob = build_batch(records, base_offset=base_offset, codec=codec)
    check_against_reference(blob)
    assert B.read_header(blob).last_offset_delta == len(records) - 1


def test_truncated_records_raise() -> None:
    blob = build_batch([(b"k", b"v" * 100, [], 1)])
    header = B.read_header(blob)
    with pytest.raises(ValueError, match="past the end"):
        decode_columns(batch_payload(blob, 0, header)[:-20], header)


def _state(*blobs: bytes, position: int = 0) -> PartitionState:
    state = PartitionState(TP, position=position, fetch_offset=position)
    for blob in blobs:
        state.buffer.append(FetchedData(TP, 0, blob))
        state.buffered_bytes += len(blob)
    return state


def test_take_batches_skips_below_position_and_honours_max_records() -> None:
    b1 = build_batch([(None, str(i).encode(), [], i) for i in range(5)], base_offset=0)
    b2 = build_batch([(None, str(i).encode(), [], i) for i in range(5, 10)], base_offset=5)
    state = _state(b1 + b2, position=3)
    out, n = take_batches(state, 4, check_crcs=True, read_committed=False)
    assert n == 4
    assert [o for c in out for o in c.offsets] == [3, 4, 5, 6]
    assert state.position == 7 and state.leftover is not None
    out, n = take_batches(state, 100, check_crcs=True, read_committed=False)
    assert [o for c in out for o in c.offsets] == [7, 8, 9]
    assert state.position == 10 and not state.has_data and state.buffered_bytes == 0


def test_crc_mismatch_is_reported_with_partition_and_offset() -> None:
    blob = bytearray(build_batch([(None, b"value", [], 1)], base_offset=12))
    blob[-3] ^= 0xFF  # a byte inside the value
    with pytest.raises(RecordCorruptError, match=r"t-0: CRC-32C mismatch .* offset 12"):
        take_batches(_state(bytes(blob), position=12), 10, True, False)
    # with check.crcs=false the (corrupt) value is returned as is
    out, _ = take_batches(_state(bytes(blob), position=12), 10, False, False)
    assert out[0].values[0] != b"value"


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    b1 = build_batch([(None, b"a", [], 1)], base_offset=0)
    b2 = build_batch([(None, b"b", [], 1)], base_offset=1)
    state = _state(b1 + b2[:30])
    _out, n = take_batches(state, 10, True, False)
    assert n == 1 and state.position == 1


def _control(base_offset: int, pid: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return build_batch([(key, struct.pack(">hi", 0, 0), [], 1)], base_offset=base_offset,
                       producer_id=pid, producer_epoch=0, base_sequence=-1,
                       transactional=True, control=True)


def test_read_committed_drops_aborted_and_control_batches() -> None:
    aborted = build_batch([(None, b"bad", [], 1)], base_offset=0, producer_id=9,
                          producer_epoch=0, base_sequence=0, transactional=True)
    abort_marker = _control(1, 9, commit=False)
    committed = build_batch([(None, b"good", [], 1)], base_offset=2, producer_id=8,
                            producer_epoch=0, base_sequence=0, transactional=True)
    commit_marker = _control(3, 8, commit=True)
    plain = build_batch([(None, b"plain", [], 1)], base_offset=4)
    blob = aborted + abort_marker + committed + commit_marker + plain
    state = _state(blob)
    state.buffer[0].aborted = [(0, 9)]
    out, _ = take_batches(state, 100, True, read_committed=True)
    assert [v for c in out for v in c.values] == [b"good", b"plain"]
    assert state.position == 5
    state = _state(blob)
    out, _ = take_batches(state, 100, True, read_committed=False)
    assert [v for c in out for v in c.values] == [b"bad", b"good", b"plain"]


def test_log_append_time_uses_max_timestamp() -> None:
    blob = bytearray(build_batch([(None, b"a", [], 5), (None, b"b", [], 6)]))
    header = B.read_header(blob)
    B.set_log_append_time(blob, 0, header, 999)
    header = B.read_header(blob)
    cols = decode_columns(batch_payload(bytes(blob), 0, header), header)
    assert cols.timestamps == [999, 999] and cols.timestamp_type == 1
