"""Walking the batches of a segment file in large chunks (recovery and state rebuilds).

:class:`BatchScanner` reads the file with ``pread`` in chunks and yields ``(position, header)``
for each batch. With ``verify=True`` (recovery) every batch must be complete, magic 2, have a
sane header, offsets that grow, and a correct CRC-32C; the walk stops at the first batch that
fails, and :attr:`BatchScanner.valid_end` / :attr:`BatchScanner.error` say where and why, so the
caller truncates the segment there. The CRC does not cover ``baseOffset``, ``batchLength`` or
``partitionLeaderEpoch``, hence the extra offset and length checks.
"""

from __future__ import annotations

from collections.abc import Iterator

from moldau.protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from moldau.protocol.records.batch import compute_crc as _compute_crc

from .fs import FileSystem

INT32_MAX = 0x7FFFFFFF
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_CHUNK = 1 << 20
_HEADER_CHUNK = 64 << 10


class BatchScanner:
    """Iterate ``(position, header)`` over ``[start, end)`` of a segment file."""

    def __init__(self, fs: FileSystem, fd: int, start: int, end: int, *, verify: bool,
                 segment_base: int, min_offset: int | None = None) -> None:
        self._fs = fs
        self._fd = fd
        self.start = start
        self.end = end
        self.verify = verify
        self.segment_base = segment_base
        self.min_offset = segment_base if min_offset is None else min_offset
        self.valid_end = start
        self.error: str | None = None
        self.batches = 0
        self.bytes_read = 0
        self.next_offset: int | None = None

    def _read(self, pos: int, size: int) -> bytes:
        data = self._fs.pread(self._fd, min(size, self.end - pos), pos)
        self.bytes_read += len(data)
        return data

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        chunk_size = _CHUNK if self.verify else _HEADER_CHUNK
        pos = self.start
        end = self.end
        buf = b""
        buf_start = pos
        expect = self.min_offset
        while pos < end:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = self._read(pos, chunk_size)
                buf_start = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    self.error = f"partial batch header at byte {pos}"
                    return
            header = read_header(buf, rel)
            size = header.batch_length + LOG_OVERHEAD
            if header.batch_length < MIN_BATCH_LENGTH or header.magic != 2:
                self.error = (
                    f"corrupt batch header at byte {pos} (magic {header.magic}, "
                    f"length {header.batch_length})"
                )
                return
            if pos + size > end:
                self.error = f"partial batch of {size} bytes at byte {pos}"
                return
            if self.verify:
                if rel + size > len(buf):
                    buf = self._read(pos, max(chunk_size, size))
                    buf_start = pos
                    rel = 0
                problem = self._check(buf, rel, header, expect)
                if problem is not None:
                    self.error = f"{problem} at byte {pos}"
                    return
            self.batches += 1
            yield pos, header
            expect = header.base_offset + header.last_offset_delta + 1
            self.next_offset = expect
            pos += size
            self.valid_end = pos

    def _check(self, buf: bytes, rel: int, h: BatchHeader, expect: int) -> str | None:
        if h.last_offset_delta < 0 or h.record_count < 0 or (
            h.record_count > h.last_offset_delta + 1
        ):
            return (
                f"inconsistent record count {h.record_count} / last offset delta "
                f"{h.last_offset_delta}"
            )
        if h.base_offset < expect:
            return f"batch base offset {h.base_offset} is below the expected {expect}"
        if h.base_offset + h.last_offset_delta - self.segment_base > INT32_MAX:
            return f"batch offset {h.base_offset} overflows the segment's relative offsets"
        if _compute_crc(buf, rel, h.batch_length + LOG_OVERHEAD) != h.crc:
            return "CRC-32C mismatch"
        return None

    def read_batch(self, pos: int, header: BatchHeader) -> bytes:
        """The full bytes of one batch (for the rare control batch a rebuild must decode)."""
        size = header.batch_length + LOG_OVERHEAD
        return self._fs.pread(self._fd, size, pos)


def validate_replicated(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Validate batches fetched from a leader; raises ``ValueError`` saying what is wrong.

    Like the produce-path validation but allowing what compaction leaves behind: fewer records
    than the offset delta spans (down to empty batches) and offset gaps between batches.
    """
    headers: list[BatchHeader] = []
    total = len(buf)
    pos = 0
    expect = -1
    if total == 0:
        raise ValueError("empty record set")
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise ValueError(f"truncated batch header at byte {pos}")
        h = read_header(buf, pos)
        size = h.batch_length + LOG_OVERHEAD
        if h.magic != 2:
            raise ValueError(f"record batch magic {h.magic} is not supported (need 2)")
        if h.batch_length < MIN_BATCH_LENGTH or pos + size > total:
            raise ValueError(f"batch at byte {pos} is truncated or has a bad length")
        if h.last_offset_delta < 0 or not 0 <= h.record_count <= h.last_offset_delta + 1:
            raise ValueError(f"batch at offset {h.base_offset} has an inconsistent record count")
        if h.base_offset < expect:
            raise ValueError(f"batch offsets go backwards at offset {h.base_offset}")
        if _compute_crc(buf, pos, size) != h.crc:
            raise ValueError(f"CRC-32C mismatch in batch at offset {h.base_offset}")
        headers.append(h)
        expect = h.base_offset + h.last_offset_delta + 1
        pos += size
    return headers
