"""The records inside a RecordBatch v2, checked the way Kafka's broker checks a produce.

:func:`moldau.protocol.records.batch.validate_batches` checks what the batch header says (size,
magic, CRC-32C, count against last offset delta); this module checks that the records agree
with it, as Kafka's ``LogValidator`` does by iterating every record with ``DefaultRecord``:

- the records section holds exactly ``recordCount`` records and nothing after them;
- each record's length prefix matches the fields it frames: attributes (one byte, unused in
  v2 and written as 0 by every client; Kafka ignores it, we require 0 because kafka-python
  reads it as a varint), timestamp delta (varlong), offset delta (varint), key, value, header
  count and headers, each length -1 (null) or within the record;
- varints are at most 5 bytes (10 for the timestamp delta) and fit their type;
- offset deltas run 0, 1, ..., count - 1. Kafka checks this for compressed batches only (and
  rewrites those that break it); we refuse it for every batch, since a record whose offset
  delta points elsewhere is read at the wrong offset by consumers, and no client writes one;
- key, value and header value lengths below -1 are refused (Kafka reads them as null; some
  consumers fail on them), header key lengths below 0 and header counts larger than the bytes
  left, as Kafka does; header keys must be UTF-8 (Kafka decodes them leniently, kafka-python
  consumers raise CorruptRecordError);
- with ``require_keys`` (a ``cleanup.policy=compact`` topic), every record has a key;
- a compressed batch is decompressed once, into at most ``max_decompressed_bytes``
  (:func:`~moldau.protocol.records.compression.decompress_bounded`), then scanned the same way.

Errors are :class:`~moldau.protocol.records.batch.InvalidBatch` with reason "invalid"
(INVALID_RECORD, Kafka's ``InvalidRecordException``), "corrupt" (CORRUPT_MESSAGE: compressed
data that does not decompress) or "too_large" (MESSAGE_TOO_LARGE: more than
``max_decompressed_bytes`` once decompressed). Nothing is decoded into objects: the scan reads
the varints and skips over keys, values and headers, so a valid batch costs one pass of plain
integer work per record (figures in docs/benchmarks.md, "Record validation cost").
"""

from __future__ import annotations

from .batch import COMPRESSION_MASK, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, InvalidBatch
from .compression import Codec, DecompressedSizeExceeded, decompress_bounded

__all__ = ["DECOMPRESSED_FLOOR", "DECOMPRESSED_RATIO", "MIN_RECORD_SIZE",
           "max_decompressed_bytes", "validate_records"]

# The smallest record: a one-byte length, then attributes, timestamp delta, offset delta, key
# length, value length and header count of one byte each.
MIN_RECORD_SIZE = 7
_MIN_BODY = MIN_RECORD_SIZE - 1
_INT32_RAW = 1 << 32  # a zigzag varint of an int32 is below this before decoding
_INT64_RAW = 1 << 64

# How far a compressed batch may expand: DECOMPRESSED_RATIO x max.message.bytes (which bounds
# the compressed batch), and at least DECOMPRESSED_FLOOR. Kafka sets no limit (it streams the
# records); here a batch is decompressed whole, so the limit is its memory, and its CPU time on
# the event loop. At the default max.message.bytes it is ~16 MiB: librdkafka producers build
# batches of at most batch.size (1,000,000) uncompressed bytes, and a Java producer that gets
# MESSAGE_TOO_LARGE for a batch of several records splits it and sends it again.
DECOMPRESSED_RATIO = 16
DECOMPRESSED_FLOOR = 16 << 20


def max_decompressed_bytes(max_message_bytes: int) -> int:
    """The most bytes a compressed batch may decompress to, for a topic's max.message.bytes."""
    return max(DECOMPRESSED_FLOOR, DECOMPRESSED_RATIO * max_message_bytes)


def validate_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    *,
    max_decompressed_bytes: int,
    require_keys: bool = False,
    timestamps: bool = True,
) -> tuple[int, int]:
    """Check every record of the batch at ``pos`` (whose ``header`` is already validated);
    returns the smallest and largest timestamp delta of its records (0 included), from which
    the caller checks the records' timestamps (``timestamps=False``: not needed, (0, 0)).

    Raises :class:`InvalidBatch`; see the module docstring for what is checked.
    """
    start = pos + HEADER_SIZE
    end = pos + LOG_OVERHEAD + header.batch_length
    count = header.record_count
    codec = header.attributes & COMPRESSION_MASK
    if codec == Codec.NONE:
        if count > (end - start) // MIN_RECORD_SIZE:
            _check_count_fits(count, end - start)
        return _scan(buf, start, end, count, require_keys, timestamps)
    if codec > Codec.ZSTD:
        raise InvalidBatch("corrupt", f"unknown compression codec {codec} in the batch "
                                      "attributes (known: 0-4)")
    try:
        data = decompress_bounded(codec, memoryview(buf)[start:end], max_decompressed_bytes)
    except DecompressedSizeExceeded as exc:
        raise InvalidBatch(
            "too_large",
            f"the {Codec(codec).name} batch decompresses to more than {max_decompressed_bytes} "
            f"bytes, the limit for this topic ({DECOMPRESSED_RATIO} x max.message.bytes, at "
            f"least {DECOMPRESSED_FLOOR >> 20} MiB); send smaller batches",
        ) from exc
    except ValueError as exc:
        raise InvalidBatch("corrupt", f"the records of the {Codec(codec).name} batch do not "
                                      f"decompress: {exc}") from exc
    _check_count_fits(count, len(data))
    return _scan(data, 0, len(data), count, require_keys, timestamps)


def _check_count_fits(count: int, size: int) -> None:
    """Refuse a count such as 2**31 - 1 before scanning anything."""
    if count > size // MIN_RECORD_SIZE:
        raise InvalidBatch(
            "invalid",
            f"the batch declares {count} records, but its {size} bytes of records can hold "
            f"at most {size // MIN_RECORD_SIZE}",
        )


class _RecordError(Exception):
    """What is wrong with record ``index``; :func:`_scan` turns it into InvalidBatch."""

    def __init__(self, index: int, what: str) -> None:
        super().__init__(what)
        self.index = index
        self.what = what


def _fail(index: int, what: str) -> _RecordError:
    return _RecordError(index, what)


def _bad_length(zigzag_index: int, field: str, raw: int) -> _RecordError:
    return _fail(zigzag_index >> 1, f"{field} length {(raw >> 1) ^ -(raw & 1)} (must be -1 for "
                                    f"null, or 0 and above)")


def _varint(data: bytes | bytearray | memoryview, pos: int, first: int,
            limit: int) -> tuple[int, int]:
    """The rest of a varint whose first byte ``first`` (> 127) was at ``pos - 1``: its raw
    (still zigzag-encoded) value and the position after it. ``limit`` is 2**32 for a varint
    (at most 5 bytes, as Kafka's ``ByteUtils.readVarint``) or 2**64 for a varlong (10)."""
    value = first & 0x7F
    shift = 7
    max_shift = 35 if limit == _INT32_RAW else 70
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value >= limit:
                raise ValueError(f"value {value} needs more than {limit.bit_length() - 1} bits")
            return value, pos
        shift += 7
        if shift >= max_shift:
            raise ValueError(f"more than {max_shift // 7} bytes")


def _scan(data: bytes | bytearray | memoryview, pos: int, end: int, count: int,
          require_key: bool, timestamps: bool = True) -> tuple[int, int]:
    """Walk the records in ``data[pos:end]``; the hot loop of the produce path.

    One- and two-byte varints (every length below 8 KiB, deltas below 64 or 8,192) are
    decoded inline; longer ones go through :func:`_varint`. A read past the end of ``data``
    raises IndexError, which means a record runs past its batch. Without ``timestamps`` the
    timestamp deltas are checked for form only (0, 0 is returned).
    """
    # The zigzag varint of the current record's index: its offset delta must be this, and
    # index = zigzag >> 1 (one counter instead of two in the loop).
    zigzag_index = 0
    min_ts = max_ts = 0
    int32 = _INT32_RAW
    min_raw_body = _MIN_BODY << 1
    try:
        while pos < end:
            # Record length: a non-negative zigzag varint is even, and its value is raw >> 1.
            b = data[pos]
            if b < 0x80:
                n = b
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    n, pos = _varint(data, pos + 1, b, int32)
            record_end = pos + (n >> 1)
            if n & 1 or n < min_raw_body or record_end > end:
                n = (n >> 1) ^ -(n & 1)
                raise _fail(zigzag_index >> 1, _length_error(n, end - pos))
            # Attributes, unused in v2: every client writes 0, and kafka-python reads the
            # byte as a varint (128 and above would shift every field after it).
            if data[pos]:
                raise _fail(zigzag_index >> 1, f"attributes {data[pos]} (unused in record "
                                               f"format v2, must be 0)")
            # Timestamp delta.
            b = data[pos + 1]
            if b < 0x80:
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 3
                else:
                    b, pos = _varint(data, pos + 2, b, _INT64_RAW)
            if timestamps:
                t = (b >> 1) ^ -(b & 1)
                if t < min_ts:
                    min_ts = t
                elif t > max_ts:
                    max_ts = t
            # Offset delta: must be the record's index.
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = _varint(data, pos + 1, b, int32)
            if b != zigzag_index:
                index = zigzag_index >> 1
                raise _fail(index, f"offset delta {(b >> 1) ^ -(b & 1)} (record {index} of a "
                                   f"batch must have offset delta {index})")
            # Key: null (raw 1) is the common case.
            b = data[pos]
            if b == 1:
                if require_key:
                    raise _RecordError(-1 - (zigzag_index >> 1), "")
                pos += 1
            else:
                if b < 0x80:
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        b = (b & 0x7F) | (c << 7)
                        pos += 2
                    else:
                        b, pos = _varint(data, pos + 1, b, int32)
                if b & 1:
                    raise _bad_length(zigzag_index, "key", b)
                pos += b >> 1
            # Value.
            b = data[pos]
            if b < 0x80:
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | (c << 7)
                    pos += 2
                else:
                    b, pos = _varint(data, pos + 1, b, int32)
            if b & 1:
                if b != 1:
                    raise _bad_length(zigzag_index, "value", b)
            else:
                pos += b >> 1
            # Headers: almost always none. A key or value that ran past the record's end
            # shows below as a length mismatch.
            if data[pos]:
                pos = _headers(data, pos + 1, data[pos], record_end, zigzag_index >> 1)
            else:
                pos += 1
            if pos != record_end:
                raise _fail(zigzag_index >> 1, f"its length says {n >> 1} bytes but its "
                                               f"fields take {(n >> 1) + pos - record_end}")
            zigzag_index += 2
    except _RecordError as exc:
        raise _invalid(exc.index, exc.what, count) from None
    except IndexError:
        raise _invalid(zigzag_index >> 1, "it runs past the end of the batch", count) from None
    except ValueError as exc:
        raise _invalid(zigzag_index >> 1,
                       f"a varint is longer or larger than its type allows: {exc}",
                       count) from None
    found = zigzag_index >> 1
    if found != count:
        raise InvalidBatch("invalid", f"the batch declares {count} records but holds {found}")
    return min_ts, max_ts


def _length_error(n: int, left: int) -> str:
    if n < _MIN_BODY:
        return f"length {n} is below the {_MIN_BODY} bytes a record's fields take at least"
    return f"length {n} runs past the end of the batch ({left} bytes left)"


def _invalid(index: int, what: str, count: int) -> InvalidBatch:
    """The InvalidBatch for a record error; bytes after the declared records are the header's
    count that is wrong, and a negative ``index`` (-1 - index) a record without a key."""
    if index < 0:
        return InvalidBatch("invalid", f"record {-1 - index} of the batch has no key: a topic "
                                       f"with cleanup.policy=compact cannot accept records "
                                       f"without a key")
    if index >= count:
        return InvalidBatch("invalid", f"the batch declares {count} records, but more bytes "
                                       f"follow record {count - 1} ({what})")
    return InvalidBatch("invalid", f"record {index} of the batch is invalid: {what}")


def _headers(data: bytes | bytearray | memoryview, pos: int, first: int, record_end: int,
             index: int) -> int:
    """Skip a record's headers (count's first byte ``first`` already read); the position after
    them."""
    if pos > record_end:
        raise _fail(index, "its key and value run past its end")
    if first < 0x80:
        raw = first
    else:
        raw, pos = _varint(data, pos, first, _INT32_RAW)
    headers = (raw >> 1) ^ -(raw & 1)
    if headers < 0 or headers > record_end - pos:
        raise _fail(index, f"header count {headers} (the record has {record_end - pos} bytes "
                           f"left)")
    for _ in range(headers):
        b = data[pos]
        pos += 1
        if b >= 0x80:
            b, pos = _varint(data, pos, b, _INT32_RAW)
        if b & 1:
            raise _fail(index, f"header key length {(b >> 1) ^ -(b & 1)} (must be 0 or above)")
        key_end = pos + (b >> 1)
        if key_end > record_end:
            raise _fail(index, "its headers run past its end")
        try:
            str(data[pos:key_end], "utf-8")
        except UnicodeDecodeError:
            raise _fail(index, "a header key is not valid UTF-8 (header keys are strings; "
                               "kafka-python consumers fail on such a record)") from None
        pos = key_end
        b = data[pos]
        pos += 1
        if b >= 0x80:
            b, pos = _varint(data, pos, b, _INT32_RAW)
        if b & 1:
            if b != 1:
                raise _fail(index, f"header value length {(b >> 1) ^ -(b & 1)} (must be -1 "
                                   f"for null, or 0 and above)")
        else:
            pos += b >> 1
        if pos > record_end:
            raise _fail(index, "its headers run past its end")
    return pos
