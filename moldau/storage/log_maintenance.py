"""Truncation, retention, DeleteRecords, flushing and closing of a partition log.

A mixin of :class:`moldau.storage.log.Log`, split out to keep files small; every method takes
the log's lock like the rest of ``Log``.
"""

from __future__ import annotations

import random
import threading
from bisect import bisect_right
from collections.abc import Callable, Collection

from moldau.protocol.records.control import parse_end_txn_marker

from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import KafkaStorageError, OffsetOutOfRange
from .fs import FileSystem, fsync_handles, remove_files
from .producer_state import ProducerStateManager
from .retention import (
    Predicate,
    deletable_segments,
    log_start_breached,
    retention_ms_breached,
    retention_size_breached,
)
from .segment import Segment
from .txn_index import AbortedTxn


class LogMaintenance:
    """Everything that removes data from a log or makes it durable."""

    # Attributes provided by Log.__init__.
    dir: str
    topic: str
    partition: int
    config: LogConfig
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    offline: bool
    _fs: FileSystem
    _time_ms: Callable[[], int]
    _rng: random.Random
    _lock: threading.RLock
    _segments: list[Segment]
    _bases: list[int]
    _last_flush_ms: int
    _roll_flush_upto: int
    _pending_deletes: list[tuple[int, list[str]]]
    _generation: int

    # Provided by Log.
    log_end_offset: int
    size_in_bytes: int

    def _check_online(self) -> None:
        raise NotImplementedError

    def _jitter(self) -> int:
        raise NotImplementedError

    def _roll(self, expected_next_offset: int) -> Segment:
        raise NotImplementedError

    # -- truncation --------------------------------------------------------------------
    def truncate_to(self, target: int) -> bool:
        """Remove everything at and above ``target`` (follower truncation). True if changed."""
        if target < 0:
            raise ValueError(f"cannot truncate to a negative offset {target}")
        with self._lock:
            self._check_online()
            if target >= self.log_end_offset:
                return False
            if target <= self._segments[0].base_offset:
                self._truncate_fully(target)
                return True
            try:
                keep = bisect_right(self._bases, target)
                doomed = self._segments[keep:]
                del self._segments[keep:]
                del self._bases[keep:]
                for seg in doomed:
                    self._schedule_delete(seg)
                seg = self._segments[-1]
                seg.open_for_append()
                seg.truncate_to(target, self._time_ms())
            except OSError as exc:
                self.offline = True
                raise KafkaStorageError(f"truncating {self.dir} failed: {exc}") from exc
            self._generation += 1
            leo = self.log_end_offset
            self.recovery_point = min(self.recovery_point, leo)
            self._roll_flush_upto = min(self._roll_flush_upto, leo)
            self.log_start_offset = min(self.log_start_offset, leo)
            self.high_watermark = min(self.high_watermark, leo)
            self.epoch_cache.truncate_from_end(leo)
            self.rebuild_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data and restart the log empty at ``offset``."""
        with self._lock:
            self._check_online()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        try:
            for seg in self._segments:
                self._schedule_delete(seg)
            new = Segment(self.dir, offset, self._fs, self.config, self._time_ms(),
                          jitter_ms=self._jitter())
            if new.size:
                self._fs.ftruncate(new.fd, 0)
                new.size = 0
            new.txn_index.reset()
            new.open_for_append()
            new.adopt(self._lock)
        except OSError as exc:
            self.offline = True
            raise KafkaStorageError(f"truncating {self.dir} failed: {exc}") from exc
        self._segments = [new]
        self._bases = [offset]
        self._generation += 1
        self.log_start_offset = offset
        self.recovery_point = offset
        self._roll_flush_upto = offset
        self.high_watermark = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    def rebuild_producer_state(self, recovered: Collection[int] = ()) -> int:
        """Reload producer state from the newest snapshot <= log end and replay batch headers
        after it. Segments whose base offset is in ``recovered`` were rebuilt by recovery:
        the ABORT markers replayed in them re-enter their ``.txnindex`` (replay then starts
        no later than the first of them). Returns the number of batches replayed."""
        with self._lock:
            ps = self.producer_state
            leo = self.log_end_offset
            snap = ps.load_latest_snapshot(min([leo, *recovered]))
            start = max(snap if snap is not None else self.log_start_offset,
                        self._segments[0].base_offset)
            ps.map_end_offset = start
            replayed = 0
            for seg in self._segments:
                if seg.next_offset <= start or seg.size == 0:
                    continue
                walker = seg.batches_from(seg.index.lookup(start))
                for pos, h in walker:
                    if h.base_offset + h.last_offset_delta < start:
                        continue
                    marker = None
                    if h.is_control and h.producer_id >= 0:
                        marker = parse_end_txn_marker(walker.read_batch(pos, h))
                    for txn in ps.apply_replicated(h, marker):
                        if txn.is_aborted and seg.base_offset in recovered:
                            seg.txn_index.append(AbortedTxn(
                                txn.producer_id, txn.first_offset, txn.last_offset,
                                ps.last_stable_offset(txn)))
                    replayed += 1
            ps.map_end_offset = leo
            ps.on_high_watermark_updated(self.high_watermark)
            ps.remove_expired(self._time_ms())
            return replayed

    # -- retention and DeleteRecords ---------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` (<= high watermark) and
        delete segments wholly below it. Returns the new log start offset (low watermark)."""
        with self._lock:
            self._check_online()
            if offset > self.high_watermark:
                raise OffsetOutOfRange(
                    offset, self.log_start_offset, self.high_watermark,
                    f"{self.topic}-{self.partition} (cannot delete records past the high "
                    "watermark)")
            if offset > self.log_start_offset:
                self._increment_log_start(offset)
                self._delete_segments(self._deletable(log_start_breached(offset)))
            return self.log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (time, size, log start); returns the number of segments deleted."""
        with self._lock:
            if self.offline:
                return 0
            now = self._time_ms() if now_ms is None else now_ms
            deleted = self._delete_segments(
                self._deletable(log_start_breached(self.log_start_offset)), now)
            if self.config.delete:
                by_time = retention_ms_breached(now, self.config.retention_ms)
                if by_time is not None:
                    deleted += self._delete_segments(self._deletable(by_time), now)
                by_size = retention_size_breached(self.size_in_bytes, self.config.retention_bytes)
                if by_size is not None:
                    deleted += self._delete_segments(self._deletable(by_size), now)
            return deleted

    def _deletable(self, predicate: Predicate) -> list[Segment]:
        return deletable_segments(self._segments, self.log_end_offset, self.high_watermark,
                                  predicate)

    def _delete_segments(self, doomed: list[Segment], now_ms: int | None = None) -> int:
        if not doomed:
            return 0
        try:
            if len(doomed) == len(self._segments):
                self._roll(self.log_end_offset)
            del self._segments[: len(doomed)]
            del self._bases[: len(doomed)]
            for seg in doomed:
                self._schedule_delete(seg, now_ms)
        except OSError as exc:
            self.offline = True
            raise KafkaStorageError(f"deleting segments in {self.dir} failed: {exc}") from exc
        first_base = self._segments[0].base_offset
        if first_base > self.log_start_offset:
            self._increment_log_start(first_base)
        self.producer_state.delete_snapshots_before(first_base)
        return len(doomed)

    def _increment_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        if self.high_watermark < offset:
            self.high_watermark = offset
        if self.recovery_point < offset:
            self.recovery_point = offset
        self.epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)

    def _schedule_delete(self, seg: Segment, now_ms: int | None = None) -> None:
        """Rename to ``.deleted`` now, remove after ``file.delete.delay.ms`` (as Kafka)."""
        paths = seg.mark_deleted()
        now = self._time_ms() if now_ms is None else now_ms
        self._pending_deletes.append((now + self.config.file_delete_delay_ms, paths))

    @property
    def has_pending_deletes(self) -> bool:
        """Whether files renamed ``.deleted`` wait for their ``file.delete.delay.ms``."""
        return bool(self._pending_deletes)

    def deletion_due(self, now_ms: int) -> bool:
        """Whether some ``.deleted`` files are due for removal at ``now_ms``."""
        return any(due <= now_ms for due, _paths in list(self._pending_deletes))

    def remove_deleted_files(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Remove ``.deleted`` files whose delay has passed; returns files removed."""
        with self._lock:
            now = self._time_ms() if now_ms is None else now_ms
            due = [p for t, p in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, p) for t, p in self._pending_deletes
                                     if not (force or t <= now)]
        count = 0
        for paths in due:
            remove_files(self._fs, paths)
            count += len(paths)
        return count

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        with self._lock:
            return self.producer_state.remove_expired(
                self._time_ms() if now_ms is None else now_ms)

    # -- flushing ----------------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: everything) and advance
        the recovery point. Safe to call from a worker thread: fsync runs without the lock."""
        with self._lock:
            self._check_online()
            leo = self.log_end_offset
            target = leo if up_to is None else min(up_to, leo)
            if target <= self.recovery_point:
                self._last_flush_ms = self._time_ms()
                return
            fds: list[int] = []
            paths: list[str] = []
            i = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
            try:
                for seg in self._segments[i:]:
                    if seg.base_offset >= target:
                        break
                    f, p = seg.flush_handles()
                    fds += f
                    paths += p
            except OSError as exc:
                # Writing pending index entries failed (a full disk): they stay in memory
                # and the next flush tries again; nothing was lost, the log stays online.
                for fd in fds:
                    self._fs.close(fd)
                raise KafkaStorageError(f"flushing {self.dir} failed: {exc}") from exc
            generation = self._generation
        try:
            fsync_handles(self._fs, fds, paths)
            self._fs.fsync_dir(self.dir)
        except OSError as exc:
            with self._lock:
                self.offline = True
            raise KafkaStorageError(f"flushing {self.dir} failed: {exc}") from exc
        with self._lock:
            if generation == self._generation and target > self.recovery_point:
                self.recovery_point = target
            self._last_flush_ms = self._time_ms()

    def flush_due(self, now_ms: int | None = None) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush, or a rolled segment is not
        yet flushed (Kafka does both from its scheduler). True if a flush ran."""
        with self._lock:
            if self.offline:
                return False
            now = self._time_ms() if now_ms is None else now_ms
            roll_target = self._roll_flush_upto
            by_time = (now - self._last_flush_ms >= self.config.flush_ms
                       and self.log_end_offset > self.recovery_point)
        if by_time:
            self.flush()
            return True
        if roll_target > self.recovery_point:
            self.flush(roll_target)
            return True
        return False

    # -- closing -----------------------------------------------------------------------
    def close(self) -> None:
        """Clean close: snapshot producer state at the log end and close every file. Every
        file is closed even if a write fails (a full disk); the first failure is raised then,
        and the log is not clean (the next start recovers it)."""
        with self._lock:
            failure: OSError | None = None
            if not self.offline:
                ps = self.producer_state
                ps.update_map_end_offset(self.log_end_offset)
                try:
                    ps.take_snapshot(sync=True)
                except OSError as exc:
                    failure = exc
            for seg in self._segments:
                try:
                    seg.close()
                except OSError as exc:
                    seg.close_without_writing()
                    failure = failure or exc
            self.offline = True  # closed: nothing may use it any more
            if failure is not None:
                raise failure

    def close_handles(self) -> None:
        """Close file descriptors without writing anything (crash simulation, dead disk)."""
        with self._lock:
            for seg in self._segments:
                seg.close_without_writing()
            self.offline = True

    # -- cleaner hand-off ----------------------------------------------------------------
    def lock(self) -> threading.RLock:
        """The log's lock, for the cleaner's short swap step."""
        return self._lock

    def _install_cleaned(self, old: list[Segment], new: Segment) -> None:
        """Put a cleaned segment where ``old`` (contiguous, non-active, already renamed to
        ``.deleted``) were. Caller holds the lock (the cleaner's swap step)."""
        first = next(i for i, s in enumerate(self._segments) if s is old[0])
        self._segments[first:first + len(old)] = [new]
        self._bases = [s.base_offset for s in self._segments]
        self._generation += 1
        new.adopt(self._lock)

