"""Checking and rebuilding a segment at start-up (Kafka's LogSegment.sanityCheck and
LogSegment.recover), which the loader runs; the segment's read and append paths are in
:mod:`moldau.storage.segment`.

A segment of a cleanly shut down log only has its index files loaded and checked against the
tail of its ``.log`` (:func:`load_indexes`, which also checks the ``.txnindex`` is whole
entries); any other segment is scanned batch by batch with
CRC checks, truncated at the first bad or partial batch, and its indexes rebuilt
(:func:`recover`).
"""

from __future__ import annotations

from collections.abc import Callable

from moldau.protocol.records.batch import BatchHeader

from .errors import CorruptIndex
from .scan import BatchScanner
from .segment import Segment


def load_indexes(segment: Segment) -> bool:
    """Load and sanity-check index files of an existing segment (no batch scan beyond the
    last indexed batch). False if an index is missing or bad: recover the segment then."""
    index, time_index = segment.index, segment.time_index
    try:
        index.load(segment.size)
        time_index.load()
        segment.txn_index.sanity_check()
    except (CorruptIndex, FileNotFoundError):
        return False
    if segment.size == 0 and (index.rel or time_index.rel):
        return False
    walker = segment.batches_from(index.last_position)
    last: BatchHeader | None = None
    for _pos, h in walker:
        last = h
    if walker.valid_end != segment.size:
        return False  # the tail does not parse: not the clean segment it claims to be
    if last is not None:
        segment.next_offset = last.base_offset + last.last_offset_delta + 1
    elif segment.size:
        return False
    ts, off = time_index.last_entry()
    if index.rel and segment.next_offset <= segment.base_offset + index.rel[-1]:
        return False
    if time_index.rel and off >= segment.next_offset:
        return False
    segment.max_timestamp, segment.offset_of_max_timestamp = ts, off
    segment.bytes_since_index = 0
    return True


def recover(segment: Segment,
            on_batch: Callable[[int, BatchHeader, BatchScanner], None] | None = None,
            *, reset_txn_index: bool = True) -> tuple[int, BatchScanner]:
    """Rebuild indexes from a CRC-verified scan, truncating at the first bad batch.

    The ``.txnindex`` is emptied (``reset_txn_index``): the log's producer state rebuild
    writes its entries again from the markers it replays (``Log.rebuild_producer_state``).
    A cleaner's ``.swap`` segment keeps the index the cleaner wrote.
    Returns (bytes truncated, the scanner with its statistics).
    """
    index, time_index, fs = segment.index, segment.time_index, segment.fs
    if reset_txn_index:
        segment.txn_index.reset()
    was_active = segment.active
    segment.forget_tail()
    index.appendable = False
    time_index.appendable = False
    index.rel = type(index.rel)("i")
    index.positions = type(index.positions)("i")
    time_index.timestamps = type(time_index.timestamps)("q")
    time_index.rel = type(time_index.rel)("i")
    scanner = BatchScanner(fs, segment.fd, 0, segment.size, verify=True,
                           segment_base=segment.base_offset)
    max_ts, off_max = -1, segment.base_offset
    last_entry_pos = 0
    first_ts: int | None = None
    interval = segment.index_interval
    for pos, h in scanner:
        last_offset = h.base_offset + h.last_offset_delta
        if first_ts is None:
            first_ts = h.max_timestamp
        if h.max_timestamp > max_ts:
            max_ts, off_max = h.max_timestamp, last_offset
        if pos - last_entry_pos > interval:
            index.append(last_offset, pos)
            time_index.maybe_append(max_ts, off_max)
            last_entry_pos = pos
        if on_batch is not None:
            on_batch(pos, h, scanner)
    truncated = segment.size - scanner.valid_end
    if truncated:
        segment.shrink(scanner.valid_end)
        segment.size = scanner.valid_end
    time_index.maybe_append(max_ts, off_max)
    fs.write_file_atomic(index.path, index.write_all_entries(), sync=False)
    fs.write_file_atomic(time_index.path, time_index.write_all_entries(), sync=False)
    index.mark_persisted()
    time_index.mark_persisted()
    segment.next_offset = (scanner.next_offset if scanner.next_offset is not None
                           else segment.base_offset)
    segment.max_timestamp, segment.offset_of_max_timestamp = max_ts, off_max
    segment.rolling_ts = first_ts
    segment.bytes_since_index = segment.size - last_entry_pos if segment.size else 0
    if was_active:
        segment.open_for_append()
    return truncated, scanner
