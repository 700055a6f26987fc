"""Which segments retention may delete (pure functions over the segment list).

Kafka's rules (UnifiedLog.deletableSegments): walk segments oldest first and stop at the first
one the predicate keeps; never delete a segment holding offsets at or above the high watermark
(the log start offset must not pass it); never delete the last segment if it is empty. The
active segment may be deleted if it is non-empty and breaches retention: the log then rolls a
new, empty active segment first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .segment import Segment

Predicate = Callable[[Segment, Segment | None], bool]


def deletable_segments(segments: Sequence[Segment], log_end_offset: int, high_watermark: int,
                       predicate: Predicate) -> list[Segment]:
    out: list[Segment] = []
    n = len(segments)
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < n else None
        if nxt is None and seg.size == 0:
            break
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if high_watermark < upper or not predicate(seg, nxt):
            break
        out.append(seg)
    return out


def log_start_breached(log_start_offset: int) -> Predicate:
    """Segments entirely below the log start offset (after DeleteRecords)."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate | None:
    """Segments whose largest timestamp is older than ``retention.ms``."""
    if retention_ms < 0:
        return None
    return lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms


def retention_size_breached(total_size: int, retention_bytes: int) -> Predicate | None:
    """Oldest segments while the log stays above ``retention.bytes`` without them."""
    if retention_bytes < 0 or total_size < retention_bytes:
        return None
    excess = [total_size - retention_bytes]

    def predicate(seg: Segment, nxt: Segment | None) -> bool:
        if excess[0] - seg.size >= 0:
            excess[0] -= seg.size
            return True
        return False

    return predicate
