"""Fast decoding of fetched record batches into columns.

The consumer's hot path. One call decodes a whole batch into parallel lists (offsets,
timestamps, keys, values, headers), with varints decoded inline: one- and two-byte varints,
which are nearly all of them, never call a function. Column form is what the PySpark source
wants (it builds Arrow arrays from the lists) and per-record objects are built only when a
caller asks for ``ConsumerRecord``s.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.protocol.errors import RecordDecodeError
from moldau.protocol.records import batch as B
from moldau.protocol.records.codec import batch_payload
from moldau.protocol.varint import read_record_uvarint, read_record_varint

from .types import Header

# RecordDecodeError (raised by the record varint readers) and batch_payload (shared with
# records.codec.decode_batch) live in the protocol layer; re-exported for the consumer's callers.
__all__ = ["BatchColumns", "RecordDecodeError", "batch_payload", "decode_columns"]


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


def decode_columns(data: bytes, header: B.BatchHeader) -> BatchColumns:
    """Decode the (decompressed) records section of a batch into columns."""
    count = header.record_count
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.is_log_append_time
    # Offset deltas of a batch are increasing; when the last one is count - 1 they are
    # exactly 0..count-1 (every batch but a compacted one), so they need no decoding: the
    # delta i is the varint of 2 * i, one byte below 64, two below 8192, three below 2**20.
    sequential = header.last_offset_delta == count - 1
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_at: dict[int, list[Header]] | None = None
    o_append = offsets.append
    t_append = timestamps.append
    k_append = keys.append
    v_append = values.append
    slow = read_record_uvarint
    pos = 0
    # Varints are decoded inline (1-3 bytes; longer ones call read_record_uvarint): a function
    # call per field would double the cost of this loop, the consumer's hottest. A key or
    # value length that fits one byte (zigzag: even = length, odd = null) is read directly.
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                end = pos + 1 + ((b >> 1) ^ -(b & 1))
                pos += 2  # the length and the attributes byte
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
                end = pos + ((u >> 1) ^ -(u & 1))
                pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                t_append(base_ts + ((b >> 1) ^ -(b & 1)))
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
                t_append(base_ts + ((u >> 1) ^ -(u & 1)))
            if sequential:
                # A delta encoded differently leaves pos off; the length check below fails.
                pos += 1 if i < 64 else 2 if i < 8192 else 3 if i < 1048576 else (
                    slow(data, pos)[1] - pos)
            else:
                b = data[pos]
                if b < 0x80:
                    o_append(base_offset + ((b >> 1) ^ -(b & 1)))
                    pos += 1
                else:
                    u, pos = slow(data, pos)
                    o_append(base_offset + ((u >> 1) ^ -(u & 1)))
            b = data[pos]
            if b < 0x80:
                pos += 1
                if b & 1:
                    k_append(None)
                else:
                    k_append(data[pos : pos + (b >> 1)])
                    pos += b >> 1
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
                pos += 1
                if b & 1:
                    v_append(None)
                else:
                    v_append(data[pos : pos + (b >> 1)])
                    pos += b >> 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    pos += 2
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
            else:
                hcount, pos = read_record_varint(data, pos)
                hdrs: list[Header] = []
                for _h in range(hcount):
                    hklen, pos = read_record_varint(data, pos)
                    hkey = data[pos : pos + hklen].decode("utf-8", "replace")
                    pos += hklen
                    hvlen, pos = read_record_varint(data, pos)
                    if hvlen >= 0:
                        hdrs.append((hkey, data[pos : pos + hvlen]))
                        pos += hvlen
                    else:
                        hdrs.append((hkey, None))
                if headers_at is None:
                    headers_at = {}
                headers_at[i] = hdrs
            if pos != end:
                at = base_offset + i if sequential else offsets[-1]
                raise RecordDecodeError(
                    f"record at offset {at} ends at byte {end} of the batch but its fields "
                    f"take it to byte {pos}"
                )
    except IndexError:
        raise RecordDecodeError(
            f"records of batch at offset {base_offset} run past the end of the batch"
        ) from None
    if sequential:
        offsets = list(range(base_offset, base_offset + count))
    if log_append:
        timestamps = [header.max_timestamp] * count
    all_headers = None
    if headers_at is not None:
        none: list[Header] = []
        all_headers = [headers_at.get(i, none) for i in range(count)]
    return BatchColumns(
        base_offset, base_offset + header.last_offset_delta, 1 if log_append else 0,
        offsets, timestamps, keys, values, all_headers,
        header.producer_id, header.is_transactional,
    )
