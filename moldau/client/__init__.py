"""Moldau's asyncio Kafka client: admin, producer, consumer, plus a synchronous facade.

Imports only :mod:`moldau.protocol`. Configuration uses the Java client's key names; see
:mod:`moldau.client.config` for every key, its default and meaning.
"""

from .address_map import AddressMap
from .admin import AdminClient
from .admin_types import (
    AdminError,
    AlterConfigOp,
    AlterOp,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    ListOffsetsResult,
    LogDirDescription,
    MemberDescription,
    NewTopic,
    OffsetSpec,
    PartitionLag,
    PartitionReassignment,
    ReplicaLogInfo,
    ResourceType,
)
from .cluster import Cluster
from .connection import BrokerConnection
from .consumer import Consumer, GroupMembership
from .decode import BatchColumns
from .errors import (
    BrokerError,
    ClientError,
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    OffsetOutOfRangeError,
    ProducerFenced,
    RecordCorruptError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionStateError,
    UnsupportedVersionError,
)
from .group import (
    CommitFailedError,
    OffsetAndMetadata,
    RebalanceInProgressError,
    RebalanceListener,
)
from .partitioner import murmur2, partition_for_key
from .producer import Producer
from .sync import SyncAdminClient, SyncConsumer, SyncProducer
from .types import (
    BrokerInfo,
    ClusterInfo,
    ConsumerGroupMetadata,
    ConsumerRecord,
    PartitionInfo,
    RecordMetadata,
    TopicInfo,
    TopicPartition,
)

__all__ = [
    "AddressMap",
    "AdminClient",
    "AdminError",
    "AlterConfigOp",
    "AlterOp",
    "BatchColumns",
    "BrokerConnection",
    "BrokerError",
    "BrokerInfo",
    "ClientError",
    "Cluster",
    "ClusterInfo",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupDescription",
    "GroupListing",
    "GroupMembership",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "ListOffsetsResult",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndMetadata",
    "OffsetOutOfRangeError",
    "OffsetSpec",
    "PartitionInfo",
    "PartitionLag",
    "PartitionReassignment",
    "Producer",
    "ProducerFenced",
    "RebalanceInProgressError",
    "RebalanceListener",
    "RecordCorruptError",
    "RecordMetadata",
    "ReplicaLogInfo",
    "ResourceType",
    "SyncAdminClient",
    "SyncConsumer",
    "SyncProducer",
    "TopicInfo",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "TransactionStateError",
    "UnsupportedVersionError",
    "murmur2",
    "partition_for_key",
]
