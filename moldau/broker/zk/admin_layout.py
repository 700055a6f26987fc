"""Kafka's ZooKeeper layout, continued: dynamic configs and their change notifications, admin
requests (delete, reassign, preferred leader election), ISR and log-dir notifications, producer
id blocks and finalized features. Same conventions as ``layout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .layout import (
    CONFIG_CHANGES,
    CONFIG_CLIENTS,
    CONFIG_ENTITY_TYPES,
    CONFIG_TOPICS,
    FEATURE,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    ZNodeFormatError,
    dumps,
    get_int,
    get_str,
    int_list,
    loads_object,
)

# -- sequential notification znodes -----------------------------------------------------------

#: Prefixes of the persistent sequential children; ZooKeeper appends a 10-digit counter
#: (``config_change_0000000042``).
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"


def config_change_create_path() -> str:
    """The path to create (sequential) for a config change notification."""
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


def isr_change_create_path() -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def log_dir_event_create_path() -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"


def sequence_number(name: str, prefix: str) -> int:
    """The counter of a sequential child (``config_change_0000000042`` -> 42)."""
    name = name.rsplit("/", 1)[-1]
    if not name.startswith(prefix) or not name[len(prefix):].isdigit():
        raise ZNodeFormatError(f"not a {prefix}NNNNNNNNNN znode name: {name!r}")
    return int(name[len(prefix):])


# -- /config/<type>/<name> --------------------------------------------------------------------


@dataclass(frozen=True)
class EntityConfig:
    """``/config/topics/<t>``, ``/config/brokers/<id>``, ``/config/brokers/<default>`` (and
    clients, users, ips): the dynamic overrides of one entity, values always strings::

        {"version":1,"config":{"retention.ms":"86400000"}}

    Kafka reads null or empty data, a missing ``config`` or a non-object as no overrides."""

    config: Mapping[str, str]
    version: int = 1

    def to_json(self) -> bytes:
        return dumps({"version": self.version, "config": dict(self.config)})

    @classmethod
    def from_json(cls, data: bytes | None, path: str = "/config/...") -> EntityConfig:
        if not data:
            return cls({})
        obj = loads_object(data, path)
        config = obj.get("config")
        if not isinstance(config, dict):
            return cls({}, get_int(obj, "version", path, 1))
        for key, value in config.items():
            if not isinstance(value, str):
                raise ZNodeFormatError(f"{path}: config {key!r} must be a string, got {value!r}")
        return cls(dict(config), get_int(obj, "version", path, 1))


@dataclass(frozen=True)
class ConfigChangeNotification:
    """``/config/changes/config_change_NNNNNNNNNN`` (persistent sequential, written after the
    config znode itself; brokers watch the children and re-read the named entity)::

        {"version":2,"entity_path":"topics/orders"}

    Version 1 (still read by Kafka 3.x, for topics and clients only) was
    ``{"version":1,"entity_type":"topics","entity_name":"orders"}``. ``entity_path`` is
    ``<type>/<name>``, or ``users/<user>/clients/<client>`` for nested quotas."""

    entity_path: str
    version: int = 2

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    @property
    def entity_name(self) -> str:
        return self.entity_path.split("/", 1)[1]

    def to_json(self) -> bytes:
        if self.version == 1:
            return dumps({"version": 1, "entity_type": self.entity_type,
                          "entity_name": self.entity_name})
        return dumps({"version": self.version, "entity_path": self.entity_path})

    @classmethod
    def from_json(cls, data: bytes, name: str = "config_change_") -> ConfigChangeNotification:
        what = f"{CONFIG_CHANGES}/{name}"
        obj = loads_object(data, what)
        version = get_int(obj, "version", what)
        if version == 1:
            entity_type = get_str(obj, "entity_type", what, None)
            if entity_type not in (CONFIG_TOPICS, CONFIG_CLIENTS):
                raise ZNodeFormatError(f"{what}: version 1 needs entity_type 'topics' or "
                                       f"'clients', got {entity_type!r}")
            return cls(f"{entity_type}/{get_str(obj, 'entity_name', what)}", 1)
        if version != 2:
            raise ZNodeFormatError(f"{what}: unsupported version {version} (1 and 2 exist)")
        path = get_str(obj, "entity_path", what)
        if "/" not in path or path.split("/", 1)[0] not in CONFIG_ENTITY_TYPES:
            raise ZNodeFormatError(f"{what}: entity_path must start with one of "
                                   f"{', '.join(t + '/' for t in CONFIG_ENTITY_TYPES)}; "
                                   f"got {path!r}")
        return cls(path, 2)


# -- partition lists: ISR changes, preferred leader election, reassignment --------------------

TopicPartition = tuple[str, int]


def _partitions_json(partitions: tuple[TopicPartition, ...]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": partition} for topic, partition in partitions]


def _partitions_from(obj: Mapping[str, Any], what: str) -> tuple[TopicPartition, ...]:
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise ZNodeFormatError(f"{what}: field 'partitions' must be a list, got {raw!r}")
    out = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ZNodeFormatError(f"{what}: partitions entry must be an object: {entry!r}")
        out.append((get_str(entry, "topic", what), get_int(entry, "partition", what)))
    return tuple(out)


@dataclass(frozen=True)
class _PartitionList:
    """A znode holding ``{"version":1,"partitions":[{"topic":...,"partition":...}]}``;
    ``_WHAT`` names it in format errors."""

    _WHAT: ClassVar[str]
    partitions: tuple[TopicPartition, ...]
    version: int = 1

    def to_json(self) -> bytes:
        return dumps({"version": self.version, "partitions": _partitions_json(self.partitions)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        obj = loads_object(data, cls._WHAT)
        return cls(_partitions_from(obj, cls._WHAT), get_int(obj, "version", cls._WHAT, 1))


@dataclass(frozen=True)
class IsrChangeNotification(_PartitionList):
    """``/isr_change_notification/isr_change_NNNNNNNNNN`` (persistent sequential; a leader
    that changed an ISR writes it, the controller reads, propagates and deletes it; Kafka
    2.7+ uses AlterPartition instead)::

        {"version":1,"partitions":[{"topic":"orders","partition":0}]}"""

    _WHAT: ClassVar[str] = ISR_CHANGE_NOTIFICATION


@dataclass(frozen=True)
class PreferredReplicaElection(_PartitionList):
    """``/admin/preferred_replica_election`` (persistent; written by the admin tool, deleted
    by the controller once done; the ElectLeaders API replaced it in 2.4)::

        {"version":1,"partitions":[{"topic":"orders","partition":0}]}"""

    _WHAT: ClassVar[str] = PREFERRED_REPLICA_ELECTION


@dataclass(frozen=True)
class PartitionReassignment:
    """``/admin/reassign_partitions`` (persistent; the pre-2.4 way to request a reassignment,
    deleted by the controller when it completes; AlterPartitionReassignments replaced it)::

        {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5,6]}]}"""

    replicas: Mapping[TopicPartition, tuple[int, ...]]
    version: int = 1

    def to_json(self) -> bytes:
        return dumps({"version": self.version, "partitions": [
            {"topic": topic, "partition": partition, "replicas": list(replicas)}
            for (topic, partition), replicas in self.replicas.items()]})

    @classmethod
    def from_json(cls, data: bytes) -> PartitionReassignment:
        what = REASSIGN_PARTITIONS
        obj = loads_object(data, what)
        raw = obj.get("partitions")
        if not isinstance(raw, list):
            raise ZNodeFormatError(f"{what}: field 'partitions' must be a list, got {raw!r}")
        replicas = {}
        for entry in raw:
            if not isinstance(entry, dict) or "replicas" not in entry:
                raise ZNodeFormatError(f"{what}: each partition needs topic, partition and "
                                       f"replicas: {entry!r}")
            key = (get_str(entry, "topic", what), get_int(entry, "partition", what))
            replicas[key] = int_list(entry["replicas"], f"{what} replicas")
        return cls(replicas, get_int(obj, "version", what, 1))


@dataclass(frozen=True)
class LogDirEventNotification:
    """``/log_dir_event_notification/log_dir_event_NNNNNNNNNN`` (persistent sequential; a
    broker whose log dir failed writes it, the controller handles and deletes it)::

        {"version":1,"broker":3,"event":1}

    Event 1 is "log dir failure", the only one."""

    broker_id: int
    event: int = 1
    version: int = 1

    def to_json(self) -> bytes:
        return dumps({"version": self.version, "broker": self.broker_id, "event": self.event})

    @classmethod
    def from_json(cls, data: bytes) -> LogDirEventNotification:
        what = LOG_DIR_EVENT_NOTIFICATION
        obj = loads_object(data, what)
        return cls(get_int(obj, "broker", what), get_int(obj, "event", what, 1),
                   get_int(obj, "version", what, 1))


# -- /latest_producer_id_block ----------------------------------------------------------------

#: Producer ids handed out per block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ProducerIdBlock:
    """``/latest_producer_id_block`` (persistent; the last block of producer ids handed out,
    claimed by a conditional write on the znode's version; starts empty)::

        {"version":1,"broker":0,"block_start":"0","block_end":"999"}

    ``block_start``/``block_end`` (inclusive) are strings: they are 64-bit."""

    broker_id: int
    block_start: int
    block_end: int
    version: int = 1

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block after this one, for ``broker_id``."""
        return ProducerIdBlock(broker_id, self.block_end + 1, self.block_end + size)

    @classmethod
    def first(cls, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block claimed when the znode is still empty."""
        return cls(broker_id, 0, size - 1)

    def to_json(self) -> bytes:
        return dumps({"version": self.version, "broker": self.broker_id,
                      "block_start": str(self.block_start), "block_end": str(self.block_end)})

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        what = LATEST_PRODUCER_ID_BLOCK
        obj = loads_object(data, what)
        start_text, end_text = get_str(obj, "block_start", what), get_str(obj, "block_end", what)
        try:
            start, end = int(start_text), int(end_text)
        except ValueError as exc:
            raise ZNodeFormatError(f"{what}: block_start/block_end must be decimal text: "
                                   f"{data!r}") from exc
        if end < start:
            raise ZNodeFormatError(f"{what}: block_end {end} is before block_start {start}")
        return cls(get_int(obj, "broker", what), start, end, get_int(obj, "version", what, 1))


# -- /feature ---------------------------------------------------------------------------------

FEATURE_DISABLED = 0
FEATURE_ENABLED = 1


@dataclass(frozen=True)
class FinalizedFeatures:
    """``/feature`` (persistent; the controller's cluster-wide finalized feature levels,
    KIP-584)::

        {"features":{},"version":2,"status":1}

    Version 2 (Kafka 3.3+) writes ``{"max_version_level": n}`` per feature, version 1 also
    ``min_version_level`` (equal to it). ``status`` 1 is enabled, 0 disabled. Every field is
    required, as in Kafka."""

    features: Mapping[str, int]
    status: int = FEATURE_ENABLED
    version: int = 2

    def to_json(self) -> bytes:
        levels: dict[str, dict[str, int]] = {}
        for name, level in self.features.items():
            levels[name] = {"max_version_level": level}
            if self.version == 1:
                levels[name]["min_version_level"] = level
        return dumps({"features": levels, "version": self.version, "status": self.status})

    @classmethod
    def from_json(cls, data: bytes) -> FinalizedFeatures:
        obj = loads_object(data, FEATURE)
        version = get_int(obj, "version", FEATURE)
        if version not in (1, 2):
            raise ZNodeFormatError(f"{FEATURE}: unsupported version {version} (1 and 2 exist)")
        status = get_int(obj, "status", FEATURE)
        if status not in (FEATURE_DISABLED, FEATURE_ENABLED):
            raise ZNodeFormatError(f"{FEATURE}: unknown status {status}")
        raw = obj.get("features")
        if not isinstance(raw, dict):
            raise ZNodeFormatError(f"{FEATURE}: field 'features' must be an object")
        features = {}
        for name, levels in raw.items():
            where = f"{FEATURE} feature {name}"
            if not isinstance(levels, dict):
                raise ZNodeFormatError(f"{where}: must be an object")
            level = get_int(levels, "max_version_level", where)
            if version == 1:
                low = get_int(levels, "min_version_level", where)
                if low < 1 or level < low:
                    raise ZNodeFormatError(f"{where}: need 1 <= min_version_level <= "
                                           f"max_version_level, got {low}, {level}")
            if level < 1:
                raise ZNodeFormatError(f"{where}: max_version_level must be >= 1, got {level}")
            features[name] = level
        return cls(features, status, version)
