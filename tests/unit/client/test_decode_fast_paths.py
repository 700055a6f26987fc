"""The fast paths of decode_columns: offsets not decoded in sequential batches, one-byte
key/value lengths read directly, headers kept only for records that have them.

Compared against the reference decoder (``decode_records``) on batches with gaps in their
offset deltas (as compaction leaves them), on batches long enough for two- and three-byte
offset deltas, and on malformed batches that must raise rather than decode wrongly.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.client.decode import RecordDecodeError, batch_payload, decode_columns
from moldau.protocol.records import batch as B
from moldau.protocol.records.codec import build_batch, encode_record

from .test_decode import check_against_reference


def raw_batch(body: bytes, count: int, last_delta: int, base_offset: int = 0,
              base_ts: int = 1_000, max_ts: int = 1_000) -> bytes:
    """A magic-2 batch around an already encoded records section (no compression)."""
    after_crc = struct.pack(">hiqqqhii", 0, last_delta, base_ts, max_ts, -1, -1, -1,
                            count) + body
    return (struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(after_crc), -1, 2)
            + struct.pack(">I", crc32c(after_crc)) + after_crc)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9000), st.integers(-5000, 5000),
                          st.none() | st.binary(max_size=70),
                          st.none() | st.binary(max_size=300),
                          st.booleans()),
                min_size=1, max_size=30),
       st.integers(0, 2**40))
def test_gapped_offset_deltas_match_the_reference(records, base_offset) -> None:
    body = bytearray()
    delta = -1
    for gap, ts_delta, key, value, with_headers in records:
        delta += gap
        headers = [("h", key), ("x", None)] if with_headers else []
        encode_record(body, delta, ts_delta, key, value, headers)
    check_against_reference(raw_batch(bytes(body), len(records), delta, base_offset))


@pytest.mark.parametrize("count", [63, 64, 65, 8191, 8193])
def test_sequential_batches_across_varint_sizes(count: int) -> None:
    records = [(None if i % 11 == 0 else b"k%d" % i, b"v" * (i % 200), [], 5_000 + i)
               for i in range(count)]
    check_against_reference(build_batch(records, base_offset=77))


def test_a_sequential_batch_with_a_misencoded_delta_raises() -> None:
    body = bytearray()
    encode_record(body, 0, 0, b"k", b"v")
    # Offset delta 1 written as a two-byte (non-minimal) varint: 0x82 0x00.
    second = bytearray()
    encode_record(second, 1, 0, b"k", b"v")
    record = bytes(second)
    assert record[3] == 2  # length, attributes, timestamp delta, then the offset delta
    patched = bytes([record[0] + 2]) + record[1:3] + b"\x82\x00" + record[4:]
    blob = raw_batch(bytes(body) + patched, 2, 1)
    header = B.read_header(blob)
    with pytest.raises(RecordDecodeError):
        decode_columns(batch_payload(blob, 0, header), header)


def test_headers_only_on_some_records() -> None:
    blob = build_batch([(b"a", b"1", [], 1), (b"b", b"2", [("h", b"x")], 2),
                        (b"c", b"3", [], 3)])
    header = B.read_header(blob)
    cols = decode_columns(batch_payload(blob, 0, header), header)
    assert cols.headers == [[], [("h", b"x")], []]
    plain = build_batch([(b"a", b"1", [], 1)])
    header = B.read_header(plain)
    assert decode_columns(batch_payload(plain, 0, header), header).headers is None
