"""Log compaction for ``cleanup.policy=compact`` (Kafka's Cleaner, simplified).

:func:`clean_log` is one blocking cleaning pass over one log; the broker runs it in a worker
thread. It never holds the log's lock while reading or writing data:

1. Under the lock (microseconds): pick the cleanable range — segments below the active segment,
   the last stable offset (open transactions), the high watermark and
   ``min.compaction.lag.ms`` — and duplicate the file descriptors of those segments.
2. Without the lock: build the offset map (key -> last offset) from the dirty part
   ``[first_dirty_offset, end)`` and rewrite the segments from the log start to ``end`` in groups
   no larger than ``segment.bytes`` into ``<base>.log.cleaned`` files (+ indexes), fsynced.
3. Under the lock (a few renames): if the log still holds the same segments (no truncation,
   retention or other swap happened meanwhile; else the pass is abandoned and the ``.cleaned``
   files removed), rename ``.cleaned`` -> ``.swap``, rename the old segments to ``.deleted``
   (removed after ``file.delete.delay.ms``), rename ``.swap`` -> final names, and install the new
   segment. A crash at any point is repaired by the loader (``.cleaned`` dropped, ``.swap``
   completed), exactly as Kafka's recovery does.

Record rules: a record survives unless a later record with the same key exists (offset map);
records without a key are dropped (Kafka rejects them for compacted topics). Tombstones (null
value) get a delete horizon the first time they are cleaned (KIP-534: the batch's
``DELETE_HORIZON`` attribute bit is set and its base timestamp holds ``now +
delete.retention.ms``) and are removed by a later pass after the horizon. A batch whose records
all survive is copied byte for byte; otherwise it is rebuilt with its base offset, last offset
delta, producer fields and codec kept, so offsets and idempotence state stay consistent. An
idempotent producer's last batch is kept (empty if need be) so its sequence state survives.
Transactions (:mod:`.cleaner_txn`, Kafka's rules): committed transactional data compacts like
any data; aborted data is dropped and never feeds the offset map; control batches never feed
it; a COMMIT/ABORT marker stays while batches of its transaction remain, then until its delete
horizon (``delete.retention.ms``, as tombstones), then goes. The cleaned segment's
``.txnindex`` keeps the entries of the ABORT markers it keeps with data.

The offset map is a Python dict; ``max_map_entries`` bounds its size: when the dirty part has
more distinct keys, the pass cleans up to the segment where the map filled.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from moldau.protocol.records.batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_BIT,
    BatchHeader,
)
from moldau.protocol.records.codec import decode_records, encode_record
from moldau.protocol.records.compression import compress, decompress
from moldau.protocol.records.control import EndTxnMarker, parse_end_txn_marker

from .cleaner_txn import CleanedTxns
from .fs import FileSystem, remove_files
from .log import Log
from .names import CLEANED_SUFFIX, SEGMENT_FILE_SUFFIXES, SWAP_SUFFIX, segment_file
from .scan import BatchScanner
from .segment import Segment

INT32_MAX = 0x7FFFFFFF
_HEAD = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_READ_CHUNK = 1 << 20


@dataclass
class CleanResult:
    """Outcome of one pass; ``first_dirty_offset`` is where the next pass's dirty part starts."""

    cleaned: bool = False
    first_dirty_offset: int = 0
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_removed: int = 0
    aborted_records_removed: int = 0
    markers_removed: int = 0
    aborted_reason: str | None = None
    map_entries: int = 0
    # Earliest delete horizon of a tombstone still in the log: a pass after it can drop it.
    next_horizon_ms: int | None = None

    def note_horizon(self, horizon_ms: int) -> None:
        if self.next_horizon_ms is None or horizon_ms < self.next_horizon_ms:
            self.next_horizon_ms = horizon_ms


@dataclass
class _Source:
    segment: Segment
    fd: int
    size: int


def cleanable_end(log: Log, now_ms: int) -> int:
    """First offset the cleaner must not touch (caller holds the log lock)."""
    segs = log._segments
    end = segs[-1].base_offset
    unstable = log.producer_state.first_unstable_offset()
    if unstable is not None:
        end = min(end, unstable)
    end = min(end, log.high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segs[:-1]:
            if seg.largest_timestamp() > now_ms - lag:
                end = min(end, seg.base_offset)
                break
    # Whole segments only.
    whole = log.log_start_offset
    for seg in segs[:-1]:
        if seg.next_offset <= end:
            whole = seg.next_offset
        else:
            break
    return whole if whole > segs[0].base_offset else segs[0].base_offset


def dirty_ratio(log: Log, first_dirty_offset: int, now_ms: int) -> float:
    """Dirty bytes / cleanable bytes, as Kafka's LogCleanerManager computes it."""
    with log.lock():
        end = cleanable_end(log, now_ms)
        clean = dirty = 0
        for seg in log._segments[:-1]:
            if seg.base_offset >= end:
                break
            if seg.next_offset <= first_dirty_offset:
                clean += seg.size
            else:
                dirty += seg.size
    total = clean + dirty
    return dirty / total if total else 0.0


def _batches(fs: FileSystem, src: _Source):
    """(header, full batch bytes) of a segment, read in large chunks."""
    pos = 0
    buf = b""
    buf_start = 0
    scanner = BatchScanner(fs, src.fd, 0, src.size, verify=False,
                           segment_base=src.segment.base_offset, min_offset=0)
    for pos, h in scanner:
        size = h.batch_length + 12
        rel = pos - buf_start
        if rel < 0 or rel + size > len(buf):
            buf = fs.pread(src.fd, max(_READ_CHUNK, size), pos)
            buf_start = pos
            rel = 0
        yield h, memoryview(buf)[rel:rel + size]


def _build_batch(h: BatchHeader, body: bytes, count: int, base_ts: int, max_ts: int,
                 attributes: int) -> bytes:
    payload = compress(h.compression, body) if h.compression else body
    after = _AFTER_CRC.pack(attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id,
                            h.producer_epoch, h.base_sequence, count) + payload
    length = 4 + 1 + 4 + len(after)
    return (_HEAD.pack(h.base_offset, length, h.partition_leader_epoch, 2)
            + struct.pack(">I", crc32c(after)) + after)


def clean_log(log: Log, now_ms: int, first_dirty_offset: int = 0, *,
              max_map_entries: int = 5_000_000) -> CleanResult:
    """One compaction pass over ``log`` (blocking; see the module docstring)."""
    fs: FileSystem = log._fs
    result = CleanResult(first_dirty_offset=first_dirty_offset)
    with log.lock():
        if log.offline:
            result.aborted_reason = "log offline"
            return result
        end = cleanable_end(log, now_ms)
        first_dirty = max(first_dirty_offset, log.log_start_offset)
        sources = [
            _Source(s, fs.dup(s.fd), s.size) for s in log._segments[:-1]
            if s.base_offset < end
        ]
        generation = log.generation
        producer_last = {pid: e.last_offset for pid, e in log.producer_state.producers.items()}
        aborted = log.aborted_txns(log.log_start_offset, end)
        config = log.config
    try:
        if not sources or first_dirty >= end:
            result.aborted_reason = "nothing to clean"
            return result
        # 1. Offset map over the dirty part.
        offset_map: dict[bytes, int] = {}
        map_end = end
        txns = CleanedTxns(aborted, first_dirty, end)
        for src in sources:
            seg = src.segment
            if seg.next_offset <= first_dirty:
                continue
            if len(offset_map) >= max_map_entries:
                map_end = seg.base_offset
                break
            for h, raw in _batches(fs, src):
                last = h.base_offset + h.last_offset_delta
                if h.is_control:
                    txns.on_marker(h, _marker(h, raw))
                    continue
                if txns.on_batch(h) or last < first_dirty:
                    continue  # aborted data never shadows a committed write
                for rec in _decode(h, raw):
                    if rec.key is not None and rec.offset >= first_dirty:
                        offset_map[rec.key] = rec.offset
        if map_end <= first_dirty:
            result.aborted_reason = "offset map full before the dirty section"
            return result
        sources = [s for s in sources if s.segment.base_offset < map_end]
        result.map_entries = len(offset_map)
        # 2. Rewrite in groups.
        groups = _group(sources, config.segment_bytes, config.max_index_entries)
        horizon = now_ms + config.delete_retention_ms
        outputs: list[tuple[list[_Source], Segment]] = []
        # One walk over every group, in order: a marker may go only if no batch of its
        # transaction is left anywhere before it, whichever group that batch landed in.
        walk = CleanedTxns(aborted, sources[0].segment.base_offset, map_end)
        try:
            for group in groups:
                outputs.append((group, _clean_group(log, group, offset_map, producer_last,
                                                    now_ms, horizon, result, walk)))
        except BaseException:
            for _g, new in outputs:
                _discard(fs, new)
            raise
        # 3. Swap under the lock.
        with log.lock():
            current = log._segments
            still_there = all(
                any(s is src.segment for s in current[:-1]) for src in sources)
            if log.generation != generation or not still_there or log.offline:
                for _g, new in outputs:
                    _discard(fs, new)
                result.aborted_reason = "log changed during cleaning"
                return result
            for group, new in outputs:
                _swap_in(log, group, new, result)
            result.cleaned = True
            result.first_dirty_offset = map_end
            result.segments_in = len(sources)
            result.segments_out = len(outputs)
        return result
    finally:
        for src in sources:
            fs.close(src.fd)


def _marker(h: BatchHeader, raw: memoryview) -> EndTxnMarker | None:
    return parse_end_txn_marker(raw) if h.producer_id >= 0 and h.record_count else None


def _decode(h: BatchHeader, raw: memoryview):
    data = raw[61:]
    body = decompress(h.compression, data) if h.compression else bytes(data)
    return decode_records(body, h)


def _group(sources: list[_Source], max_bytes: int, max_entries: int) -> list[list[_Source]]:
    """Consecutive segments whose combined size fits one segment (Kafka's
    groupSegmentsBySize)."""
    groups: list[list[_Source]] = []
    current: list[_Source] = []
    size = 0
    entries = 0
    for src in sources:
        seg = src.segment
        offsets_fit = (not current
                       or seg.next_offset - 1 - current[0].segment.base_offset <= INT32_MAX)
        if current and (size + src.size > max_bytes
                        or entries + seg.index.entries > max_entries or not offsets_fit):
            groups.append(current)
            current, size, entries = [], 0, 0
        current.append(src)
        size += src.size
        entries += seg.index.entries
    if current:
        groups.append(current)
    return groups


def _clean_group(log: Log, group: list[_Source], offset_map: dict[bytes, int],
                 producer_last: dict[int, int], now_ms: int, horizon: int,
                 result: CleanResult, txns: CleanedTxns) -> Segment:
    fs = log._fs
    base = group[0].segment.base_offset
    kept_before = len(txns.kept_entries)
    remove_files(fs, [segment_file(log.dir, base, kind, suffix)
                      for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX)
                      for kind in SEGMENT_FILE_SUFFIXES])
    new = Segment(log.dir, base, fs, log.config, now_ms, suffix=CLEANED_SUFFIX)
    new.open_for_append()
    try:
        pending = bytearray()
        infos: list[tuple[int, int, int]] = []
        for src in group:
            result.bytes_in += src.size
            for h, raw in _batches(fs, src):
                out = _filter_batch(h, raw, offset_map, producer_last, now_ms, horizon, result,
                                    txns)
                if out is None:
                    continue
                data, max_ts = out
                pending += data
                infos.append((len(data), h.base_offset + h.last_offset_delta, max_ts))
                if len(pending) >= _READ_CHUNK:
                    new.append(pending, infos)
                    pending, infos = bytearray(), []
        if infos:
            new.append(pending, infos)
        for entry in txns.kept_entries[kept_before:]:
            new.txn_index.append(entry)
        result.bytes_out += new.size
        new.on_become_inactive()
        new.flush()
    except BaseException:
        _discard(fs, new)
        raise
    return new


def _filter_marker(h: BatchHeader, raw: memoryview, now_ms: int, horizon: int,
                   result: CleanResult, txns: CleanedTxns
                   ) -> tuple[bytes | memoryview, int] | None:
    """A control batch: kept while its transaction has data, then until its horizon."""
    result.records_in += h.record_count
    has_horizon = bool(h.attributes & DELETE_HORIZON_BIT)
    if not txns.on_marker(h, _marker(h, raw)):
        result.records_out += h.record_count
        return raw, h.max_timestamp
    if has_horizon:
        if now_ms >= h.base_timestamp:
            result.markers_removed += 1
            return None
        result.note_horizon(h.base_timestamp)
        result.records_out += h.record_count
        return raw, h.max_timestamp
    result.note_horizon(horizon)
    records = _decode(h, raw)
    result.records_out += len(records)
    body = bytearray()
    for rec in records:
        encode_record(body, rec.offset - h.base_offset, rec.timestamp - horizon, rec.key,
                      rec.value, rec.headers)
    return _build_batch(h, bytes(body), len(records), horizon, h.max_timestamp,
                        h.attributes | DELETE_HORIZON_BIT), h.max_timestamp


def _filter_batch(h: BatchHeader, raw: memoryview, offset_map: dict[bytes, int],
                  producer_last: dict[int, int], now_ms: int, horizon: int,
                  result: CleanResult, txns: CleanedTxns
                  ) -> tuple[bytes | memoryview, int] | None:
    if h.is_control:
        return _filter_marker(h, raw, now_ms, horizon, result, txns)
    has_horizon = bool(h.attributes & DELETE_HORIZON_BIT)
    records = _decode(h, raw)
    result.records_in += len(records)
    if txns.on_batch(h):
        result.aborted_records_removed += len(records)
        records = []
    kept = []
    tombstones = False
    for rec in records:
        if rec.key is None:
            continue
        latest = offset_map.get(rec.key)
        if latest is not None and rec.offset < latest:
            continue
        if rec.value is None:
            if has_horizon and now_ms >= h.base_timestamp:
                result.tombstones_removed += 1
                continue
            tombstones = True
        kept.append(rec)
    result.records_out += len(kept)
    needs_horizon = tombstones and not has_horizon
    if tombstones:
        result.note_horizon(h.base_timestamp if has_horizon else horizon)
    if kept and len(kept) == len(records) and not needs_horizon:
        return raw, h.max_timestamp
    last_offset = h.base_offset + h.last_offset_delta
    if not kept:
        if h.producer_id >= 0 and producer_last.get(h.producer_id) == last_offset:
            # Keep the producer's last batch so its sequence numbers survive a reload.
            return _build_batch(h, b"", 0, h.base_timestamp, h.max_timestamp,
                                h.attributes), h.max_timestamp
        return None
    attributes = h.attributes & ~DELETE_HORIZON_BIT & 0xFFFF
    max_ts = h.max_timestamp if h.is_log_append_time else max(r.timestamp for r in kept)
    if tombstones:
        base_ts = h.base_timestamp if has_horizon else horizon
        attributes |= DELETE_HORIZON_BIT
    else:
        base_ts = kept[0].timestamp if not h.is_log_append_time else h.base_timestamp
    body = bytearray()
    for rec in kept:
        ts_delta = 0 if h.is_log_append_time else rec.timestamp - base_ts
        encode_record(body, rec.offset - h.base_offset, ts_delta, rec.key, rec.value,
                      rec.headers)
    assert attributes & COMPRESSION_MASK == h.compression
    return _build_batch(h, bytes(body), len(kept), base_ts, max_ts, attributes), max_ts


def _discard(fs: FileSystem, seg: Segment) -> None:
    paths = seg.file_paths()
    seg.close()
    remove_files(fs, paths)


def _swap_in(log: Log, group: list[_Source], new: Segment, result: CleanResult) -> None:
    """Kafka's replaceSegments: .cleaned -> .swap, old -> .deleted, .swap -> final."""
    fs = log._fs
    new.rename_suffix(SWAP_SUFFIX)
    fs.fsync_dir(log.dir)
    old = [src.segment for src in group]
    for seg in old:
        log._schedule_delete(seg)
    new.rename_suffix("")
    fs.fsync_dir(log.dir)
    log._install_cleaned(old, new)
