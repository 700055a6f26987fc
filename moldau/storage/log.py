"""One partition's log (Kafka's UnifiedLog + LocalLog): append, read, roll, retention, flush.

Concurrency: the broker's event loop owns a Log and calls it directly; each public method holds
``self._lock`` (an uncontended lock costs ~0.1 µs) so that blocking work the broker moves to a
thread — :meth:`Log.flush`, retention, the cleaner's segment swap — can run safely alongside.
Slow disk work never happens under the lock: :meth:`Log.flush` only duplicates file descriptors
under it and fsyncs outside; the cleaner reads and writes its new segment outside it and takes
the lock only to swap files in (see :mod:`moldau.storage.cleaner`).

Batches are opaque: an append patches the base offset and partition leader epoch of each batch
in place (and LogAppendTime when used), writes the buffer with one ``pwrite`` and updates the
sparse indexes; no record is decoded.
"""

from __future__ import annotations

import random
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping
from typing import NamedTuple

from moldau.protocol.records.batch import CONTROL_BIT, BatchHeader, set_log_append_time
from moldau.protocol.records.control import parse_end_txn_marker

from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import (
    CorruptRecord,
    InvalidRecord,
    KafkaStorageError,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from .fs import FileSystem, remove_files
from .health import DISK_HEALTH, log_dir_of
from .log_maintenance import LogMaintenance
from .log_txn import LogTransactions
from .producer_state import (
    ORIGIN_CLIENT,
    ORIGIN_REPLICATION,
    ProducerAppend,
    ProducerStateEntry,
    ProducerStateManager,
    VerificationGuard,
)
from .scan import validate_replicated
from .segment import Segment

_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
INT32_MAX = 0x7FFFFFFF
# Read-only record sets smaller than this are copied and patched; larger ones are written
# with patched headers beside the untouched records (copying would cost more).
COPY_BELOW = 8 << 10

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendInfo(NamedTuple):
    """Result of an append (Kafka's LogAppendInfo, the parts a Produce response needs)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 unless LogAppendTime was applied
    log_start_offset: int
    duplicate: bool = False  # a retried idempotent batch: offsets are the original append's


class ReadResult(NamedTuple):
    """Whole batches read from the log; ``records`` is bytes-like (bytes or memoryview)."""

    records: bytes | memoryview
    first_offset: int  # base offset of the first batch returned, -1 if none
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int  # -1 when unknown


class Log(LogMaintenance, LogTransactions):
    """A partition log in ``directory``; open one with :func:`moldau.storage.loader.load_log`."""

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, *,
                 segments: list[Segment], log_start_offset: int, recovery_point: int,
                 high_watermark: int, epoch_cache: LeaderEpochCache,
                 producer_state: ProducerStateManager, fs: FileSystem,
                 time_ms: Callable[[], int], rng: random.Random) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self._fs = fs
        self._time_ms = time_ms
        self._rng = rng
        self._lock = threading.RLock()
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.high_watermark = 0
        self._last_flush_ms = time_ms()
        self._roll_flush_upto = 0
        self._pending_deletes: list[tuple[int, list[str]]] = []
        self._generation = 0
        self.offline = False
        self._health = DISK_HEALTH
        self._log_dir = log_dir_of(directory)
        segments[-1].open_for_append()
        for seg in segments:
            seg.adopt(self._lock)
        self.update_high_watermark(high_watermark)

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")

    # -- simple properties -------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @property
    def segments(self) -> list[Segment]:
        """A copy of the segment list, oldest first."""
        with self._lock:
            return list(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def generation(self) -> int:
        """Changes whenever segments are truncated, replaced or fully reset."""
        return self._generation

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(
                f"log {self.topic}-{self.partition} in {self.dir} is offline after a disk "
                "error; restart the broker once the disk is healthy"
            )

    def _jitter(self) -> int:
        cfg = self.config
        if cfg.segment_jitter_ms <= 0:
            return 0
        return self._rng.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms))

    def update_config(self, config: LogConfig | Mapping[str, object]) -> None:
        """Apply a changed topic config at runtime (takes effect on the next append/roll)."""
        if not isinstance(config, LogConfig):
            config = self.config.updated(config)
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.update_config(config)
            self.producer_state.expiration_ms = config.producer_id_expiration_ms

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[log_start_offset, log_end_offset]``."""
        with self._lock:
            self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
            self.producer_state.on_high_watermark_updated(self.high_watermark)
            return self.high_watermark

    # -- append ------------------------------------------------------------------------
    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader],
               leader_epoch: int, log_append_time_ms: int | None = None,
               origin: str = ORIGIN_CLIENT, *,
               verification_guard: VerificationGuard | None = None) -> AppendInfo:
        """Append validated batches as leader, assigning offsets in place in ``buf``.

        ``headers`` are the batch headers of ``buf`` in order, already validated (magic, CRC,
        sizes) by :func:`moldau.protocol.records.batch.validate_batches`. Base offsets and the
        partition leader epoch are patched in ``buf`` when it is writable; a read-only ``buf``
        (bytes, or a view of a request) is left as it is: from ``COPY_BELOW`` bytes it is
        written with the patched headers alongside, without copying the records. With
        ``log_append_time_ms`` (or a topic with ``message.timestamp.type=LogAppendTime``)
        batches switch to LogAppendTime.
        ``origin`` is "client" (full idempotence checks) or "coordinator" (epoch checks only).
        ``verification_guard``: see :meth:`ProducerStateManager.prepare` (KIP-890).
        A retried idempotent batch is not written again: the result has ``duplicate=True``
        and the original offsets.
        """
        with self._lock:
            if self.offline:
                self._check_online()
            cfg = self.config
            if log_append_time_ms is None and cfg.message_timestamp_type == "LogAppendTime":
                log_append_time_ms = self._time_ms()
            first = self._segments[-1].next_offset
            infos: list[tuple[int, int, int]] = []
            next_off = first
            total = 0
            max_ts = -1
            off_max = -1
            has_pid = False
            max_bytes = cfg.max_message_bytes
            for h in headers:
                size = h.batch_length + 12
                if size > max_bytes:
                    raise RecordTooLarge(
                        f"batch of {size} bytes exceeds max.message.bytes {max_bytes} of "
                        f"{self.topic}-{self.partition}"
                    )
                if h.attributes & CONTROL_BIT and origin == ORIGIN_CLIENT:
                    raise InvalidRecord(
                        "client produce requests may not contain control batches"
                    )
                last = next_off + h.last_offset_delta
                ts = h.max_timestamp if log_append_time_ms is None else log_append_time_ms
                if ts > max_ts:
                    max_ts, off_max = ts, last
                infos.append((size, last, ts))
                has_pid = has_pid or h.producer_id >= 0
                next_off = last + 1
                total += size
            if not infos or total != len(buf):
                raise ValueError("batch headers do not describe the buffer")
            if total > cfg.segment_bytes:
                raise RecordBatchTooLarge(
                    f"append of {total} bytes is larger than segment.bytes {cfg.segment_bytes}"
                )
            pending = None
            if has_pid:
                pending = self._prepare_producers(buf, headers, first, origin,
                                                  verification_guard)
                dup = pending.duplicate
                if dup is not None:
                    return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                      dup.last_offset, -1, self.log_start_offset, True)
            pos = 0
            pack_offset = _BASE_OFFSET.pack_into
            pack_epoch = _EPOCH.pack_into
            off = first
            data: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview]
            writable = isinstance(buf, bytearray) or (
                isinstance(buf, memoryview) and not buf.readonly)
            if writable or log_append_time_ms is not None or total < COPY_BELOW:
                if not writable:
                    # Small sets: a copy costs less than building the vectored write;
                    # LogAppendTime rewrites timestamps and CRCs.
                    buf = bytearray(buf)
                for h, (size, last, _ts) in zip(headers, infos, strict=True):
                    pack_offset(buf, pos, off)
                    pack_epoch(buf, pos + 12, leader_epoch)
                    if log_append_time_ms is not None:
                        set_log_append_time(buf, pos, h, log_append_time_ms)
                    off = last + 1
                    pos += size
                data = buf
            else:
                # A read-only buffer (a slice of the request frame) is not copied: each
                # batch's first 16 bytes are rebuilt with its offset and epoch, and the file
                # gets them and the untouched rest in one vectored write.
                view = memoryview(buf)
                data = []
                for size, last, _ts in infos:
                    head = bytearray(view[pos:pos + 16])
                    pack_offset(head, 0, off)
                    pack_epoch(head, 12, leader_epoch)
                    data.append(head)
                    data.append(view[pos + 16:pos + size])
                    off = last + 1
                    pos += size
            self._maybe_roll(total, first, infos[-1][1], max_ts)
            self._write(data, infos)
            self._after_append(pending, leader_epoch, first)
            return AppendInfo(first, infos[-1][1], max_ts, off_max,
                              -1 if log_append_time_ms is None else log_append_time_ms,
                              self.log_start_offset)

    def append_as_follower(self, buf: bytes | bytearray) -> AppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs.

        Batches are validated here (CRC, magic, sizes; compacted batches and offset gaps are
        fine); the first offset must not be below the log end offset
        (:class:`UnexpectedAppendOffset`).
        """
        try:
            headers = validate_replicated(buf)
        except ValueError as exc:
            raise CorruptRecord(
                f"replicated batches for {self.topic}-{self.partition} are invalid: {exc}"
            ) from exc
        with self._lock:
            self._check_online()
            first = headers[0].base_offset
            last = headers[-1].base_offset + headers[-1].last_offset_delta
            leo = self._segments[-1].next_offset
            if first < leo:
                raise UnexpectedAppendOffset(
                    f"follower append at offset {first} is below the log end offset {leo} of "
                    f"{self.topic}-{self.partition}", first, last)
            infos = []
            max_ts, off_max = -1, -1
            prev_next = first
            for h in headers:
                if h.base_offset < prev_next:
                    raise UnexpectedAppendOffset("replicated batches are out of order",
                                                 first, last)
                h_last = h.base_offset + h.last_offset_delta
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, h_last
                infos.append((h.batch_length + 12, h_last, h.max_timestamp))
                prev_next = h_last + 1
            if len(buf) > self.config.segment_bytes:
                raise RecordBatchTooLarge(
                    f"append of {len(buf)} bytes is larger than segment.bytes "
                    f"{self.config.segment_bytes}")
            pending = self._prepare_producers(buf, headers, None, ORIGIN_REPLICATION)
            self._maybe_roll(len(buf), first, last, max_ts)
            self._write(buf, infos)
            self._after_append(pending, None, first, headers)
            return AppendInfo(first, last, max_ts, off_max, -1, self.log_start_offset)

    def _prepare_producers(self, buf: bytes | bytearray, headers: list[BatchHeader],
                           first: int | None, origin: str,
                           guard: VerificationGuard | None = None) -> ProducerAppend:
        triples = []
        pos = 0
        off = first
        for h in headers:
            start = h.base_offset if off is None else off
            marker = None
            if h.is_control and h.producer_id >= 0:
                marker = parse_end_txn_marker(memoryview(buf)[pos:pos + h.batch_length + 12])
            triples.append((h, start, marker))
            pos += h.batch_length + 12
            if off is not None:
                off += h.last_offset_delta + 1
        return self.producer_state.prepare(triples, origin, guard)

    def _write(self, buf: bytes | bytearray | memoryview | list[bytes | bytearray | memoryview],
               infos: list[tuple[int, int, int]]) -> None:
        seg = self._segments[-1]
        undo = (seg.size, seg.next_offset, (seg.index.entries, seg.time_index.entries),
                (seg.max_timestamp, seg.offset_of_max_timestamp))
        try:
            seg.append(buf, infos)
        except OSError as exc:
            try:
                seg.rollback(*undo)
            except OSError:
                self.offline = True
            self._health.failed(self._log_dir, f"append to {seg.log_path}", exc)
            raise KafkaStorageError(
                f"append to {seg.log_path} failed: {exc}; the append was not acknowledged"
            ) from exc
        if self._health.failing:
            self._health.succeeded(self._log_dir)

    def _after_append(self, pending: ProducerAppend | None, leader_epoch: int | None,
                      first: int, headers: list[BatchHeader] | None = None) -> None:
        ps = self.producer_state
        if pending is not None:
            ps.commit(pending)
            if pending.completed_txns:
                self._complete_txns(pending.completed_txns)
        end = self._segments[-1].next_offset
        ps.map_end_offset = end  # ProducerStateManager.update_map_end_offset
        if leader_epoch is not None:
            self.epoch_cache.maybe_assign_from_batch(leader_epoch, first)
        elif headers is not None:
            for h in headers:
                self.epoch_cache.maybe_assign_from_batch(h.partition_leader_epoch, h.base_offset)
        if end - self.recovery_point >= self.config.flush_messages:
            self.flush()

    # -- rolling -----------------------------------------------------------------------
    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, max_ts: int) -> None:
        seg = self._segments[-1]
        cfg = self.config
        if seg.size > 0:
            if seg.size > cfg.segment_bytes - size:
                self._roll(first_offset)
                return
            # Segment.time_waited_for_roll, without reading the clock when the first batch
            # has a timestamp (the common case: one clock call less per append).
            first = seg.rolling_ts
            if first is None:
                first = seg.first_batch_timestamp()
            waited = max_ts - first if first >= 0 else self._time_ms() - seg.created_ms
            if waited > cfg.segment_ms - seg.roll_jitter_ms:
                self._roll(first_offset)
                return
        if (seg.index.is_full or seg.time_index.is_full
                or last_offset - seg.base_offset > INT32_MAX):
            self._roll(first_offset)

    def roll(self) -> Segment:
        """Force a new active segment at the log end offset."""
        with self._lock:
            self._check_online()
            return self._roll(self.log_end_offset)

    def _roll(self, expected_next_offset: int) -> Segment:
        """A new active segment at ``expected_next_offset`` (or the log end). Everything that
        can fail (new files, the producer snapshot, the old segment's final index entries) is
        done before anything is switched, so a failure (a full disk, no descriptor left)
        leaves the log as it was and online: the append that needed the roll fails with
        KAFKA_STORAGE_ERROR and a later one succeeds once the cause is gone."""
        old = self._segments[-1]
        new_base = max(expected_next_offset, old.next_offset)
        if old.size == 0 and new_base == old.base_offset:
            return old
        new: Segment | None = None
        ps = self.producer_state
        saved_end = ps.map_end_offset
        try:
            new = Segment(self.dir, new_base, self._fs, self.config, self._time_ms(),
                          jitter_ms=self._jitter())
            if new.size:
                self._fs.ftruncate(new.fd, 0)  # stale file from an earlier life of this log
                new.size = 0
            new.open_for_append()
            ps.update_map_end_offset(new_base)
            ps.take_snapshot()
            old.on_become_inactive()
        except OSError as exc:
            ps.map_end_offset = saved_end
            if new is not None:
                paths = [new.log_path, new.index.path, new.time_index.path]
                new.close_without_writing()
                remove_files(self._fs, paths)
                remove_files(self._fs, [ps.snapshot_path(new_base)])
            self._health.failed(self._log_dir, f"rolling a segment in {self.dir}", exc)
            raise KafkaStorageError(
                f"rolling a new segment in {self.dir} failed: {exc}; the append was not "
                f"acknowledged") from exc
        if old.size == 0:
            # An empty segment below the new base is useless (follower gap): replace it.
            self._segments.pop()
            self._bases.pop()
            try:
                remove_files(self._fs, old.mark_deleted())
            except OSError:
                pass  # an empty file left behind loads as an empty segment; harmless
        self._segments.append(new)
        self._bases.append(new_base)
        new.adopt(self._lock)
        # Kafka flushes rolled segments in the background; flush_due() does it here.
        self._roll_flush_upto = new_base
        return new

    # -- read --------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches from the one holding ``offset``, never past ``max_offset``.

        ``max_offset`` is the exclusive visibility bound (high watermark or last stable
        offset; None = log end). With ``min_one_batch`` the first batch is returned whole even
        if larger than ``max_bytes`` (Kafka's minOneMessage). Reads stay within one segment.
        Raises :class:`OffsetOutOfRange` unless ``log_start_offset <= offset <=
        log_end_offset``.
        """
        with self._lock:
            self._check_online()
            leo = self._segments[-1].next_offset
            start = self.log_start_offset
            if offset < start or offset > leo:
                raise OffsetOutOfRange(offset, start, leo, f"{self.topic}-{self.partition}")
            limit = leo if max_offset is None else min(max_offset, leo)
            if offset >= limit:
                return ReadResult(b"", -1, start, leo, self.high_watermark)
            segs = self._segments
            i = max(bisect_right(self._bases, offset) - 1, 0)
            try:
                while i < len(segs):
                    seg = segs[i]
                    max_pos = seg.size
                    if limit < seg.next_offset:
                        located = seg.translate(limit)
                        if located is not None:
                            max_pos = located[0]
                    got = seg.read(offset, max_bytes, max_pos, min_one_batch)
                    if got is None:
                        i += 1
                        continue
                    data, header = got
                    return ReadResult(data, header.base_offset if len(data) else -1, start, leo,
                                      self.high_watermark)
            except OSError as exc:
                raise KafkaStorageError(f"read from {self.dir} failed: {exc}") from exc
            return ReadResult(b"", -1, start, leo, self.high_watermark)

    # -- offsets by timestamp ----------------------------------------------------------
    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: special timestamps -1 (latest), -2 (earliest), -3 (max timestamp),
        -4 (earliest local), -5 (latest tiered: none here), or a real timestamp."""
        with self._lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                epoch = self.epoch_cache.epoch_for_offset(self.log_start_offset)
                return TimestampAndOffset(-1, self.log_start_offset,
                                          -1 if epoch is None else epoch)
            if timestamp == LATEST_TIMESTAMP:
                epoch = self.epoch_cache.latest_epoch()
                return TimestampAndOffset(-1, self.log_end_offset, -1 if epoch is None else epoch)
            if timestamp == MAX_TIMESTAMP:
                return self.max_timestamp_and_offset()
            if timestamp < 0:
                return TimestampAndOffset(-1, -1, -1)
            return self.offset_for_timestamp(timestamp)

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` at or after the log start."""
        with self._lock:
            for seg in self._segments:
                if seg.size == 0 or seg.largest_timestamp() < timestamp:
                    continue
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return TimestampAndOffset(*found)
            return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """The largest record timestamp and the offset of the first record carrying it."""
        with self._lock:
            best = None
            for seg in self._segments:
                if seg.max_timestamp >= 0 and (best is None or
                                               seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            found = best.max_timestamp_record()
            return TimestampAndOffset(*found) if found is not None else None

    # -- leader epochs -----------------------------------------------------------------
    def assign_epoch_start_offset(self, epoch: int, start_offset: int | None = None) -> None:
        """Record a new leader epoch starting at ``start_offset`` (default: log end)."""
        with self._lock:
            self.epoch_cache.assign(epoch, self.log_end_offset if start_offset is None
                                    else start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch."""
        with self._lock:
            return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch()

    def active_producers(self) -> list[ProducerStateEntry]:
        """Copies of the producers' states (DescribeProducers), taken under the log's lock:
        producer expiry runs in a worker thread."""
        with self._lock:
            return [entry.copy() for entry in self.producer_state.producers.values()]
