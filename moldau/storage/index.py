"""Sparse offset and time indexes of a segment, in Kafka's file formats.

* ``.index``: 8-byte entries, big-endian ``int32 relativeOffset, int32 position``; an entry maps
  (an offset inside) a batch to the file position where that batch starts.
* ``.timeindex``: 12-byte entries, big-endian ``int64 timestamp, int32 relativeOffset``; an entry
  says every batch up to that offset has a max timestamp <= that timestamp. Timestamps strictly
  grow from entry to entry.

Kafka preallocates and memory-maps these files; we keep the entries in ``array`` objects for
lookups (``bisect`` on them runs in C) and write new entries to the file in one go when the
segment is flushed, rolled or closed, so files are never preallocated and hold exactly
``entries * size`` bytes (Kafka trims its files to the same layout on close, so the files are
interchangeable). No index keeps a file descriptor open: a partition's active segment holds
one descriptor (its ``.log``), not three. Entries written late are safe: after a crash the
active segment (and everything after the recovery point) is recovered and its indexes rebuilt
from the log; a clean shutdown writes every entry.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right

from .errors import CorruptIndex
from .fs import RW_CREATE, FileSystem

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_SWAP = sys.byteorder == "little"


def _strictly_increasing(values: array) -> bool:
    # Both checks run in C: sorted() on sorted data is linear, set() finds duplicates.
    as_list = values.tolist()
    return as_list == sorted(as_list) and len(set(as_list)) == len(as_list)


class _IndexFile:
    """What both indexes share: a file of fixed-size entries whose in-memory copy lives in
    ``rel`` (relative offsets) plus one parallel array per subclass; the first ``persisted``
    entries are on disk."""

    ENTRY_SIZE = 0
    __slots__ = ("_fs", "appendable", "base_offset", "max_entries", "path", "persisted", "rel")

    def __init__(self, path: str, base_offset: int, max_entries: int, fs: FileSystem) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._fs = fs
        self.rel = array("i")
        self.persisted = 0
        self.appendable = False

    def _columns(self) -> tuple[array, ...]:
        """Every in-memory column, ``rel`` included (truncated together)."""
        raise NotImplementedError

    def _entries_bytes(self, start: int) -> bytes:
        """File content of entries ``start`` onwards."""
        raise NotImplementedError

    def open_for_append(self) -> None:
        """Accept new entries (active segment only); the file exists from now on, holding
        exactly the persisted entries."""
        if self.appendable:
            return
        fd = self._fs.open(self.path, RW_CREATE)
        try:
            want = self.persisted * self.ENTRY_SIZE
            if self._fs.fsize(fd) != want:
                self._fs.ftruncate(fd, want)
        finally:
            self._fs.close(fd)
        self.appendable = True

    def close(self) -> None:
        """Write pending entries and stop accepting new ones. Raises ``OSError``."""
        if self.appendable:
            self.sync()
            self.appendable = False

    def sync(self, fsync: bool = False) -> None:
        """Write entries not yet in the file (and fsync it if asked). Raises ``OSError``."""
        pending = len(self.rel) - self.persisted
        if pending <= 0 and not fsync:
            return
        fd = self._fs.open(self.path, RW_CREATE)
        try:
            if pending > 0:
                self._fs.write_all(fd, self._entries_bytes(self.persisted),
                                   self.persisted * self.ENTRY_SIZE)
            if fsync:
                self._fs.fsync(fd)
        finally:
            self._fs.close(fd)
        self.persisted = len(self.rel)

    def flush(self) -> None:
        if self.appendable:
            self.sync(fsync=True)

    def mark_persisted(self) -> None:
        """The file was just written whole (rebuilt or loaded)."""
        self.persisted = len(self.rel)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        keep = bisect_right(self.rel, offset - self.base_offset - 1)
        self.truncate_entries(keep)

    def truncate_entries(self, keep: int) -> None:
        if keep >= len(self.rel):
            return
        if keep < self.persisted:
            fd = self._fs.open(self.path, RW_CREATE)
            try:
                self._fs.ftruncate(fd, keep * self.ENTRY_SIZE)
            finally:
                self._fs.close(fd)
            self.persisted = keep
        for column in self._columns():
            del column[keep:]

    def reset(self) -> None:
        self.truncate_entries(0)

    @property
    def entries(self) -> int:
        return len(self.rel)

    @property
    def is_full(self) -> bool:
        return len(self.rel) >= self.max_entries


class OffsetIndex(_IndexFile):
    """Relative offset -> file position, sparse."""

    ENTRY_SIZE = 8
    __slots__ = ("positions",)

    def __init__(self, path: str, base_offset: int, max_entries: int, fs: FileSystem) -> None:
        super().__init__(path, base_offset, max_entries, fs)
        self.positions = array("i")

    def _columns(self) -> tuple[array, ...]:
        return self.rel, self.positions

    # -- loading -----------------------------------------------------------------------
    def load(self, log_size: int) -> None:
        """Read the file and sanity-check it; raises :class:`CorruptIndex` or ``OSError``."""
        data = self._fs.read_file(self.path)
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndex(
                f"index file {self.path} has size {len(data)}, not a multiple of 8"
            )
        flat = array("i")
        flat.frombytes(data)
        if _SWAP:
            flat.byteswap()
        rel = flat[0::2]
        pos = flat[1::2]
        if rel:
            if rel[0] < 0 or not _strictly_increasing(rel):
                raise CorruptIndex(f"index file {self.path} has offsets out of order")
            if pos[0] < 0 or not _strictly_increasing(pos) or pos[-1] >= log_size:
                raise CorruptIndex(
                    f"index file {self.path} has positions out of order or past the log end"
                )
        self.rel = rel
        self.positions = pos
        self.persisted = len(rel)

    # -- writing -----------------------------------------------------------------------
    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel and rel <= self.rel[-1]:
            return  # Kafka refuses non-increasing offsets; they cannot help a lookup
        self.rel.append(rel)
        self.positions.append(position)

    def write_all_entries(self) -> bytes:
        """The file content for the current entries (used when rebuilding an index)."""
        return self._entries_bytes(0)

    def _entries_bytes(self, start: int) -> bytes:
        n = len(self.rel) - start
        flat = array("i", [0]) * (2 * n)
        flat[0::2] = self.rel[start:]
        flat[1::2] = self.positions[start:]
        if _SWAP:
            flat.byteswap()
        return flat.tobytes()

    # -- lookups -----------------------------------------------------------------------
    def lookup(self, offset: int) -> int:
        """File position of the batch holding the largest indexed offset <= ``offset``."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch start <= ``position`` (a known batch boundary), else 0."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    @property
    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0


class TimeIndex(_IndexFile):
    """Max timestamp so far -> relative offset, sparse, strictly increasing timestamps."""

    ENTRY_SIZE = 12
    __slots__ = ("timestamps",)

    def __init__(self, path: str, base_offset: int, max_entries: int, fs: FileSystem) -> None:
        super().__init__(path, base_offset, max_entries, fs)
        self.timestamps = array("q")

    def _columns(self) -> tuple[array, ...]:
        return self.timestamps, self.rel

    def load(self) -> None:
        data = self._fs.read_file(self.path)
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndex(
                f"time index file {self.path} has size {len(data)}, not a multiple of 12"
            )
        ts = array("q")
        rel = array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            ts.append(t)
            rel.append(r)
        if ts:
            if not _strictly_increasing(ts):
                raise CorruptIndex(f"time index file {self.path} has timestamps out of order")
            rel_list = rel.tolist()
            if rel_list[0] < 0 or rel_list != sorted(rel_list):
                raise CorruptIndex(f"time index file {self.path} has offsets out of order")
        self.timestamps = ts
        self.rel = rel
        self.persisted = len(rel)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is larger than the last entry's."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        rel = offset - self.base_offset
        if self.rel and rel < self.rel[-1]:
            return
        self.timestamps.append(timestamp)
        self.rel.append(rel)

    def write_all_entries(self) -> bytes:
        return self._entries_bytes(0)

    def _entries_bytes(self, start: int) -> bytes:
        pairs = zip(self.timestamps[start:], self.rel[start:], strict=True)
        return b"".join(_TIME_ENTRY.pack(t, r) for t, r in pairs)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= ``timestamp``;
        ``(-1, base_offset)`` if there is none."""
        i = bisect_right(self.timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.timestamps[i], self.base_offset + self.rel[i]

    def last_entry(self) -> tuple[int, int]:
        if not self.rel:
            return -1, self.base_offset
        return self.timestamps[-1], self.base_offset + self.rel[-1]
