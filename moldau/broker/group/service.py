"""Wiring the group coordinator into a broker, and what the request handlers share.

:func:`start_group_coordinator` is the only call the broker's start-up makes: it builds the
coordinator on the broker's ``__consumer_offsets`` partitions (through the replica manager),
loads the partitions this broker leads and starts the offset expiry timer. The node then makes
it follow leadership changes (:func:`moldau.broker.startup.follow_metadata`) and closes it when
it stops (:func:`moldau.broker.startup.close_node`).
``__consumer_offsets`` is created with ``offsets.topic.*`` settings on the first
FindCoordinator for a group, as Kafka does, without waiting long on the controller
(:mod:`moldau.broker.coordinator.topic`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode
from ..config.loader import BrokerConfig
from ..context import BrokerContext
from ..coordinator.topic import TOPIC_CREATION_WAIT_S, ensure_internal_topic
from ..metadata.channel import ControllerChannel, TopicSpec
from ..metadata.image import MetadataImage
from ..replica_manager import ReplicaManager
from .config import GroupConfig
from .coordinator import GroupCoordinator
from .errors import GroupError
from .offsets_log import MemoryOffsetsLog, OffsetsLog
from .partition_log import PartitionOffsetsLog
from .partitioning import OFFSETS_TOPIC, partition_for
from .timer import LoopTimer

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

#: How long a FindCoordinator waits for the creation of ``__consumer_offsets`` before it
#: answers COORDINATOR_NOT_AVAILABLE (the creation goes on; the client's retry finds it).
OFFSETS_TOPIC_CREATION_WAIT_S = TOPIC_CREATION_WAIT_S


def coordinator_of(broker: BrokerContext) -> GroupCoordinator:
    """The broker's coordinator; raises COORDINATOR_NOT_AVAILABLE before it is started."""
    coordinator = broker.group_coordinator
    if coordinator is None:
        raise GroupError(ErrorCode.coordinator_not_available,
                         "the group coordinator is not running on this broker")
    return coordinator


def offsets_log_for(replicas: ReplicaManager | None, *,
                    commit_timeout_ms: int = 5000) -> OffsetsLog:
    """The partition layer's ``__consumer_offsets`` when the broker has one, else memory.
    ``commit_timeout_ms`` bounds each append's wait for the ISR
    (``offsets.commit.timeout.ms``)."""
    if replicas is not None:
        return PartitionOffsetsLog(replicas, commit_timeout_ms=commit_timeout_ms)
    log.warning("no partition layer: committed offsets are kept in memory only")
    return MemoryOffsetsLog()


def start_group_coordinator(config: BrokerConfig, *, node_id: int, image: MetadataImage,
                            replicas: ReplicaManager | None,
                            time_ms: Callable[[], int]) -> GroupCoordinator:
    """Start coordinating the groups of this broker's ``__consumer_offsets`` partitions; the
    caller calls ``sync_leadership()`` after every metadata change and closes the
    coordinator (``await coordinator.close()``) when the node stops."""
    group_config = GroupConfig.from_config(config)
    offsets_log = offsets_log_for(replicas,
                                  commit_timeout_ms=group_config.offsets_commit_timeout_ms)
    coordinator = GroupCoordinator(group_config, offsets_log, LoopTimer(time_ms),
                                   node_id=node_id, image=lambda: image)
    if replicas is not None:
        follow_fence(coordinator, replicas)
    coordinator.sync_leadership()
    coordinator.start_expiry()
    return coordinator


def follow_fence(coordinator: GroupCoordinator, replicas: ReplicaManager) -> None:
    """Make ``coordinator`` coordinate nothing while the broker is fenced (the runtime's
    :meth:`~moldau.broker.coordinator.runtime.CoordinatorRuntime.follow_fence`)."""
    coordinator.runtime.follow_fence(replicas)


async def ensure_offsets_topic(coordinator: GroupCoordinator, image: MetadataImage,
                               controller: ControllerChannel, *,
                               wait_s: float = OFFSETS_TOPIC_CREATION_WAIT_S,
                               ) -> tuple[ErrorCode, str | None]:
    """Create ``__consumer_offsets`` if it does not exist yet (through the controller, with
    ``offsets.topic.num.partitions`` and ``offsets.topic.replication.factor``); the error and
    message a FindCoordinator gets when it cannot be, or is not created within ``wait_s``
    (see :func:`moldau.broker.coordinator.topic.ensure_internal_topic`; the single node caps
    the factor at the brokers alive, so it works with Kafka's default of 3)."""
    config = coordinator.config
    spec = TopicSpec(
        OFFSETS_TOPIC,
        num_partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        configs={"cleanup.policy": "compact",
                 "segment.bytes": str(config.offsets_topic_segment_bytes),
                 "compression.type": "producer"},
    )
    return await ensure_internal_topic(coordinator.runtime, image, spec, controller,
                                       cap_rf=config.cap_offsets_replication,
                                       rf_key="offsets.topic.replication.factor",
                                       wait_s=wait_s)


@dataclass(slots=True)
class CoordinatorAnswer:
    error: int
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1

    def as_dict(self, key: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"error_code": self.error, "error_message": self.message,
                                "node_id": self.node_id, "host": self.host, "port": self.port}
        if key is not None:
            data["key"] = key
        return data


async def find_coordinator(broker: BrokerContext, key: str, key_type: int,
                           listener: str) -> CoordinatorAnswer:
    """The coordinator of ``key`` with its endpoint on ``listener`` (FindCoordinator)."""
    if key_type == TRANSACTION_KEY_TYPE:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 "transactions are not supported by this broker yet")
    if key_type != GROUP_KEY_TYPE:
        return CoordinatorAnswer(ErrorCode.invalid_request, f"unknown key type {key_type}")
    try:
        coordinator = coordinator_of(broker)
    except GroupError as exc:
        return CoordinatorAnswer(exc.code, exc.message)
    error, message = await ensure_offsets_topic(coordinator, broker.image,
                                                broker.controller)
    if error:
        return CoordinatorAnswer(error, message)
    image = broker.image
    topic = image.topics_by_name.get(OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        # Created through another broker's controller and not in this image yet.
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"{OFFSETS_TOPIC} is being created")
    state = topic.partitions.get(partition_for(key, len(topic.partitions)))
    live = {b.broker_id: b for b in image.live_brokers()}
    if broker.replica_manager.fenced:
        live.pop(broker.node_id, None)  # this broker coordinates nothing while fenced
    if state is None or state.leader not in live:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 "the coordinator's __consumer_offsets partition has no leader")
    endpoint = live[state.leader].endpoint(listener)
    if endpoint is None:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"the coordinator has no endpoint on listener {listener}")
    return CoordinatorAnswer(ErrorCode.none, None, state.leader, endpoint.host, endpoint.port)
