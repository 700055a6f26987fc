"""Record batches built byte by byte, valid or broken in one named way, with a correct CRC-32C.

Shared by the raw-socket integration test (test_record_validation.py) and the unit tests of
check_record_set (tests/unit/broker/test_produce_validation.py): every broken shape passes the
batch header checks (size, magic, CRC, count against last offset delta) and is wrong only
inside its records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from moldau.protocol.records.codec import encode_record
from moldau.protocol.records.compression import Codec, compress
from moldau.protocol.varint import uvarint_bytes

Header = tuple[str, bytes | None]


def zigzag(value: int) -> bytes:
    """A record field's varint (zigzag, then unsigned varint)."""
    return uvarint_bytes((value << 1) ^ (value >> 63))


def record(index: int, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: Sequence[Header] = (), ts_delta: int = 0) -> bytes:
    """One well-formed record with offset delta ``index``, its length prefix included."""
    out = bytearray()
    encode_record(out, index, ts_delta, key, value, headers)
    return bytes(out)


def framed(body: bytes) -> bytes:
    """``body`` (the fields after the length) with its length prefix."""
    return zigzag(len(body)) + body


def batch(records: bytes, *, count: int, last_offset_delta: int | None = None,
          codec: Codec = Codec.NONE, compressed: bytes | None = None, base_timestamp: int,
          max_timestamp: int | None = None, attributes: int | None = None,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A RecordBatch v2 around ``records`` (compressed with ``codec``, or ``compressed`` as
    the payload as it is) whose header says ``count`` records; the CRC is correct."""
    payload = compressed if compressed is not None else (
        compress(codec, records) if codec else records)
    if last_offset_delta is None:
        last_offset_delta = count - 1
    if max_timestamp is None:
        max_timestamp = base_timestamp
    if attributes is None:
        attributes = int(codec)
    after_crc = struct.pack(">hiqqqhii", attributes, last_offset_delta, base_timestamp,
                            max_timestamp, producer_id, producer_epoch, base_sequence,
                            count) + payload
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def good_records(n: int, value: bytes = b"v") -> bytes:
    return b"".join(record(i, b"k%d" % i, value) for i in range(n))


def broken_record_sets(now_ms: int) -> dict[str, bytes]:
    """Uncompressed batches that are wrong only inside their records (named by what is
    wrong). Each must be refused with INVALID_RECORD."""
    three = good_records(3)
    one = record(0)
    # Fields of a record without its length prefix, for hand-made bodies.
    head = b"\x00" + zigzag(0) + zigzag(0)  # attributes, timestamp delta, offset delta 0

    def b(records: bytes, count: int, **kw: int) -> bytes:
        return batch(records, count=count, base_timestamp=now_ms, **kw)

    return {
        "count above the records present": b(three, 5),
        "count one above, within the bytes": b(good_records(3, b"v" * 20), 4),
        "count below the records present": b(three, 2),
        "count 2**31-1": b(three, 2**31 - 1),
        "truncated record": b(three[:-3], 3),
        "record length past the batch end": b(three + zigzag(100) + head, 4),
        "trailing bytes after the last record": b(three + b"\x00\x00\x00", 3),
        "record length longer than its fields": b(framed(head + b"\x02k\x02v\x00\x00\x00"), 1),
        "record length shorter than its fields": b(zigzag(6) + head + b"\x02k\x02v\x00", 1),
        "record length negative": b(zigzag(-5) + head + b"\x02k\x02v\x00", 1),
        "varint longer than 5 bytes": b(framed(b"\x00" + zigzag(0) + b"\xff\xff\xff\xff\xff\x01"
                                               + b"\x02k\x02v\x00"), 1),
        "varint beyond int32": b(framed(b"\x00" + zigzag(0) + b"\xff\xff\xff\xff\x7f"
                                        + b"\x02k\x02v\x00"), 1),
        "timestamp varlong longer than 10 bytes": b(framed(b"\x00" + b"\xff" * 10 + b"\x01"
                                                           + zigzag(0) + b"\x02k\x02v\x00"), 1),
        "offset deltas out of order": b(record(0) + record(2) + record(1), 3),
        "offset deltas not starting at 0": b(record(1) + record(2) + record(3), 3),
        "offset delta repeated": b(record(0) + record(0), 2),
        "record attributes not 0": b(framed(b"\x80" + zigzag(0) + zigzag(0) + b"\x02k\x02v\x00"),
                                     1),
        "key length -2": b(framed(head + zigzag(-2) + b"\x02v\x00"), 1),
        "value length -7": b(framed(head + b"\x02k" + zigzag(-7) + b"\x00"), 1),
        "key past the record end": b(framed(head + zigzag(40) + b"k\x02v\x00"), 1),
        "value past the batch end": b(framed(head + b"\x02k" + zigzag(1000) + b"v\x00"), 1),
        "header count negative": b(framed(head + b"\x02k\x02v" + zigzag(-1)), 1),
        "header count larger than the record": b(framed(head + b"\x02k\x02v" + zigzag(1000)
                                                        + b"\x02h\x02x"), 1),
        "header key length -1": b(framed(head + b"\x02k\x02v\x02" + zigzag(-1) + b"\x02x"), 1),
        "header key not UTF-8": b(framed(head + b"\x02k\x02v\x02\x02\xdd\x02x"), 1),
        "header value length -3": b(framed(head + b"\x02k\x02v\x02\x02h" + zigzag(-3)), 1),
        "good record then garbage record": b(one + b"\x0e" + b"\xff" * 7, 2),
    }
