"""ZooKeeper's cluster state as metadata records: decode the znodes, diff against an image.

Pure functions over layout data (no I/O): :func:`paths_to_read` says which znodes hold the
cluster state given the children already known, :func:`decode` turns the znodes read into a
:class:`ClusterState`, and :func:`diff` gives the records whose replay makes a
:class:`~moldau.broker.metadata.image.MetadataImage` equal to that state:

================================================  ==========================================
znodes                                            records
================================================  ==========================================
``/controller`` + ``/controller_epoch``           ControllerChangeRecord (id -1: no controller)
``/brokers/ids/<id>`` appeared or re-created      RegisterBrokerRecord (incarnation from czxid)
``/brokers/ids/<id>`` gone                        UnregisterBrokerRecord
``/brokers/topics/<t>`` new (or a new topic id)   TopicRecord, then PartitionRecord per state
``.../partitions/<p>/state`` changed              PartitionChangeRecord when it is one step
                                                  (partition epoch + 1, leader epoch + 1 iff
                                                  the leader changed), else a PartitionRecord
``/brokers/topics/<t>`` gone                      RemoveTopicRecord
``/config/topics/<t>``, ``/config/brokers/<n>``   ConfigRecord per key that differs
``/latest_producer_id_block``                     ProducerIdsRecord (next id = block_end + 1)
================================================  ==========================================

The partition epoch of the image is the state znode's ``Stat.version`` (Kafka's ``zkVersion``),
so a controller's conditional write and a broker's diff agree on it. A partition listed in an
assignment without a state znode yet is left out (Kafka's brokers learn a partition from its
first LeaderAndIsr, i.e. once the state exists); a topic without ``topic_id`` (written by a
pre-2.8 tool) is left out until a controller has given it one. A znode whose data is not in
Kafka's format is skipped with a warning naming it, and the image keeps what it had.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kazoo.protocol.states import ZnodeStat

from ..metadata.image import MetadataImage
from ..metadata.image import PartitionState as ImagePartition
from ..metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    ControllerChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from . import layout
from .admin_layout import EntityConfig, ProducerIdBlock
from .layout import (
    LEADER_RECOVERED,
    BrokerRegistration,
    ControllerEpoch,
    ControllerRegistration,
    PartitionState,
    ReplicaAssignment,
    TopicAssignment,
    ZNodeFormatError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG_TOPICS_PATH = f"{layout.CONFIG}/{layout.CONFIG_TOPICS}"
CONFIG_BROKERS_PATH = f"{layout.CONFIG}/{layout.CONFIG_BROKERS}"
#: Parents whose children are the cluster's entities.
CHILDREN_PATHS = (layout.BROKER_IDS, layout.TOPICS, CONFIG_TOPICS_PATH, CONFIG_BROKERS_PATH)
#: Data znodes read whatever the children are.
FIXED_DATA_PATHS = (layout.CONTROLLER, layout.CONTROLLER_EPOCH, layout.LATEST_PRODUCER_ID_BLOCK)

_INCARNATIONS = uuid.UUID("6d6f6c64-6175-4b7a-9b00-000000000012")

#: What a znode read gave: its data and stat, or None when it does not exist.
Znode = tuple[bytes, ZnodeStat] | None


@dataclass(frozen=True)
class ZkBroker:
    """A registration and the incarnation it stands for (a new znode, a new incarnation)."""

    registration: BrokerRegistration
    incarnation_id: uuid.UUID


@dataclass(frozen=True)
class ZkPartition:
    """A partition state znode and its version (the partition epoch)."""

    state: PartitionState
    version: int


@dataclass
class ClusterState:
    """The cluster as ZooKeeper holds it, decoded."""

    controller_id: int = -1
    controller_epoch: int = -1
    brokers: dict[int, ZkBroker] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    partitions: dict[tuple[str, int], ZkPartition] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: By the image's resource name: ``""`` for ``<default>``, else the broker id.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    producer_id_block: ProducerIdBlock | None = None


def incarnation_of(broker_id: int, czxid: int) -> uuid.UUID:
    """The incarnation id of the registration znode created at ``czxid``: every broker derives
    the same one, and a re-registration (a new znode) gives a new one."""
    return uuid.uuid5(_INCARNATIONS, f"{broker_id}/{czxid}")


def broker_config_name(child: str) -> str:
    """The image's resource name of ``/config/brokers/<child>``."""
    return "" if child == layout.DEFAULT_ENTITY else child


def _broker_ids(children: Iterable[str]) -> list[int]:
    return sorted(int(c) for c in children if c.isdigit())


def _topic_names(children: Iterable[str]) -> list[str]:
    names = []
    for child in children:
        try:
            layout.topic_path(child)
        except ValueError:
            log.warning("ignoring %s/%s: not a legal topic name", layout.TOPICS, child)
            continue
        names.append(child)
    return sorted(names)


def paths_to_read(children: Mapping[str, list[str]],
                  assignments: Mapping[str, TopicAssignment]) -> list[str]:
    """The data znodes that hold the cluster state, given the children of
    :data:`CHILDREN_PATHS` and the topics' decoded assignments known so far (their partitions'
    state znodes)."""
    paths = list(FIXED_DATA_PATHS)
    paths += [layout.broker_path(b) for b in _broker_ids(children.get(layout.BROKER_IDS, ()))]
    topics = _topic_names(children.get(layout.TOPICS, ()))
    paths += [layout.topic_path(t) for t in topics]
    with_config = set(children.get(CONFIG_TOPICS_PATH, ()))
    paths += [layout.topic_config_path(t) for t in topics if t in with_config]
    for name in sorted(children.get(CONFIG_BROKERS_PATH, ())):
        try:
            paths.append(layout.config_entity_path(layout.CONFIG_BROKERS, name))
        except ValueError:
            continue
    for topic in topics:
        assignment = assignments.get(topic)
        if assignment is not None:
            paths += [layout.partition_state_path(topic, p) for p in sorted(assignment.partitions)]
    return paths


#: Decoded znodes by path, with the ``mzxid`` they were decoded at: a reader that decodes the
#: same znodes again and again (the sync, once per round) passes one to decode each version
#: once.
Memo = dict[str, tuple[int, Any]]


def _memoized(memo: Memo | None, path: str, znode: tuple[bytes, ZnodeStat],
              decoder: Callable[[], Any]) -> Any:
    if memo is None:
        return decoder()
    hit = memo.get(path)
    if hit is not None and hit[0] == znode[1].mzxid:
        return hit[1]
    value = decoder()
    memo[path] = (znode[1].mzxid, value)
    return value


def _or_skip(what: str, decoder: Callable[[], T]) -> T | None:
    """``decoder()``, or None with a warning naming ``what`` when its znode is not in Kafka's
    format: one malformed znode (written by hand, or by another tool) is left out of the
    cluster state, never fatal to the reader."""
    try:
        return decoder()
    except ZNodeFormatError as exc:
        log.warning("ignoring %s: %s", what, exc)
        return None


def decode_assignment(topic: str, znode: Znode, memo: Memo | None = None
                      ) -> TopicAssignment | None:
    """``/brokers/topics/<topic>`` decoded; None if missing or not in Kafka's format."""
    if znode is None:
        return None
    return _or_skip(f"topic {topic}", lambda: _memoized(
        memo, layout.topic_path(topic), znode,
        lambda: TopicAssignment.from_json(znode[0], topic)))


def decode(data: Mapping[str, Znode], children: Mapping[str, list[str]],
           memo: Memo | None = None) -> ClusterState:
    """The cluster state in the znodes read (``data`` by path; absent or None: no znode)."""
    state = ClusterState()
    controller = data.get(layout.CONTROLLER)
    if controller is not None:
        registered = _or_skip(layout.CONTROLLER,
                              lambda: ControllerRegistration.from_json(controller[0]))
        if registered is not None:
            state.controller_id = registered.broker_id
    epoch = data.get(layout.CONTROLLER_EPOCH)
    if epoch is not None:
        stored = _or_skip(layout.CONTROLLER_EPOCH, lambda: ControllerEpoch.from_json(epoch[0]))
        if stored is not None:
            state.controller_epoch = stored.epoch
    for broker_id in _broker_ids(children.get(layout.BROKER_IDS, ())):
        znode = data.get(layout.broker_path(broker_id))
        if znode is None:
            continue
        registration = _or_skip(f"broker {broker_id}", lambda z=znode, b=broker_id: (
            BrokerRegistration.from_json(z[0], b)))
        if registration is None:
            continue
        state.brokers[broker_id] = ZkBroker(registration,
                                            incarnation_of(broker_id, znode[1].czxid))
    for topic in _topic_names(children.get(layout.TOPICS, ())):
        assignment = decode_assignment(topic, data.get(layout.topic_path(topic)), memo)
        if assignment is None:
            continue
        state.topics[topic] = assignment
        for p in assignment.partitions:
            path = layout.partition_state_path(topic, p)
            znode = data.get(path)
            if znode is None:
                continue
            partition = _or_skip(f"partition {topic}-{p}", lambda path=path, z=znode, t=topic,
                                 p=p: _memoized(memo, path, z, lambda: (
                                     PartitionState.from_json(z[0], t, p))))
            if partition is None:
                continue
            state.partitions[(topic, p)] = ZkPartition(partition, znode[1].version)
        path = layout.topic_config_path(topic)
        config = _entity_config(data.get(path), path)
        if config:
            state.topic_configs[topic] = config
    for child in children.get(CONFIG_BROKERS_PATH, ()):
        try:
            path = layout.config_entity_path(layout.CONFIG_BROKERS, child)
        except ValueError:
            continue
        config = _entity_config(data.get(path), path)
        if config:
            state.broker_configs[broker_config_name(child)] = config
    block = data.get(layout.LATEST_PRODUCER_ID_BLOCK)
    if block is not None and block[0]:
        state.producer_id_block = _or_skip(layout.LATEST_PRODUCER_ID_BLOCK,
                                           lambda: ProducerIdBlock.from_json(block[0]))
    return state


def _entity_config(znode: Znode, path: str) -> dict[str, str]:
    if znode is None:
        return {}
    config = _or_skip(path, lambda: dict(EntityConfig.from_json(znode[0], path).config))
    return config or {}


# -- the diff ---------------------------------------------------------------------------------


def broker_record(broker: ZkBroker) -> RegisterBrokerRecord:
    """The record of a registration znode."""
    registration = broker.registration
    endpoints = [BrokerEndpoint(ep.listener, ep.host or "", ep.port, ep.security_protocol)
                 for ep in registration.endpoints]
    return RegisterBrokerRecord(registration.broker_id, broker.incarnation_id, endpoints,
                                registration.rack)


def diff(image: MetadataImage, state: ClusterState) -> list[MetadataRecord]:
    """The records whose replay, in order, makes ``image`` hold ``state`` (empty: it does).
    Producer ids only move forward."""
    out: list[MetadataRecord] = []
    if (image.controller_id, image.controller_epoch) != (state.controller_id,
                                                         state.controller_epoch):
        out.append(ControllerChangeRecord(state.controller_id, state.controller_epoch))
    out += [UnregisterBrokerRecord(b) for b in sorted(image.brokers.keys() - state.brokers)]
    for broker_id, broker in sorted(state.brokers.items()):
        record = broker_record(broker)
        current = image.brokers.get(broker_id)
        if current is None or current.fenced or (
                current.incarnation_id, current.endpoints, current.rack) != (
                record.incarnation_id, record.endpoints, record.rack):
            out.append(record)
    recreated: set[str] = set()
    for name, topic in sorted(image.topics_by_name.items()):
        assignment = state.topics.get(name)
        if assignment is None or (assignment.topic_id is not None
                                  and assignment.topic_id != topic.topic_id):
            out.append(RemoveTopicRecord(topic.topic_id))
            recreated.add(name)
    for name, assignment in sorted(state.topics.items()):
        if assignment.topic_id is None:
            continue
        current = image.topics_by_name.get(name)
        if current is None or name in recreated:
            out.append(TopicRecord(name, assignment.topic_id))
            current = None
        for p, replicas in sorted(assignment.partitions.items()):
            zk = state.partitions.get((name, p))
            if zk is None:
                continue
            have = current.partitions.get(p) if current is not None else None
            out += _partition_records(assignment.topic_id, p, replicas, zk, have)
        before = {} if current is None else image.topic_configs.get(name, {})
        out += _config_records(TOPIC_RESOURCE, name, before, state.topic_configs.get(name, {}))
    for name in sorted(image.broker_configs.keys() | state.broker_configs.keys()):
        out += _config_records(BROKER_RESOURCE, name, image.broker_configs.get(name, {}),
                               state.broker_configs.get(name, {}))
    block = state.producer_id_block
    if block is not None and block.block_end + 1 > image.next_producer_id:
        out.append(ProducerIdsRecord(block.broker_id, block.block_end + 1))
    return out


def _partition_records(topic_id: uuid.UUID, p: int, assignment: ReplicaAssignment,
                       zk: ZkPartition, have: ImagePartition | None) -> list[MetadataRecord]:
    state = zk.state
    isr = list(state.isr)
    replicas = list(assignment.replicas)
    adding, removing = list(assignment.adding_replicas), list(assignment.removing_replicas)
    recovery = state.leader_recovery_state
    full = PartitionRecord(topic_id, p, replicas, isr, state.leader, state.leader_epoch,
                           zk.version, adding, removing, recovery)
    if have is None:
        return [full]
    if (have.replicas, have.isr, have.leader, have.leader_epoch, have.partition_epoch,
            have.adding_replicas, have.removing_replicas, have.leader_recovery_state) == (
            replicas, isr, state.leader, state.leader_epoch, zk.version, adding, removing,
            recovery):
        return []
    leader_moved = state.leader != have.leader
    if zk.version == have.partition_epoch + 1 and \
            state.leader_epoch == have.leader_epoch + (1 if leader_moved else 0):
        return [PartitionChangeRecord(
            topic_id, p, leader=state.leader if leader_moved else None,
            isr=isr if isr != have.isr else None,
            replicas=replicas if replicas != have.replicas else None,
            adding_replicas=adding if adding != have.adding_replicas else None,
            removing_replicas=removing if removing != have.removing_replicas else None,
            # said only when the replay would not come to it (a new leader resets it)
            leader_recovery_state=None if recovery == (
                LEADER_RECOVERED if leader_moved else have.leader_recovery_state) else recovery)]
    return [full]  # more than one step behind: the whole state


def _config_records(resource_type: int, name: str, before: Mapping[str, str],
                    after: Mapping[str, str]) -> list[MetadataRecord]:
    return [ConfigRecord(resource_type, name, key, after.get(key))
            for key in sorted(before.keys() | after.keys()) if before.get(key) != after.get(key)]
