"""murmur2 matches Kafka's Java Utils.murmur2; sticky partitioning for null keys."""

from __future__ import annotations

import random

import pytest

from moldau.client.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Reference values of org.apache.kafka.common.utils.Utils.murmur2, as published with
# other Kafka-compatible clients' tests (Kafka's UtilsTest cases and Java-generated values).
JAVA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
    "1": -1993445489,
    "12": 126087238,
    "123": -267702483,
    "1234": -1614185708,
    "12345": -1188365604,
}


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


def test_murmur2_empty_and_range() -> None:
    assert -(2**31) <= murmur2(b"") < 2**31
    for n in range(64):
        assert -(2**31) <= murmur2(bytes(range(n))) < 2**31


def test_to_positive_is_mask_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


def test_sticky_stays_until_batch_size_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    first = sticky.partition("t", [0, 1, 2, 3], 4)
    for _ in range(9):
        sticky.on_append("t", first, 100, [0, 1, 2, 3], 4)
        assert sticky.partition("t", [0, 1, 2, 3], 4) == first
    sticky.on_append("t", first, 100, [0, 1, 2, 3], 4)
    second = sticky.partition("t", [0, 1, 2, 3], 4)
    assert second != first


def test_sticky_avoids_partitions_without_leader() -> None:
    sticky = StickyPartitioner(batch_size=10, rng=random.Random(2))
    for _ in range(50):
        p = sticky.partition("t", [2], 4)
        assert p == 2
        sticky.on_append("t", p, 10, [2], 4)


def test_sticky_spreads_over_partitions() -> None:
    sticky = StickyPartitioner(batch_size=10, rng=random.Random(3))
    seen = set()
    for _ in range(200):
        p = sticky.partition("t", [0, 1, 2], 3)
        seen.add(p)
        sticky.on_append("t", p, 10, [0, 1, 2], 3)
    assert seen == {0, 1, 2}
