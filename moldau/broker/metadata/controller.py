"""The controller: turns admin requests into metadata records and applies them.

Every change is validated first (pure functions in :mod:`.validation`), then written to the
store as one batch (atomic), then replayed into the image, then announced to listeners (the
replica manager creates or deletes local logs, configs take effect). The controller is the
local :class:`~.channel.ControllerChannel`: the process that runs it is the active controller
(a single node always is; its store is the ``__cluster_metadata`` log). Another store (a
ZooKeeper ensemble) can replace ``MetadataLog`` without changing this module's callers.

Every operation is asynchronous (a store may wait for the network) and operations run one at
a time, each from its validation to its last listener, so one is validated against the image
the previous one left. Once an operation has started it runs to its end even if its caller is
cancelled (a client that went away): a batch that reached the store reaches the image too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ...protocol.errors import ErrorCode, KafkaError
from ..config.definitions import TOPIC_BY_NAME
from ..config.kafka_dynamic import BROKER_DEFINITIONS
from .assignment import AssignmentError, assign_replicas
from .channel import PRODUCER_ID_BLOCK, Outcome, TopicResult, TopicSpec
from .configs import validate_broker_changes
from .image import MetadataImage
from .leadership_control import LeadershipControl
from .log import METADATA_MAX_BATCH_BYTES, METADATA_TOPIC
from .reassignment_control import ReassignmentControl
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
    Problem,
    apply_incremental,
    validate_broker_resource_name,
    validate_collision,
    validate_create_configs,
    validate_manual_assignment,
    validate_partitions,
    validate_replication_factor,
    validate_topic_configs,
    validate_topic_name,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["PRODUCER_ID_BLOCK", "Controller", "MetadataStore", "TopicResult", "TopicSpec"]
# Kafka's controller refuses user operations that would write more than 10000 records at once
# (MAX_RECORDS_PER_USER_OP); Moldau limits the partitions one request may create likewise, so a
# client asking for a billion partitions gets an error instead of exhausting the broker.
MAX_PARTITIONS_PER_REQUEST = 10_000
# Bytes a record adds to a batch beyond its value (length, attributes, deltas, key and value
# lengths, header count: varints, at most this much for a batch of < 2^21 records), and the
# batch header.
_RECORD_OVERHEAD = 24
_BATCH_OVERHEAD = 61


class MetadataStore(Protocol):
    """Where metadata records are made durable (the ``__cluster_metadata`` log)."""

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Make ``records`` durable as one batch, all or nothing; the offset of the last one.
        Raises KafkaError (nothing written) when it cannot."""
        ...


Listener = Callable[[MetadataImage, Sequence[MetadataRecord]], None]
# Called with the records about to be committed, before they are written; makes what they
# need exist (the local logs of new partitions) or raises KafkaError to refuse them, and
# returns how to undo that if the write then fails.
Preparer = Callable[[MetadataImage, Sequence[MetadataRecord]], Callable[[], None]]


def batch_size(records: Sequence[MetadataRecord]) -> int:
    """An upper bound of the size of the metadata batch holding ``records``."""
    return _BATCH_OVERHEAD + sum(len(r.encode()) + _RECORD_OVERHEAD for r in records)


class Controller(LeadershipControl, ReassignmentControl):
    """Validates, records and applies cluster metadata changes."""

    def __init__(
        self,
        image: MetadataImage,
        store: MetadataStore,
        *,
        default_partitions: Callable[[], int],
        default_replication_factor: Callable[[], int],
        max_batch_bytes: int = METADATA_MAX_BATCH_BYTES,
    ) -> None:
        self.image = image
        self.store = store
        self.listeners: list[Listener] = []
        self.preparers: list[Preparer] = []
        self.max_batch_bytes = max_batch_bytes
        self._default_partitions = default_partitions
        self._default_rf = default_replication_factor
        self._serial = asyncio.Lock()
        #: Brokers that may not join an ISR although registered (in controlled shutdown).
        self.ineligible_replicas: set[int] = set()

    # --- plumbing ----------------------------------------------------------------------
    async def _one_at_a_time(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation`` after every operation started before it, to its end even if the
        caller is cancelled meanwhile."""

        async def run() -> T:
            async with self._serial:
                return await operation()

        task: asyncio.Task[T] = asyncio.ensure_future(run())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.add_done_callback(_log_unread_failure)  # nobody else will read it
            raise

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Prepare for ``records`` (preparers), make them durable as one batch, replay them,
        and tell listeners. Raises :class:`KafkaError` (nothing changed) if the batch is too
        large, a preparer refuses, or the write fails."""
        await self._one_at_a_time(lambda: self._commit(records))

    async def _commit(self, records: Sequence[MetadataRecord]) -> None:
        if not records:
            return
        self._check_size(records)
        undo: list[Callable[[], None]] = []
        try:
            for prepare in self.preparers:
                undo.append(prepare(self.image, records))
            offset = await self.store.append(records)
        except BaseException:
            for step in reversed(undo):
                step()
            raise
        replay_and_notify(self.image, records, self.listeners, offset - len(records) + 1)

    async def commit_with(self, plan: Callable[[MetadataImage], Sequence[MetadataRecord]]
                          ) -> Sequence[MetadataRecord]:
        """:meth:`commit` the records ``plan(image)`` returns, planned after every operation
        started before (so against the image they left); the records committed."""

        async def run() -> Sequence[MetadataRecord]:
            records = list(plan(self.image))
            await self._commit(records)
            return records

        return await self._one_at_a_time(run)

    async def follow(self, change: Callable[[MetadataImage], Sequence[MetadataRecord] | None]
                     ) -> Sequence[MetadataRecord] | None:
        """Replay records that are already durable elsewhere — what a ZooKeeper watch showed
        another controller wrote — and tell listeners, exactly as a commit does, without
        writing them. ``change(image)`` runs after every operation started before, so it
        diffs against the image they left; it returns the records (or None: nothing to do)."""

        async def run() -> Sequence[MetadataRecord] | None:
            records = change(self.image)
            if records:
                replay_and_notify(self.image, records, self.listeners)
            return records

        return await self._one_at_a_time(run)

    def _check_size(self, records: Sequence[MetadataRecord], what: str = "this change"
                    ) -> None:
        size = batch_size(records)
        if size > self.max_batch_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"The metadata records of {what} take {size} bytes, more than the "
                f"{self.max_batch_bytes} bytes one metadata batch may hold; split it into "
                f"smaller requests (fewer partitions, or smaller config values)")

    async def _try_commit(self, records: Sequence[MetadataRecord]) -> Problem:
        """:meth:`commit`, with a refusal returned as a Problem instead of raised."""
        try:
            await self._commit(records)
        except KafkaError as exc:
            return exc.code, exc.message
        return None

    async def _validate_and_commit(self, records: Sequence[MetadataRecord], what: str,
                                   validate_only: bool) -> Outcome:
        """One request's records: refused if they do not fit one metadata batch (also with
        ``validate_only``, so that it answers as the real request would), else committed
        unless ``validate_only``."""
        try:
            self._check_size(records, what)
        except KafkaError as exc:
            return exc.code, exc.message
        if validate_only:
            return ErrorCode.none, None
        return await self._try_commit(records) or (ErrorCode.none, None)

    def _assign_replicas(self, partitions: range, factor: int,
                         fixed_start_index: int = -1) -> dict[int, list[int]]:
        """Kafka's assignment (:mod:`.assignment`) over the live brokers, with their racks."""
        brokers = [(b.broker_id, b.rack) for b in self.image.live_brokers()]
        return assign_replicas(brokers, len(partitions), factor,
                               fixed_start_index=fixed_start_index,
                               start_partition_id=partitions.start)

    # --- topics ------------------------------------------------------------------------
    async def create_topics(
        self, specs: Sequence[TopicSpec], *, validate_only: bool = False
    ) -> list[TopicResult]:
        """Create topics; each result says whether (and why not) its topic was created.

        Topics are independent: one that fails validation does not stop the others. A topic's
        records are committed in one batch, and topics share batches up to the metadata batch
        limit; a topic whose records alone exceed it is refused (RECORD_LIST_TOO_LARGE), with
        ``validate_only`` too, so validation answers what creation would."""
        return await self._one_at_a_time(lambda: self._create_topics(specs, validate_only))

    async def _create_topics(self, specs: Sequence[TopicSpec],
                             validate_only: bool) -> list[TopicResult]:
        results: list[TopicResult] = []
        groups: list[tuple[TopicResult, list[MetadataRecord], int]] = []
        pending: set[str] = set()
        live = len(self.image.live_brokers())
        budget = MAX_PARTITIONS_PER_REQUEST
        for spec in specs:
            result = TopicResult(spec.name)
            results.append(result)
            problem, num_partitions, factor = self._check_topic(spec, pending, live)
            if problem is None and num_partitions > budget:
                problem = (ErrorCode.policy_violation,
                           f"Creating {num_partitions} partitions would exceed the limit of "
                           f"{MAX_PARTITIONS_PER_REQUEST} partitions per request "
                           f"({budget} left); create the topic with fewer partitions and add "
                           f"more with CreatePartitions")
            records: list[MetadataRecord] = []
            if problem is None:
                try:
                    records = self._topic_records(spec, uuid.uuid4(), num_partitions, factor)
                except AssignmentError as exc:
                    problem = exc.code, exc.message
            if problem is None:
                size = batch_size(records)
                if size > self.max_batch_bytes:
                    problem = (ErrorCode.record_list_too_large,
                               f"The metadata records of topic '{spec.name}' take {size} "
                               f"bytes, more than the {self.max_batch_bytes} bytes one "
                               f"metadata batch may hold; use fewer partitions or smaller "
                               f"config values")
            if problem is not None:
                result.error, result.message = problem
                continue
            budget -= num_partitions
            result.num_partitions, result.replication_factor = num_partitions, factor
            pending.add(spec.name)
            groups.append((result, records, batch_size(records)))
        if not validate_only:
            for chunk in _chunks(groups, self.max_batch_bytes):
                problem = await self._try_commit([r for _res, recs, _n in chunk for r in recs])
                for result, recs, _n in chunk:
                    if problem is None:
                        result.topic_id = recs[0].topic_id  # type: ignore[attr-defined]
                    else:
                        result.error, result.message = problem
                        result.num_partitions = result.replication_factor = -1
        return results

    def _topic_records(self, spec: TopicSpec, topic_id: uuid.UUID, num_partitions: int,
                       factor: int) -> list[MetadataRecord]:
        records: list[MetadataRecord] = [TopicRecord(spec.name, topic_id)]
        for key, value in spec.configs.items():
            records.append(ConfigRecord(TOPIC_RESOURCE, spec.name, key, value))
        assignment = spec.assignments or self._assign_replicas(range(num_partitions), factor)
        for p in range(num_partitions):
            replicas = list(assignment[p])
            records.append(PartitionRecord(topic_id, p, replicas, list(replicas), replicas[0]))
        return records

    def _check_topic(self, spec: TopicSpec, pending: set[str], live: int
                     ) -> tuple[Problem, int, int]:
        """(problem, partitions, replication factor) of a topic to create."""
        problem = validate_topic_name(spec.name)
        if problem is None and spec.name == METADATA_TOPIC:
            # A client topic of this name would share the metadata log's directory.
            problem = (ErrorCode.invalid_request,
                       f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
        if problem is None and (spec.name in self.image.topics_by_name or spec.name in pending):
            problem = (ErrorCode.topic_already_exists, f"Topic '{spec.name}' already exists.")
        problem = problem or validate_collision(
            spec.name, [*self.image.topics_by_name, *pending])
        problem = problem or validate_create_configs(spec.configs)
        if problem is not None:
            return problem, -1, -1
        if spec.assignments:
            if spec.replication_factor != -1 or spec.num_partitions != -1:
                return ((ErrorCode.invalid_request,
                         "A manual replica assignment was given together with a partition "
                         "count or replication factor; set both to -1 when assigning replicas "
                         "manually"), -1, -1)
            problem = validate_manual_assignment(spec.assignments, self.image.brokers)
            if problem is not None:
                return problem, -1, -1
            return None, len(spec.assignments), len(next(iter(spec.assignments.values())))
        num_partitions = spec.num_partitions
        factor = spec.replication_factor
        if num_partitions == -1:
            num_partitions = self._default_partitions()
        if factor == -1:
            factor = self._default_rf()
        problem = validate_partitions(num_partitions) or validate_replication_factor(factor, live)
        return problem, num_partitions, factor

    async def delete_topics(self, names: Sequence[str]) -> dict[str, Outcome]:
        """Delete topics by name (one batch); unknown names get UNKNOWN_TOPIC_OR_PARTITION."""
        return await self._one_at_a_time(lambda: self._delete_topics(names))

    async def _delete_topics(self, names: Sequence[str]) -> dict[str, Outcome]:
        results: dict[str, Outcome] = {}
        records: list[MetadataRecord] = []
        for name in names:
            topic = self.image.topics_by_name.get(name)
            if topic is None:
                results[name] = (ErrorCode.unknown_topic_or_partition,
                                 "This server does not host this topic.")
                continue
            if name in results:
                continue
            records.append(RemoveTopicRecord(topic.topic_id))
            results[name] = (ErrorCode.none, None)
        problem = await self._try_commit(records)
        if problem is not None:
            for name, (code, _message) in results.items():
                if code == ErrorCode.none:
                    results[name] = problem
        return results

    async def create_partitions(
        self, name: str, total: int, assignments: list[list[int]] | None,
        *, validate_only: bool = False,
    ) -> Outcome:
        """Grow ``name`` to ``total`` partitions (never shrink), with optional assignments of
        the new partitions."""
        return await self._one_at_a_time(
            lambda: self._create_partitions(name, total, assignments, validate_only))

    async def _create_partitions(self, name: str, total: int,
                                 assignments: list[list[int]] | None,
                                 validate_only: bool) -> Outcome:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return (ErrorCode.unknown_topic_or_partition,
                    f"This server does not host topic '{name}'.")
        current = len(topic.partitions)
        if total == current:
            return (ErrorCode.invalid_partitions,
                    f"Topic '{name}' already has {current} partition(s).")
        if total < current:
            return (ErrorCode.invalid_partitions,
                    f"Topic '{name}' currently has {current} partition(s); {total} would not "
                    f"be an increase (partitions can only be added).")
        if total - current > MAX_PARTITIONS_PER_REQUEST:
            return (ErrorCode.policy_violation,
                    f"Adding {total - current} partitions exceeds the limit of "
                    f"{MAX_PARTITIONS_PER_REQUEST} partitions per request")
        factor = len(next(iter(topic.partitions.values())).replicas) if topic.partitions else 1
        new = range(current, total)
        if assignments is not None:
            if len(assignments) != len(new):
                return (ErrorCode.invalid_replica_assignment,
                        f"{len(new)} partition(s) would be added to '{name}', but "
                        f"{len(assignments)} assignment(s) were given")
            plan = dict(zip(new, assignments, strict=True))
            problem = validate_manual_assignment(
                {i: a for i, a in enumerate(assignments)}, self.image.brokers)
            if problem is None and len(assignments[0]) != factor:
                problem = (ErrorCode.invalid_replica_assignment,
                           f"The new partitions have {len(assignments[0])} replica(s) each, "
                           f"but topic '{name}' has replication factor {factor}")
            if problem is not None:
                return problem
        else:
            problem = validate_replication_factor(factor, len(self.image.live_brokers()))
            if problem is not None:
                return problem
            # Kafka continues the leaders' walk from partition 0's leader.
            live = [b.broker_id for b in self.image.live_brokers()]
            first = topic.partitions[0].replicas[0] if 0 in topic.partitions else -1
            start = max(0, next((i for i, b in enumerate(live) if b >= first), 0))
            try:
                plan = self._assign_replicas(new, factor, start)
            except AssignmentError as exc:
                return exc.code, exc.message
        records: list[MetadataRecord] = [
            PartitionRecord(topic.topic_id, p, list(plan[p]), list(plan[p]), plan[p][0])
            for p in new]
        return await self._validate_and_commit(
            records, f"{len(new)} new partitions of '{name}'", validate_only)

    async def change_partition(self, topic_id: uuid.UUID, partition: int, *,
                               leader: int | None = None, isr: list[int] | None = None) -> None:
        await self.commit([PartitionChangeRecord(topic_id, partition, leader=leader, isr=isr)])

    # --- configs -----------------------------------------------------------------------
    def _check_resource(self, resource_type: int, name: str) -> Problem:
        if resource_type == TOPIC_RESOURCE:
            problem = validate_topic_name(name)
            if problem is None and name not in self.image.topics_by_name:
                problem = (ErrorCode.unknown_topic_or_partition,
                           f"The topic '{name}' does not exist.")
            return problem
        if resource_type == BROKER_RESOURCE:
            return validate_broker_resource_name(name, self.image.brokers)
        return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}"

    def _check_changes(self, resource_type: int, name: str,
                       changes: Mapping[str, str | None]) -> Problem:
        if resource_type == TOPIC_RESOURCE:
            return validate_topic_configs(changes)
        return validate_broker_changes(name, changes)

    async def alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        *, replace: bool = False, validate_only: bool = False,
    ) -> Outcome:
        """Set (value) or delete (None) dynamic configs of a topic or broker (``name`` = id,
        or "" for the cluster-wide default). ``replace`` drops unlisted keys (the
        non-incremental AlterConfigs semantics)."""
        return await self._one_at_a_time(
            lambda: self._alter_configs(resource_type, name, changes, replace, validate_only))

    async def _alter_configs(self, resource_type: int, name: str,
                             changes: Mapping[str, str | None], replace: bool,
                             validate_only: bool) -> Outcome:
        problem = (self._check_resource(resource_type, name)
                   or self._check_changes(resource_type, name, changes))
        if problem is not None:
            return problem
        records: list[MetadataRecord] = []
        current = self.image.configs_of(resource_type, name)
        for key, value in changes.items():
            # Broker records are written even when unchanged, as Kafka does, so listeners
            # re-apply them (KAFKA-14136); deleting an absent key writes nothing.
            changed = current.get(key) != value or resource_type == BROKER_RESOURCE
            if changed and (value is not None or key in current):
                records.append(ConfigRecord(resource_type, name, key, value))
        if replace:
            for key in current:
                if key not in changes:
                    records.append(ConfigRecord(resource_type, name, key, None))
        return await self._validate_and_commit(
            records, f"the config change of '{name}'", validate_only)

    async def incremental_alter_configs(
        self, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]],
        *, validate_only: bool = False,
    ) -> Outcome:
        """Apply IncrementalAlterConfigs operations (key, SET/DELETE/APPEND/SUBTRACT, value)
        to one resource; all or nothing."""
        return await self._one_at_a_time(
            lambda: self._incremental_alter_configs(resource_type, name, ops, validate_only))

    async def _incremental_alter_configs(self, resource_type: int, name: str,
                                         ops: Sequence[tuple[str, int, str | None]],
                                         validate_only: bool) -> Outcome:
        problem = self._check_resource(resource_type, name)
        if problem is not None:
            return problem
        definitions = TOPIC_BY_NAME if resource_type == TOPIC_RESOURCE else BROKER_DEFINITIONS
        changes = apply_incremental(self.image.configs_of(resource_type, name), ops,
                                    definitions)
        if isinstance(changes, tuple):
            return changes
        return await self._alter_configs(resource_type, name, changes or {}, False,
                                         validate_only)

    # --- brokers and producer ids ---------------------------------------------------------
    async def register_broker(self, broker_id: int, endpoints: list[BrokerEndpoint],
                              rack: str | None) -> None:
        """Register (or re-register with new endpoints or rack) a live broker."""

        async def register() -> None:
            current = self.image.brokers.get(broker_id)
            if current is not None and current.endpoints == endpoints \
                    and current.rack == rack and not current.fenced:
                return
            await self._commit([RegisterBrokerRecord(broker_id, uuid.uuid4(), endpoints, rack)])

        await self._one_at_a_time(register)

    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK) -> range:
        """The next block of ``count`` producer ids, handed to ``broker_id``."""

        async def allocate() -> range:
            start = self.image.next_producer_id
            await self._commit([ProducerIdsRecord(broker_id, start + count)])
            return range(start, start + count)

        return await self._one_at_a_time(allocate)


def replay_and_notify(image: MetadataImage, records: Sequence[MetadataRecord],
                      listeners: Sequence[Listener], first_offset: int | None = None) -> None:
    """Replay ``records`` into ``image`` (offsets from ``first_offset``, else following the
    image's) and tell every listener: the one path by which committed metadata reaches a
    broker, whether its own controller wrote it or a ZooKeeper watch showed it."""
    first = image.offset + 1 if first_offset is None else first_offset
    for i, record in enumerate(records):
        image.replay(record, first + i)
    for listener in listeners:
        try:
            listener(image, records)
        except Exception:
            # The change is committed; a listener that fails (e.g. a disk error while a
            # replica applies it) must not turn it into an error for the client.
            log.exception("a metadata listener failed on %d committed records", len(records))


def _log_unread_failure(task: asyncio.Task[Any]) -> None:
    """Say how an operation whose caller went away failed (its caller would have been told)."""
    if task.cancelled() or task.exception() is None:
        return
    error = task.exception()
    if isinstance(error, KafkaError):
        log.warning("a metadata change whose requester went away was refused: %s", error)
    else:
        log.error("a metadata change whose requester went away failed", exc_info=error)


def _chunks(groups: list[tuple[TopicResult, list[MetadataRecord], int]], limit: int
            ) -> list[list[tuple[TopicResult, list[MetadataRecord], int]]]:
    """Topics packed, in order, into batches of at most ``limit`` bytes (each topic fits)."""
    chunks: list[list[tuple[TopicResult, list[MetadataRecord], int]]] = []
    size = limit + 1
    for group in groups:
        grown = size + group[2] - _BATCH_OVERHEAD
        if chunks and grown <= limit:
            chunks[-1].append(group)
            size = grown
        else:
            chunks.append([group])
            size = group[2]
    return chunks


def internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def require_topic(image: MetadataImage, name: str) -> None:
    if name not in image.topics_by_name:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unknown topic {name}")


