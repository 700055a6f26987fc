"""Balanced, sticky partition assignment (for the ``sticky`` and ``cooperative-sticky``
assignors), as pure functions.

Goals, in order (Kafka's KIP-54/KIP-341 sticky assignor): every partition of a subscribed
topic goes to exactly one member that subscribes to it; counts are as even as the
subscriptions allow; and as many partitions as possible stay with their current owner.

Ownership comes from what members claim in JoinGroup. A partition claimed by several members
belongs to the one that held it in the highest generation; a tie in the highest generation
means nobody can be trusted with it and it is handed out afresh (Java does the same).

:func:`cooperative_adjust` turns a sticky assignment into the first phase of an incremental
cooperative rebalance (KIP-429): a partition that moves from one live member to another is
left out of the new owner's assignment, so the old owner revokes it, rejoins, and the follow-up
rebalance hands it over. No partition is ever owned by two members at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..types import TopicPartition

Assignment = dict[str, list[TopicPartition]]


def current_owners(
    claims: Mapping[str, tuple[Sequence[TopicPartition], int]],
) -> dict[TopicPartition, str]:
    """Partition -> member that owns it, from ``{member: (owned, generation)}`` claims."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member, (owned, generation) in sorted(claims.items()):
        for tp in owned:
            seen = best.get(tp)
            if seen is None or generation > seen[0]:
                best[tp] = (generation, member)
            elif generation == seen[0] and seen[1] != member:
                best[tp] = (generation, None)  # conflicting claims: trust neither
    return {tp: member for tp, (_gen, member) in best.items() if member is not None}


def _all_partitions(partitions: Mapping[str, int], topics: set[str]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in sorted(topics) if t in partitions
            for p in range(partitions[t])]


def sticky_assign(
    partitions: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    owners: Mapping[TopicPartition, str],
) -> Assignment:
    """Balanced assignment that keeps ``owners``' partitions where balance allows.

    ``partitions`` is partition count per topic; ``subscriptions`` topics per member;
    ``owners`` the current owner of each partition (see :func:`current_owners`).
    """
    members = sorted(subscriptions)
    eligible = {m: set(_all_partitions(partitions, set(subscriptions[m]))) for m in members}
    result: Assignment = {m: [] for m in members}
    if not members:
        return result
    everything = sorted(set().union(*eligible.values()))
    kept: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp in everything:
        owner = owners.get(tp)
        if owner in eligible and tp in eligible[owner]:
            kept[owner].append(tp)
    identical = all(eligible[m] == eligible[members[0]] for m in members)
    if identical:
        return _constrained(members, everything, kept)
    return _general(members, everything, eligible, kept)


def _constrained(members: list[str], everything: list[TopicPartition],
                 kept: dict[str, list[TopicPartition]]) -> Assignment:
    """All members subscribe to the same topics: exact quotas, owners keep up to theirs."""
    count = len(members)
    low, extra = divmod(len(everything), count)  # `extra` members may hold low + 1
    result: Assignment = {m: [] for m in members}
    released: list[TopicPartition] = []
    # Members holding the most keep their extra partition first: fewest movements.
    for m in sorted(members, key=lambda m: (-len(kept[m]), m)):
        owned = kept[m]
        quota = low
        if len(owned) > low and extra > 0:
            quota = low + 1
            extra -= 1
        result[m] = owned[:quota]
        released.extend(owned[quota:])
    taken = {tp for ps in result.values() for tp in ps}
    free = [tp for tp in everything if tp not in taken]
    # Fill everyone up to `low`, then hand the remaining partitions out one each.
    for m in sorted(members, key=lambda m: (len(result[m]), m)):
        while len(result[m]) < low and free:
            result[m].append(free.pop(0))
    for m in sorted(members, key=lambda m: (len(result[m]), m)):
        if not free or extra <= 0:
            break
        if len(result[m]) == low:
            result[m].append(free.pop(0))
            extra -= 1
    for m in members:
        result[m].sort()
    return result


def _general(members: list[str], everything: list[TopicPartition],
             eligible: dict[str, set[TopicPartition]],
             kept: dict[str, list[TopicPartition]]) -> Assignment:
    """Different subscriptions: keep owners, place the rest greedily, then even out."""
    result: Assignment = {m: list(kept[m]) for m in members}
    taken = {tp for ps in result.values() for tp in ps}
    candidates = {tp: [m for m in members if tp in eligible[m]] for tp in everything}
    # Partitions with the fewest possible consumers first, each to the least loaded one.
    for tp in sorted((tp for tp in everything if tp not in taken),
                     key=lambda tp: (len(candidates[tp]), tp)):
        options = candidates[tp]
        if options:
            target = min(options, key=lambda m: (len(result[m]), m))
            result[target].append(tp)
    # Move partitions from the most to the least loaded eligible member while that narrows
    # the gap by at least two; every move strictly lowers the sum of squared counts, so
    # this ends.
    moved = True
    while moved:
        moved = False
        for source in sorted(members, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[source], reverse=True):
                options = [m for m in candidates[tp] if m != source]
                if not options:
                    continue
                target = min(options, key=lambda m: (len(result[m]), m))
                if len(result[target]) + 1 < len(result[source]):
                    result[source].remove(tp)
                    result[target].append(tp)
                    moved = True
                    break
            if moved:
                break
    for m in members:
        result[m].sort()
    return result


def cooperative_adjust(assignment: Assignment, owners: Mapping[TopicPartition, str]
                       ) -> Assignment:
    """First phase of a cooperative rebalance: partitions that change owner are given to
    nobody this round (their old owner revokes them and rejoins)."""
    out: Assignment = {}
    for member, tps in assignment.items():
        out[member] = [
            tp for tp in tps
            if owners.get(tp) in (None, member) or owners.get(tp) not in assignment
        ]
    return out
