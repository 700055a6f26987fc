"""Which partition of a coordinator's topic holds a key (as Kafka computes it).

Kafka uses ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` for groups and the
same for transactional ids over ``transaction.state.log.num.partitions``: Java's
``String.hashCode`` over UTF-16 code units with 32-bit overflow, and an ``abs`` that maps
``Integer.MIN_VALUE`` to 0. Matching it keeps a data directory's group placement identical to
Kafka's, which tools that read ``__consumer_offsets`` directly rely on.
"""

from __future__ import annotations


def java_string_hash(value: str) -> int:
    """``java.lang.String.hashCode`` of ``value`` as a signed 32-bit int."""
    h = 0
    raw = value.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if value == -(1 << 31) else abs(value)


def partition_for(key: str, num_partitions: int) -> int:
    """The partition of ``key`` (a group id, a transactional id) among ``num_partitions``."""
    return kafka_abs(java_string_hash(key)) % num_partitions
