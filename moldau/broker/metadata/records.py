"""Cluster metadata records: the entries of the ``__cluster_metadata`` log.

Named after Kafka's KRaft metadata records (TopicRecord, PartitionRecord, ConfigRecord, ...)
with the fields Moldau uses. They are stored as the values of ordinary RecordBatch v2 records,
encoded as JSON objects ``{"type": "TopicRecord", "v": 0, ...fields}``: Kafka's own binary
metadata schemas are not in kio, and these records never leave the cluster, so a readable
encoding (``moldau metadata-log dump`` can print it) was preferred over a hand-written binary one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

TOPIC_RESOURCE = 2  # Kafka ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # Kafka ConfigResource.Type.BROKER


@dataclass(frozen=True)
class MetadataRecord:
    """Base of all metadata records."""

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 0
    # Fields left out of the encoding when they hold their default (added after records of
    # this type were first written: old logs decode to the default, and new records keep the
    # size they had).
    OPTIONAL: ClassVar[dict[str, Any]] = {}

    def encode(self) -> bytes:
        body: dict[str, Any] = {"type": self.TYPE, "v": self.VERSION}
        for key, value in asdict(self).items():
            if key in self.OPTIONAL and value == self.OPTIONAL[key]:
                continue
            body[key] = str(value) if isinstance(value, uuid.UUID) else value
        return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class TopicRecord(MetadataRecord):
    TYPE: ClassVar[str] = "TopicRecord"
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True)
class PartitionRecord(MetadataRecord):
    TYPE: ClassVar[str] = "PartitionRecord"
    OPTIONAL: ClassVar[dict[str, Any]] = {"adding_replicas": [], "removing_replicas": [],
                                          "leader_recovery_state": 0}
    topic_id: uuid.UUID
    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in progress (KIP-455): ``replicas`` is then the union of the old and the
    # target replicas; these are the ones being added and removed (KRaft's addingReplicas and
    # removingReplicas).
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    # KIP-704: 1 (RECOVERING) while the leader came from an unclean election and has not
    # changed the ISR since; 0 (RECOVERED) otherwise.
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class PartitionChangeRecord(MetadataRecord):
    """A change of leader, ISR and/or replicas; a new leader bumps the leader epoch. None
    leaves a field as it is; ``adding_replicas``/``removing_replicas`` set the reassignment
    in progress (empty lists: none). ``leader_recovery_state`` (KIP-704) is 1 (RECOVERING) for
    an unclean election, 0 when the leader's ISR change ends the recovery; None: as it was,
    except that a new leader makes it 0 unless the record says otherwise."""

    TYPE: ClassVar[str] = "PartitionChangeRecord"
    OPTIONAL: ClassVar[dict[str, Any]] = {"adding_replicas": None, "removing_replicas": None,
                                          "leader_recovery_state": None}
    topic_id: uuid.UUID
    partition_id: int
    leader: int | None = None
    isr: list[int] | None = None
    replicas: list[int] | None = None
    adding_replicas: list[int] | None = None
    removing_replicas: list[int] | None = None
    leader_recovery_state: int | None = None


@dataclass(frozen=True)
class RemoveTopicRecord(MetadataRecord):
    TYPE: ClassVar[str] = "RemoveTopicRecord"
    topic_id: uuid.UUID


@dataclass(frozen=True)
class ConfigRecord(MetadataRecord):
    """Set (value) or remove (value None) a dynamic config of a topic or broker."""

    TYPE: ClassVar[str] = "ConfigRecord"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class RegisterBrokerRecord(MetadataRecord):
    TYPE: ClassVar[str] = "RegisterBrokerRecord"
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: list[BrokerEndpoint] = field(default_factory=list)
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    TYPE: ClassVar[str] = "BrokerRegistrationChangeRecord"
    broker_id: int
    fenced: bool


@dataclass(frozen=True)
class UnregisterBrokerRecord(MetadataRecord):
    TYPE: ClassVar[str] = "UnregisterBrokerRecord"
    broker_id: int


@dataclass(frozen=True)
class ProducerIdsRecord(MetadataRecord):
    """The controller handed producer ids below ``next_producer_id`` to ``broker_id``."""

    TYPE: ClassVar[str] = "ProducerIdsRecord"
    broker_id: int
    next_producer_id: int


@dataclass(frozen=True)
class ControllerChangeRecord(MetadataRecord):
    """The active controller changed: its node id (-1: none) and its epoch.

    Who leads the metadata, not a change the controller makes: the store that feeds the image
    replays it when it learns of an election (KRaft writes a LeaderChangeMessage control
    record when a controller is elected; ZooKeeper keeps ``/controller`` and
    ``/controller_epoch``). The single node's metadata log does not store it: the node replays
    one naming itself each time it opens the log."""

    TYPE: ClassVar[str] = "ControllerChangeRecord"
    controller_id: int
    controller_epoch: int


RECORD_TYPES: dict[str, type[MetadataRecord]] = {
    cls.TYPE: cls
    for cls in (
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        UnregisterBrokerRecord,
        ProducerIdsRecord,
        ControllerChangeRecord,
    )
}

_UUID_FIELDS = {"topic_id", "incarnation_id"}


def decode_record(raw: bytes) -> MetadataRecord:
    """Decode one metadata record; ValueError if it is not one."""
    try:
        body = json.loads(raw)
        cls = RECORD_TYPES[body.pop("type")]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a metadata record: {raw[:80]!r}") from exc
    body.pop("v", None)
    known = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in body.items() if k in known}
    for name in _UUID_FIELDS & kwargs.keys():
        kwargs[name] = uuid.UUID(kwargs[name])
    if cls is RegisterBrokerRecord:
        kwargs["endpoints"] = [BrokerEndpoint(**e) for e in kwargs.get("endpoints", [])]
    return cls(**kwargs)
