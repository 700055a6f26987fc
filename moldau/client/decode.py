"""Fast decoding of fetched record batches into columns.

The consumer's hot path. One call decodes a whole batch into parallel lists (offsets,
timestamps, keys, values, headers), with varints decoded inline: one- and two-byte varints,
which are nearly all of them, never call a function. Column form is what the PySpark source
wants (it builds Arrow arrays from the lists) and per-record objects are built only when a
caller asks for ``ConsumerRecord``s.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol.records import batch as B
from moldau.protocol.records.compression import decompress

from .types import Header


class RecordDecodeError(ValueError):
    """A batch's records section does not decode (corrupt or truncated)."""


@dataclass(slots=True)
class BatchColumns:
    """The records of one batch as columns. ``headers`` is None when no record has any."""

    base_offset: int
    last_offset: int
    timestamp_type: int
    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[Header]] | None
    producer_id: int = -1
    is_transactional: bool = False

    def __len__(self) -> int:
        return len(self.offsets)

    def slice_from(self, offset: int) -> BatchColumns:
        """Drop records below ``offset`` (a fetch can start inside a batch)."""
        if not self.offsets or self.offsets[0] >= offset:
            return self
        i = 0
        offsets = self.offsets
        while i < len(offsets) and offsets[i] < offset:
            i += 1
        return BatchColumns(
            self.base_offset, self.last_offset, self.timestamp_type, offsets[i:],
            self.timestamps[i:], self.keys[i:], self.values[i:],
            self.headers[i:] if self.headers is not None else None,
            self.producer_id, self.is_transactional,
        )


def _uvarint_slow(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of any length (the raw value, before zigzag decoding)."""
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint is longer than 10 bytes")


def _varint_slow(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint is longer than 10 bytes")


def decode_columns(data: bytes, header: B.BatchHeader) -> BatchColumns:
    """Decode the (decompressed) records section of a batch into columns."""
    count = header.record_count
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.is_log_append_time
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    all_headers: list[list[Header]] = []
    any_headers = False
    o_append = offsets.append
    t_append = timestamps.append
    k_append = keys.append
    v_append = values.append
    h_append = all_headers.append
    slow = _uvarint_slow
    no_headers: list[Header] = []
    pos = 0
    # Varints are decoded inline (1-3 bytes; longer ones call _uvarint_slow): a function
    # call per field would double the cost of this loop, the consumer's hottest.
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b3 = data[pos + 2]
                    if b3 < 0x80:
                        u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                        pos += 3
                    else:
                        u, pos = slow(data, pos)
                length = (u >> 1) ^ -(u & 1)
            end = pos + length
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b3 = data[pos + 2]
                    if b3 < 0x80:
                        u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                        pos += 3
                    else:
                        u, pos = slow(data, pos)
                ts_delta = (u >> 1) ^ -(u & 1)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b3 = data[pos + 2]
                    if b3 < 0x80:
                        u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                        pos += 3
                    else:
                        u, pos = slow(data, pos)
                off_delta = (u >> 1) ^ -(u & 1)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b3 = data[pos + 2]
                    if b3 < 0x80:
                        u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                        pos += 3
                    else:
                        u, pos = slow(data, pos)
                klen = (u >> 1) ^ -(u & 1)
            if klen >= 0:
                k_append(data[pos : pos + klen])
                pos += klen
            else:
                k_append(None)
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
                else:
                    b3 = data[pos + 2]
                    if b3 < 0x80:
                        u = (b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)
                        pos += 3
                    else:
                        u, pos = slow(data, pos)
                vlen = (u >> 1) ^ -(u & 1)
            if vlen >= 0:
                v_append(data[pos : pos + vlen])
                pos += vlen
            else:
                v_append(None)
            if data[pos] == 0:
                pos += 1
                h_append(no_headers)
            else:
                hcount, pos = _varint_slow(data, pos)
                hdrs: list[Header] = []
                for _h in range(hcount):
                    hklen, pos = _varint_slow(data, pos)
                    hkey = data[pos : pos + hklen].decode("utf-8", "replace")
                    pos += hklen
                    hvlen, pos = _varint_slow(data, pos)
                    if hvlen >= 0:
                        hdrs.append((hkey, data[pos : pos + hvlen]))
                        pos += hvlen
                    else:
                        hdrs.append((hkey, None))
                h_append(hdrs)
                any_headers = True
            if pos != end:
                raise RecordDecodeError(
                    f"record at offset {base_offset + off_delta} has length {length} but its "
                    f"fields take {length + pos - end} bytes"
                )
            o_append(base_offset + off_delta)
            t_append(base_ts + ts_delta)
    except IndexError:
        raise RecordDecodeError(
            f"records of batch at offset {base_offset} run past the end of the batch"
        ) from None
    if log_append:
        timestamps = [header.max_timestamp] * len(offsets)
    return BatchColumns(
        base_offset, base_offset + header.last_offset_delta, 1 if log_append else 0,
        offsets, timestamps, keys, values, all_headers if any_headers else None,
        header.producer_id, header.is_transactional,
    )


def batch_payload(buf: bytes | memoryview, pos: int, header: B.BatchHeader) -> bytes:
    """The records section of the batch at ``pos``, decompressed."""
    raw = buf[pos + B.HEADER_SIZE : pos + header.size]
    if header.compression:
        return decompress(header.compression, raw)
    return bytes(raw)
