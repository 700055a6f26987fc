"""A broker's membership of a ZooKeeper cluster: :class:`ZkBrokerNode`.

What Kafka's ``KafkaServer`` does with ZooKeeper before and while it serves, in its order:

1. Connect (:meth:`ZkBrokerNode.connect`) to ``zookeeper.connect``, creating a missing chroot
   first as Kafka does. No server answering within ``zookeeper.connection.timeout.ms`` (the
   session timeout when unset) stops start-up with a :class:`ClusterStartError` that names the
   key, its value and what to check.
2. Make sure Kafka's persistent paths exist (``/brokers/ids``, ``/brokers/topics``,
   ``/config/...``: ``layout.PERSISTENT_PATHS``), as every Kafka broker does at start.
3. Read the cluster id from ``/cluster/id``, or create it (Kafka's JSON,
   ``{"version":"1","id":...}``) when this is the first broker; two brokers racing to create
   it both end with the winner's (:meth:`cluster_id`). The caller compares it with the log
   dirs' ``meta.properties`` (:func:`check_log_dirs_cluster_id`).
4. Register (:meth:`register`): the ephemeral ``/brokers/ids/<id>`` with Kafka's version-5
   JSON (every advertised listener, rack, features). A registration owned by another live
   session means another broker runs with this ``broker.id``: start-up stops with
   :class:`ClusterStartError` naming the id and where that broker is.

While the broker runs, the session is watched. Losing the connection (kazoo ``SUSPENDED``)
changes nothing: the session and the registration live on while ZooKeeper waits for the
client. An expired session (``LOST``) has lost the registration, and the controller will
elect other leaders for this broker's partitions: the broker is *fenced* — it stops acting as
a leader (:attr:`fenced` says why; the replica manager answers produce and fetch with
NOT_LEADER_OR_FOLLOWER) — until kazoo has a new session and the broker has registered again
with it; then it is unfenced. Each step is logged as a warning or an info line an operator can
find. ``on_fenced`` / ``on_unfenced`` callbacks run on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from ...storage.meta import META_PROPERTIES, read_meta_properties
from ...storage.meta import new_uuid as new_cluster_id
from ..config.loader import BrokerConfig
from ..metadata.records import BrokerEndpoint
from .aio import AsyncZooKeeper
from .layout import (
    CLUSTER_ID,
    PERSISTENT_PATHS,
    BrokerRegistration,
    ClusterId,
    Endpoint,
    ZNodeFormatError,
    broker_path,
)

log = logging.getLogger(__name__)

# How often a fenced broker tries again to register when its id is taken or ZooKeeper fails.
REREGISTER_RETRY_S = 1.0


class ClusterStartError(OSError):
    """A cluster node cannot start (ZooKeeper unreachable, duplicate broker id, cluster id
    mismatch). The message says what is wrong and how to fix it; an ``OSError`` so that
    ``moldau serve`` reports it as a start-up failure without a traceback."""


def check_log_dirs_cluster_id(log_dirs: Sequence[str], cluster_id: str,
                              zookeeper_connect: str) -> None:
    """Refuse a log dir whose ``meta.properties`` names another cluster than ZooKeeper's
    (Kafka's InconsistentClusterIdException): its data belong to another cluster."""
    for log_dir in log_dirs:
        meta = read_meta_properties(log_dir)
        if meta is None or meta.cluster_id is None or meta.cluster_id == cluster_id:
            continue
        path = f"{log_dir.rstrip('/')}/{META_PROPERTIES}"
        raise ClusterStartError(
            f"The cluster id {cluster_id} in ZooKeeper (zookeeper.connect={zookeeper_connect}, "
            f"znode {CLUSTER_ID}) doesn't match the cluster id {meta.cluster_id} stored in "
            f"{path}: this broker is trying to join the wrong cluster "
            f"(InconsistentClusterIdException). Check that zookeeper.connect (and its chroot) "
            f"names the ensemble of cluster {meta.cluster_id}, or, if this log dir's data are "
            f"no longer wanted, move {log_dir} away so the broker starts empty in cluster "
            f"{cluster_id}.")


def registration_of(broker_id: int, endpoints: Sequence[BrokerEndpoint], rack: str | None
                    ) -> BrokerRegistration:
    """The ``/brokers/ids/<id>`` znode of this broker (version 5)."""
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(Endpoint(e.name, e.host or None, e.port, e.security_protocol)
                        for e in endpoints),
        rack=rack)


def _where(registration: BrokerRegistration) -> str:
    return ", ".join(ep.connection_string for ep in registration.endpoints) or "no endpoints"


class ZkBrokerNode:
    """This broker's ZooKeeper session, cluster id and registration."""

    def __init__(self, config: BrokerConfig, *, zk: AsyncZooKeeper | None = None) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.connect_string = str(config["zookeeper.connect"])
        self.zk = zk or AsyncZooKeeper(
            str(config.zookeeper), session_timeout_ms=config["zookeeper.session.timeout.ms"])
        self.on_fenced: list[Callable[[str], Any]] = []
        self.on_unfenced: list[Callable[[], Any]] = []
        self._registration: BrokerRegistration | None = None
        self._fenced: str | None = None
        self._session: int | None = None
        self._reregistering: asyncio.Task[None] | None = None
        self._listener: Callable[..., None] | None = None
        self._closed = False

    # --- start-up ------------------------------------------------------------------------
    async def connect(self) -> None:
        """Connect (chroot created when missing) and make Kafka's persistent paths exist;
        :class:`ClusterStartError` after ``zookeeper.connection.timeout.ms``."""
        timeout_ms = self.config.zookeeper_connection_timeout_ms
        log.info("connecting to ZooKeeper at %s (zookeeper.connect; session timeout %d ms)",
                 self.connect_string, self.config["zookeeper.session.timeout.ms"])
        try:
            await asyncio.wait_for(self.zk.start(timeout_ms / 1000), timeout_ms / 1000 + 5)
        except (KazooTimeoutError, TimeoutError) as exc:
            raise ClusterStartError(
                f"Timed out waiting for connection to ZooKeeper after {timeout_ms} ms "
                f"(zookeeper.connection.timeout.ms): zookeeper.connect={self.connect_string}. "
                f"Check that ZooKeeper runs on those hosts and ports, that this machine can "
                f"reach them (DNS, firewall), and that a majority of the ensemble is up."
            ) from exc
        except KazooException as exc:
            raise ClusterStartError(
                f"Cannot use ZooKeeper at zookeeper.connect={self.connect_string}: {exc!r}. "
                f"Check the host list and the chroot.") from exc
        self._session = self.zk.session_id
        self._listener = self.zk.add_state_listener(self._on_state)
        for path in PERSISTENT_PATHS:
            await self.zk.ensure_path(path)

    async def cluster_id(self) -> str:
        """The id in ``/cluster/id``, created (a new random one) when missing."""
        while True:
            try:
                data, _stat = await self.zk.get(CLUSTER_ID)
            except NoNodeError:
                proposed = new_cluster_id()
                try:
                    await self.zk.create(CLUSTER_ID, ClusterId(proposed).to_json(),
                                         makepath=True)
                except NodeExistsError:
                    continue  # another broker created it first: read theirs
                log.info("created cluster id %s in %s", proposed, CLUSTER_ID)
                return proposed
            try:
                return ClusterId.from_json(data).id
            except ZNodeFormatError as exc:
                raise ClusterStartError(
                    f"{exc} (zookeeper.connect={self.connect_string}); it is not a Kafka "
                    f"cluster id: check zookeeper.connect's chroot") from exc

    async def check_id_free(self) -> None:
        """Refuse to start early (before the broker competes for the controller) when a live
        broker holds this id; :meth:`register` checks again (two brokers may race)."""
        try:
            data, stat = await self.zk.get(broker_path(self.broker_id))
        except NoNodeError:
            return
        self._refuse_duplicate(data, stat.ephemeralOwner)

    def _refuse_duplicate(self, data: bytes, owner: int) -> None:
        try:
            where = _where(BrokerRegistration.from_json(data, self.broker_id))
        except ZNodeFormatError:
            where = repr(data[:200])
        raise ClusterStartError(
            f"broker.id {self.broker_id} is already registered by a live broker at {where} "
            f"({broker_path(self.broker_id)} in zookeeper.connect={self.connect_string}, "
            f"session 0x{owner:x}); choose another broker.id (node.id, KAFKA_BROKER_ID) or "
            f"stop that broker.")

    async def register(self, endpoints: Sequence[BrokerEndpoint], rack: str | None) -> None:
        """Create this broker's ephemeral registration; :class:`ClusterStartError` if a live
        broker holds this id."""
        self._registration = registration_of(self.broker_id, endpoints, rack)
        await self._create_registration(self._registration)
        log.info("registered broker %d at %s with ZooKeeper (session 0x%x)", self.broker_id,
                 broker_path(self.broker_id), self.zk.session_id or 0)

    async def _create_registration(self, registration: BrokerRegistration) -> None:
        path = registration.path
        try:
            await self.zk.until_connected(self.zk.create, path, registration.to_json(),
                                          ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            pass
        try:
            data, stat = await self.zk.get(path)
        except NoNodeError:  # it went away meanwhile (its session just ended): try again
            await self.zk.create(path, registration.to_json(), ephemeral=True, makepath=True)
            return
        if stat.ephemeralOwner == self.zk.session_id:
            return  # our own, from a create retried after a lost connection
        self._refuse_duplicate(data, stat.ephemeralOwner)

    # --- session -------------------------------------------------------------------------
    @property
    def fenced(self) -> str | None:
        """Why this broker may not act as a leader now (None: it may)."""
        return self._fenced

    def _on_state(self, state: KazooState) -> None:
        if self._closed:
            return
        if state == KazooState.SUSPENDED:
            log.warning("lost the connection to ZooKeeper (zookeeper.connect=%s); the session "
                        "lives for up to zookeeper.session.timeout.ms=%d while kazoo "
                        "reconnects", self.connect_string,
                        self.config["zookeeper.session.timeout.ms"])
        elif state == KazooState.LOST:
            self._fence(f"broker {self.broker_id}'s ZooKeeper session expired; it is not "
                        f"registered and leads no partition until it has registered again")
        elif state == KazooState.CONNECTED:
            if self.zk.session_id != self._session or self._fenced is not None:
                self._session = self.zk.session_id
                if self._fenced is None:
                    # kazoo may report the new session without a LOST first
                    self._fence(f"broker {self.broker_id} has a new ZooKeeper session and "
                                f"is not registered in it yet")
                self._start_reregistering()
            else:
                log.info("reconnected to ZooKeeper; session 0x%x kept",
                         self.zk.session_id or 0)

    def _fence(self, reason: str) -> None:
        first = self._fenced is None
        self._fenced = reason
        if first:
            log.warning("fenced: %s", reason)
            for callback in self.on_fenced:
                _safely(callback, reason)

    def _start_reregistering(self) -> None:
        if self._reregistering is None or self._reregistering.done():
            self._reregistering = asyncio.ensure_future(self._reregister())

    async def _reregister(self) -> None:
        registration = self._registration
        while not self._closed and registration is not None:
            try:
                registration = registration_of(
                    self.broker_id,
                    [BrokerEndpoint(e.listener, e.host or "", e.port, e.security_protocol)
                     for e in registration.endpoints], registration.rack)
                await self._create_registration(registration)
                break
            except ClusterStartError as exc:
                log.error("cannot register again: %s", exc)
            except KazooException as exc:
                log.warning("registering again with ZooKeeper failed (%r); retrying", exc)
            await asyncio.sleep(REREGISTER_RETRY_S)
        if self._closed:
            return
        self._registration = registration
        self._fenced = None
        log.info("registered broker %d again with ZooKeeper (new session 0x%x); unfenced: it "
                 "acts as leader of the partitions the metadata gives it",
                 self.broker_id, self.zk.session_id or 0)
        for callback in self.on_unfenced:
            _safely(callback)

    # --- shutdown ------------------------------------------------------------------------
    async def close(self) -> None:
        """End the session: the registration goes at once (other brokers see it leave)."""
        if self._closed:
            return
        self._closed = True
        if self._reregistering is not None:
            self._reregistering.cancel()
        if self._listener is None:
            return  # never connected: a failed start already released kazoo's threads
        self.zk.remove_state_listener(self._listener)
        await self.zk.stop()


def _safely(callback: Callable[..., Any], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("a ZooKeeper session callback failed")
