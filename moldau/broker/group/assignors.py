"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Both are pure functions from (members' subscribed topic ids, partition counts, the previous
target assignment) to a new target assignment.

* ``uniform`` spreads partitions so member counts differ by at most one among members with the
  same subscription, keeping every partition where it was when that stays balanced (sticky), so
  a rebalance moves as few partitions as possible.
* ``range`` assigns each topic in contiguous ranges over the members subscribed to it, sorted
  by member id; members subscribed to the same co-partitioned topics get the same partition
  numbers of each.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Assignment = dict[uuid.UUID, set[int]]
TopicPartition = tuple[uuid.UUID, int]


def uniform_assign(subscriptions: Mapping[str, set[uuid.UUID]],
                   partition_counts: Mapping[uuid.UUID, int],
                   previous: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    """Balanced, sticky assignment (see module docstring)."""
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()
    # 1. Keep what each member had, if it still subscribes and the partition exists.
    for member in members:
        for topic, partitions in previous.get(member, {}).items():
            if topic not in subscriptions[member]:
                continue
            for p in partitions:
                tp = (topic, p)
                if p < partition_counts.get(topic, 0) and tp not in taken:
                    owned[member].add(tp)
                    taken.add(tp)
    # 2. Cap members above their fair share, releasing their highest partitions.
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member in members:
        for topic in subscriptions[member]:
            if topic in partition_counts:
                subscribers.setdefault(topic, []).append(member)
    quota = _fair_quotas(members, subscriptions, partition_counts)
    for member in members:
        excess = len(owned[member]) - quota[member]
        if excess > 0:
            for tp in sorted(owned[member], reverse=True)[:excess]:
                owned[member].discard(tp)
                taken.discard(tp)
    # 3. Hand out free partitions to the least-loaded subscriber.
    for topic in sorted(subscribers, key=str):
        for p in range(partition_counts[topic]):
            tp = (topic, p)
            if tp in taken:
                continue
            best = min(subscribers[topic], key=lambda m: (len(owned[m]) - quota[m],
                                                          len(owned[m]), m))
            owned[best].add(tp)
            taken.add(tp)
    # 4. Move partitions from overloaded to underloaded members that can take them.
    _balance(owned, subscriptions)
    return {m: _by_topic(owned[m]) for m in members}


def _fair_quotas(members: list[str], subscriptions: Mapping[str, set[uuid.UUID]],
                 partition_counts: Mapping[uuid.UUID, int]) -> dict[str, int]:
    """An upper bound per member: ceil(partitions it could get / members sharing them)."""
    quota = {}
    for member in members:
        topics = {t for t in subscriptions[member] if t in partition_counts}
        partitions = sum(partition_counts[t] for t in topics)
        sharing = sum(1 for m in members if subscriptions[m] & topics) or 1
        quota[member] = -(-partitions // sharing)
    return quota


def _balance(owned: dict[str, set[TopicPartition]],
             subscriptions: Mapping[str, set[uuid.UUID]]) -> None:
    for _ in range(10_000):
        moved = False
        by_load = sorted(owned, key=lambda m: (-len(owned[m]), m))
        for heavy in by_load:
            for light in reversed(by_load):
                if len(owned[heavy]) - len(owned[light]) <= 1:
                    break
                movable = sorted(tp for tp in owned[heavy] if tp[0] in subscriptions[light])
                if movable:
                    tp = movable[-1]
                    owned[heavy].discard(tp)
                    owned[light].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def _by_topic(partitions: set[TopicPartition]) -> Assignment:
    result: Assignment = {}
    for topic, p in partitions:
        result.setdefault(topic, set()).add(p)
    return result


def range_assign(subscriptions: Mapping[str, set[uuid.UUID]],
                 partition_counts: Mapping[uuid.UUID, int],
                 previous: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    """Contiguous ranges per topic over its subscribers sorted by member id."""
    result: dict[str, Assignment] = {m: {} for m in subscriptions}
    for topic, count in partition_counts.items():
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members or count <= 0:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = per + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


Assignor = Callable[[Mapping[str, set[uuid.UUID]], Mapping[uuid.UUID, int],
                     Mapping[str, Mapping[uuid.UUID, set[int]]]], dict[str, Assignment]]

ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
