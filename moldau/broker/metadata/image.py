"""The metadata image: cluster state rebuilt by replaying metadata records.

``MetadataImage.replay(record)`` is the only way state changes, so the image after a restart
(replaying ``__cluster_metadata``) equals the image before it, and a follower replaying the
same log (later, with a controller quorum) sees the same cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from .records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
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

#: ``leader_recovery_state`` (KIP-704): the leader came from an unclean election and may lack
#: records the previous leader had acknowledged (RECOVERING), or not (RECOVERED).
RECOVERED = 0
RECOVERING = 1


@dataclass
class PartitionState:
    """Replica assignment, leader and ISR of one partition; during a reassignment
    (KIP-455) ``replicas`` holds the old and the target replicas, and ``adding_replicas`` /
    ``removing_replicas`` say which of them come and go."""

    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    #: KIP-704: RECOVERING (1) from an unclean election until the leader changes the ISR (or
    #: another leader is elected cleanly); RECOVERED (0) otherwise.
    leader_recovery_state: int = 0

    @property
    def reassigning(self) -> bool:
        """Whether a reassignment of this partition is in progress."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> list[int]:
        """The replicas the partition will have when its reassignment completes."""
        return [r for r in self.replicas if r not in self.removing_replicas]


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: list[BrokerEndpoint]
    rack: str | None
    fenced: bool

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint
        return None


@dataclass
class MetadataImage:
    """Topics, partitions, configs, brokers and producer-id blocks of the cluster."""

    topics_by_name: dict[str, TopicImage] = field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    next_producer_id: int = 0
    # The active controller (-1: unknown) and its epoch, from the last ControllerChangeRecord.
    controller_id: int = -1
    controller_epoch: int = -1
    offset: int = -1  # offset of the last record replayed

    def replay(self, record: MetadataRecord, offset: int | None = None) -> None:
        """Apply one record."""
        match record:
            case TopicRecord(name=name, topic_id=topic_id):
                topic = TopicImage(name, topic_id)
                self.topics_by_name[name] = topic
                self.topics_by_id[topic_id] = topic
            case PartitionRecord():
                self.topics_by_id[record.topic_id].partitions[record.partition_id] = (
                    PartitionState(
                        record.partition_id,
                        list(record.replicas),
                        list(record.isr),
                        record.leader,
                        record.leader_epoch,
                        record.partition_epoch,
                        list(record.adding_replicas),
                        list(record.removing_replicas),
                        record.leader_recovery_state,
                    )
                )
            case PartitionChangeRecord():
                state = self.topics_by_id[record.topic_id].partitions[record.partition_id]
                if record.leader is not None and record.leader != state.leader:
                    state.leader = record.leader
                    state.leader_epoch += 1
                    state.leader_recovery_state = RECOVERED
                if record.leader_recovery_state is not None:
                    state.leader_recovery_state = record.leader_recovery_state
                if record.isr is not None:
                    state.isr = list(record.isr)
                if record.replicas is not None:
                    state.replicas = list(record.replicas)
                if record.adding_replicas is not None:
                    state.adding_replicas = list(record.adding_replicas)
                if record.removing_replicas is not None:
                    state.removing_replicas = list(record.removing_replicas)
                state.partition_epoch += 1
            case RemoveTopicRecord(topic_id=topic_id):
                topic = self.topics_by_id.pop(topic_id)
                self.topics_by_name.pop(topic.name, None)
                self.topic_configs.pop(topic.name, None)
            case ConfigRecord():
                target = (
                    self.topic_configs
                    if record.resource_type == TOPIC_RESOURCE
                    else self.broker_configs
                )
                configs = target.setdefault(record.resource_name, {})
                if record.value is None:
                    configs.pop(record.name, None)
                else:
                    configs[record.name] = record.value
                if not configs:
                    target.pop(record.resource_name, None)
            case RegisterBrokerRecord():
                self.brokers[record.broker_id] = BrokerRegistration(
                    record.broker_id,
                    record.incarnation_id,
                    list(record.endpoints),
                    record.rack,
                    record.fenced,
                )
            case BrokerRegistrationChangeRecord(broker_id=broker_id, fenced=fenced):
                self.brokers[broker_id].fenced = fenced
            case UnregisterBrokerRecord(broker_id=broker_id):
                self.brokers.pop(broker_id, None)
            case ProducerIdsRecord(next_producer_id=next_id):
                self.next_producer_id = max(self.next_producer_id, next_id)
            case ControllerChangeRecord():
                self.controller_id = record.controller_id
                self.controller_epoch = record.controller_epoch
            case _:
                raise ValueError(f"unknown metadata record {record!r}")
        if offset is not None:
            self.offset = offset

    @classmethod
    def from_records(cls, records: Iterable[MetadataRecord]) -> MetadataImage:
        image = cls()
        for record in records:
            image.replay(record)
        return image

    def live_brokers(self) -> list[BrokerRegistration]:
        return [b for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)
                if not b.fenced]

    def configs_of(self, resource_type: int, name: str) -> dict[str, str]:
        source = self.topic_configs if resource_type == TOPIC_RESOURCE else self.broker_configs
        return dict(source.get(name, {}))


__all__ = ["BROKER_RESOURCE", "RECOVERED", "RECOVERING", "TOPIC_RESOURCE", "BrokerRegistration",
           "MetadataImage", "PartitionState", "TopicImage"]
