"""ISR changes a partition leader asks of the controller (AlterPartition, KIP-497): the pure
rules.

A leader shrinks or expands the ISR of a partition it leads by sending the new ISR together
with the leader epoch and the partition epoch it last saw. The controller checks the request
against its image (:func:`validate_isr_change`) in the order Kafka's controller does, and a
valid one becomes ONE :class:`~.records.PartitionChangeRecord` with the new ISR (its replay
bumps the partition epoch; the ZooKeeper store writes the state znode conditionally on the
old one). What the leader gets back is the partition's state after the change
(:func:`partition_state_of`), so it can adopt the new ISR and partition epoch at once.

The checks, each answering one of Kafka's error codes:

- the topic id is unknown: UNKNOWN_TOPIC_ID; the partition is unknown:
  UNKNOWN_TOPIC_OR_PARTITION;
- the leader epoch is not the partition's: FENCED_LEADER_EPOCH (the sender is a leader of an
  older or newer term: it learns the current one from the metadata);
- the sender is not the partition's leader: NOT_LEADER_OR_FOLLOWER;
- the partition epoch is not the partition's: INVALID_UPDATE_VERSION (the ISR changed since
  the sender last saw it: the controller moved a leader, or a broker was removed from it);
- the new ISR is empty, repeats a broker, names a broker that is not a replica, or leaves out
  the leader: INVALID_REQUEST;
- a broker the new ISR adds is not alive (unregistered, fenced or shutting down):
  INELIGIBLE_REPLICA. Members the ISR already had may stay (the leader only removes them).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from .image import RECOVERED, MetadataImage, PartitionState
from .records import MetadataRecord, PartitionChangeRecord
from .validation import Problem

__all__ = ["IsrChange", "IsrChangeResult", "apply_isr_change", "partition_state_of",
           "plan_isr_changes", "validate_isr_change"]


@dataclass(frozen=True)
class IsrChange:
    """One partition's ISR change as a leader asks for it."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True)
class IsrChangeResult:
    """The controller's answer for one :class:`IsrChange`: an error, or the partition's state
    after the change (leader, leader epoch, ISR, partition epoch)."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


def _state(image: MetadataImage, topic_id: uuid.UUID, partition: int) -> PartitionState | None:
    topic = image.topics_by_id.get(topic_id)
    return None if topic is None else topic.partitions.get(partition)


def validate_isr_change(image: MetadataImage, broker_id: int, change: IsrChange, *,
                        ineligible: Collection[int] = ()) -> Problem:
    """Why the controller refuses ``change`` sent by ``broker_id`` (None: it is valid).
    ``ineligible`` names brokers that may not join an ISR besides the unregistered and fenced
    ones (those in controlled shutdown)."""
    topic = image.topics_by_id.get(change.topic_id)
    if topic is None:
        return ErrorCode.unknown_topic_id, f"No topic has id {change.topic_id}."
    state = topic.partitions.get(change.partition)
    if state is None:
        return (ErrorCode.unknown_topic_or_partition,
                f"Topic '{topic.name}' has no partition {change.partition}.")
    where = f"{topic.name}-{change.partition}"
    if change.leader_epoch != state.leader_epoch:
        return (ErrorCode.fenced_leader_epoch,
                f"The ISR change of {where} names leader epoch {change.leader_epoch}, but the "
                f"partition is at leader epoch {state.leader_epoch}.")
    if broker_id != state.leader:
        return (ErrorCode.not_leader_or_follower,
                f"Broker {broker_id} asked to change the ISR of {where}, but its leader is "
                f"broker {state.leader}.")
    if change.partition_epoch != state.partition_epoch:
        return (ErrorCode.invalid_update_version,
                f"The ISR change of {where} names partition epoch {change.partition_epoch}, "
                f"but the partition is at epoch {state.partition_epoch}: its state changed "
                f"since the leader last saw it.")
    new_isr = list(change.new_isr)
    if not new_isr or len(set(new_isr)) != len(new_isr) or state.leader not in new_isr:
        return (ErrorCode.invalid_request,
                f"The new ISR {new_isr} of {where} must list distinct brokers including the "
                f"leader {state.leader}.")
    strangers = [b for b in new_isr if b not in state.replicas]
    if strangers:
        return (ErrorCode.invalid_request,
                f"The new ISR of {where} names broker(s) {strangers} that are not replicas "
                f"of it (replicas {state.replicas}).")
    unfit = [b for b in new_isr if b not in state.isr and not _eligible(image, b, ineligible)]
    if unfit:
        return (ErrorCode.ineligible_replica,
                f"The new ISR of {where} adds broker(s) {unfit}, which are not registered, "
                f"fenced or shutting down.")
    return None


def _eligible(image: MetadataImage, broker_id: int, ineligible: Collection[int]) -> bool:
    registration = image.brokers.get(broker_id)
    return registration is not None and not registration.fenced and broker_id not in ineligible


def apply_isr_change(change: IsrChange, state: PartitionState) -> PartitionChangeRecord | None:
    """The record a valid ``change`` needs (None: the ISR already is the new one). A leader
    that changes the ISR after an unclean election has recovered (KIP-704: its AlterPartition
    says RECOVERED): the record says so."""
    if list(change.new_isr) == state.isr:
        return None
    return PartitionChangeRecord(
        change.topic_id, change.partition, isr=list(change.new_isr),
        leader_recovery_state=RECOVERED if state.leader_recovery_state != RECOVERED else None)


def plan_isr_changes(image: MetadataImage, broker_id: int, changes: Sequence[IsrChange], *,
                     ineligible: Collection[int] = ()
                     ) -> tuple[list[Problem], list[MetadataRecord]]:
    """Each change's refusal (None: valid), and the records of the valid ones that change
    something (to be committed as one batch)."""
    problems: list[Problem] = []
    records: list[MetadataRecord] = []
    seen: set[tuple[uuid.UUID, int]] = set()
    for change in changes:
        key = (change.topic_id, change.partition)
        problem: Problem = None
        if key in seen:
            problem = (ErrorCode.invalid_request,
                       f"Partition {change.partition} of topic {change.topic_id} is listed "
                       f"more than once in one request.")
        seen.add(key)
        problem = problem or validate_isr_change(image, broker_id, change,
                                                 ineligible=ineligible)
        problems.append(problem)
        if problem is None:
            state = image.topics_by_id[change.topic_id].partitions[change.partition]
            record = apply_isr_change(change, state)
            if record is not None:
                records.append(record)
    return problems, records


def partition_state_of(image: MetadataImage, topic_id: uuid.UUID, partition: int,
                       error: ErrorCode = ErrorCode.none, message: str | None = None
                       ) -> IsrChangeResult:
    """The answer for one partition: ``error``, or its state in ``image``."""
    if error != ErrorCode.none:
        return IsrChangeResult(topic_id, partition, error, message)
    state = _state(image, topic_id, partition)
    if state is None:
        return IsrChangeResult(topic_id, partition, ErrorCode.unknown_topic_or_partition,
                               "The partition was deleted while its ISR changed.")
    return IsrChangeResult(topic_id, partition, ErrorCode.none, None, state.leader,
                           state.leader_epoch, tuple(state.isr), state.partition_epoch)
