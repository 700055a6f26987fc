"""Encoding and decoding of the records inside a RecordBatch v2.

The broker never calls this on the produce or fetch path; clients, compaction and tools do.
kio ships a record reader, but it truncates timestamps to seconds and knows no compression,
so records are coded here (varints per Kafka's spec, compression via
:mod:`moldau.protocol.records.compression`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from ..varint import read_record_varint, uvarint_bytes
from . import batch as B
from .compression import Codec, compress, decompress

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One record as a client sees it (offset and timestamp resolved)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


@dataclass(slots=True)
class DecodedBatch:
    """A batch header with its decoded records."""

    header: B.BatchHeader
    records: list[Record]

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (as Kafka's TimestampType ids)."""
        return 1 if self.header.is_log_append_time else 0


# Encoded unsigned varints for every value below 2**14 (one and two bytes), so the common
# lengths and deltas are a list lookup instead of a loop: producing is per-record work.
_VARINT_LIMIT = 1 << 14
_VARINTS = [uvarint_bytes(u) for u in range(_VARINT_LIMIT)]
_NULL = _VARINTS[1]  # zigzag(-1)


def _zigzag_varint(value: int, out: bytearray) -> None:
    u = (value << 1) ^ (value >> 63)
    out += _VARINTS[u] if u < _VARINT_LIMIT else uvarint_bytes(u)


def _write_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        out += _NULL
    else:
        n = len(data) << 1
        out += _VARINTS[n] if n < _VARINT_LIMIT else uvarint_bytes(n)
        out += data


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one encoded record (with its length prefix) to ``out``."""
    varints = _VARINTS
    limit = _VARINT_LIMIT
    body = bytearray(b"\x00")  # attributes
    u = (timestamp_delta << 1) ^ (timestamp_delta >> 63)
    body += varints[u] if u < limit else uvarint_bytes(u)
    u = offset_delta << 1
    body += varints[u] if u < limit else uvarint_bytes(u)
    if key is None:
        body += _NULL
    else:
        u = len(key) << 1
        body += varints[u] if u < limit else uvarint_bytes(u)
        body += key
    if value is None:
        body += _NULL
    else:
        u = len(value) << 1
        body += varints[u] if u < limit else uvarint_bytes(u)
        body += value
    if headers:
        u = len(headers) << 1
        body += varints[u] if u < limit else uvarint_bytes(u)
        for hkey, hvalue in headers:
            raw = hkey.encode("utf-8")
            _write_bytes(raw, body)
            _write_bytes(hvalue, body)
    else:
        body.append(0)
    u = len(body) << 1
    out += varints[u] if u < limit else uvarint_bytes(u)
    out += body


_HEADER_NO_CRC = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")


def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None, Sequence[Header], int]],
    *,
    base_offset: int = 0,
    codec: Codec | int = Codec.NONE,
    producer_id: int = B.NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = B.NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = B.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Build a RecordBatch v2 from ``(key, value, headers, timestamp_ms)`` tuples."""
    body = bytearray()
    first_ts: int | None = None
    max_ts = -1
    count = 0
    for key, value, headers, ts in records:
        if first_ts is None:
            first_ts = ts
        max_ts = max(max_ts, ts)
        encode_record(body, count, ts - first_ts, key, value, headers)
        count += 1
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    assert first_ts is not None
    payload = compress(codec, bytes(body)) if codec else bytes(body)
    attributes = int(codec) & B.COMPRESSION_MASK
    if transactional:
        attributes |= B.TRANSACTIONAL_BIT
    if control:
        attributes |= B.CONTROL_BIT
    after_crc = _AFTER_CRC.pack(
        attributes, count - 1, first_ts, max_ts, producer_id, producer_epoch, base_sequence, count
    ) + payload
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (
        _HEADER_NO_CRC.pack(base_offset, batch_length, partition_leader_epoch, 2)
        + struct.pack(">I", crc)
        + after_crc
    )


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def decode_records(data: bytes, header: B.BatchHeader) -> list[Record]:
    """Decode the (already decompressed) records section of a batch."""
    records: list[Record] = []
    pos = 0
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.is_log_append_time
    read = read_record_varint
    n = len(data)
    for _ in range(header.record_count):
        length, pos = read(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise ValueError("record runs past the end of its batch")
        pos += 1  # attributes, unused in v2
        ts_delta, pos = read(data, pos)
        off_delta, pos = read(data, pos)
        klen, pos = read(data, pos)
        if klen >= 0:
            key: bytes | None = data[pos : pos + klen]
            pos += klen
        else:
            key = None
        vlen, pos = read(data, pos)
        if vlen >= 0:
            value: bytes | None = data[pos : pos + vlen]
            pos += vlen
        else:
            value = None
        hcount, pos = read(data, pos)
        headers: list[Header] = []
        for _h in range(hcount):
            hklen, pos = read(data, pos)
            hkey = data[pos : pos + hklen].decode("utf-8", "replace")
            pos += hklen
            hvlen, pos = read(data, pos)
            if hvlen >= 0:
                hval: bytes | None = data[pos : pos + hvlen]
                pos += hvlen
            else:
                hval = None
            headers.append((hkey, hval))
        if pos != end:
            raise ValueError("record length does not match its fields")
        if log_append:
            ts = header.max_timestamp
        else:
            ts = base_ts + ts_delta
            if not _INT64_MIN <= ts <= _INT64_MAX:
                # Kafka adds two Java longs here, which wraps: so do we, or a client-chosen
                # delta makes a timestamp no response can carry.
                ts = (ts - _INT64_MIN) % (1 << 64) + _INT64_MIN
        records.append(Record(base_offset + off_delta, ts, key, value, headers))
    return records


def batch_payload(buf: bytes | bytearray | memoryview, pos: int, header: B.BatchHeader) -> bytes:
    """The records section of the batch at ``pos`` (with its ``header``), decompressed."""
    raw = memoryview(buf)[pos + B.HEADER_SIZE : pos + header.size]
    return decompress(header.compression, raw) if header.compression else bytes(raw)


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> DecodedBatch:
    """Decode the batch at ``pos`` (header, decompression, records)."""
    header = B.read_header(buf, pos)
    return DecodedBatch(header, decode_records(batch_payload(buf, pos, header), header))


def iter_decoded(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterable[DecodedBatch]:
    """Decode every complete batch in a fetch response's records blob."""
    for pos, header in B.iter_batches(buf):
        if header.magic != 2:
            raise ValueError(f"unsupported record batch magic {header.magic}")
        if verify_crc and not B.check_crc(buf, pos, header):
            raise ValueError(f"CRC mismatch in batch at offset {header.base_offset}")
        yield decode_batch(buf, pos)


def recompress_batch(buf: bytes | bytearray | memoryview, pos: int, codec: Codec | int) -> bytes:
    """Rewrite the batch at ``pos`` with ``codec``, keeping producer id/epoch/sequence,
    transactional flag and record timestamps (a topic's ``compression.type``)."""
    decoded = decode_batch(buf, pos)
    h = decoded.header
    return build_batch(
        ((r.key, r.value, r.headers, r.timestamp) for r in decoded.records),
        base_offset=h.base_offset,
        codec=codec,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        transactional=h.is_transactional,
        partition_leader_epoch=h.partition_leader_epoch,
    )
