"""Kafka's ZooKeeper layout (ZooKeeper mode, Kafka 2.8-3.9): paths, and the JSON of the znodes
that say who is in the cluster, who controls it and where each partition lives.

Configs, change notifications, admin requests, producer id blocks and features are in
``admin_layout``. Every znode type is a frozen dataclass with ``to_json() -> bytes`` and
``from_json(data, ...)``; a decoder accepts what Kafka's decoder (``kafka.zk.ZkData``) accepts —
older versions, missing optional fields, keys in any order — and raises :class:`ZNodeFormatError`
naming the znode and the field where Kafka would refuse the data too.

Kafka writes compact JSON (Jackson: no spaces, UTF-8 as is); ours is the same. Key order is not
significant to any reader (Kafka builds most of these from hash maps); ``to_json`` uses the order
``zkCli.sh get`` shows for a Kafka 3.x broker, so an operator sees familiar text.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# -- paths ------------------------------------------------------------------------------------

CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
#: The old (pre-0.9) consumer's root; Kafka still creates it empty.
CONSUMERS = "/consumers"

#: Config entity types under ``/config`` (Kafka's ``ConfigType.ALL``).
CONFIG_TOPICS = "topics"
CONFIG_CLIENTS = "clients"
CONFIG_USERS = "users"
CONFIG_BROKERS = "brokers"
CONFIG_IPS = "ips"
CONFIG_ENTITY_TYPES = (CONFIG_TOPICS, CONFIG_CLIENTS, CONFIG_USERS, CONFIG_BROKERS, CONFIG_IPS)
#: The entity name of cluster-wide defaults (``/config/brokers/<default>``).
DEFAULT_ENTITY = "<default>"

#: Persistent paths a Kafka broker makes sure exist at start-up (``ZkData.PersistentZkPaths``),
#: each created with null data; parents first.
PERSISTENT_PATHS = (
    CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_ENTITY_TYPES),
)

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _topic(topic: str) -> str:
    # A name that is not a legal topic could escape its directory ("a/../b") or be empty.
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(f"not a legal topic name for a znode path: {topic!r}")
    return topic


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``: a live broker's registration (ephemeral)."""
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``: the topic's replica assignment and id."""
    return f"{TOPICS}/{_topic(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<p>/state``: leader, ISR and epochs."""
    return f"{partition_path(topic, partition)}/state"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """``/config/<type>/<name>``, e.g. ``/config/topics/orders`` or
    ``/config/brokers/<default>``. ``entity_name`` is used as given: Kafka URL-encodes user
    and client names (``Sanitizer``) before they get here; topic names and broker ids need
    nothing."""
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}; one of "
                         f"{', '.join(CONFIG_ENTITY_TYPES)}")
    if not entity_name or "/" in entity_name or entity_name in (".", ".."):
        raise ValueError(f"not a config entity name for a znode path: {entity_name!r}")
    return f"{CONFIG}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(CONFIG_TOPICS, _topic(topic))


def broker_config_path(broker_id: int | None) -> str:
    """``/config/brokers/<id>``, or ``/config/brokers/<default>`` for ``None``."""
    name = DEFAULT_ENTITY if broker_id is None else str(int(broker_id))
    return config_entity_path(CONFIG_BROKERS, name)


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>``: a request to delete the topic (null data)."""
    return f"{DELETE_TOPICS}/{_topic(topic)}"


# -- shared JSON helpers ----------------------------------------------------------------------


class ZNodeFormatError(ValueError):
    """A znode's data is not in Kafka's format; the message names the znode and the field."""


def dumps(value: Any) -> bytes:
    """Compact JSON as Kafka's Jackson writes it (no spaces, non-ASCII as UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads_object(data: bytes | None, what: str) -> dict[str, Any]:
    """Parse ``data`` as a JSON object; ``what`` names the znode in the error."""
    if not data:
        raise ZNodeFormatError(f"{what}: no data (expected a JSON object)")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeFormatError(f"{what}: not JSON ({exc}): {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ZNodeFormatError(f"{what}: expected a JSON object, got {data[:200]!r}")
    return value


_MISSING = object()


def get_int(obj: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> Any:
    """``obj[key]`` as an int (JSON numbers only, as Kafka's ``to[Int]``); ``default`` if the key
    is absent, else an error."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise ZNodeFormatError(f"{what}: missing field {key!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeFormatError(f"{what}: field {key!r} must be an integer, got {value!r}")
    return value


def get_str(obj: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> Any:
    """``obj[key]`` as a string; ``default`` if absent (or JSON null when a default is given)."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise ZNodeFormatError(f"{what}: missing field {key!r}")
        return default
    if not isinstance(value, str):
        raise ZNodeFormatError(f"{what}: field {key!r} must be a string, got {value!r}")
    return value


def int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ZNodeFormatError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


def now_ms() -> int:
    """Wall-clock milliseconds, the default ``timestamp`` of a registration."""
    return int(time.time() * 1000)


def _timestamp(obj: Mapping[str, Any], what: str) -> int | None:
    # Kafka writes milliseconds as a JSON string and never reads them back.
    text = obj.get("timestamp")
    if text is None:
        return None
    try:
        return int(text)
    except (TypeError, ValueError) as exc:
        raise ZNodeFormatError(f"{what}: field 'timestamp' must be milliseconds, got {text!r}"
                               ) from exc


def uuid_to_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_text(text: str, what: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ZNodeFormatError(f"{what}: not a Kafka Uuid: {text!r}") from exc
    if len(raw) != 16:
        raise ZNodeFormatError(f"{what}: not a Kafka Uuid (16 bytes): {text!r}")
    return uuid.UUID(bytes=raw)


# -- /cluster/id ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterId:
    """``/cluster/id`` (persistent, created by the first broker that finds it missing):
    ``{"version":"1","id":"<22-char Uuid text>"}``. Note the version is a string."""

    id: str

    def to_json(self) -> bytes:
        return dumps({"version": "1", "id": self.id})

    @classmethod
    def from_json(cls, data: bytes) -> ClusterId:
        obj = loads_object(data, CLUSTER_ID)
        return cls(get_str(obj, "id", CLUSTER_ID))


# -- /controller, /controller_epoch -----------------------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    """``/controller`` (ephemeral, created by the broker that wins the election).

    Version 1 (Kafka up to 3.3): ``{"version":1,"brokerid":1,"timestamp":"<ms>"}``; version 2
    (3.4+) adds ``"kraftControllerEpoch"``, -1 for a ZooKeeper-mode controller (a KRaft
    controller migrating the cluster writes its epoch, and makes the znode persistent).
    Readers need only ``brokerid``.
    """

    broker_id: int
    timestamp_ms: int | None = field(default_factory=now_ms)
    version: int = 2
    kraft_controller_epoch: int | None = -1

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"version": self.version, "brokerid": self.broker_id}
        if self.timestamp_ms is not None:
            obj["timestamp"] = str(self.timestamp_ms)
        if self.version >= 2:
            epoch = -1 if self.kraft_controller_epoch is None else self.kraft_controller_epoch
            obj["kraftControllerEpoch"] = epoch
        return dumps(obj)

    @classmethod
    def from_json(cls, data: bytes) -> ControllerRegistration:
        obj = loads_object(data, CONTROLLER)
        return cls(
            broker_id=get_int(obj, "brokerid", CONTROLLER),
            timestamp_ms=_timestamp(obj, CONTROLLER),
            version=get_int(obj, "version", CONTROLLER, 1),
            kraft_controller_epoch=get_int(obj, "kraftControllerEpoch", CONTROLLER, None),
        )

    @property
    def is_kraft(self) -> bool:
        """A KRaft controller (ZooKeeper migration) holds the cluster: no broker may compete."""
        return self.kraft_controller_epoch is not None and self.kraft_controller_epoch >= 0


#: The epoch ``/controller_epoch`` is created with; the first elected controller makes it 1.
INITIAL_CONTROLLER_EPOCH = 0


@dataclass(frozen=True)
class ControllerEpoch:
    """``/controller_epoch`` (persistent): the epoch as decimal text, e.g. ``1``.

    A controller's writes are fenced by this znode's *version* (``Stat.version``), not its
    value: Kafka wraps each write in a multi-op with a check of the version it read when it was
    elected, so a deposed controller's write fails as a whole."""

    epoch: int

    def to_json(self) -> bytes:
        return str(self.epoch).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> ControllerEpoch:
        try:
            return cls(int(data.decode("ascii")))
        except (UnicodeDecodeError, ValueError, AttributeError) as exc:
            raise ZNodeFormatError(f"{CONTROLLER_EPOCH}: expected an integer, got {data!r}"
                                   ) from exc


# -- /brokers/ids/<id> ------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class Endpoint:
    """One advertised listener of a broker: ``LISTENER://host:port`` plus its protocol."""

    listener: str
    host: str | None
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """``NAME://host:port`` (``NAME://[::1]:port`` for IPv6, ``NAME://:port`` for no
        host), as Kafka's ``EndPoint.connectionString``."""
        if self.host is None:
            hostport = f":{self.port}"
        elif ":" in self.host:
            hostport = f"[{self.host}]:{self.port}"
        else:
            hostport = f"{self.host}:{self.port}"
        return f"{self.listener}://{hostport}"

    @classmethod
    def parse(cls, text: str, protocols: Mapping[str, str] | None, what: str) -> Endpoint:
        """Parse a connection string; without a protocol map the listener name must be a
        security protocol (registrations before version 4)."""
        match = _ENDPOINT.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ZNodeFormatError(f"{what}: cannot parse endpoint {text!r} "
                                   f"(expected LISTENER://host:port)")
        listener = match[1].upper()
        protocol = (protocols or {n: n for n in SECURITY_PROTOCOLS}).get(listener)
        if protocol is None:
            raise ZNodeFormatError(f"{what}: no security protocol defined for listener "
                                   f"{listener} (listener_security_protocol_map)")
        return cls(listener, match[2] or None, int(match[3]), protocol)


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral, created by the broker itself at start-up).

    Version 5 (Kafka 2.7+) as ``zkCli.sh get`` shows it::

        {"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"features":{},
         "host":"localhost","timestamp":"1617894143073","port":9092,"version":5}

    ``host``/``port`` repeat the first PLAINTEXT endpoint for pre-0.9 clients (``null``/-1 when
    there is none). ``rack`` is present when ``broker.rack`` is set (version 3+), the protocol
    map from version 4, ``features`` (name -> {"min_version","max_version"}) from version 5.
    Version 1 had only ``host``/``port``. The broker id is the znode's name, not in the data.
    """

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int | None = field(default_factory=now_ms)
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 5

    @property
    def path(self) -> str:
        return broker_path(self.broker_id)

    def endpoint(self, listener: str) -> Endpoint | None:
        """The endpoint of ``listener`` (by name), if the broker has one."""
        return next((ep for ep in self.endpoints if ep.listener == listener), None)

    def to_json(self) -> bytes:
        plaintext = next((ep for ep in self.endpoints if ep.security_protocol == "PLAINTEXT"),
                         None)
        obj: dict[str, Any] = {}
        if self.version >= 4:
            obj["listener_security_protocol_map"] = {
                ep.listener: ep.security_protocol for ep in self.endpoints}
        obj["endpoints"] = [ep.connection_string for ep in self.endpoints]
        obj["jmx_port"] = self.jmx_port
        if self.version >= 3 and self.rack is not None:
            obj["rack"] = self.rack
        if self.version >= 5:
            obj["features"] = {name: {"min_version": lo, "max_version": hi}
                               for name, (lo, hi) in self.features.items()}
        obj["host"] = plaintext.host if plaintext else None
        if self.timestamp_ms is not None:
            obj["timestamp"] = str(self.timestamp_ms)
        obj["port"] = plaintext.port if plaintext else -1
        obj["version"] = self.version
        return dumps(obj)

    @classmethod
    def from_json(cls, data: bytes, broker_id: int) -> BrokerRegistration:
        what = broker_path(broker_id)
        obj = loads_object(data, what)
        version = get_int(obj, "version", what)
        jmx_port = get_int(obj, "jmx_port", what)
        if version < 1:
            raise ZNodeFormatError(f"{what}: unsupported registration version {version}")
        if version == 1:
            endpoints: tuple[Endpoint, ...] = (Endpoint(
                "PLAINTEXT", get_str(obj, "host", what), get_int(obj, "port", what),
                "PLAINTEXT"),)
        else:
            protocols = obj.get("listener_security_protocol_map")
            if protocols is not None and not (isinstance(protocols, dict) and all(
                    isinstance(v, str) for v in protocols.values())):
                raise ZNodeFormatError(f"{what}: listener_security_protocol_map must map "
                                       f"listener names to protocols, got {protocols!r}")
            if protocols is not None:
                protocols = {k.upper(): v for k, v in protocols.items()}
            raw = obj.get("endpoints")
            if not isinstance(raw, list):
                raise ZNodeFormatError(f"{what}: field 'endpoints' must be a list, got {raw!r}")
            endpoints = tuple(Endpoint.parse(text, protocols, what) for text in raw)
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            rack=get_str(obj, "rack", what, None),
            jmx_port=jmx_port,
            timestamp_ms=_timestamp(obj, what),
            features=_supported_features(obj.get("features"), what),
            version=version,
        )


def _supported_features(raw: Any, what: str) -> dict[str, tuple[int, int]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ZNodeFormatError(f"{what}: field 'features' must be an object, got {raw!r}")
    features = {}
    for name, versions in raw.items():
        if not isinstance(versions, dict):
            raise ZNodeFormatError(f"{what}: feature {name!r} must be an object")
        features[name] = (get_int(versions, "min_version", f"{what} feature {name}"),
                          get_int(versions, "max_version", f"{what} feature {name}"))
    return features


# -- /brokers/topics/<topic> ------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas, and those being added or removed by a reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>`` (persistent, written by the controller or the admin path).

    Version 3 (Kafka 2.8+)::

        {"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"SbJQ_jVrRFOYqlkfIgLwNg",
         "adding_replicas":{},"removing_replicas":{},"version":3}

    Version 2 (2.4+) had no ``topic_id``, version 1 only ``partitions``; partition keys are
    decimal strings in any order. Kafka reads missing or empty data as a topic without
    partitions (a topic being created)."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: uuid.UUID | None = None
    version: int = 3

    def to_json(self) -> bytes:
        ordered = sorted(self.partitions.items())
        obj: dict[str, Any] = {"partitions": {str(p): list(a.replicas) for p, a in ordered}}
        if self.topic_id is not None:
            obj["topic_id"] = uuid_to_text(self.topic_id)
        obj["adding_replicas"] = {str(p): list(a.adding_replicas)
                                  for p, a in ordered if a.adding_replicas}
        obj["removing_replicas"] = {str(p): list(a.removing_replicas)
                                    for p, a in ordered if a.removing_replicas}
        obj["version"] = self.version
        return dumps(obj)

    @classmethod
    def from_json(cls, data: bytes | None, topic: str) -> TopicAssignment:
        what = topic_path(topic)
        if not data:
            return cls({}, None)
        obj = loads_object(data, what)
        topic_id = obj.get("topic_id")
        if topic_id is not None:
            if not isinstance(topic_id, str):
                raise ZNodeFormatError(f"{what}: field 'topic_id' must be a string")
            topic_id = uuid_from_text(topic_id, what)
        parts = _partition_lists(obj.get("partitions"), "partitions", what)
        adding = _partition_lists(obj.get("adding_replicas"), "adding_replicas", what)
        removing = _partition_lists(obj.get("removing_replicas"), "removing_replicas", what)
        partitions = {p: ReplicaAssignment(replicas, adding.get(p, ()), removing.get(p, ()))
                      for p, replicas in parts.items()}
        return cls(partitions, topic_id, get_int(obj, "version", what, 1))

    @classmethod
    def of(cls, replicas: Mapping[int, Sequence[int]],
           topic_id: uuid.UUID | None = None) -> TopicAssignment:
        """An assignment with no reassignment in progress."""
        return cls({p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()}, topic_id)


def _partition_lists(raw: Any, key: str, what: str) -> dict[int, tuple[int, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ZNodeFormatError(f"{what}: field {key!r} must be an object, got {raw!r}")
    out = {}
    for name, replicas in raw.items():
        try:
            partition = int(name)
        except ValueError as exc:
            raise ZNodeFormatError(f"{what}: {key} has a key that is not a partition number: "
                                   f"{name!r}") from exc
        out[partition] = int_list(replicas, f"{what} {key}[{name}]")
    return out


# -- /brokers/topics/<topic>/partitions/<p>/state ---------------------------------------------

#: ``leader_recovery_state`` values (KIP-704): written only when not RECOVERED.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
#: ``leader`` when the partition has none (offline).
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state`` (persistent, written by the controller;
    the ISR also by the leader through AlterPartition in Kafka 2.7+, or directly before)::

        {"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}

    ``leader_recovery_state`` (3.2+) is written only when it is RECOVERING (1); missing means
    RECOVERED. The znode's ``Stat.version`` is the partition epoch (Kafka's ``zkVersion`` of
    ``LeaderAndIsr``): every update is conditional on it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    version: int = 1

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"controller_epoch": self.controller_epoch, "leader": self.leader,
                               "version": self.version, "leader_epoch": self.leader_epoch,
                               "isr": list(self.isr)}
        if self.leader_recovery_state != LEADER_RECOVERED:
            obj["leader_recovery_state"] = self.leader_recovery_state
        return dumps(obj)

    @classmethod
    def from_json(cls, data: bytes, topic: str, partition: int) -> PartitionState:
        what = partition_state_path(topic, partition)
        obj = loads_object(data, what)
        if "isr" not in obj:
            raise ZNodeFormatError(f"{what}: missing field 'isr'")
        recovery = get_int(obj, "leader_recovery_state", what, LEADER_RECOVERED)
        if recovery not in (LEADER_RECOVERED, LEADER_RECOVERING):
            raise ZNodeFormatError(f"{what}: unknown leader_recovery_state {recovery}")
        return cls(
            leader=get_int(obj, "leader", what),
            leader_epoch=get_int(obj, "leader_epoch", what),
            isr=int_list(obj["isr"], f"{what} isr"),
            controller_epoch=get_int(obj, "controller_epoch", what),
            leader_recovery_state=recovery,
            version=get_int(obj, "version", what, 1),
        )
