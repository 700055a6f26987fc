"""A bound on the file descriptors held by inactive segments, and the process's open-file limit.

Every partition's active segment keeps its ``.log`` open (appends and tail reads). Older
segments are read rarely (a consumer catching up, a timestamp lookup, the cleaner), so their
descriptors (and memory maps, which hold a duplicate descriptor each) are opened on demand and
kept in a least-recently-used pool of :attr:`HandlePool.capacity` entries; beyond that the
oldest are closed. A partition with thousands of segments thus opens, loads and serves within
any reasonable ``RLIMIT_NOFILE``, where keeping every segment open (Kafka needs a descriptor
per segment, hence its advice of a 100000 limit) made the broker unable to start.

Closing a descriptor another thread is using would be a disaster (the number can be reused by
another file), so a segment is only closed while its log's lock can be taken without waiting:
every use of a pooled segment's descriptor happens under its log's lock. The lock is
reentrant, so the thread that holds it may close another segment of the same log; that is
safe because no code of a log uses one segment's descriptor across the opening of another
(reads, timestamp lookups, truncation and producer-state rebuilds finish with a segment
before they touch the next; the cleaner and flushes work on duplicated descriptors).
Segments not yet owned by a log (being loaded, being written by the cleaner) are not pooled.
"""

from __future__ import annotations

import itertools
import logging
import os
import resource
import threading
from collections import OrderedDict
from typing import Any, Protocol

log = logging.getLogger(__name__)

# Descriptors kept free for connections, checkpoints and everything else when deciding whether
# new partitions fit (a fraction of the limit, at least this many).
MIN_RESERVE = 32
# Java raises its soft limit to the hard one at start (HotSpot's -XX:+MaxFDLimit, on by
# default), so Kafka runs with the hard limit; Moldau does the same, up to this value.
MAX_RAISED_LIMIT = 1 << 20


class PooledSegment(Protocol):
    owner_lock: Any

    def release_handles(self) -> None: ...


class HandlePool:
    """Least-recently-used inactive segments holding an open descriptor."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._lru: OrderedDict[PooledSegment, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def opened(self, segment: PooledSegment) -> None:
        """``segment`` (owned by a log) now holds a descriptor; closes the least recently
        used others while the pool is over capacity."""
        with self._lock:
            self._lru[segment] = None
            self._lru.move_to_end(segment)
            if len(self._lru) > self.capacity:
                self._evict(segment)

    def touch(self, segment: PooledSegment) -> None:
        with self._lock:
            if segment in self._lru:
                self._lru.move_to_end(segment)

    def forget(self, segment: PooledSegment) -> None:
        with self._lock:
            self._lru.pop(segment, None)

    def _evict(self, keep: PooledSegment) -> None:
        excess = len(self._lru) - self.capacity
        # Look at a bounded number of candidates: a busy log's segments are skipped, and the
        # pool may then stay over capacity until the next open.
        for victim in list(itertools.islice(self._lru, excess + 16)):
            if excess <= 0:
                return
            lock = victim.owner_lock
            if victim is keep or lock is None:
                continue
            if not lock.acquire(blocking=False):
                continue
            try:
                victim.release_handles()
            finally:
                lock.release()
            self._lru.pop(victim, None)
            excess -= 1


def open_file_limit() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE; RLIM_INFINITY is reported as MAX_RAISED_LIMIT."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return (MAX_RAISED_LIMIT if soft == inf else soft, MAX_RAISED_LIMIT if hard == inf else hard)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as the JVM does); (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else MAX_RAISED_LIMIT
    target = min(target, MAX_RAISED_LIMIT)
    before = soft
    if soft == resource.RLIM_INFINITY or soft >= target:
        return before, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return before, soft
    return before, target


def pool_capacity(soft_limit: int) -> int:
    """How many inactive segments may hold a descriptor: an eighth of the limit."""
    return max(MIN_RESERVE, min(soft_limit // 8, 65536))


def reserve(soft_limit: int) -> int:
    """Descriptors kept free for connections and files opened briefly."""
    return max(MIN_RESERVE, soft_limit // 8)


def open_descriptors() -> int | None:
    """How many descriptors this process has open (None if that cannot be counted, e.g.
    because none is left to list /proc/self/fd)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # minus the one listing the directory
    except OSError:
        return None


HANDLE_POOL = HandlePool(pool_capacity(open_file_limit()[0]))
