"""The aborted transaction index of a segment, ``<base>.txnindex`` (Kafka's TransactionIndex).

One entry per transaction whose ABORT marker landed while the segment was active, 34 bytes,
big-endian, in marker order::

    version            int16  0
    producer_id        int64
    first_offset       int64  the transaction's first offset on the partition
    last_offset        int64  the offset of its ABORT marker
    last_stable_offset int64  the partition's LSO once the abort completed

A read_committed Fetch gets the aborted transactions overlapping what it returns, so the
consumer can drop their records. The file is created with the first entry (most segments have
none); entries are read lazily and kept in memory, since aborts are rare and small.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import CorruptIndex
from .fs import RW_CREATE, FileSystem

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry of a transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return ENTRY.pack(VERSION, *self)


def decode_entries(data: bytes, path: str = "") -> list[AbortedTxn]:
    """Entries of a whole index file; CorruptIndex when its size or a version is wrong."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndex(f"transaction index {path} has size {len(data)}, which is not a "
                           f"multiple of the entry size {ENTRY_SIZE}")
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, *fields = ENTRY.unpack_from(data, pos)
        if version != VERSION:
            raise CorruptIndex(f"transaction index {path} has an entry of unknown version "
                               f"{version} at byte {pos}")
        out.append(AbortedTxn(*fields))
    return out


class TransactionIndex:
    """The aborted transactions of one segment (file ``path``, through ``fs``)."""

    __slots__ = ("_entries", "_fs", "path")

    def __init__(self, path: str, fs: FileSystem) -> None:
        self.path = path
        self._fs = fs
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        """All entries, read from the file on first use."""
        if self._entries is None:
            data = self._fs.read_file(self.path) if self._fs.exists(self.path) else b""
            self._entries = decode_entries(data, self.path)
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end of the file. Raises ValueError if its last offset is below
        the last entry's (markers land in offset order), OSError on a write failure."""
        entries = self.entries
        if entries and txn.last_offset < entries[-1].last_offset:
            raise ValueError(
                f"the last offset {txn.last_offset} of an aborted transaction in {self.path} "
                f"is below the previous one {entries[-1].last_offset}")
        fd = self._fs.open(self.path, RW_CREATE)
        try:
            self._fs.write_all(fd, txn.pack(), len(entries) * ENTRY_SIZE)
        finally:
            self._fs.close(fd)
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``; the flag says the search is
        complete (an entry's LSO reached ``upper_bound``, so later segments hold nothing
        older that overlaps)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset`` (the log is cut there)."""
        entries = self.entries
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._rewrite(keep)

    def reset(self) -> None:
        """Remove every entry (segment recovery rebuilds them)."""
        self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            if self._fs.exists(self.path):
                self._fs.remove(self.path)
        else:
            fd = self._fs.open(self.path, RW_CREATE)
            try:
                self._fs.ftruncate(fd, 0)
                self._fs.write_all(fd, b"".join(t.pack() for t in entries), 0)
            finally:
                self._fs.close(fd)
        self._entries = entries

    def sanity_check(self) -> None:
        """CorruptIndex if the file is not a whole number of valid entries."""
        self._entries = None
        self.entries  # noqa: B018 - reading is the check

    def exists(self) -> bool:
        return self._fs.exists(self.path)
