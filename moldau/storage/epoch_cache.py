"""Leader epoch cache: which leader epoch started at which offset (``leader-epoch-checkpoint``).

Mirrors Kafka's ``LeaderEpochFileCache``: entries ``(epoch, start_offset)`` with both strictly
increasing; answers OffsetForLeaderEpoch (:meth:`LeaderEpochCache.end_offset_for`) and is
truncated with the log. Changes are rare (once per leader election), so every change rewrites
the checkpoint file atomically.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left, bisect_right

from .checkpoints import read_epoch_checkpoint, write_epoch_checkpoint
from .fs import FileSystem
from .names import LEADER_EPOCH_CHECKPOINT

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """In-memory epoch -> start offset map backed by the partition's checkpoint file.

    Raises :class:`~.checkpoints.MalformedCheckpoint` (naming the line) if that file cannot
    be read."""

    def __init__(self, partition_dir: str, fs: FileSystem, *, sync: bool = True) -> None:
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        self._fs = fs
        self._sync = sync
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # A malformed file raises MalformedCheckpoint (the loader stops, naming the fix):
        # dropping it would lose the epochs for good after a clean shutdown.
        for epoch, offset in read_epoch_checkpoint(fs, self.path):
            self._append_sane(epoch, offset)

    def _append_sane(self, epoch: int, offset: int) -> None:
        if self._epochs and (epoch <= self._epochs[-1] or offset < self._offsets[-1]):
            return
        self._epochs.append(epoch)
        self._offsets.append(offset)

    def _flush(self) -> None:
        write_epoch_checkpoint(self._fs, self.path, zip(self._epochs, self._offsets, strict=True),
                               sync=self._sync)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if anything changed.

        As Kafka: entries with an epoch >= ``epoch`` or a start offset >= ``start_offset`` are
        replaced, so the cache stays strictly increasing in both.
        """
        if epoch < 0:
            return False
        with self._lock:
            if self._epochs:
                last_epoch, last_offset = self._epochs[-1], self._offsets[-1]
                if epoch == last_epoch and start_offset >= last_offset:
                    return False
            while self._epochs and (
                self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset
            ):
                self._epochs.pop()
                self._offsets.pop()
            self._epochs.append(epoch)
            self._offsets.append(start_offset)
            self._flush()
            return True

    def maybe_assign_from_batch(self, epoch: int, base_offset: int) -> None:
        """Called per appended batch: only a new, larger epoch changes the cache."""
        if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1]):
            self.assign(epoch, base_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None if before the first entry)."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch, exactly as Kafka answers.

        The end offset of an epoch is the start offset of the next larger epoch, or the log end
        offset for the latest epoch. Unknown larger epochs give ``(-1, -1)``; an epoch smaller
        than every entry gives ``(requested, first start offset)``.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._epochs[-1]:
                return requested_epoch, log_end_offset
            higher = bisect_right(self._epochs, requested_epoch)
            if higher >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = higher - 1
            if floor < 0:
                return requested_epoch, self._offsets[higher]
            return self._epochs[floor], self._offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries whose start offset is >= ``end_offset`` (log truncated to it)."""
        with self._lock:
            if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
                return
            keep = bisect_left(self._offsets, end_offset)
            del self._epochs[keep:]
            del self._offsets[keep:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: drop older entries, keeping the epoch that
        covers ``start_offset`` with its start moved up to it."""
        with self._lock:
            if not self._offsets or self._offsets[0] >= start_offset:
                return
            i = bisect_right(self._offsets, start_offset) - 1
            epoch = self._epochs[i]
            del self._epochs[: i + 1]
            del self._offsets[: i + 1]
            self._epochs.insert(0, epoch)
            self._offsets.insert(0, start_offset)
            self._flush()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
            self._flush()
