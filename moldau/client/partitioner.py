"""Kafka's default partitioner: murmur2 of the key, and sticky partitions for null keys.

Keyed records go to ``toPositive(murmur2(key)) % partitions`` exactly as the Java client
computes it, so a Moldau producer and a Java producer agree on where each key lives (a
compacted topic depends on that). Records without a key stick to one partition until about
``batch.size`` bytes went there, then move to another one at random (KIP-794, "uniform
sticky"), which keeps batches full without skewing partitions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``Utils.murmur2``): a signed 32-bit hash of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs())."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key``."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Sticky partition choice for records without a key (one instance per producer)."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self.batch_size = max(1, batch_size)
        self._rng = rng or random.Random()
        self._current: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes sent)

    def partition(self, topic: str, available: Sequence[int], all_count: int) -> int:
        """Current sticky partition of ``topic`` (among ``available`` leaders if any)."""
        current = self._current.get(topic)
        if current is not None and current[0] < all_count and (
            not available or current[0] in available
        ):
            return current[0]
        return self._switch(topic, available, all_count, None)

    def on_append(self, topic: str, partition: int, size: int,
                  available: Sequence[int], all_count: int) -> None:
        """Account ``size`` bytes to the sticky partition; move on once batch.size is full."""
        current = self._current.get(topic)
        if current is None or current[0] != partition:
            return
        produced = current[1] + size
        if produced >= self.batch_size:
            self._switch(topic, available, all_count, partition)
        else:
            self._current[topic] = (partition, produced)

    def _switch(self, topic: str, available: Sequence[int], all_count: int,
                previous: int | None) -> int:
        choices = list(available) if available else list(range(all_count))
        if previous is not None and len(choices) > 1:
            choices = [p for p in choices if p != previous]
        chosen = self._rng.choice(choices)
        self._current[topic] = (chosen, 0)
        return chosen
