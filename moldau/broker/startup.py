"""Opening and closing a node's state, and its periodic housekeeping.

Open (:func:`open_node`, which returns the node's :class:`~.services.NodeServices`): check or
write ``meta.properties`` in every log dir (cluster id, node id; a cluster node takes the
cluster id from ZooKeeper and refuses log dirs of another cluster), load every partition log
(recovering after a crash; skipped after a clean shutdown) in a worker thread, replay
``__cluster_metadata`` into the image, create the controller and the replica manager,
reconcile the partitions this node hosts and start the group coordinator. Close
(:func:`close_node`): close the group coordinator, flush, checkpoint and write the
clean-shutdown marker.

Housekeeping runs in worker threads so disk work (fsync, segment deletion) never stalls the
event loop: retention every ``log.retention.check.interval.ms``, removal of deleted topics'
directories and deleted segments once their ``file.delete.delay.ms`` passed (checked every
second), flushing of rolled segments and ``flush.ms`` every second, checkpoints every 5 s
(Kafka's ``replica.high.watermark.checkpoint.interval.ms`` default), producer-id expiry every
10 min, and another try every 5 s at partitions whose log could not be opened.

At start the soft RLIMIT_NOFILE is raised to the hard limit (as the JVM does) and the room it
leaves for partitions is logged, as a warning when it is low.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..storage.config import LogConfig
from ..storage.errors import LogDirError
from ..storage.handles import (
    HANDLE_POOL,
    open_descriptors,
    open_file_limit,
    pool_capacity,
    raise_open_file_limit,
    reserve,
)
from ..storage.log_dirs import prepare_log_dir
from ..storage.manager import LogManager
from ..storage.meta import (
    MetaPropertiesError,
    ensure_meta_properties,
    new_uuid,
    read_meta_properties,
)
from .config.loader import BrokerConfig
from .group.coordinator import GroupCoordinator
from .group.service import start_group_coordinator
from .metadata.configs import effective_topic_config
from .metadata.controller import Controller
from .metadata.forwarding import ForwardingControllerChannel
from .metadata.image import MetadataImage
from .metadata.log import METADATA_MAX_BATCH_BYTES, METADATA_TOPIC, MetadataLog
from .metadata.records import ControllerChangeRecord
from .metadata.selection import ActiveControllerChannel
from .peers import PeerConnections
from .producer_ids import ProducerIdManager
from .replica_manager import ReplicaManager
from .replication.fetcher import FetcherSettings, ReplicaFetcherManager
from .replication.isr import IsrManager
from .services import NodeServices
from .txn.coordinator import TransactionCoordinator
from .txn.markers import MarkerWriter, runtime_end_marker
from .txn.service import close_txn_services, start_txn_services
from .txn.verification import TxnVerifier
from .zk.cluster_controller import ZkMetadataPlane
from .zk.node import ZkBrokerNode, check_log_dirs_cluster_id

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 5.0
# How often partitions whose log could not be opened are tried again.
OFFLINE_RETRY_INTERVAL_S = 5.0
# Kafka's documentation asks for at least this many open files.
RECOMMENDED_OPEN_FILES = 100_000
# How often files whose file.delete.delay.ms passed are looked for (Kafka schedules each
# deletion at its own time; a one-second sweep is as good and needs no timer per file).
DELETE_CHECK_INTERVAL_S = 1.0
FLUSH_CHECK_INTERVAL_S = 1.0

# The metadata log is never trimmed by retention: the image is rebuilt from all of it.
# Its batches may be as large as METADATA_MAX_BATCH_BYTES, whatever message.max.bytes says.
_METADATA_LOG_CONFIG = {"retention.ms": -1, "retention.bytes": -1,
                        "segment.bytes": METADATA_MAX_BATCH_BYTES,
                        "max.message.bytes": METADATA_MAX_BATCH_BYTES,
                        "cleanup.policy": "delete"}


def _cluster_id(config: BrokerConfig, log_dirs: list[str]) -> str:
    for log_dir in log_dirs:
        meta = read_meta_properties(log_dir)
        if meta is not None and meta.cluster_id:
            return meta.cluster_id
    configured = config["cluster.id"]
    return configured or new_uuid()


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def log_dirs_key(config: Any) -> str:
    """The key the log dirs came from: ``log.dirs``, or ``log.dir`` when it is unset."""
    return "log.dirs" if config["log.dirs"] else "log.dir"


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


async def open_node(config: BrokerConfig, *,
                    time_ms: Callable[[], int] = _wall_clock_ms,
                    cluster: ZkBrokerNode | None = None) -> NodeServices:
    """Open a node's state from its log dirs and wire its components together. The caller
    runs :func:`housekeeping` while the node is open and :func:`close_node` at the end.

    ``cluster`` (a broker of a ZooKeeper cluster) is connected already: the cluster id comes
    from its ``/cluster/id``."""
    log_dirs = [str(d) for d in config.log_dirs]
    key = log_dirs_key(config)
    for log_dir in log_dirs:
        prepare_log_dir(log_dir, key)
    if cluster is not None:
        cluster_id = await cluster.cluster_id()
        check_log_dirs_cluster_id(log_dirs, cluster_id, cluster.connect_string)
    try:
        if cluster is None:
            cluster_id = _cluster_id(config, log_dirs)
        ensure_meta_properties(log_dirs, config.node_id, cluster_id)
    except MetaPropertiesError as exc:
        raise LogDirError(f"{exc} (log dirs from {key}: {', '.join(log_dirs)})") from exc

    image = MetadataImage()

    def topic_config(topic: str) -> dict[str, Any]:
        if topic == METADATA_TOPIC:
            return {**effective_topic_config(image, config, topic), **_METADATA_LOG_CONFIG}
        return effective_topic_config(image, config, topic)

    manager = LogManager(log_dirs, LogConfig.from_dict(config.topic_defaults()),
                         topic_config=topic_config, time_ms=time_ms)
    raise_descriptor_limit()
    stats = await _in_thread(manager.startup, config["num.recovery.threads.per.data.dir"])
    log.info("loaded %d logs (%d segments; %d recovered, %d batches scanned, %d bytes "
             "truncated)", len(manager.all_logs()), stats.segments, stats.segments_recovered,
             stats.batches_scanned, stats.bytes_truncated)
    check_descriptor_limit(len(manager.all_logs()))
    services: NodeServices | None = None
    try:
        services = _open_components(config, cluster_id, image, manager, stats, time_ms, cluster)
        if services.plane is not None:
            # Only now, with the image holding the cluster's topics, may logs of topics it
            # does not name be deleted.
            await services.plane.start()
            log.info("read the cluster metadata from ZooKeeper: %d topics, %d brokers, "
                     "controller %d", len(image.topics_by_name), len(image.brokers),
                     image.controller_id)
            reconcile_logs(image, services.replica_manager, manager)
        if services.isr_manager is not None:
            services.isr_manager.start()  # every replica.lag.time.max.ms / 2
        return services
    except BaseException:
        # Nothing stays open behind a failed start.
        if services is not None and services.plane is not None:
            await services.plane.stop()
        await _in_thread(manager.shutdown)
        raise


def _open_components(config: BrokerConfig, cluster_id: str, image: MetadataImage,
                     manager: LogManager, stats: Any, time_ms: Callable[[], int],
                     cluster: ZkBrokerNode | None) -> NodeServices:
    node_id = config.node_id
    metadata_log: MetadataLog | None = None
    plane: ZkMetadataPlane | None = None
    if cluster is None:
        metadata_log = MetadataLog(manager.get_or_create_log(METADATA_TOPIC, 0), time_ms)
        replayed = metadata_log.replay_into(image)
        log.info("replayed %d metadata records", replayed)
        # This node runs the controller of its own metadata log (not a stored record).
        image.replay(ControllerChangeRecord(node_id, metadata_log.leader_epoch))
        controller = Controller(
            image, metadata_log,
            default_partitions=lambda: config["num.partitions"],
            default_replication_factor=lambda: config["default.replication.factor"],
        )
    else:
        # The cluster's metadata lives in ZooKeeper: the plane's controller writes there when
        # this broker is the active one, and its sync replays what ZooKeeper holds into the
        # image (open_node starts it once everything that follows metadata is wired).
        plane = ZkMetadataPlane.build(
            cluster.zk, node_id, image,
            default_partitions=lambda: config["num.partitions"],
            default_replication_factor=lambda: config["default.replication.factor"],
            unclean_enabled=lambda topic: bool(effective_topic_config(
                image, config, topic)["unclean.leader.election.enable"]),
            rebalance=lambda: (bool(config["auto.leader.rebalance.enable"]),
                               float(config["leader.imbalance.check.interval.seconds"]),
                               int(config["leader.imbalance.per.broker.percentage"])))
        controller = plane.controller
    replicas = ReplicaManager(node_id=node_id, image=image, config=config, log_manager=manager,
                              time_ms=time_ms)
    follow_metadata(controller, replicas)
    if cluster is None:
        reconcile_logs(image, replicas, manager)
    # Group coordinator (moldau/broker/group): follows __consumer_offsets leadership.
    groups = start_group_coordinator(config, node_id=node_id, image=image, replicas=replicas,
                                     time_ms=time_ms)
    follow_metadata(controller, groups=groups)
    channel: Controller | ActiveControllerChannel = controller
    fetchers: ReplicaFetcherManager | None = None
    isr_manager: IsrManager | None = None
    if cluster is not None:
        channel = ActiveControllerChannel(
            node_id=node_id, image=image, local=controller,
            remote=ForwardingControllerChannel(
                node_id=node_id, image=image,
                listener=config.listeners.inter_broker_listener),
            local_ready=lambda: plane is not None and plane.is_active_controller)
        fence_with(cluster, replicas)
        fetchers = ReplicaFetcherManager(
            node_id=node_id, image=image, partitions=lambda: replicas.partitions,
            listener=config.listeners.inter_broker_listener,
            settings=FetcherSettings.from_config(config))
        replicas.state_listeners.append(fetchers.sync)
        # Leaders shrink and expand their ISRs through the active controller (this broker
        # or the one the image names); the answer is applied at once (see replication.isr).
        isr_manager = IsrManager(
            node_id=node_id, lag_ms=lambda: config["replica.lag.time.max.ms"],
            send=channel.alter_partition, leaders=replicas.led_partitions, time_ms=time_ms,
            on_result=replicas.apply_isr_result)
        replicas.isr_hooks = isr_manager
        for partition in replicas.partitions.values():
            partition.isr_hooks = isr_manager
    peers: PeerConnections | None = None
    if cluster is not None:
        # One connection per (peer, purpose): transaction markers and verification.
        peers = PeerConnections(node_id=node_id, image=image,
                                listener=config.listeners.inter_broker_listener)
        replicas.state_listeners.append(peers.sync)
    producer_ids = ProducerIdManager(node_id, channel)
    # Markers for __consumer_offsets go through the group runtime (pending transactional
    # offsets become visible or are dropped), all others straight to the partitions.
    marker_writer = MarkerWriter(replicas, offsets_marker=runtime_end_marker(groups.runtime))
    # Transaction coordinator (moldau/broker/txn): follows __transaction_state leadership;
    # its marker channel writes local markers directly, remote ones over peer connections.
    txns = start_txn_services(config, node_id=node_id, image=image, replicas=replicas,
                              time_ms=time_ms, new_producer_id=producer_ids.next_id,
                              writer=marker_writer, peers=peers)
    follow_metadata(controller, txns=txns)
    verifier = TxnVerifier(node_id=node_id, image=image, peers=peers, coordinator=txns)
    return NodeServices(
        config=config, cluster_id=cluster_id, image=image, log_manager=manager,
        load_stats=stats, metadata_log=metadata_log, controller=channel,
        local_controller=controller, replica_manager=replicas, group_coordinator=groups,
        producer_ids=producer_ids, time_ms=time_ms, cluster=cluster,
        plane=plane, fetchers=fetchers, isr_manager=isr_manager, peers=peers,
        txn_verifier=verifier, marker_writer=marker_writer, txn_coordinator=txns)


def reconcile_logs(image: MetadataImage, replicas: ReplicaManager, manager: LogManager) -> None:
    """Open the logs of the partitions the image gives this broker, and delete the logs of
    topics the image no longer has (deleted while this broker was down)."""
    replicas.reconcile(list(image.topics_by_name))
    for stray in manager.all_logs():
        if stray.topic != METADATA_TOPIC and stray.topic not in image.topics_by_name:
            log.info("deleting the log of %s-%d: its topic no longer exists",
                     stray.topic, stray.partition)
            manager.delete_log(stray.topic, stray.partition)


def fence_with(cluster: ZkBrokerNode, replicas: ReplicaManager) -> None:
    """Stop acting as a leader while the ZooKeeper session is lost (until the broker has
    registered again): produce and fetch answer NOT_LEADER_OR_FOLLOWER meanwhile."""

    def fenced(reason: str) -> None:
        replicas.set_fenced(True)

    def unfenced() -> None:
        replicas.set_fenced(False)

    cluster.on_fenced.append(fenced)
    cluster.on_unfenced.append(unfenced)


def follow_metadata(controller: Controller, replicas: ReplicaManager | None = None,
                    groups: GroupCoordinator | None = None,
                    txns: TransactionCoordinator | None = None) -> None:
    """Make components follow the controller's changes: the replica manager creates the logs
    of new partitions before their records are written and reconciles after; the group
    coordinator loads and unloads ``__consumer_offsets`` partitions as leadership moves."""
    if replicas is not None:
        controller.preparers.append(replicas.prepare)
        controller.listeners.append(replicas.on_metadata)
    if groups is not None:
        controller.listeners.append(lambda _image, _records: groups.sync_leadership())
    if txns is not None:
        controller.listeners.append(lambda _image, _records: txns.sync_leadership())
        wake = getattr(txns.markers, "wake", None)
        if wake is not None:
            controller.listeners.append(wake)


def raise_descriptor_limit() -> None:
    """Raise the soft open-file limit to the hard one, as the JVM does for Kafka, and size
    the pool of older segments' descriptors from it."""
    before, after = raise_open_file_limit()
    if after != before:
        log.info("raised the open-file limit (RLIMIT_NOFILE) from %d to %d, the hard limit",
                 before, after)
    HANDLE_POOL.capacity = pool_capacity(open_file_limit()[0])


def check_descriptor_limit(partitions: int) -> None:
    """Say how many partitions the open-file limit leaves room for; warn when it is low."""
    soft, hard = open_file_limit()
    in_use = open_descriptors() or 0
    keep = reserve(soft)
    room = max(soft - in_use - HANDLE_POOL.capacity - keep, 0)
    text = (f"open-file limit (RLIMIT_NOFILE) {soft} (hard limit {hard}): room for about "
            f"{room} more partitions (one file descriptor each; {HANDLE_POOL.capacity} kept "
            f"for older segments, {keep} for connections; {in_use} open now for {partitions} "
            f"partitions)")
    if soft < RECOMMENDED_OPEN_FILES and room < max(1000, partitions):
        log.warning("%s. Topic creation fails with KAFKA_STORAGE_ERROR once that room is used. "
                    "Raise the limit before starting the broker: `ulimit -n %d` (the hard limit "
                    "too, as root), LimitNOFILE=%d in a systemd unit, or --ulimit nofile=%d:%d "
                    "for Docker.", text, RECOMMENDED_OPEN_FILES, RECOMMENDED_OPEN_FILES,
                    RECOMMENDED_OPEN_FILES, RECOMMENDED_OPEN_FILES)
    else:
        log.info("%s", text)


async def _periodic(interval_s: float, fn: Callable[[], Any], what: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await _in_thread(fn)
        except Exception:
            log.exception("%s failed", what)


async def housekeeping(node: NodeServices) -> None:
    """The node's periodic work, for as long as it runs (the caller cancels it)."""
    manager = node.log_manager
    retention_s = node.config["log.retention.check.interval.ms"] / 1000
    await asyncio.gather(
        _periodic(retention_s, manager.run_retention, "log retention"),
        _periodic(FLUSH_CHECK_INTERVAL_S, manager.flush_due, "log flush"),
        _periodic(CHECKPOINT_INTERVAL_S, manager.checkpoint_all, "checkpoint"),
        _deletions(manager),
        _on_loop(OFFLINE_RETRY_INTERVAL_S, node.replica_manager.retry_offline,
                 "reopening offline partitions"),
        _periodic(node.config["producer.id.expiration.check.interval.ms"] / 1000,
                  manager.remove_expired_producers,
                  "producer id expiry"),
    )


async def _on_loop(interval_s: float, fn: Callable[[], Any], what: str) -> None:
    """Like :func:`_periodic`, for work that changes event-loop state (quick, no fsync)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            fn()
        except Exception:
            log.exception("%s failed", what)


async def _deletions(manager: LogManager) -> None:
    """Remove deleted topics' directories and deleted segments once their
    ``file.delete.delay.ms`` passed, independently of the retention check (which runs every
    ``log.retention.check.interval.ms``, 5 minutes by default)."""
    while True:
        await asyncio.sleep(DELETE_CHECK_INTERVAL_S)
        try:
            if manager.deletions_due():
                await _in_thread(manager.remove_deleted)
        except Exception:
            log.exception("removing deleted log files failed")


async def close_node(node: NodeServices) -> None:
    """Close the group coordinator (parked requests answered, timers stopped), then the logs
    (flush, checkpoints, clean-shutdown marker)."""
    coordinator: GroupCoordinator = node.group_coordinator
    if node.isr_manager is not None:
        await node.isr_manager.stop()
    if node.fetchers is not None:
        await node.fetchers.close()
    if node.txn_verifier is not None:
        await node.txn_verifier.close()
    if node.peers is not None:
        node.peers.close()
    for creation in set(node.auto_creations.values()):
        creation.cancel()  # auto-creations still waiting on the controller
    try:
        if node.txn_coordinator is not None:
            await close_txn_services(node.txn_coordinator)
        await coordinator.close()
    finally:
        await _in_thread(node.log_manager.shutdown)
