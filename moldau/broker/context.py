"""What a request handler may use of the node it runs on: :class:`BrokerContext`.

A handler gets it as ``ctx.broker`` (:class:`~.dispatch.RequestContext`), never the server
object (:class:`~.server.Broker`, which owns sockets, connections and their limits). The
context is narrow on purpose: the node's identity (``node_id``, ``cluster_id``), its static
``config``, the cluster as this node last saw it (``image``: topics, partitions, brokers with
their endpoint on every listener, and the active controller's id), the partitions it hosts
(``replica_manager``), the way to change cluster metadata (``controller``), the group
coordinator, producer ids and the clock.

Components wired at start-up take only the pieces they use as explicit arguments
(:class:`~.replica_manager.ReplicaManager`, the group coordinator in :mod:`.group.service`), so
a cluster can hand them a different store or controller without touching them. Unit tests give
handlers a fake context (``tests/unit/broker/handlers/fakes.py``): an image and components
built in memory, no sockets and no broker on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..protocol.errors import ErrorCode
from .config.loader import BrokerConfig
from .group.coordinator import GroupCoordinator
from .metadata.channel import ControllerChannel
from .metadata.image import MetadataImage
from .replica_manager import ReplicaManager
from .txn.markers import MarkerWriter
from .txn.verification import TxnVerifier

if TYPE_CHECKING:
    from .txn.coordinator import TransactionCoordinator


class BrokerContext(Protocol):
    """The node as a request handler sees it."""

    @property
    def node_id(self) -> int:
        """This broker's id (``node.id`` / ``broker.id``)."""
        ...

    @property
    def cluster_id(self) -> str:
        """The cluster id, as in ``meta.properties``."""
        ...

    @property
    def config(self) -> BrokerConfig:
        """The static configuration (server.properties, ``KAFKA_*``, overrides)."""
        ...

    @property
    def image(self) -> MetadataImage:
        """The cluster metadata as this node last replayed it."""
        ...

    @property
    def controller_id(self) -> int:
        """The id of the active controller as the image says (what Metadata and
        DescribeCluster report; -1 while none is known)."""
        ...

    @property
    def controller(self) -> ControllerChannel:
        """Where metadata changes (topics, partitions, configs, producer ids) are asked for:
        the active controller, in this process or forwarded to it."""
        ...

    @property
    def replica_manager(self) -> ReplicaManager:
        """The partitions this broker hosts: produce, fetch, offsets, deletions."""
        ...

    @property
    def group_coordinator(self) -> GroupCoordinator | None:
        """The group coordinator; None until it is started."""
        ...

    @property
    def marker_writer(self) -> MarkerWriter:
        """Writes transaction markers to partitions led here (WriteTxnMarkers, the local
        marker path)."""
        ...

    @property
    def txn_verifier(self) -> TxnVerifier | None:
        """Transaction verification (KIP-890): whether partitions are in a transactional
        id's ongoing transaction, asked of its coordinator; None when not wired."""
        ...

    @property
    def txn_coordinator(self) -> TransactionCoordinator | None:
        """The transaction coordinator; None until it is started."""
        ...

    def time_ms(self) -> int:
        """The clock: milliseconds since the epoch."""
        ...

    async def next_producer_id(self) -> int:
        """A producer id never issued before (KafkaError when no block can be allocated)."""
        ...

    async def auto_create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        """Create topics a client asked for (``auto.create.topics.enable``); the error of each
        topic that could not be created."""
        ...

    async def shut_down_broker(self, broker_id: int) -> list[tuple[str, int]]:
        """As the active controller, move leadership off ``broker_id`` (a controlled
        shutdown); the (topic, partition)s it still leads that another replica could take.
        KafkaError NOT_CONTROLLER when this node is not the active controller,
        BROKER_NOT_AVAILABLE when the broker is unknown."""
        ...
