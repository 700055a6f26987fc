"""Wiring the group coordinator into a broker, and what the request handlers share.

``await start_group_coordinator(broker)`` is the only call the broker's start-up makes: it
builds the coordinator on the broker's ``__consumer_offsets`` partitions, follows leadership
changes of that topic through the controller, starts the offset expiry timer, and stops it all
when the broker stops. ``__consumer_offsets`` is created with ``offsets.topic.*`` settings on
the first FindCoordinator for a group, as Kafka does (its logs are created in one batch, so
even 50 partitions take well under a second).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ..metadata.controller import TopicSpec
from .config import GroupConfig
from .coordinator import GroupCoordinator
from .errors import GroupError
from .offsets_log import MemoryOffsetsLog, OffsetsLog
from .partitioning import OFFSETS_TOPIC, partition_for
from .timer import LoopTimer

if TYPE_CHECKING:
    from ..context import BrokerContext
    from ..server import Broker

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def coordinator_of(broker: BrokerContext) -> GroupCoordinator:
    """The broker's coordinator; raises COORDINATOR_NOT_AVAILABLE before it is started."""
    coordinator = broker.group_coordinator
    if coordinator is None:
        raise GroupError(ErrorCode.coordinator_not_available,
                         "the group coordinator is not running on this broker")
    return coordinator


def offsets_log_for(broker: Broker) -> OffsetsLog:
    """The partition layer's ``__consumer_offsets`` when the broker has one, else memory."""
    replicas = getattr(broker, "replica_manager", None)
    if replicas is not None:
        from .partition_log import PartitionOffsetsLog

        return PartitionOffsetsLog(broker, replicas)
    log.warning("no partition layer: committed offsets are kept in memory only")
    return MemoryOffsetsLog()


async def start_group_coordinator(broker: Broker) -> GroupCoordinator:
    """Start coordinating the groups of this broker's ``__consumer_offsets`` partitions."""
    config = GroupConfig.from_config(broker.config)
    coordinator = GroupCoordinator(config, offsets_log_for(broker), LoopTimer(broker.time_ms),
                                   node_id=broker.node_id, image=lambda: broker.image)
    broker.group_coordinator = coordinator
    broker.controller.listeners.append(lambda image, records: coordinator.sync_leadership())
    coordinator.sync_leadership()
    coordinator.start_expiry()
    broker.spawn(_close_on_stop(coordinator))
    return coordinator


async def _close_on_stop(coordinator: GroupCoordinator) -> None:
    """Lives as long as the broker; the broker cancels it on stop, which closes the
    coordinator (parked requests answered, timers stopped)."""
    try:
        await asyncio.Event().wait()
    finally:
        await coordinator.close()


def ensure_offsets_topic(broker: Broker, config: GroupConfig) -> ErrorCode:
    """Create ``__consumer_offsets`` if it does not exist yet."""
    if OFFSETS_TOPIC in broker.image.topics_by_name:
        return ErrorCode.none
    live = len(broker.image.live_brokers())
    if live == 0:
        return ErrorCode.coordinator_not_available
    spec = TopicSpec(
        OFFSETS_TOPIC,
        num_partitions=config.offsets_topic_num_partitions,
        replication_factor=min(config.offsets_topic_replication_factor, live),
        configs={"cleanup.policy": "compact",
                 "segment.bytes": str(config.offsets_topic_segment_bytes),
                 "compression.type": "producer"},
    )
    result = broker.controller.create_topics([spec])[0]
    if result.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
        log.warning("could not create %s: %s", OFFSETS_TOPIC, result.message)
        return ErrorCode.coordinator_not_available
    log.info("created %s with %d partitions, replication factor %d", OFFSETS_TOPIC,
             spec.num_partitions, spec.replication_factor)
    return ErrorCode.none


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


def find_coordinator(broker: Broker, key: str, key_type: int, listener: str) -> CoordinatorAnswer:
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
    error = ensure_offsets_topic(broker, coordinator.config)
    if error:
        return CoordinatorAnswer(error, "the __consumer_offsets topic is not available")
    image = broker.image
    topic = image.topics_by_name.get(OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available)
    state = topic.partitions.get(partition_for(key, len(topic.partitions)))
    live = {b.broker_id: b for b in image.live_brokers()}
    if state is None or state.leader not in live:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 "the coordinator's __consumer_offsets partition has no leader")
    endpoint = live[state.leader].endpoint(listener)
    if endpoint is None:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"the coordinator has no endpoint on listener {listener}")
    return CoordinatorAnswer(ErrorCode.none, None, state.leader, endpoint.host, endpoint.port)
