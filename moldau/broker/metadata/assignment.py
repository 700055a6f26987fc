"""Replica assignment of new partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Goals, as Kafka states them: spread the replicas evenly over the brokers; for each partition
put its replicas on different brokers (and, with ``broker.rack``, on as many racks as possible);
and let the leaders of consecutive partitions land on consecutive brokers from a random start,
so that 12 partitions over 3 brokers give each broker 4 leaders.

Without racks (every broker's rack unset): partition ``p``'s first replica is broker
``(p + start) % n`` of the brokers sorted by id; the others follow it at a distance of
``1 + (shift + j) % (n - 1)`` for the j-th follower, where ``shift`` starts random and grows by
one each time the partition number wraps around the broker list (so followers do not always
pair with the same brokers).

With racks (every broker has one): the same walk over a broker list that alternates racks
(``rack-alternated list``: first broker of rack a, first of rack b, second of rack a, ...),
skipping a candidate whose rack already holds a replica while some rack holds none, or a broker
that already holds one while some broker holds none. Some brokers with a rack and others
without is refused, as Kafka refuses it.

Pure functions; the controller passes the registered brokers and Kafka's error texts come back
as :class:`AssignmentError` with the code Kafka answers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from ...protocol.errors import ErrorCode, KafkaError

#: (broker id, rack or None)
Broker = tuple[int, str | None]


class AssignmentError(KafkaError):
    """The assignment cannot be made; ``code`` is the error Kafka answers."""


def assign_replicas(brokers: Sequence[Broker], partitions: int, replication_factor: int, *,
                    fixed_start_index: int = -1, start_partition_id: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replicas (leader first) of partitions ``start_partition_id`` (0 if negative) onwards,
    ``partitions`` of them, over ``brokers``. ``fixed_start_index`` >= 0 replaces both random
    choices (the first leader's index and the follower shift), as in Kafka's tests and
    CreatePartitions. Raises :class:`AssignmentError`."""
    if partitions <= 0:
        raise AssignmentError(ErrorCode.invalid_partitions,
                              "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(ErrorCode.invalid_replication_factor,
                              f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(brokers)}.")
    rng = rng or random.Random()
    ordered = sorted(brokers)
    if all(rack is None for _, rack in ordered):
        return _rack_unaware([b for b, _ in ordered], partitions, replication_factor,
                             fixed_start_index, start_partition_id, rng)
    if any(rack is None for _, rack in ordered):
        missing = [b for b, rack in ordered if rack is None]
        raise AssignmentError(
            ErrorCode.invalid_replica_assignment,
            f"Not all brokers have rack information for replica rack aware assignment. "
            f"Set broker.rack on broker(s) {missing} too, or on none.")
    return _rack_aware(dict(ordered), partitions, replication_factor, fixed_start_index,
                       start_partition_id, rng)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _placements(n: int, partitions: int, fixed_start_index: int, start_partition_id: int,
                rng: random.Random) -> Iterator[tuple[int, int, int]]:
    """(partition id, index of its first replica among the ``n`` brokers, follower shift) of
    each partition to place, as both of Kafka's assignments step: round robin from a start
    index, the followers shifted by one more each time the partitions wrap around."""
    if fixed_start_index >= 0:
        start = shift = fixed_start_index
    else:
        start, shift = rng.randrange(n), rng.randrange(n)
    partition = max(0, start_partition_id)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start) % n, shift
        partition += 1


def _rack_unaware(brokers: list[int], partitions: int, factor: int, fixed_start_index: int,
                  start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    n = len(brokers)
    return {
        partition: [brokers[first],
                    *(brokers[_replica_index(first, shift, j, n)] for j in range(factor - 1))]
        for partition, first, shift in _placements(n, partitions, fixed_start_index,
                                                   start_partition_id, rng)}


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """Brokers ordered so that racks alternate (racks sorted by name, brokers by id), e.g.
    {0: a, 1: a, 2: b, 3: c, 4: c} -> [0, 2, 3, 1, 4]."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    names = sorted(by_rack)
    iterators = {rack: iter(by_rack[rack]) for rack in names}
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        broker = next(iterators[names[index]], None)
        if broker is not None:
            result.append(broker)
        index = (index + 1) % len(names)
    return result


def _rack_aware(racks: dict[int, str], partitions: int, factor: int, fixed_start_index: int,
                start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    result = {}
    for partition, first, shift in _placements(n, partitions, fixed_start_index,
                                               start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_used, brokers_used = {racks[leader]}, {leader}
        k = 0
        for _ in range(factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # Skip a broker whose rack already has a replica while another rack has none,
                # or one that already has a replica while another broker has none.
                if (rack not in racks_used or len(racks_used) == num_racks) and \
                        (broker not in brokers_used or len(brokers_used) == n):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[partition] = replicas
    return result
