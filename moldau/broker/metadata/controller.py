"""The controller: turns admin requests into metadata records and applies them.

Every change is validated first (pure functions in :mod:`.validation`), then written to the
metadata log as one batch (atomic), then replayed into the image, then announced to listeners
(the replica manager creates or deletes local logs, configs take effect). In a single node the
controller runs in the broker process; a Raft quorum can later replace ``MetadataLog`` without
changing this module's callers.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ...protocol.errors import ErrorCode, KafkaError
from .image import MetadataImage
from .records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from .validation import (
    INTERNAL_TOPICS,
    validate_collision,
    validate_partitions,
    validate_replication_factor,
    validate_topic_configs,
    validate_topic_name,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


class MetadataStore(Protocol):
    """Where metadata records are made durable (the ``__cluster_metadata`` log)."""

    def append(self, records: Sequence[MetadataRecord]) -> int: ...


@dataclass
class TopicSpec:
    """A topic to create; -1 partitions/replication factor means the broker default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


Listener = Callable[[MetadataImage, Sequence[MetadataRecord]], None]


class Controller:
    """Validates, records and applies cluster metadata changes."""

    def __init__(
        self,
        image: MetadataImage,
        store: MetadataStore,
        *,
        default_partitions: Callable[[], int],
        default_replication_factor: Callable[[], int],
    ) -> None:
        self.image = image
        self.store = store
        self.listeners: list[Listener] = []
        self._default_partitions = default_partitions
        self._default_rf = default_replication_factor

    # --- plumbing ----------------------------------------------------------------------
    def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Make ``records`` durable, replay them, and tell listeners."""
        if not records:
            return
        offset = self.store.append(records)
        first = offset - len(records) + 1
        for i, record in enumerate(records):
            self.image.replay(record, first + i)
        for listener in self.listeners:
            listener(self.image, records)

    def _assign_replicas(self, partitions: Iterable[int], factor: int) -> dict[int, list[int]]:
        brokers = [b.broker_id for b in self.image.live_brokers()]
        start = random.randrange(len(brokers)) if brokers else 0
        result = {}
        for p in partitions:
            result[p] = [brokers[(start + p + r) % len(brokers)] for r in range(factor)]
        return result

    # --- topics ------------------------------------------------------------------------
    def create_topics(
        self, specs: Sequence[TopicSpec], *, validate_only: bool = False
    ) -> list[TopicResult]:
        """Create topics; each result says whether (and why not) its topic was created."""
        results: list[TopicResult] = []
        records: list[MetadataRecord] = []
        pending: set[str] = set()
        live = len(self.image.live_brokers())
        for spec in specs:
            result = TopicResult(spec.name)
            results.append(result)
            problem = validate_topic_name(spec.name)
            if problem is None and (spec.name in self.image.topics_by_name
                                    or spec.name in pending):
                problem = (ErrorCode.topic_already_exists,
                           f"Topic '{spec.name}' already exists.")
            if problem is None:
                problem = validate_collision(
                    spec.name, list(self.image.topics_by_name) + list(pending)
                )
            num_partitions = spec.num_partitions
            factor = spec.replication_factor
            if spec.assignments:
                if num_partitions != -1 or factor != -1:
                    problem = problem or (
                        ErrorCode.invalid_request,
                        "Both manual replica assignments and a partition count or replication "
                        "factor were given; give one or the other",
                    )
                num_partitions = len(spec.assignments)
                factor = len(next(iter(spec.assignments.values())))
            if num_partitions == -1:
                num_partitions = self._default_partitions()
            if factor == -1:
                factor = self._default_rf()
            problem = (problem or validate_partitions(num_partitions)
                       or validate_replication_factor(factor, live)
                       or validate_topic_configs(spec.configs))
            if problem is not None:
                result.error, result.message = problem
                continue
            result.num_partitions, result.replication_factor = num_partitions, factor
            if validate_only:
                continue
            topic_id = uuid.uuid4()
            result.topic_id = topic_id
            pending.add(spec.name)
            records.append(TopicRecord(spec.name, topic_id))
            for key, value in spec.configs.items():
                records.append(ConfigRecord(TOPIC_RESOURCE, spec.name, key, value))
            assignment = spec.assignments or self._assign_replicas(range(num_partitions), factor)
            for p in range(num_partitions):
                replicas = assignment[p]
                records.append(PartitionRecord(topic_id, p, replicas, list(replicas),
                                               replicas[0]))
        self.commit(records)
        return results

    def delete_topics(self, names: Sequence[str]) -> dict[str, tuple[ErrorCode, str | None]]:
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        records: list[MetadataRecord] = []
        for name in names:
            topic = self.image.topics_by_name.get(name)
            if topic is None:
                results[name] = (ErrorCode.unknown_topic_or_partition,
                                 "This server does not host this topic.")
                continue
            records.append(RemoveTopicRecord(topic.topic_id))
            results[name] = (ErrorCode.none, None)
        self.commit(records)
        return results

    def create_partitions(
        self, name: str, total: int, assignments: list[list[int]] | None,
        *, validate_only: bool = False,
    ) -> tuple[ErrorCode, str | None]:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist."
        current = len(topic.partitions)
        if total <= current:
            return (ErrorCode.invalid_partitions,
                    f"Topic currently has {current} partitions, which is higher than or equal "
                    f"to the requested {total}.")
        factor = len(next(iter(topic.partitions.values())).replicas)
        new = range(current, total)
        if assignments:
            if len(assignments) != len(new):
                return (ErrorCode.invalid_replica_assignment,
                        f"{len(assignments)} assignments given for {len(new)} new partitions")
            plan = dict(zip(new, assignments, strict=True))
        else:
            plan = self._assign_replicas(new, factor)
        if validate_only:
            return ErrorCode.none, None
        self.commit([PartitionRecord(topic.topic_id, p, plan[p], list(plan[p]), plan[p][0])
                     for p in new])
        return ErrorCode.none, None

    def change_partition(self, topic_id: uuid.UUID, partition: int, *,
                         leader: int | None = None, isr: list[int] | None = None) -> None:
        self.commit([PartitionChangeRecord(topic_id, partition, leader=leader, isr=isr)])

    # --- configs -----------------------------------------------------------------------
    def alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        *, replace: bool = False, validate_only: bool = False,
    ) -> tuple[ErrorCode, str | None]:
        """Set (value) or delete (None) dynamic configs. ``replace`` drops unlisted keys
        (the non-incremental AlterConfigs semantics)."""
        if resource_type == TOPIC_RESOURCE:
            if name not in self.image.topics_by_name:
                return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist"
            problem = validate_topic_configs(changes)
            if problem is not None:
                return problem
        elif resource_type == BROKER_RESOURCE:
            from ..config.definitions import BROKER_BY_NAME

            for key in changes:
                if key not in BROKER_BY_NAME:
                    return ErrorCode.invalid_config, f"Unknown broker config name: {key}"
        else:
            return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}"
        if validate_only:
            return ErrorCode.none, None
        records: list[MetadataRecord] = []
        current = self.image.configs_of(resource_type, name)
        if replace:
            for key in current:
                if key not in changes:
                    records.append(ConfigRecord(resource_type, name, key, None))
        for key, value in changes.items():
            if current.get(key) != value:
                records.append(ConfigRecord(resource_type, name, key, value))
        self.commit(records)
        return ErrorCode.none, None

    # --- brokers and producer ids ---------------------------------------------------------
    def register_broker(self, broker_id: int, endpoints: list[BrokerEndpoint],
                        rack: str | None) -> None:
        current = self.image.brokers.get(broker_id)
        if current is not None and current.endpoints == endpoints and current.rack == rack \
                and not current.fenced:
            return
        self.commit([RegisterBrokerRecord(broker_id, uuid.uuid4(), endpoints, rack)])

    def allocate_producer_ids(self, broker_id: int, count: int = PRODUCER_ID_BLOCK) -> range:
        start = self.image.next_producer_id
        self.commit([ProducerIdsRecord(broker_id, start + count)])
        return range(start, start + count)


def internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def require_topic(image: MetadataImage, name: str) -> None:
    if name not in image.topics_by_name:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unknown topic {name}")


