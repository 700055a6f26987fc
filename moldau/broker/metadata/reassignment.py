"""Partition reassignment (KIP-455): the pure rules of the controller's state machine.

A reassignment moves a partition from its replicas (the *original* ones) to *target* ones in
Kafka's steps, each one metadata record through the controller model (in a cluster, the
partition's assignment znode holds the ``adding_replicas``/``removing_replicas`` Kafka writes
there, so a controller elected mid-move carries on):

1. :func:`start_reassignment`: the partition's replicas become the union, target first then
   the original ones that go (Kafka's ``target ++ original``, distinct); ``adding_replicas``
   = target - original, ``removing_replicas`` = original - target. The leader and ISR stay.
   Every broker sees the new replica list: the added ones create the log and fetch from the
   leader like any follower; the leader tracks them and adds each to the ISR (AlterPartition)
   once it has caught up.
2. :func:`complete_reassignment`, once every target replica is in the ISR: replicas = target,
   the removed replicas leave the ISR, and if the leader is one of them (or is not alive) the
   first target replica in the ISR that is alive and not shutting down leads (new leader
   epoch). The removed replicas see they are no longer replicas: they stop fetching and
   delete the partition's log (Kafka's StopReplica with deletion). The data reached the new
   replicas before the old ones are dropped: they are in the ISR, so they hold everything
   below the high watermark.

A new target for a partition already being reassigned starts over from its original
replicas (replicas - adding); the replicas that were being added and are no longer wanted
are dropped at once (out of the ISR too). Cancelling (null target) is a new target equal to
the original replicas: nothing is left to add or remove, so the partition is back on them at
once (Kafka's revert; their order is the union's, so it may differ from the original one).
Cancelling a partition that is not being reassigned answers
NO_REASSIGNMENT_IN_PROGRESS; a target that is empty, repeats a broker, or names a broker
that is not registered (or is fenced) answers INVALID_REPLICA_ASSIGNMENT, as does a target
(or cancellation) that would drop every in-sync replica (possible only when all of them are
replicas being added); an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from .image import MetadataImage, PartitionState
from .records import MetadataRecord, PartitionChangeRecord
from .validation import Problem

__all__ = ["NO_LEADER", "OngoingReassignment", "ReassignmentRequest", "complete_reassignment",
           "list_reassignments", "original_replicas", "plan_completions",
           "plan_reassignments", "start_reassignment", "validate_target"]

NO_LEADER = -1


@dataclass(frozen=True)
class ReassignmentRequest:
    """One partition of an AlterPartitionReassignments request; ``replicas`` None cancels."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


@dataclass(frozen=True)
class OngoingReassignment:
    """One partition being reassigned, as ListPartitionReassignments shows it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def original_replicas(state: PartitionState) -> list[int]:
    """The replicas the partition had before its reassignment (its replicas when none)."""
    return [r for r in state.replicas if r not in state.adding_replicas]


def validate_target(image: MetadataImage, where: str, target: Sequence[int]) -> Problem:
    """Why ``target`` cannot be the replicas of partition ``where`` (None: it can)."""
    if not target:
        return (ErrorCode.invalid_replica_assignment,
                f"The target replicas of {where} are empty; name at least one broker.")
    if len(set(target)) != len(target):
        return (ErrorCode.invalid_replica_assignment,
                f"The target replicas {list(target)} of {where} name a broker more than once.")
    unknown = [b for b in target if b not in image.brokers or image.brokers[b].fenced]
    if unknown:
        live = [b.broker_id for b in image.live_brokers()]
        return (ErrorCode.invalid_replica_assignment,
                f"The target replicas {list(target)} of {where} name broker(s) {unknown} that "
                f"are not alive; live brokers: {live}.")
    return None


def _leader_among(replicas: Sequence[int], isr: Sequence[int], current: int,
                  eligible: Collection[int]) -> int:
    """The current leader if it stays a replica in the ISR and is eligible, else the first
    replica in the ISR that is eligible (NO_LEADER: none)."""
    if current in replicas and current in isr and current in eligible:
        return current
    return next((r for r in replicas if r in isr and r in eligible), NO_LEADER)


def start_reassignment(topic_id: uuid.UUID, partition: int, state: PartitionState,
                       target: Sequence[int] | None, eligible: Collection[int]
                       ) -> PartitionChangeRecord | Problem | None:
    """The record that starts (or redirects, or cancels with ``target`` None) the
    reassignment of a partition, a Problem, or None when nothing changes (the target is the
    current replica set and nothing is in progress)."""
    original = original_replicas(state)
    if target is None:
        if not state.reassigning:
            return (ErrorCode.no_reassignment_in_progress,
                    f"Partition {partition} of topic {topic_id} has no reassignment in "
                    f"progress to cancel.")
        target = original
    target = list(target)
    if target == original and not state.reassigning:
        return None
    full = target + [r for r in original if r not in target]
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    # Replicas that were being added for an earlier target and are no longer wanted go now.
    isr = [b for b in state.isr if b in full]
    if not isr:
        # Only replicas that would go hold the data now: dropping them would lose it.
        return (ErrorCode.invalid_replica_assignment,
                f"Partition {partition}'s in-sync replicas {state.isr} are all replicas being "
                f"added that the new target {target} leaves out; include one of them.")
    leader = state.leader
    if leader not in full:
        leader = _leader_among(full, isr, NO_LEADER, eligible)
    return PartitionChangeRecord(
        topic_id, partition,
        leader=leader if leader != state.leader else None,
        isr=isr if isr != state.isr else None,
        replicas=full if full != state.replicas else None,
        adding_replicas=adding, removing_replicas=removing)


def complete_reassignment(topic_id: uuid.UUID, partition: int, state: PartitionState,
                          eligible: Collection[int]) -> PartitionChangeRecord | None:
    """The record that completes a reassignment whose target replicas are all in the ISR
    (None: not reassigning, not yet caught up, or no target replica could lead)."""
    if not state.reassigning:
        return None
    target = state.target_replicas
    if not target or any(r not in state.isr for r in target):
        return None
    isr = [b for b in state.isr if b in target]
    leader = _leader_among(target, isr, state.leader, eligible)
    if leader == NO_LEADER:
        return None  # no target replica alive to lead: wait for one to come back
    return PartitionChangeRecord(
        topic_id, partition,
        leader=leader if leader != state.leader else None,
        isr=isr if isr != state.isr else None,
        replicas=target, adding_replicas=[], removing_replicas=[])


def plan_reassignments(image: MetadataImage, requests: Sequence[ReassignmentRequest],
                       eligible: Collection[int]
                       ) -> tuple[list[Problem], list[MetadataRecord]]:
    """Each request's refusal (None: accepted) and the records that start the accepted
    ones (one batch)."""
    problems: list[Problem] = []
    records: list[MetadataRecord] = []
    seen: set[tuple[str, int]] = set()
    for request in requests:
        where = f"{request.topic}-{request.partition}"
        topic = image.topics_by_name.get(request.topic)
        state = None if topic is None else topic.partitions.get(request.partition)
        problem: Problem = None
        if (request.topic, request.partition) in seen:
            problem = (ErrorCode.invalid_request,
                       f"Partition {where} is listed more than once in one request.")
        elif topic is None or state is None:
            problem = (ErrorCode.unknown_topic_or_partition,
                       f"Unable to find partition {where}: this cluster has no such topic or "
                       f"partition.")
        elif request.replicas is not None:
            problem = validate_target(image, where, request.replicas)
        seen.add((request.topic, request.partition))
        if problem is None and topic is not None and state is not None:
            outcome = start_reassignment(topic.topic_id, request.partition, state,
                                         request.replicas, eligible)
            if isinstance(outcome, PartitionChangeRecord):
                records.append(outcome)
            elif outcome is not None:
                code, message = outcome
                problem = (code, f"Partition {where} has no reassignment in progress to cancel."
                           if code == ErrorCode.no_reassignment_in_progress else message)
        problems.append(problem)
    return problems, records


def plan_completions(image: MetadataImage, eligible: Collection[int],
                     only: Collection[tuple[uuid.UUID, int]] | None = None
                     ) -> list[MetadataRecord]:
    """The records that complete every reassignment (of the partitions ``only`` names, by
    topic id and index, if given) whose target replicas have all joined the ISR."""
    out: list[MetadataRecord] = []
    for topic in image.topics_by_id.values():
        for p, state in sorted(topic.partitions.items()):
            if only is not None and (topic.topic_id, p) not in only:
                continue
            record = complete_reassignment(topic.topic_id, p, state, eligible)
            if record is not None:
                out.append(record)
    return out


def list_reassignments(image: MetadataImage,
                       wanted: Iterable[tuple[str, Sequence[int]]] | None
                       ) -> list[OngoingReassignment]:
    """The reassignments in progress, of every partition (``wanted`` None) or of the named
    partitions of the named topics (unknown ones and those not being reassigned are left
    out, as Kafka's controller does)."""
    if wanted is None:
        pairs = [(name, sorted(topic.partitions)) for name, topic
                 in sorted(image.topics_by_name.items())]
    else:
        pairs = [(name, list(parts)) for name, parts in wanted]
    out: list[OngoingReassignment] = []
    for name, partitions in pairs:
        topic = image.topics_by_name.get(name)
        if topic is None:
            continue
        for p in partitions:
            state = topic.partitions.get(p)
            if state is not None and state.reassigning:
                out.append(OngoingReassignment(name, p, tuple(state.replicas),
                                               tuple(state.adding_replicas),
                                               tuple(state.removing_replicas)))
    return out
