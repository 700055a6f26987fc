"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``
(Kafka's LogSegment).

The ``.log`` file holds record batches exactly as they travel on the wire. Positions of batches
are found through the sparse offset index plus a short walk of batch headers (bounded by
``index.interval.bytes``), so reading at the tail never scans the file.

Large reads (a consumer catching up) are served zero-copy: a read-only ``mmap`` of the file,
sliced into memoryviews the broker writes straight to the socket; small reads use ``pread``.
A memoryview keeps its mapping alive after the segment lets go of it (deleted files stay
readable through it), and a segment never shrinks a file that may still be mapped: it
copies the kept prefix into a new file instead (:meth:`Segment.shrink`), because touching
a mapped page past the end of a file is SIGBUS.

Only the active segment keeps its ``.log`` descriptor open for good; an older segment opens
it on demand, and the shared :data:`moldau.storage.handles.HANDLE_POOL` closes the least
recently used ones (see :mod:`moldau.storage.handles`). Every use of :attr:`Segment.fd` by a
segment a log owns happens under that log's lock (``owner_lock``), which is what lets the pool
close it safely.

Not thread-safe by itself: the owning :class:`moldau.storage.log.Log` serialises access.
"""

from __future__ import annotations

import mmap
import os
import struct
from bisect import bisect_left

from moldau.protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from moldau.protocol.records.codec import decode_batch

from .config import LogConfig
from .fs import RW_CREATE, RW_EXISTING, FileSystem, fsync_handles
from .handles import HANDLE_POOL, HandlePool
from .index import OffsetIndex, TimeIndex
from .names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from .scan import MIN_BATCH_LENGTH, BatchScanner
from .txn_index import TransactionIndex

_WALK_CHUNK = 16 << 10
# Reads at least this large come from a memory map instead of pread (no copy), if the
# current mapping covers them; a growing segment is remapped (mmap + munmap) only for reads of
# MMAP_REMAP_MIN or more (catching up), not for every read near its tail.
MMAP_READ_MIN = 64 << 10
MMAP_REMAP_MIN = 1 << 20
_WALK = struct.Struct(">qi")
_DELTA = struct.Struct(">i")

# A located batch: (file position, header, buffer holding it, buffer's file position).
Located = tuple[int, BatchHeader, bytes, int]
# Per appended batch: (size, last offset, max timestamp).
BatchInfo = tuple[int, int, int]


class Segment:
    """A ``.log`` file with its indexes and the in-memory facts the log needs about it."""

    __slots__ = (
        "_closed", "_fd", "_fs", "_map", "_map_len", "_pool", "base_offset",
        "bytes_since_index", "created_ms", "dir", "index", "index_interval", "log_path",
        "max_timestamp", "next_offset", "offset_of_max_timestamp", "owner_lock",
        "roll_jitter_ms", "rolling_ts", "size", "suffix", "tail_last", "tail_pos", "time_index",
        "txn_index",
    )

    def __init__(self, directory: str, base_offset: int, fs: FileSystem, config: LogConfig,
                 now_ms: int, *, suffix: str = "", jitter_ms: int = 0) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self._fs = fs
        self.suffix = suffix
        self.log_path = segment_file(directory, base_offset, LOG_SUFFIX, suffix)
        self._closed = False
        self._pool: HandlePool | None = None
        # The lock of the log that owns this segment; None until a log adopts it (while it
        # is loaded or written by the cleaner), and only then may the pool close its fd.
        self.owner_lock: object | None = None
        self._fd = fs.open(self.log_path, RW_CREATE)
        self.size = fs.fsize(self._fd)
        self.index = OffsetIndex(segment_file(directory, base_offset, INDEX_SUFFIX, suffix),
                                 base_offset, config.max_index_entries, fs)
        self.time_index = TimeIndex(segment_file(directory, base_offset, TIME_INDEX_SUFFIX,
                                                 suffix),
                                    base_offset, config.max_time_index_entries, fs)
        # The aborted transactions whose markers landed here (file created at the first).
        self.txn_index = TransactionIndex(
            segment_file(directory, base_offset, TXN_INDEX_SUFFIX, suffix), fs)
        self.index_interval = config.index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.rolling_ts: int | None = None
        self.created_ms = now_ms
        self.bytes_since_index = 0
        self.roll_jitter_ms = jitter_ms
        # Last offset and position of every batch appended since the last index entry, so a
        # consumer reading at the tail finds its batch by bisection instead of a header walk.
        # Empty means "unknown": lookups then walk from the index as usual.
        self.tail_last: list[int] = []
        self.tail_pos: list[int] = []
        self._map: mmap.mmap | None = None
        self._map_len = 0

    def __repr__(self) -> str:
        return (f"Segment(base={self.base_offset}, size={self.size}, next={self.next_offset}, "
                f"max_ts={self.max_timestamp})")

    @property
    def fs(self) -> FileSystem:
        """The filesystem seam this segment's files go through."""
        return self._fs

    # -- descriptor ----------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The ``.log`` file's descriptor, reopened if the pool closed it; -1 once closed."""
        fd = self._fd
        if fd >= 0:
            if self._pool is not None and not self.active:
                self._pool.touch(self)
            return fd
        if self._closed:
            return -1
        fd = self._fs.open(self.log_path, RW_EXISTING)
        self._fd = fd
        if self._pool is not None and not self.active:
            self._pool.opened(self)
        return fd

    def adopt(self, owner_lock: object, pool: HandlePool = HANDLE_POOL) -> None:
        """Owned by a log from now on (its lock guards every use of :attr:`fd`); an inactive
        segment's descriptor goes to ``pool``."""
        self.owner_lock = owner_lock
        self._pool = pool
        if self._fd >= 0 and not self.active:
            pool.opened(self)

    def release_handles(self) -> None:
        """Close the descriptor and the memory map (reopened on the next use). For the pool,
        under the owner's lock; an active segment keeps them."""
        if self.active:
            return
        self._unmap()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            self._fs.close(fd)

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.index.appendable

    def open_for_append(self) -> None:
        """Make this the active segment: index files accept entries; keeps its fd open."""
        if self._pool is not None:
            self._pool.forget(self)
        self.fd  # noqa: B018 - reopened if the pool had closed it
        self.index.open_for_append()
        self.time_index.open_for_append()

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (as Kafka does) and write the
        indexes; the descriptor joins the pool. Raises ``OSError`` (the segment then stays
        active)."""
        self.forget_tail()
        if not self.active:
            self.time_index.open_for_append()
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.sync()
        self.time_index.sync()
        self.index.close()
        self.time_index.close()
        # Tail reads of the active segment mapped it; an old segment maps again on demand.
        self._unmap()
        if self._pool is not None and self._fd >= 0:
            self._pool.opened(self)

    def update_config(self, config: LogConfig) -> None:
        self.index_interval = config.index_interval_bytes
        self.index.max_entries = config.max_index_entries
        self.time_index.max_entries = config.max_time_index_entries

    def close(self) -> None:
        """Write pending index entries and close every handle for good."""
        if self.active:
            self.on_become_inactive()
        self._close_handles()

    def _close_handles(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.forget(self)
        self.index.appendable = False
        self.time_index.appendable = False
        self._unmap()
        fd, self._fd = self._fd, -1
        if fd >= 0:
            self._fs.close(fd)

    def close_without_writing(self) -> None:
        """Close every handle, dropping index entries not yet written (a crash, a dead disk,
        or a segment about to be deleted)."""
        self._close_handles()

    def file_paths(self) -> list[str]:
        names = [self.log_path, self.index.path, self.time_index.path, self.txn_index.path]
        return [p for p in names if self._fs.exists(p)]

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename all files from the current suffix to ``new_suffix`` (fds stay valid)."""
        for path in self.file_paths():
            base = path[: len(path) - len(self.suffix)] if self.suffix else path
            self._fs.rename(path, base + new_suffix)
        self.suffix = new_suffix
        self.log_path = segment_file(self.dir, self.base_offset, LOG_SUFFIX, new_suffix)
        self.index.path = segment_file(self.dir, self.base_offset, INDEX_SUFFIX, new_suffix)
        self.time_index.path = segment_file(self.dir, self.base_offset, TIME_INDEX_SUFFIX,
                                            new_suffix)
        self.txn_index.path = segment_file(self.dir, self.base_offset, TXN_INDEX_SUFFIX,
                                           new_suffix)

    def mark_deleted(self) -> list[str]:
        """Close and rename the files to ``.deleted``; returns the new paths to remove later.
        Nothing is written (retention must work on a full disk)."""
        self.close_without_writing()
        self.rename_suffix(self.suffix + DELETED_SUFFIX)
        return self.file_paths()

    def flush_handles(self) -> tuple[list[int], list[str]]:
        """Duplicated fds (caller closes them) and paths to fsync, taken under the log lock
        so a flush in another thread never touches an fd the log may close meanwhile. Pending
        index entries of the active segment are written here."""
        paths = [self.index.path, self.time_index.path]
        if self.txn_index.exists():
            paths.append(self.txn_index.path)
        if not self.active:
            # An older segment no longer changes: fsync it by path, one descriptor at a time
            # (a flush after many rolls must not hold one descriptor per segment at once).
            return [], [self.log_path, *paths]
        for idx in (self.index, self.time_index):
            idx.sync()
        return [self._fs.dup(self.fd)], paths

    # -- appending ---------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
               batches: list[BatchInfo]) -> None:
        """Write ``data`` (whole batches, or chunks that make them up) at the end and index
        them. Raises ``OSError``."""
        start = self.size
        if isinstance(data, list):
            self._fs.write_vectored(self.fd, data, start)
        else:
            self._fs.write_all(self.fd, data, start)
        if start == 0:
            self.rolling_ts = max(b[2] for b in batches)
        pos = start
        interval = self.index_interval
        tail_last = self.tail_last
        tail_pos = self.tail_pos
        if start and not tail_last:
            # Batches before this append are not tracked: a sentinel (the last offset before
            # it) keeps lookups of older offsets on the index walk.
            tail_last.append(self.next_offset - 1)
            tail_pos.append(-1)
        for size, last_offset, max_ts in batches:
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
                self.offset_of_max_timestamp = last_offset
            if self.bytes_since_index > interval:
                self.index.append(last_offset, pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_index = 0
                tail_last.clear()
                tail_pos.clear()
            tail_last.append(last_offset)
            tail_pos.append(pos)
            pos += size
            self.bytes_since_index += size
        self.size = pos
        self.next_offset = batches[-1][1] + 1

    def forget_tail(self) -> None:
        self.tail_last.clear()
        self.tail_pos.clear()

    def rollback(self, size: int, next_offset: int, index_entries: tuple[int, int],
                 max_ts: tuple[int, int]) -> None:
        """Undo a failed append (file, indexes, counters); raises ``OSError`` if it cannot.
        (A mapping never reaches past ``size``, the length before the append: no SIGBUS.)"""
        self.forget_tail()
        self._fs.ftruncate(self.fd, size)
        self.index.truncate_entries(index_entries[0])
        self.time_index.truncate_entries(index_entries[1])
        self.size = size
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka's rollingBasedTimestamp), -1 if none."""
        if self.rolling_ts is None:
            if self.size < HEADER_SIZE:
                return -1
            self.rolling_ts = read_header(self._fs.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        return self.rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_ts: int) -> int:
        first = self.first_batch_timestamp()
        if first >= 0:
            return message_ts - first
        return now_ms - self.created_ms

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if no batch has one (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return self._fs.mtime_ms(self.log_path)
        except OSError:
            return -1

    # -- locating batches ----------------------------------------------------------------
    def translate(self, offset: int, start_pos: int = 0) -> Located | None:
        """The first batch whose last offset is >= ``offset``, or None past the end."""
        end = self.size
        tail_last = self.tail_last
        if tail_last and tail_last[0] < offset <= tail_last[-1] and start_pos == 0:
            pos = self.tail_pos[bisect_left(tail_last, offset)]
            buf = self._fs.pread(self.fd, min(_WALK_CHUNK, end - pos), pos)
            if len(buf) >= HEADER_SIZE:
                return pos, read_header(buf, 0), buf, pos
        pos = max(self.index.lookup(offset), start_pos)
        buf = b""
        buf_start = pos
        fs = self._fs
        walk = _WALK.unpack_from
        delta = _DELTA.unpack_from
        # Only baseOffset, batchLength and lastOffsetDelta are needed to walk; the full
        # header is parsed once, for the batch found.
        while pos + HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = fs.pread(self.fd, min(_WALK_CHUNK, end - pos), pos)
                buf_start = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    return None
            base, length = walk(buf, rel)
            if length < MIN_BATCH_LENGTH:
                return None  # unreadable; recovery is what repairs segments
            if base + delta(buf, rel + 23)[0] >= offset:
                return pos, read_header(buf, rel), buf, buf_start
            pos += length + LOG_OVERHEAD
        return None

    def read(self, offset: int, max_bytes: int, max_position: int,
             min_one_batch: bool) -> tuple[bytes | memoryview, BatchHeader] | None:
        """Whole batches from the one holding ``offset``, ending before ``max_position``.

        Returns None if no batch here ends at or after ``offset``; empty data if the first
        batch lies at/after ``max_position`` or does not fit ``max_bytes`` (and not
        ``min_one_batch``).
        """
        found = self.translate(offset)
        if found is None:
            return None
        pos, header, buf, buf_start = found
        limit = min(max_position, self.size)
        first_size = header.batch_length + LOG_OVERHEAD
        if pos >= limit:
            return b"", header
        want = max(max_bytes, first_size) if min_one_batch else max_bytes
        n = min(limit - pos, want)
        if n < first_size:
            return b"", header
        rel = pos - buf_start
        if rel + n <= len(buf):
            data: bytes | memoryview = memoryview(buf)[rel:rel + n]
        elif n >= MMAP_READ_MIN and (pos + n <= self._map_len or n >= MMAP_REMAP_MIN
                                     or not self.active):
            data = self._mapped(pos, n)
        else:
            data = self._fs.pread(self.fd, n, pos)
        if pos + n < limit:
            data = self._trim_to_batches(data, pos)
        return data, header

    # -- memory map ----------------------------------------------------------------------
    def _mapped(self, pos: int, n: int) -> memoryview:
        """``n`` bytes at ``pos`` as a view of a mapping of the file (no copy)."""
        end = pos + n
        if self._map is None or self._map_len < end:
            self._unmap()
            # Map what the file holds now; a growing segment is remapped when a read passes
            # the end of the old mapping.
            self._map = self._fs.map(self.fd, self.size)
            self._map_len = self.size
        return memoryview(self._map)[pos:end]

    def _unmap(self) -> bool:
        """Drop the mapping; True unless views of it are still alive (they keep it)."""
        m, self._map, self._map_len = self._map, None, 0
        if m is None:
            return True
        try:
            m.close()
        except BufferError:  # exported views still use it; it is unmapped when they go
            return False
        return True

    def shrink(self, size: int) -> None:
        """Cut the file to ``size`` bytes. If a mapping of it may still be read (a response
        being sent), the kept bytes go to a new file that replaces it, and the old file, still
        mapped, keeps its length."""
        if self._unmap():
            self._fs.ftruncate(self.fd, size)
            return
        tmp = self.log_path + ".shrink"
        new_fd = self._fs.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC
                               | getattr(os, "O_CLOEXEC", 0))
        try:
            pos = 0
            while pos < size:
                chunk = self._fs.pread(self.fd, min(1 << 20, size - pos), pos)
                if not chunk:
                    raise OSError(f"{self.log_path} ended at byte {pos} of {size}")
                self._fs.write_all(new_fd, chunk, pos)
                pos += len(chunk)
            self._fs.rename(tmp, self.log_path)
        except BaseException:
            self._fs.close(new_fd)
            raise
        old, self._fd = self._fd, new_fd
        self._fs.close(old)

    def _trim_to_batches(self, data: bytes | memoryview, pos: int) -> memoryview:
        """Cut ``data`` (read from ``pos``) after its last complete batch, walking headers
        from the nearest indexed batch boundary rather than from the start."""
        n = len(data)
        rel = max(self.index.floor_position(pos + n) - pos, 0)
        view = memoryview(data)
        while rel + LOG_OVERHEAD <= n:
            size = int.from_bytes(view[rel + 8:rel + 12], "big") + LOG_OVERHEAD
            if rel + size > n:
                break
            rel += size
        return view[:rel]

    def batches_from(self, pos: int = 0) -> BatchScanner:
        """Unverified header walk from ``pos`` to the end (offsets and timestamps lookups)."""
        return BatchScanner(self._fs, self.fd, pos, self.size, verify=False,
                            segment_base=self.base_offset, min_offset=0)

    def read_at(self, pos: int, size: int) -> bytes:
        return self._fs.pread(self.fd, size, pos)

    # -- truncation (start-up checks and recovery: segment_recovery.py) ------------------
    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove batches whose last offset is >= ``offset``; returns bytes removed."""
        found = self.translate(offset)
        self.forget_tail()
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.bytes_since_index = 0
        if found is None:
            return 0
        pos, header = found[0], found[1]
        removed = self.size - pos
        self.shrink(pos)
        self.size = pos
        self.next_offset = header.base_offset if pos > 0 else self.base_offset
        if pos == 0:
            self.created_ms = now_ms
            self.rolling_ts = None
        self._reload_max_timestamp()
        return removed

    def _reload_max_timestamp(self) -> None:
        ts, off = self.time_index.last_entry()
        for _pos, h in self.batches_from(self.index.lookup(off)):
            if h.max_timestamp > ts:
                ts, off = h.max_timestamp, h.base_offset + h.last_offset_delta
        self.max_timestamp, self.offset_of_max_timestamp = ts, off

    # -- timestamps ----------------------------------------------------------------------
    def find_offset_by_timestamp(self, timestamp: int, start_offset: int
                                 ) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record with timestamp >=
        ``timestamp`` and offset >= ``start_offset`` (Kafka's findOffsetByTimestamp)."""
        _ts, idx_offset = self.time_index.lookup(timestamp)
        walker = self.batches_from(self.index.lookup(max(idx_offset, start_offset)))
        for pos, h in walker:
            if h.max_timestamp < timestamp or h.base_offset + h.last_offset_delta < start_offset:
                continue
            for record in decode_batch(walker.read_batch(pos, h)).records:
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.timestamp, record.offset, h.partition_leader_epoch
        return None

    def max_timestamp_record(self) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record holding the max timestamp."""
        if self.max_timestamp < 0:
            return None
        walker = self.batches_from(self.index.lookup(self.offset_of_max_timestamp))
        for pos, h in walker:
            if h.max_timestamp != self.max_timestamp:
                continue
            if h.is_log_append_time:
                return h.max_timestamp, h.base_offset, h.partition_leader_epoch
            for record in decode_batch(walker.read_batch(pos, h)).records:
                if record.timestamp == h.max_timestamp:
                    return record.timestamp, record.offset, h.partition_leader_epoch
        return None

    # -- durability ------------------------------------------------------------------------
    def flush(self) -> None:
        fds, paths = self.flush_handles()
        fsync_handles(self._fs, fds, paths)
