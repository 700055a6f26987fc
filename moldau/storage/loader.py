"""Opening a partition log from disk, with crash recovery (Kafka's LogLoader).

:func:`load_log` is a plain blocking call, safe to run in a worker thread per log.

1. Stray files: ``*.deleted`` and ``*.tmp`` are removed; ``*.cleaned`` files (a compaction that
   never reached the swap step) are removed; ``*.swap`` files (a compaction that crashed while
   swapping) are completed: the segments they replace are deleted and the swap files renamed
   into place. Swap files at or above the lowest ``.cleaned`` offset are incomplete and removed.
2. Every ``.log`` file becomes a segment. Index files without a ``.log`` are removed.
3. After a clean shutdown (``.kafka_cleanshutdown`` present) segments and indexes are trusted:
   indexes are sanity-checked and only a bad or missing one is rebuilt; nothing is CRC-scanned.
   Otherwise every segment from the one holding the recovery point onwards is recovered: each
   batch is checked (complete, magic 2, sane header, growing offsets, CRC-32C), the segment is
   truncated at the first failure, every later segment is dropped, and its indexes are rebuilt.
   Segments below the recovery point were fsynced before it was checkpointed, so only their
   indexes are checked.
4. Leader epochs come from ``leader-epoch-checkpoint``, are rebuilt from recovered batches and
   truncated to the log's range; a checkpoint that cannot be read stops the load with
   :class:`~.errors.LogDirError` (as Kafka takes the log dir offline). Producer state is loaded
   from the newest snapshot and brought up to date from batch headers; the aborted
   transaction index (``.txnindex``) of every recovered segment holding markers is rebuilt on
   the way from the ABORT markers replayed (from the newest snapshot at or below the first).
"""

from __future__ import annotations

import os
import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from moldau.protocol.records.batch import BatchHeader

from .checkpoints import MalformedCheckpoint
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import LogDirError
from .fs import DEFAULT_FS, FileSystem, remove_files
from .log import Log, wall_clock_ms
from .names import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    SEGMENT_FILE_SUFFIXES,
    SWAP_SUFFIX,
    offset_from_filename,
    parse_partition_dir,
)
from .producer_state import ProducerStateManager
from .scan import BatchScanner
from .segment import Segment
from .segment_recovery import load_indexes
from .segment_recovery import recover as recover_segment


@dataclass
class LoadStats:
    """What loading a log had to do (tests use it to prove a clean start does no scan)."""

    segments: int = 0
    segments_recovered: int = 0
    batches_scanned: int = 0
    bytes_truncated: int = 0
    segments_dropped: int = 0
    indexes_rebuilt: int = 0
    swaps_completed: int = 0
    stray_files_removed: int = 0
    producer_batches_replayed: int = 0

    def add(self, other: LoadStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _remove(fs: FileSystem, path: str) -> None:
    try:
        fs.remove(path)
    except FileNotFoundError:
        pass


def _is_segment_file(name: str) -> bool:
    head, _, rest = name.partition(".")
    return head.isdigit() and ("." + rest) in SEGMENT_FILE_SUFFIXES


def _clean_stray_files(fs: FileSystem, directory: str, config: LogConfig, now: int,
                       stats: LoadStats) -> None:
    names = fs.listdir(directory)
    swaps: list[str] = []
    cleaned: list[str] = []
    min_cleaned = None
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith((DELETED_SUFFIX, ".tmp")):
            _remove(fs, path)
            stats.stray_files_removed += 1
        elif name.endswith(CLEANED_SUFFIX):
            offset = offset_from_filename(name)
            min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
            cleaned.append(path)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    valid_swaps = []
    for name in swaps:
        if min_cleaned is not None and offset_from_filename(name) >= min_cleaned:
            _remove(fs, os.path.join(directory, name))
            stats.stray_files_removed += 1
        else:
            valid_swaps.append(name)
    for path in cleaned:
        _remove(fs, path)
        stats.stray_files_removed += 1
    if not valid_swaps:
        return
    # A crashed swap: the .swap segment replaces every segment in [its base, its end).
    lo, hi = None, None
    for name in valid_swaps:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        base = offset_from_filename(name)
        seg = Segment(directory, base, fs, config, now, suffix=SWAP_SUFFIX)
        try:
            recover_segment(seg, reset_txn_index=False)
            end = seg.next_offset
        finally:
            seg.close()
        lo = base if lo is None else min(lo, base)
        hi = end if hi is None else max(hi, end)
    if lo is not None and hi is not None:
        for name in fs.listdir(directory):
            if name.endswith(SWAP_SUFFIX) or not _is_segment_file(name):
                continue
            if lo <= offset_from_filename(name) < hi:
                _remove(fs, os.path.join(directory, name))
    for name in valid_swaps:
        fs.rename(os.path.join(directory, name),
                  os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
        stats.swaps_completed += 1


def _open_epoch_cache(directory: str, fs: FileSystem, topic: str,
                      partition: int) -> LeaderEpochCache:
    """The partition's leader epoch cache. A ``leader-epoch-checkpoint`` that cannot be read
    stops the load, as Kafka's CheckpointFileWithFailureHandler takes the log dir offline: it
    is written atomically, so a bad line means the file was damaged or edited, and going on
    without it would lose the partition's epochs for good after a clean shutdown (recovery,
    which reads epochs from batch headers, does not run then)."""
    try:
        return LeaderEpochCache(directory, fs)
    except MalformedCheckpoint as exc:
        log_dir = os.path.dirname(os.path.normpath(directory))
        raise LogDirError(
            f"Cannot load the log of {topic}-{partition} in {log_dir}: {exc}. Fix that line "
            f"(line 1 is the version 0, line 2 the number of entries, then one 'epoch "
            f"startOffset' line per entry, two integers, both increasing), or delete the file "
            f"together with {os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)} and "
            f"{os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT)}: the next start then "
            f"recovers every segment of that dir (a slower start, no data lost) and rebuilds "
            f"the epochs from the batches. The broker stops here rather than lose them; "
            f"nothing was changed on disk."
        ) from exc


def load_log(
    directory: str,
    config: LogConfig | None = None,
    *,
    topic: str | None = None,
    partition: int | None = None,
    fs: FileSystem = DEFAULT_FS,
    time_ms: Callable[[], int] = wall_clock_ms,
    clean_shutdown: bool = False,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    high_watermark: int = 0,
    rng: random.Random | None = None,
    stats: LoadStats | None = None,
) -> Log:
    """Open (creating if needed) the log in ``directory``; see the module docstring.

    ``recovery_point``, ``log_start_offset`` and ``high_watermark`` come from the log dir's
    checkpoint files; ``clean_shutdown`` from its ``.kafka_cleanshutdown`` marker.
    """
    config = config or LogConfig()
    stats = stats if stats is not None else LoadStats()
    rng = rng or random.Random()
    if topic is None or partition is None:
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(directory)))
        topic, partition = parsed if parsed else (os.path.basename(directory), 0)
    fs.makedirs(directory)
    # Read first, so that a malformed file stops the load before anything on disk changes.
    epoch_cache = _open_epoch_cache(directory, fs, topic, partition)
    now = time_ms()
    _clean_stray_files(fs, directory, config, now, stats)

    bases = []
    names = fs.listdir(directory)
    present = set(names)
    for name in names:
        if not _is_segment_file(name):
            continue
        if name.endswith(LOG_SUFFIX):
            bases.append(offset_from_filename(name))
        elif f"{name.split('.', 1)[0]}{LOG_SUFFIX}" not in present:
            _remove(fs, os.path.join(directory, name))  # orphaned index file
            stats.stray_files_removed += 1
    bases.sort()

    # Recovered segments holding transaction markers: their .txnindex is rebuilt.
    with_markers: set[int] = set()

    def on_batch(_pos: int, h: BatchHeader, _scanner: BatchScanner) -> None:
        epoch_cache.maybe_assign_from_batch(h.partition_leader_epoch, h.base_offset)
        if h.is_control and h.producer_id >= 0:
            with_markers.add(base)

    first_unflushed = max(bisect_right(bases, recovery_point) - 1, 0)
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        seg = Segment(directory, base, fs, config, now)
        must_recover = not clean_shutdown and i >= first_unflushed
        if not must_recover and not load_indexes(seg):
            must_recover = True
            stats.indexes_rebuilt += 1
        if must_recover:
            truncated, scanner = recover_segment(seg, on_batch)
            stats.segments_recovered += 1
            stats.batches_scanned += scanner.batches
            stats.bytes_truncated += truncated
            if truncated:
                segments.append(seg)
                for later in bases[i + 1:]:
                    doomed = Segment(directory, later, fs, config, now)
                    paths = doomed.file_paths()
                    doomed.close()
                    remove_files(fs, paths)
                    stats.segments_dropped += 1
                break
        segments.append(seg)
        if len(segments) > 1:
            # Older segments give their descriptor back at once (reopened on demand), so a
            # partition with more segments than the open-file limit still loads.
            segments[-2].release_handles()
    stats.segments += len(segments)

    if not segments:
        segments.append(Segment(directory, log_start_offset, fs, config, now))
    log_start = max(log_start_offset, segments[0].base_offset)
    log_end = segments[-1].next_offset
    if log_end < log_start:
        # Everything below the checkpointed log start is gone: start empty there.
        for seg in segments:
            paths = seg.file_paths()
            seg.close()
            remove_files(fs, paths)
        segments = [Segment(directory, log_start, fs, config, now)]
        log_end = log_start
    new_recovery_point = log_end if clean_shutdown else min(recovery_point, log_end)

    epoch_cache.truncate_from_end(log_end)
    epoch_cache.truncate_from_start(log_start)

    producer_state = ProducerStateManager(directory, fs, config.producer_id_expiration_ms,
                                          name=f"{topic}-{partition}")
    # Snapshots are kept for segment bases and the log end; others are strays.
    for snap in producer_state.snapshot_offsets():
        if snap < segments[0].base_offset:
            _remove(fs, producer_state.snapshot_path(snap))
    log = Log(directory, topic, partition, config, segments=segments,
              log_start_offset=log_start, recovery_point=new_recovery_point,
              high_watermark=high_watermark, epoch_cache=epoch_cache,
              producer_state=producer_state, fs=fs, time_ms=time_ms, rng=rng)
    stats.producer_batches_replayed += log.rebuild_producer_state(with_markers)
    return log

