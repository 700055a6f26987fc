"""Leader elections an administrator asks for (ElectLeaders, KIP-183 / KIP-460) and the
controller's automatic preferred-leader rebalance (``auto.leader.rebalance.enable``).

Pure planning over a :class:`~.image.MetadataImage`: which PartitionChangeRecords to commit,
and what to answer for each partition, in Kafka's terms.

PREFERRED (0) moves leadership to the partition's preferred replica, the first of its
assignment. ELECTION_NOT_NEEDED (84) when it already leads; PREFERRED_LEADER_NOT_AVAILABLE
(80) when it is not alive, not in the ISR, or shutting down (Kafka's
PreferredReplicaPartitionLeaderElectionStrategy).

UNCLEAN (1) elects a leader for a partition that has none alive: the first live in-sync
replica, else the first live replica (which then forms the ISR alone: records only the others
had are lost). ELECTION_NOT_NEEDED when the leader is alive; ELIGIBLE_LEADERS_NOT_AVAILABLE
(83) when no replica is alive. Unlike the automatic election after a broker dies, an
administrator's UNCLEAN election ignores ``unclean.leader.election.enable``, as Kafka's does.

A partition the image does not hold is UNKNOWN_TOPIC_OR_PARTITION (3). When the request
names no partitions (null: all of them) the partitions that needed no election are left out
of the answer, as Kafka's controller leaves them out.

:func:`imbalanced_partitions` is Kafka's ``checkAndTriggerAutoLeaderRebalance``: per broker,
the share of the partitions it prefers to lead that it does not lead; over
``leader.imbalance.per.broker.percentage`` percent, those partitions get a preferred election.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode
from .image import RECOVERING, MetadataImage, PartitionState
from .records import MetadataRecord, PartitionChangeRecord

log = logging.getLogger(__name__)

PREFERRED = 0
UNCLEAN = 1
ELECTION_TYPES = {PREFERRED: "PREFERRED", UNCLEAN: "UNCLEAN"}
NO_LEADER = -1

#: (topic, partition) -> (error, message); ErrorCode.none when the leader was elected.
Results = dict[tuple[str, int], tuple[ErrorCode, str | None]]


@dataclass
class ElectionPlan:
    """The records to commit and the answer per partition."""

    results: Results = field(default_factory=dict)
    records: list[MetadataRecord] = field(default_factory=list)


def alive_brokers(image: MetadataImage, ineligible: Collection[int] = ()) -> set[int]:
    """Brokers that may become leaders: registered, not fenced, not shutting down."""
    return {b for b, reg in image.brokers.items() if not reg.fenced} - set(ineligible)


def _strategy(election_type: int) -> str:
    return ("PreferredReplicaPartitionLeaderElectionStrategy" if election_type == PREFERRED
            else "UncleanPartitionLeaderElectionStrategy")


def _elect_one(topic_id: object, name: str, partition: int, state: PartitionState,
               election_type: int, alive: set[int]
               ) -> tuple[ErrorCode, str | None, PartitionChangeRecord | None]:
    tp = f"{name}-{partition}"
    if election_type == PREFERRED:
        preferred = state.replicas[0] if state.replicas else NO_LEADER
        if state.leader == preferred:
            return ErrorCode.election_not_needed, (
                f"Leader election not needed for topic partition {tp}: the preferred "
                f"replica {preferred} already leads it"), None
        if preferred not in alive or preferred not in state.isr:
            why = "is not alive" if preferred not in alive else "is not in the ISR"
            return ErrorCode.preferred_leader_not_available, (
                f"Failed to elect leader for partition {tp} under strategy "
                f"{_strategy(election_type)}: the preferred replica {preferred} {why} "
                f"(ISR {state.isr})"), None
        return ErrorCode.none, None, PartitionChangeRecord(topic_id, partition,
                                                           leader=preferred)
    if state.leader in alive:
        return ErrorCode.election_not_needed, (
            f"Leader election not needed for topic partition {tp}: its leader "
            f"{state.leader} is alive"), None
    leader = next((r for r in state.replicas if r in alive and r in state.isr), NO_LEADER)
    if leader != NO_LEADER:
        isr = [b for b in state.isr if b in alive]
        return ErrorCode.none, None, PartitionChangeRecord(
            topic_id, partition, leader=leader, isr=isr if isr != state.isr else None)
    leader = next((r for r in state.replicas if r in alive), NO_LEADER)
    if leader == NO_LEADER:
        return ErrorCode.eligible_leaders_not_available, (
            f"Failed to elect leader for partition {tp} under strategy "
            f"{_strategy(election_type)}: none of its replicas {state.replicas} is alive"), None
    log.warning("Unclean leader election of %s (ElectLeaders UNCLEAN): no in-sync replica "
                "(ISR %s) is alive, so out-of-sync replica %d leads it; records it lacks are "
                "lost (data loss)", tp, state.isr, leader)
    return ErrorCode.none, None, PartitionChangeRecord(topic_id, partition, leader=leader,
                                                       isr=[leader],
                                                       leader_recovery_state=RECOVERING)


def plan_elections(image: MetadataImage, election_type: int,
                   partitions: Iterable[tuple[str, int]] | None,
                   ineligible: Collection[int] = ()) -> ElectionPlan:
    """The elections ``partitions`` (None: every partition) need under ``election_type``."""
    alive = alive_brokers(image, ineligible)
    plan = ElectionPlan()
    every = partitions is None
    wanted: Iterable[tuple[str, int]] = (
        [(t.name, p) for t in image.topics_by_name.values() for p in sorted(t.partitions)]
        if partitions is None else partitions)
    for name, partition in wanted:
        if (name, partition) in plan.results:
            continue
        topic = image.topics_by_name.get(name)
        state = topic.partitions.get(partition) if topic is not None else None
        if topic is None or state is None:
            plan.results[(name, partition)] = (
                ErrorCode.unknown_topic_or_partition,
                f"The partition {name}-{partition} does not exist.")
            continue
        code, message, record = _elect_one(topic.topic_id, name, partition, state,
                                           election_type, alive)
        if every and code == ErrorCode.election_not_needed:
            continue
        plan.results[(name, partition)] = (code, message)
        if record is not None:
            plan.records.append(record)
    return plan


def imbalanced_partitions(image: MetadataImage, percentage: int,
                          ineligible: Collection[int] = ()) -> list[tuple[str, int]]:
    """Partitions an automatic rebalance should give back to their preferred replica: those
    of every broker whose share of not-led preferred partitions is over ``percentage``
    percent, and whose preferred replica can lead now (alive, in the ISR). Partitions being
    reassigned are left alone, as Kafka's controller does: their replica list is the union of
    the old and the target replicas until the move completes, so its first entry is not yet
    the preferred replica the move will leave."""
    alive = alive_brokers(image, ineligible)
    preferred: dict[int, list[tuple[str, int, PartitionState]]] = {}
    for topic in image.topics_by_name.values():
        for p, state in sorted(topic.partitions.items()):
            if state.replicas and not state.reassigning:
                preferred.setdefault(state.replicas[0], []).append((topic.name, p, state))
    out: list[tuple[str, int]] = []
    for broker, owned in sorted(preferred.items()):
        not_led = [(name, p, s) for name, p, s in owned if s.leader != broker]
        if not owned or len(not_led) * 100 <= percentage * len(owned):
            continue
        out.extend((name, p) for name, p, s in not_led if broker in alive and broker in s.isr)
    return out

