"""Wiring the transaction coordinator into a broker, and what its request handlers share.

:func:`start_txn_coordinator` builds the coordinator on the broker's ``__transaction_state``
partitions (through the replica manager), loads the partitions this broker leads and starts
its housekeeping; the node makes it follow leadership changes and closes it when it stops.
``__transaction_state`` is created on the first FindCoordinator for a transactional id (key
type 1), as Kafka does, with ``transaction.state.log.*`` settings: compacted, uncompressed,
``unclean.leader.election.enable=false`` and ``min.insync.replicas`` =
``transaction.state.log.min.isr`` capped at the replication factor (the single node caps the
factor at the brokers alive; without capping min.isr too, Kafka's default of 2 would make
every write of one broker fail NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...protocol.errors import ErrorCode
from ..config.loader import BrokerConfig
from ..context import BrokerContext
from ..coordinator.partition_log import PartitionCoordinatorLog
from ..coordinator.timer import LoopTimer
from ..coordinator.topic import ensure_internal_topic
from ..group.service import CoordinatorAnswer
from ..metadata.channel import TopicSpec
from ..metadata.image import MetadataImage
from ..peers import PeerConnections
from ..replica_manager import ReplicaManager
from .channel import MarkerWriter, TxnMarkerChannel
from .config import TxnConfig
from .coordinator import MarkerSink, TransactionCoordinator
from .errors import TxnError
from .maintenance import start_maintenance, stop_maintenance
from .records import TXN_STATE_TOPIC


def txn_coordinator_of(broker: BrokerContext) -> TransactionCoordinator:
    """The broker's transaction coordinator; TxnError COORDINATOR_NOT_AVAILABLE before it
    is started."""
    coordinator = getattr(broker, "txn_coordinator", None)
    if coordinator is None:
        raise TxnError(ErrorCode.coordinator_not_available,
                       "the transaction coordinator is not running on this broker")
    return coordinator


def start_txn_coordinator(config: BrokerConfig, *, node_id: int, image: MetadataImage,
                          replicas: ReplicaManager, time_ms: Callable[[], int],
                          new_producer_id: Callable[[], Awaitable[int]],
                          markers: MarkerSink | None) -> TransactionCoordinator:
    """Start coordinating the transactions of this broker's ``__transaction_state``
    partitions; the caller calls ``sync_leadership()`` after every metadata change and
    ``await coordinator.close()`` when the node stops."""
    txn_config = TxnConfig.from_config(config)
    log = PartitionCoordinatorLog(replicas, TXN_STATE_TOPIC,
                                  commit_timeout_ms=txn_config.write_timeout_ms)
    coordinator = TransactionCoordinator(txn_config, log, LoopTimer(time_ms), node_id=node_id,
                                         image=lambda: image, new_producer_id=new_producer_id,
                                         markers=markers)
    coordinator.runtime.follow_fence(replicas)
    coordinator.sync_leadership()
    start_maintenance(coordinator)
    return coordinator


def start_txn_services(config: BrokerConfig, *, node_id: int, image: MetadataImage,
                       replicas: ReplicaManager, time_ms: Callable[[], int],
                       new_producer_id: Callable[[], Awaitable[int]], writer: MarkerWriter,
                       peers: PeerConnections | None = None) -> TransactionCoordinator:
    """The marker channel (local markers through ``writer``, remote ones over ``peers``)
    and the coordinator that feeds it; ``coordinator.markers`` is the channel."""
    channel = TxnMarkerChannel(node_id=node_id, image=lambda: image, writer=writer,
                               peers=peers)
    return start_txn_coordinator(config, node_id=node_id, image=image, replicas=replicas,
                                 time_ms=time_ms, new_producer_id=new_producer_id,
                                 markers=channel)


async def close_txn_services(coordinator: TransactionCoordinator) -> None:
    """Stop the housekeeping, unload every shard, stop the marker channel (the node closes
    the peer connections it shares)."""
    stop_maintenance(coordinator)
    await coordinator.close()
    close = getattr(coordinator.markers, "close", None)
    if close is not None:
        await close()


def txn_topic_spec(config: TxnConfig) -> TopicSpec:
    """``__transaction_state`` as Kafka creates it."""
    return TopicSpec(
        TXN_STATE_TOPIC,
        num_partitions=config.num_partitions,
        replication_factor=config.replication_factor,
        configs={"cleanup.policy": "compact",
                 "compression.type": "uncompressed",
                 "segment.bytes": str(config.segment_bytes),
                 "unclean.leader.election.enable": "false",
                 "min.insync.replicas": str(config.min_isr)},
    )


async def find_txn_coordinator(broker: BrokerContext, transactional_id: str,
                               listener: str) -> CoordinatorAnswer:
    """FindCoordinator key type 1: the leader of the id's ``__transaction_state``
    partition, with its endpoint on ``listener``; the topic is created on first use."""
    try:
        coordinator = txn_coordinator_of(broker)
    except TxnError as exc:
        return CoordinatorAnswer(exc.code, exc.message)
    if not transactional_id:
        return CoordinatorAnswer(ErrorCode.invalid_request, "the transactional id is empty")
    error, message = await ensure_internal_topic(
        coordinator.runtime, broker.image, txn_topic_spec(coordinator.config),
        broker.controller, cap_rf=coordinator.config.cap_replication,
        rf_key="transaction.state.log.replication.factor")
    if error:
        return CoordinatorAnswer(error, message)
    image = broker.image
    topic = image.topics_by_name.get(TXN_STATE_TOPIC)
    if topic is None or not topic.partitions:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"{TXN_STATE_TOPIC} is being created")
    state = topic.partitions.get(coordinator.partition_of(transactional_id))
    live = {b.broker_id: b for b in image.live_brokers()}
    if broker.replica_manager.fenced:
        live.pop(broker.node_id, None)  # this broker coordinates nothing while fenced
    if state is None or state.leader not in live:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"the coordinator's {TXN_STATE_TOPIC} partition has no leader")
    endpoint = live[state.leader].endpoint(listener)
    if endpoint is None:
        return CoordinatorAnswer(ErrorCode.coordinator_not_available,
                                 f"the coordinator has no endpoint on listener {listener}")
    return CoordinatorAnswer(ErrorCode.none, None, state.leader, endpoint.host, endpoint.port)
