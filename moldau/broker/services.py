"""The services of an open node: what :func:`~.startup.open_node` returns.

:class:`NodeServices` holds every component of a node's state (log dirs, metadata, controller,
partitions, groups, producer ids) and is the :class:`~.context.BrokerContext` request handlers
see. It is frozen: the components are chosen once, when the node opens, and never swapped
behind a handler's back. The server (:class:`~.server.Broker`) adds sockets and connections
around it.

A single node runs the active controller itself: ``controller`` is the local
:class:`~.metadata.controller.Controller` (handlers see it only as a
:class:`~.metadata.channel.ControllerChannel`), and the controller id the image reports is
this node's, replayed when the node opens its metadata log.

A broker of a ZooKeeper cluster (``zookeeper.connect``) has ``cluster``, its
:class:`~.zk.node.ZkBrokerNode` (session, cluster id, registration, fencing), and ``plane``,
its :class:`~.zk.cluster_controller.ZkMetadataPlane` (the image kept equal to ZooKeeper, the
election, and the controller whose store is ZooKeeper; no ``metadata_log``). Its
``controller`` is an :class:`~.metadata.selection.ActiveControllerChannel`: the local
controller while the image names this broker the active one, else a
:class:`~.metadata.forwarding.ForwardingControllerChannel` to the one it names.
``local_controller`` is this process's controller either way (tools and tests inspect it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode, KafkaError
from ..storage.manager import LoadStats, LogManager
from .config.loader import BrokerConfig
from .group.coordinator import GroupCoordinator
from .metadata.channel import ControllerChannel, TopicSpec
from .metadata.controller import Controller
from .metadata.image import MetadataImage
from .metadata.log import MetadataLog
from .metadata.selection import ActiveControllerChannel
from .peers import PeerConnections
from .producer_ids import ProducerIdManager
from .replica_manager import ReplicaManager
from .txn.markers import MarkerWriter
from .txn.verification import TxnVerifier

if TYPE_CHECKING:
    from .replication.fetcher import ReplicaFetcherManager
    from .replication.isr import IsrManager
    from .txn.coordinator import TransactionCoordinator
    from .zk.cluster_controller import ZkMetadataPlane
    from .zk.node import ZkBrokerNode

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class NodeServices:
    """A node's components, opened and wired together (a :class:`BrokerContext`)."""

    config: BrokerConfig
    cluster_id: str
    image: MetadataImage
    log_manager: LogManager
    load_stats: LoadStats
    metadata_log: MetadataLog | None  # the single node's store; None in a cluster
    controller: Controller | ActiveControllerChannel
    local_controller: Controller
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    producer_ids: ProducerIdManager
    time_ms: Callable[[], int]
    cluster: ZkBrokerNode | None = None
    plane: ZkMetadataPlane | None = None
    # Replica fetchers of a broker of a cluster (a single node follows nothing).
    fetchers: ReplicaFetcherManager | None = None
    # The ISR manager of a broker of a cluster (shrinks and expands the ISRs it leads).
    isr_manager: IsrManager | None = None
    # Writes transaction markers to partitions led here (always set by _open_components).
    marker_writer: MarkerWriter = None  # type: ignore[assignment]
    # Connections to the other brokers of a cluster, one per (peer, purpose) (None on a single
    # node, which has no peers).
    peers: PeerConnections | None = None
    # Transaction verification (KIP-890): asks a transactional id's coordinator whether a
    # partition is in its transaction (Produce, TxnOffsetCommit).
    txn_verifier: TxnVerifier | None = None
    # The transaction coordinator (moldau/broker/txn), started with the node.
    txn_coordinator: TransactionCoordinator | None = None
    #: Auto-creations under way, by topic name (see :func:`auto_create_topics_bounded`).
    auto_creations: dict[str, asyncio.Future[dict[str, ErrorCode]]] = field(
        default_factory=dict)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def controller_id(self) -> int:
        return self.image.controller_id

    async def next_producer_id(self) -> int:
        return await self.producer_ids.next_id()

    async def auto_create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        return await auto_create_topics_bounded(self.controller, self.auto_creations, names)

    async def shut_down_broker(self, broker_id: int) -> list[tuple[str, int]]:
        if self.plane is not None:
            if broker_id not in self.image.brokers:
                raise KafkaError(ErrorCode.broker_not_available,
                                 f"Broker id {broker_id} does not exist.")
            return await self.plane.move_leadership_off(broker_id)
        image = self.image
        if image.controller_id != self.node_id:
            raise KafkaError(ErrorCode.not_controller,
                             f"broker {self.node_id} is not the active controller "
                             f"(the metadata names {image.controller_id})")
        if broker_id not in image.brokers:
            raise KafkaError(ErrorCode.broker_not_available,
                             f"Broker id {broker_id} does not exist.")
        # A single node: nothing can take over from the only broker.
        return [(topic.name, index) for topic in image.topics_by_name.values()
                for index, state in sorted(topic.partitions.items())
                if state.leader == broker_id and len(state.replicas) > 1]


async def auto_create_topics(controller: ControllerChannel,
                             names: list[str]) -> dict[str, ErrorCode]:
    """Create topics a client asked for (``auto.create.topics.enable``) with the broker's
    defaults; the error of each topic that could not be created."""
    results = await controller.create_topics([TopicSpec(name) for name in names])
    failed: dict[str, ErrorCode] = {}
    for result in results:
        if result.error:
            failed[result.name] = result.error
            log.info("auto-creation of topic %s failed: %s", result.name, result.message)
        else:
            log.info("auto-created topic %s with %d partitions", result.name,
                     result.num_partitions)
    return failed


#: How long a Metadata request waits for the topics it auto-creates. The creation goes on in
#: the background past it, and the request is answered LEADER_NOT_AVAILABLE ("being
#: created", which clients retry) rather than held until the controller answers: a
#: controller that is busy or being replaced (a ZooKeeper session renewed under load, a
#: failover) would otherwise hold the client's connection for the forwarding time-out (30 s).
#: Kafka answers at once; the wait keeps the single node's answer carrying the new topic.
AUTO_CREATE_WAIT_S = 5.0


async def auto_create_topics_bounded(
        controller: ControllerChannel,
        creations: dict[str, asyncio.Future[dict[str, ErrorCode]]], names: list[str],
        wait_s: float = AUTO_CREATE_WAIT_S) -> dict[str, ErrorCode]:
    """:func:`auto_create_topics`, waited for at most ``wait_s``: a topic whose creation is
    still under way then (or failed unexpectedly) is LEADER_NOT_AVAILABLE. ``creations``
    holds the creations under way by name, so clients asking again join the one creation
    instead of sending the controller another."""
    new = [name for name in names if name not in creations]
    if new:
        task = asyncio.ensure_future(auto_create_topics(controller, new))
        for name in new:
            creations[name] = task

        def forget(done: asyncio.Future[dict[str, ErrorCode]], new: list[str] = new) -> None:
            for name in new:
                if creations.get(name) is done:
                    del creations[name]
            if not done.cancelled() and done.exception() is not None:
                log.warning("auto-creation of topic(s) %s failed: %s", ", ".join(new),
                            done.exception())

        task.add_done_callback(forget)
    # Taken before waiting: a finished creation forgets its names (its done callback).
    mine = {name: creations[name] for name in names}
    if mine:
        await asyncio.wait(set(mine.values()), timeout=wait_s)
    failed: dict[str, ErrorCode] = {}
    for name, task in mine.items():
        if not task.done() or task.cancelled() or task.exception() is not None:
            failed[name] = ErrorCode.leader_not_available
        elif name in task.result():
            failed[name] = task.result()[name]
    return failed
