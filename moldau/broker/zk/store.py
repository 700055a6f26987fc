"""The controller's ZooKeeper store: each batch of metadata records becomes ONE multi-op in
Kafka's layout, fenced by the version of ``/controller_epoch``.

:class:`ZkMetadataStore` is the :class:`~moldau.broker.metadata.controller.MetadataStore` of
cluster mode. The shared :class:`~moldau.broker.metadata.controller.Controller` validates a
change and hands its records here; :func:`plan_ops` replays them onto a copy of the touched
part of the image and writes what changed, as Kafka's controller and admin paths do:

- a new topic: ``/config/topics/<t>`` (always, as ``AdminZkClient`` does, with the topic's
  configs), ``/brokers/topics/<t>`` (assignment + topic id), ``.../partitions``,
  ``.../partitions/<p>`` and ``.../partitions/<p>/state`` (leader, leader epoch, ISR and this
  controller's epoch);
- new partitions of a topic: the assignment rewritten, the new partition znodes created;
- a leader/ISR change: the state znode set *conditionally on its version* (the partition epoch;
  one set per change, so the znode version and the image's partition epoch stay equal);
- a removed topic: its whole subtree, its config znode and any ``/admin/delete_topics/<t>``;
- config changes of an existing entity: the full ``/config/<type>/<name>`` plus a
  ``/config/changes/config_change_`` sequential notification, Kafka's ``changeConfigs``;
  cluster-wide broker defaults are ``/config/brokers/<default>``;
- producer ids: ``/latest_producer_id_block`` conditionally on its version.

The multi-op starts with a check of ``/controller_epoch``'s version
(:meth:`~.aio.AsyncZooKeeper.fenced_commit`): a controller deposed meanwhile (another broker
elected, its session expired, it was paused) has the whole write refused — nothing applies —
and its caller gets NOT_CONTROLLER. The store refuses (NOT_CONTROLLER) while it is not armed
by an election (:meth:`arm`/:meth:`disarm`, called by :mod:`.election`).

Broker registrations and the controller record are not written through here: a broker
registers itself with an ephemeral ``/brokers/ids/<id>``, and the election writes
``/controller``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)

from ...protocol.errors import ErrorCode, KafkaError
from ..metadata.image import MetadataImage, TopicImage
from ..metadata.records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from . import layout
from .admin_layout import (
    ConfigChangeNotification,
    EntityConfig,
    ProducerIdBlock,
    config_change_create_path,
)
from .aio import AsyncZooKeeper, TransactionFailed
from .layout import PartitionState, ReplicaAssignment, TopicAssignment

log = logging.getLogger(__name__)

#: The largest request ZooKeeper takes by default (``jute.maxbuffer``, 0xfffff bytes); a
#: larger one makes the server drop the connection. The store refuses to send more than this.
ZK_MAX_REQUEST_BYTES = 0xFFFFF - 4096
#: The metadata batch limit for a Controller on this store (its records are a little smaller
#: than the znodes they become), so the controller's own RECORD_LIST_TOO_LARGE check speaks
#: first: a topic of up to ~3000 partitions fits one batch.
ZK_MAX_BATCH_BYTES = 640 << 10
# Bytes a multi-op adds per operation beyond path and data (header, flags, ACL, version).
_OP_OVERHEAD = 48
WRITE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Op:
    """One operation of a multi-op: ``create`` (``sequence`` for notifications), ``set``
    (conditional on ``version``, -1 any) or ``delete``."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    sequence: bool = False


@dataclass
class Facts:
    """What ZooKeeper holds beyond the image, read before planning: which of the optional
    znodes exist, every znode under a topic being deleted (deepest first), and the producer
    id block with its version."""

    existing: set[str] = field(default_factory=set)
    topic_trees: dict[str, list[str]] = field(default_factory=dict)
    producer_block: ProducerIdBlock | None = None
    producer_block_version: int = -1


def entity_path(resource_type: int, name: str) -> str:
    """The config znode of a topic, or of a broker (``""``: ``<default>``)."""
    if resource_type == TOPIC_RESOURCE:
        return layout.topic_config_path(name)
    return layout.broker_config_path(None if name == "" else int(name))


def _entity_name(resource_type: int, name: str) -> str:
    return entity_path(resource_type, name).split("/", 2)[2]  # "topics/t", "brokers/<default>"


def _scratch(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataImage:
    """A new image holding copies of what ``records`` touch, to replay them onto."""
    scratch = MetadataImage(next_producer_id=image.next_producer_id, offset=image.offset)
    for record in records:
        topic_id = getattr(record, "topic_id", None)
        topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
        if topic is not None and topic_id not in scratch.topics_by_id:
            clone = TopicImage(topic.name, topic.topic_id, copy.deepcopy(topic.partitions))
            scratch.topics_by_id[topic_id] = scratch.topics_by_name[topic.name] = clone
            if topic.name in image.topic_configs:
                scratch.topic_configs[topic.name] = dict(image.topic_configs[topic.name])
        if isinstance(record, ConfigRecord):
            source = (image.topic_configs if record.resource_type == TOPIC_RESOURCE
                      else image.broker_configs)
            target = (scratch.topic_configs if record.resource_type == TOPIC_RESOURCE
                      else scratch.broker_configs)
            if record.resource_name in source:
                target.setdefault(record.resource_name, dict(source[record.resource_name]))
    return scratch


def optional_paths(image: MetadataImage, records: Sequence[MetadataRecord]) -> list[str]:
    """The znodes whose existence :func:`plan_ops` needs to know (see :class:`Facts`)."""
    paths: list[str] = []
    for record in records:
        if isinstance(record, RemoveTopicRecord):
            topic = image.topics_by_id.get(record.topic_id)
            if topic is not None:
                paths += [layout.topic_config_path(topic.name),
                          layout.delete_topic_path(topic.name)]
        elif isinstance(record, TopicRecord):
            paths.append(layout.topic_config_path(record.name))
        elif isinstance(record, ConfigRecord):
            paths.append(entity_path(record.resource_type, record.resource_name))
    return list(dict.fromkeys(paths))


def plan_ops(image: MetadataImage, records: Sequence[MetadataRecord], controller_epoch: int,
             facts: Facts) -> list[Op]:
    """The multi-op (without the epoch check) that makes ZooKeeper hold what replaying
    ``records`` onto ``image`` gives. Raises KafkaError for records this store does not
    write and for a producer id block that does not follow ZooKeeper's."""
    after = _scratch(image, records)
    changes: dict[tuple[Any, int], int] = {}  # partition -> PartitionChangeRecords
    topics: list[Any] = []
    configs: list[tuple[int, str]] = []
    producer: ProducerIdsRecord | None = None
    for record in records:
        after.replay(record)
        match record:
            case TopicRecord() | PartitionRecord() | RemoveTopicRecord():
                topics.append(record.topic_id)
            case PartitionChangeRecord():
                topics.append(record.topic_id)
                key = (record.topic_id, record.partition_id)
                changes[key] = changes.get(key, 0) + 1
            case ConfigRecord():
                configs.append((record.resource_type, record.resource_name))
            case ProducerIdsRecord():
                producer = record
            case _:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"{record.TYPE} is not written to ZooKeeper by the controller "
                                 f"(brokers register themselves under {layout.BROKER_IDS}; "
                                 f"the election writes {layout.CONTROLLER})")
    ops: list[Op] = []
    created: set[str] = set()
    for topic_id in dict.fromkeys(topics):
        before_topic = image.topics_by_id.get(topic_id)
        after_topic = after.topics_by_id.get(topic_id)
        if after_topic is None:
            if before_topic is not None:
                ops += _delete_topic(before_topic.name, facts)
            continue
        if before_topic is None:
            created.add(after_topic.name)
            ops += _create_topic(after_topic, after.topic_configs.get(after_topic.name, {}),
                                 controller_epoch, facts)
            continue
        ops += _change_topic(before_topic, after_topic, changes, controller_epoch)
    for resource_type, name in dict.fromkeys(configs):
        if resource_type == TOPIC_RESOURCE and name in created:
            continue
        source = after.topic_configs if resource_type == TOPIC_RESOURCE else after.broker_configs
        path = entity_path(resource_type, name)
        data = EntityConfig(source.get(name, {})).to_json()
        ops.append(Op("set", path, data) if path in facts.existing else Op("create", path, data))
        ops.append(Op("create", config_change_create_path(),
                      ConfigChangeNotification(_entity_name(resource_type, name)).to_json(),
                      sequence=True))
    if producer is not None:
        ops.append(_producer_block_op(image, producer, facts))
    return ops


def _state_json(state: Any, controller_epoch: int) -> bytes:
    return PartitionState(state.leader, state.leader_epoch, tuple(state.isr),
                          controller_epoch, state.leader_recovery_state).to_json()


def _create_topic(topic: TopicImage, configs: dict[str, str], controller_epoch: int,
                  facts: Facts) -> list[Op]:
    name = topic.name
    config_path = layout.topic_config_path(name)
    config = EntityConfig(configs).to_json()
    # Kafka writes the config before the assignment (AdminZkClient.createTopicWithAssignment).
    ops = [Op("set", config_path, config) if config_path in facts.existing
           else Op("create", config_path, config)]
    ops += [Op("create", layout.topic_path(name), _assignment(topic).to_json()),
            Op("create", layout.partitions_path(name))]
    for p, state in sorted(topic.partitions.items()):
        ops += [Op("create", layout.partition_path(name, p)),
                *_new_state(layout.partition_state_path(name, p), state, controller_epoch)]
    return ops


def _assignment(topic: TopicImage) -> TopicAssignment:
    """``/brokers/topics/<t>`` of a topic: replicas, and the adding/removing replicas of
    reassignments in progress (where Kafka keeps them, so a new controller resumes them)."""
    return TopicAssignment(
        {p: ReplicaAssignment(tuple(s.replicas), tuple(s.adding_replicas),
                              tuple(s.removing_replicas))
         for p, s in topic.partitions.items()}, topic.topic_id)


def _new_state(path: str, state: Any, controller_epoch: int) -> list[Op]:
    """Create a state znode whose version is the partition's epoch (sets after the create if
    the same batch also changed the new partition)."""
    data = _state_json(state, controller_epoch)
    return [Op("create", path, data),
            *(Op("set", path, data, v) for v in range(state.partition_epoch))]


def _change_topic(before: TopicImage, after: TopicImage,
                  changes: dict[tuple[Any, int], int], controller_epoch: int) -> list[Op]:
    name = after.name
    ops: list[Op] = []
    if _assignment(before) != _assignment(after):
        ops.append(Op("set", layout.topic_path(name), _assignment(after).to_json()))
    for p, state in sorted(after.partitions.items()):
        old = before.partitions.get(p)
        path = layout.partition_state_path(name, p)
        data = _state_json(state, controller_epoch)
        if old is None:
            ops += [Op("create", layout.partition_path(name, p)),
                    *_new_state(path, state, controller_epoch)]
            continue
        # One conditional set per change: the znode's version keeps equal to the image's
        # partition epoch, which the replay advances once per PartitionChangeRecord.
        for step in range(changes.get((after.topic_id, p), 0)):
            ops.append(Op("set", path, data, old.partition_epoch + step))
    return ops


def _delete_topic(name: str, facts: Facts) -> list[Op]:
    tree = facts.topic_trees.get(name, [layout.topic_path(name)])
    ops = [Op("delete", path) for path in tree]
    for path in (layout.topic_config_path(name), layout.delete_topic_path(name)):
        if path in facts.existing:
            ops.append(Op("delete", path))
    return ops


def _producer_block_op(image: MetadataImage, record: ProducerIdsRecord, facts: Facts) -> Op:
    current = facts.producer_block
    next_in_zk = 0 if current is None else current.block_end + 1
    start = image.next_producer_id
    if next_in_zk != start:
        raise KafkaError(ErrorCode.unknown_server_error,
                         f"{layout.LATEST_PRODUCER_ID_BLOCK} hands out ids from {next_in_zk} "
                         f"but this controller's image from {start}; it is catching up, "
                         f"retry")
    block = ProducerIdBlock(record.broker_id, start, record.next_producer_id - 1)
    return Op("set", layout.LATEST_PRODUCER_ID_BLOCK, block.to_json(),
              facts.producer_block_version)


def request_size(ops: Iterable[Op]) -> int:
    """About the bytes of the multi-op request ``ops`` make."""
    return sum(len(op.path.encode()) + len(op.data) + _OP_OVERHEAD for op in ops)


class ZkMetadataStore:
    """The :class:`~moldau.broker.metadata.controller.MetadataStore` of cluster mode.

    One per broker, shared by its :class:`~moldau.broker.metadata.controller.Controller`;
    writes only while armed by this broker's election. ``generation`` counts writes begun and
    ended (odd while one is in flight) and ``on_written`` callbacks get the data paths and
    the parents whose children a write changed, so :mod:`.sync` never diffs a stale read
    against records the controller replayed."""

    def __init__(self, zk: AsyncZooKeeper, image: MetadataImage, *,
                 timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.zk = zk
        self.image = image
        self.timeout_s = timeout_s
        self.generation = 0
        self.on_written: list[Callable[[set[str], set[str]], None]] = []
        #: Called when a write found the controller epoch moved on (this broker was deposed
        #: without noticing): the election then gives up ``/controller``.
        self.on_fenced: list[Callable[[], None]] = []
        self._fence: tuple[int, int] | None = None

    def arm(self, controller_epoch: int, epoch_version: int) -> None:
        """Write from now on as the controller of ``controller_epoch``, whose election left
        ``/controller_epoch`` at version ``epoch_version``."""
        self._fence = (controller_epoch, epoch_version)

    def disarm(self) -> None:
        """Refuse every write from now on (the controller lost its election or session)."""
        self._fence = None

    @property
    def fence(self) -> tuple[int, int] | None:
        """(controller epoch, ``/controller_epoch`` version) while armed."""
        return self._fence

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Write ``records`` as one fenced multi-op; the offset the last one gets in the
        image. KafkaError: NOT_CONTROLLER when deposed (nothing written), REQUEST_TIMED_OUT
        when ZooKeeper did not answer (the write may still apply; the sync then brings it
        into the image), RECORD_LIST_TOO_LARGE above ``jute.maxbuffer``."""
        fence = self._fence
        if fence is None:
            raise _not_controller("it is not the active controller")
        self.generation += 1
        try:
            return await self._append(records, *fence)
        finally:
            self.generation += 1

    async def _append(self, records: Sequence[MetadataRecord], epoch: int,
                      epoch_version: int) -> int:
        try:
            # plain reads: sent again after a lost connection (kazoo holds them meanwhile)
            facts = await self.zk.until_connected(self._facts, records,
                                                  deadline_s=self.timeout_s)
        except (TimeoutError, ConnectionLoss, OperationTimeoutError) as exc:
            raise KafkaError(ErrorCode.request_timed_out,
                             f"ZooKeeper ({self.zk.hosts}) did not answer within "
                             f"{self.timeout_s} s; nothing was written, retry") from exc
        except SessionExpiredError as exc:
            raise _not_controller("its ZooKeeper session expired") from exc
        ops = plan_ops(self.image, records, epoch, facts)
        await self._commit(ops, epoch, epoch_version)
        return self.image.offset + len(records)

    async def write_ops(self, ops: Sequence[Op]) -> None:
        """Write ``ops`` as one fenced multi-op, without records: the controller's fix-ups of
        what other tools wrote (a topic without id or partition states), which every broker,
        this one too, then learns through its sync. Same errors as :meth:`append`."""
        fence = self._fence
        if fence is None:
            raise _not_controller("it is not the active controller")
        self.generation += 1
        try:
            await self._commit(ops, *fence)
        finally:
            self.generation += 1

    async def _commit(self, ops: Sequence[Op], epoch: int, epoch_version: int) -> None:
        size = request_size(ops)
        if size > ZK_MAX_REQUEST_BYTES:
            raise KafkaError(ErrorCode.record_list_too_large,
                             f"This change takes about {size} bytes in ZooKeeper, more than "
                             f"one request may carry (jute.maxbuffer, {ZK_MAX_REQUEST_BYTES}); "
                             f"split it into smaller requests (fewer partitions)")

        def fill(txn: Any) -> None:
            for op in ops:
                if op.kind == "create":
                    txn.create(op.path, op.data, sequence=op.sequence)
                elif op.kind == "set":
                    txn.set_data(op.path, op.data, op.version)
                else:
                    txn.delete(op.path)

        try:
            resent = await self._commit_until_connected(fill, epoch_version)
        except TransactionFailed as exc:
            first = exc.results[0] if exc.results else None
            if isinstance(first, BadVersionError | NoNodeError):
                if self._fence == (epoch, epoch_version):
                    self._fence = None
                    for callback in self.on_fenced:
                        callback()
                raise _not_controller(f"another controller was elected after epoch {epoch} "
                                      f"({layout.CONTROLLER_EPOCH} moved on)") from exc
            failed = next((op for op, r in zip(ops, exc.results[1:], strict=False)
                           if isinstance(r, Exception) and type(r).__name__ != "RolledBackError"),
                          None)
            self._touched(ops)  # read them again: ZooKeeper holds something else
            if getattr(exc, "resent", False):
                raise KafkaError(ErrorCode.request_timed_out,
                                 f"The connection to ZooKeeper ({self.zk.hosts}) was lost "
                                 f"during the metadata write and the write sent again was "
                                 f"refused ({exc.cause!r} at {failed.path if failed else '?'}): "
                                 f"the first one probably applied, and the metadata will show "
                                 f"it shortly; retry if it does not") from exc
            raise KafkaError(ErrorCode.unknown_server_error,
                             f"ZooKeeper refused the metadata write ({exc.cause!r} at "
                             f"{failed.path if failed else '?'}): this controller's view is "
                             f"behind ZooKeeper's and is being refreshed; retry") from exc
        except SessionExpiredError as exc:
            raise _not_controller("its ZooKeeper session expired") from exc
        except (TimeoutError, ConnectionLoss, OperationTimeoutError) as exc:
            raise KafkaError(ErrorCode.request_timed_out,
                             f"ZooKeeper ({self.zk.hosts}) did not confirm the metadata write "
                             f"within {self.timeout_s} s; it may still apply. Retry") from exc
        if resent:
            log.info("a metadata write was sent again after a lost ZooKeeper connection")
        self._touched(ops)

    def _touched(self, ops: Sequence[Op]) -> None:
        """Tell ``on_written`` what ``ops`` wrote (or tried to)."""
        data_paths = {op.path for op in ops if not op.sequence}
        parents = {op.path.rsplit("/", 1)[0] or "/" for op in ops if op.kind != "set"}
        for callback in self.on_written:
            callback(data_paths, parents)

    async def _commit_until_connected(self, fill: Callable[[Any], None],
                                      epoch_version: int) -> bool:
        """The fenced multi-op, sent again when the connection is lost before its answer (a
        multi-op is atomic, and fenced: sent twice, at most one applies); True if it was sent
        more than once. A failure after a resend carries ``resent``."""
        deadline = time.monotonic() + self.timeout_s
        resent = False
        while True:
            try:
                await asyncio.wait_for(
                    self.zk.fenced_commit(layout.CONTROLLER_EPOCH, epoch_version, fill),
                    max(0.0, deadline - time.monotonic()))
                return resent
            except TransactionFailed as exc:
                exc.resent = resent  # type: ignore[attr-defined]
                raise
            except ConnectionLoss:
                if time.monotonic() + 0.1 > deadline:
                    raise
                resent = True
                await asyncio.sleep(0.1)

    async def _facts(self, records: Sequence[MetadataRecord]) -> Facts:
        facts = Facts()
        paths = optional_paths(self.image, records)
        stats = await asyncio.gather(*(self.zk.exists(p) for p in paths))
        facts.existing = {p for p, stat in zip(paths, stats, strict=True) if stat is not None}
        for record in records:
            if isinstance(record, RemoveTopicRecord):
                topic = self.image.topics_by_id.get(record.topic_id)
                if topic is not None:
                    facts.topic_trees[topic.name] = await self._subtree(
                        layout.topic_path(topic.name))
            elif isinstance(record, ProducerIdsRecord):
                data, stat = await self.zk.get(layout.LATEST_PRODUCER_ID_BLOCK)
                facts.producer_block = ProducerIdBlock.from_json(data) if data else None
                facts.producer_block_version = stat.version
        return facts

    async def _subtree(self, path: str) -> list[str]:
        """``path`` and every znode under it, children before parents."""
        try:
            children = await self.zk.get_children(path)
        except NoNodeError:
            return []
        out: list[str] = []
        for child in children:
            out += await self._subtree(f"{path}/{child}")
        return [*out, path]


def _not_controller(why: str) -> KafkaError:
    return KafkaError(ErrorCode.not_controller,
                      f"This broker is no longer the active controller: {why}. Nothing was "
                      f"written; send the request again (clients refresh metadata and find "
                      f"the new controller)")
