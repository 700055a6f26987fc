"""Cluster mode's metadata plane for one broker: :class:`ZkMetadataPlane` (sync + election +
the controller's reactions), and the pure leader-election rules it applies.

Every broker runs a plane. All of them keep their image equal to ZooKeeper
(:class:`~.sync.ZkMetadataSync`) and compete for ``/controller``
(:class:`~.election.ControllerElection`). The winner catches up with a full read, arms its
:class:`~.store.ZkMetadataStore` and runs the shared
:class:`~moldau.broker.metadata.controller.Controller` on it (``plane.channel``), plus the
reactions Kafka's controller has:

- a broker registration disappears: each partition it led gets a new leader, the first
  replica (assignment order) that is alive and in the ISR, and the dead broker leaves the
  ISRs; with none left (replication factor 1) the leader becomes -1 — the partition is
  offline, clients get LEADER_NOT_AVAILABLE — and the ISR keeps its last member, as Kafka
  keeps it (``doRemoveReplicasFromIsr``), so that the broker can lead again;
- a broker registers (again): offline partitions whose ISR holds it get it as leader;
- on election, the same rules catch up with whatever happened while there was no controller;
- :meth:`ZkMetadataPlane.move_leadership_off` (controlled shutdown): leadership of the
  broker's partitions moves to another in-sync replica, the broker leaves the followers'
  ISRs, and until it registers again it is never chosen as a new leader;
- a topic another tool wrote (``kafka-topics.sh --zookeeper``: only ``/brokers/topics/<t>``,
  maybe without a topic id) gets its id and its partitions' state znodes
  (:func:`topic_fixups`), after which every broker's sync sees a complete topic;
  ``/admin/delete_topics/<t>`` deletes the topic;
- config change notifications older than 15 minutes are deleted, as Kafka's brokers do;
- ``/admin/reassign_partitions`` (the pre-2.4 way to ask for a reassignment) is carried out
  and deleted when done (:mod:`.legacy_reassignment`).

- with ``auto.leader.rebalance.enable``, every ``leader.imbalance.check.interval.seconds``
  (first 5 s after the election, as Kafka) partitions go back to their preferred replica
  when its broker's imbalance is over ``leader.imbalance.per.broker.percentage``
  (:func:`~moldau.broker.metadata.leader_election.imbalanced_partitions`).

Every leader change bumps the leader epoch (the replay of PartitionChangeRecord does) and is
written to the partition's state znode conditionally on its version, fenced by the controller
epoch. Unclean leader election (the first live replica outside the ISR, which then forms the
ISR alone) is done only for topics whose ``unclean.leader.election.enable`` is true (topic
config, else the controller's broker config), with a warning naming the partition; a change of
that config (AlterConfigs / IncrementalAlterConfigs of the topic or a broker) triggers a new
election of the offline partitions, as Kafka's controller does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError

from ...protocol.errors import ErrorCode, KafkaError
from ..metadata.controller import Controller
from ..metadata.image import RECOVERING, MetadataImage, PartitionState
from ..metadata.leader_election import PREFERRED, imbalanced_partitions
from ..metadata.records import (
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from . import layout
from .aio import AsyncZooKeeper
from .election import ControllerElection
from .layout import TopicAssignment
from .legacy_reassignment import watch_legacy_reassignments
from .snapshot import ClusterState
from .store import ZK_MAX_BATCH_BYTES, Op, ZkMetadataStore
from .sync import ZkMetadataSync

log = logging.getLogger(__name__)

NO_LEADER = layout.NO_LEADER
UNCLEAN_KEY = "unclean.leader.election.enable"
#: Config change notifications older than this are deleted (Kafka's changeExpirationMs).
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
NOTIFICATION_PURGE_INTERVAL_S = 60.0
#: Kafka's controller checks the leader imbalance first this long after its election.
FIRST_REBALANCE_CHECK_S = 5.0


def elect_leader(topic_id: uuid.UUID, partition: int, state: PartitionState,
                 alive: Collection[int], eligible: Collection[int], *, unclean: bool = False
                 ) -> PartitionChangeRecord | None:
    """The change a partition needs when the brokers ``alive`` are registered, of which
    ``eligible`` may become leaders (not shutting down); None if none.

    A leader that is alive stays; dead replicas leave the ISR (never its last member). A
    partition whose leader is dead or -1 gets the first eligible replica in the ISR; with
    none, and ``unclean`` (``unclean.leader.election.enable``), the first eligible replica
    outside it, which becomes the ISR alone (records only it had are lost) with
    ``leader_recovery_state`` RECOVERING, so that the new leader logs what it lacks; else
    -1."""
    isr = [b for b in state.isr if b in alive] or list(state.isr[-1:])
    if state.leader in alive:
        return (PartitionChangeRecord(topic_id, partition, isr=isr)
                if isr != state.isr else None)
    leader = next((r for r in state.replicas if r in eligible and r in state.isr), NO_LEADER)
    if leader == NO_LEADER and unclean:
        leader = next((r for r in state.replicas if r in eligible), NO_LEADER)
        if leader != NO_LEADER:
            return PartitionChangeRecord(topic_id, partition, leader=leader, isr=[leader],
                                         leader_recovery_state=RECOVERING)
    if leader == NO_LEADER and state.leader == NO_LEADER and isr == state.isr:
        return None
    return PartitionChangeRecord(topic_id, partition,
                                 leader=leader if leader != state.leader else None,
                                 isr=isr if isr != state.isr else None)


def leader_elections(image: MetadataImage, shutting_down: Collection[int] = (),
                     unclean_enabled: Callable[[str], bool] | None = None
                     ) -> list[MetadataRecord]:
    """:func:`elect_leader` over every partition of ``image``; ``unclean_enabled(topic)``
    says whether a topic allows unclean leader election (default: none does). Each unclean
    election is logged as a warning naming the partition; the offsets lost are logged by the
    brokers, which know them: the new leader (where its log ends, and the last high watermark
    it had heard of) and each former replica that truncates when it rejoins (the exact
    range)."""
    alive = set(image.brokers)
    eligible = alive - set(shutting_down)
    out: list[MetadataRecord] = []
    for topic in image.topics_by_id.values():
        unclean: bool | None = None  # resolved once per topic, only when needed
        for p, state in sorted(topic.partitions.items()):
            change = elect_leader(topic.topic_id, p, state, alive, eligible)
            leader = state.leader if change is None or change.leader is None else change.leader
            if leader == NO_LEADER and unclean_enabled is not None:
                if unclean is None:
                    unclean = unclean_enabled(topic.name)
                if unclean:
                    forced = elect_leader(topic.topic_id, p, state, alive, eligible,
                                          unclean=True)
                    if forced is not None and forced.leader not in (None, NO_LEADER):
                        log.warning(
                            "Unclean leader election of %s-%d: no in-sync replica (ISR %s) "
                            "is alive, so out-of-sync replica %d leads it "
                            "(unclean.leader.election.enable=true); records it lacks are lost "
                            "(data loss): broker %d logs the offsets from which they are "
                            "lost, a former replica that rejoins the exact range it drops",
                            topic.name, p, state.isr, forced.leader, forced.leader)
                        change = forced
            if change is not None:
                out.append(change)
    return out


def controlled_shutdown(image: MetadataImage, broker_id: int,
                        shutting_down: Collection[int]) -> list[MetadataRecord]:
    """Kafka's controlled shutdown of ``broker_id``: the partitions it leads move to another
    eligible replica of the ISR (those with none stay), and it leaves the ISR of the
    partitions it follows (unless it is the last member)."""
    eligible = set(image.brokers) - set(shutting_down) - {broker_id}
    out: list[MetadataRecord] = []
    for topic in image.topics_by_id.values():
        for p, state in sorted(topic.partitions.items()):
            isr = [b for b in state.isr if b != broker_id] or list(state.isr)
            if state.leader == broker_id:
                leader = next((r for r in state.replicas if r in eligible and r in state.isr),
                              None)
                if leader is not None:
                    out.append(PartitionChangeRecord(topic.topic_id, p, leader=leader,
                                                     isr=isr if isr != state.isr else None))
            elif broker_id in state.isr and isr != state.isr and state.leader != NO_LEADER:
                out.append(PartitionChangeRecord(topic.topic_id, p, isr=isr))
    return out


def topic_fixups(state: ClusterState, versions: Mapping[str, int], alive: Collection[int],
                 controller_epoch: int, existing: Collection[str],
                 new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> list[Op]:
    """What Kafka's controller completes after a tool wrote ``/brokers/topics/<t>`` itself
    (``kafka-topics.sh --zookeeper`` before Kafka 3, or a new partition in the assignment):
    a topic id for a topic without one (the assignment rewritten conditionally on its
    version, ``versions`` by path), and a state znode for each partition without one — leader
    the first live replica, ISR the live replicas (a partition with none alive waits).
    ``existing`` holds the ``partitions`` znodes that exist."""
    ops: list[Op] = []
    for name, assignment in sorted(state.topics.items()):
        if assignment.topic_id is None:
            path = layout.topic_path(name)
            ops.append(Op("set", path, TopicAssignment(assignment.partitions, new_id()
                                                       ).to_json(), versions.get(path, -1)))
        parent = layout.partitions_path(name)
        for p, replicas in sorted(assignment.partitions.items()):
            live = [r for r in replicas.replicas if r in alive]
            if (name, p) in state.partitions or not live:
                continue
            if parent not in existing:
                ops.append(Op("create", parent))
                existing = {*existing, parent}
            if layout.partition_path(name, p) not in existing:
                ops.append(Op("create", layout.partition_path(name, p)))
            ops.append(Op("create", layout.partition_state_path(name, p), layout.PartitionState(
                live[0], 0, tuple(live), controller_epoch).to_json()))
    return ops


def unfinished(state: ClusterState) -> list[str]:
    """Topics :func:`topic_fixups` would complete (no id, or partitions without state)."""
    return [name for name, a in sorted(state.topics.items())
            if a.topic_id is None or any((name, p) not in state.partitions for p in a.partitions)]


class ZkMetadataPlane:
    """Cluster mode's metadata plane of one broker (the entry point the broker wires in).

    Build it with :meth:`build` (or from parts), add the broker's listeners and preparers to
    ``plane.controller`` (``startup.follow_metadata``), then ``await start()``: the image
    holds the cluster state when it returns, and the broker competes for the controller from
    then on. ``channel`` is the local ControllerChannel while this broker is the active
    controller (None otherwise: use the forwarding channel to ``image.controller_id``).
    ``await stop()`` gives up the controller (if held) and stops following ZooKeeper.

    Broker registration (``/brokers/ids/<id>``) is the broker's own business, not the plane's;
    the election waits until this session holds it. ``image.controller_id`` (from
    ``/controller``) names this broker a moment before ``is_active_controller`` turns true (the
    winner first catches up), and a moment after it turned false (deposed): the broker's
    :class:`~moldau.broker.metadata.selection.ActiveControllerChannel` holds a change asked
    for in that gap until this broker is armed or the image names another controller.
    """

    def __init__(self, zk: AsyncZooKeeper, broker_id: int, controller: Controller,
                 store: ZkMetadataStore,
                 unclean_enabled: Callable[[str], bool] | None = None,
                 rebalance: Callable[[], tuple[bool, float, int]] | None = None) -> None:
        self.zk = zk
        #: (auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds,
        #: leader.imbalance.per.broker.percentage), read at each check; None: never.
        self.rebalance = rebalance
        #: Whether a topic allows unclean leader election (its effective
        #: ``unclean.leader.election.enable``); None: no topic does.
        self.unclean_enabled = unclean_enabled
        self.broker_id = broker_id
        self.controller = controller
        self.store = store
        self.sync = ZkMetadataSync(zk, controller, store)
        self.election = ControllerElection(zk, broker_id, self._on_elected, self._on_resigned)
        #: Brokers in controlled shutdown: never chosen as new leaders until they re-register.
        self.shutting_down: set[int] = set()
        # ... nor added to an ISR (AlterPartition answers INELIGIBLE_REPLICA).
        controller.ineligible_replicas = self.shutting_down
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reconcile_pending = False
        controller.listeners.append(self._on_metadata)
        self.sync.on_round.append(self._after_round)
        self._fixing = False
        store.on_fenced.append(lambda: self._spawn(self.election.abdicate()))

    @classmethod
    def build(cls, zk: AsyncZooKeeper, broker_id: int, image: MetadataImage, *,
              default_partitions: Callable[[], int],
              default_replication_factor: Callable[[], int],
              unclean_enabled: Callable[[str], bool] | None = None,
              rebalance: Callable[[], tuple[bool, float, int]] | None = None
              ) -> ZkMetadataPlane:
        """A plane with its own store and Controller over ``image`` (the broker's image)."""
        store = ZkMetadataStore(zk, image)
        controller = Controller(image, store, default_partitions=default_partitions,
                                default_replication_factor=default_replication_factor,
                                max_batch_bytes=ZK_MAX_BATCH_BYTES)
        return cls(zk, broker_id, controller, store, unclean_enabled, rebalance)

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    @property
    def is_active_controller(self) -> bool:
        """Whether this broker is the active controller (its store armed) right now."""
        return self.store.fence is not None

    @property
    def channel(self) -> Controller | None:
        """The local controller channel while active, else None."""
        return self.controller if self.is_active_controller else None

    async def start(self) -> None:
        """Replay the cluster state into the image, then compete for the controller."""
        await self.sync.start()
        self.election.start()

    async def stop(self) -> None:
        await self.election.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.sync.stop()

    async def move_leadership_off(self, broker_id: int) -> list[tuple[str, int]]:
        """Controlled shutdown of ``broker_id`` (on the active controller): move leadership
        of its partitions to other in-sync replicas and take it out of followers' ISRs.
        Returns the partitions with more than one replica it still leads (Kafka's
        ``partitionsRemaining``: no other in-sync replica to take over). KafkaError
        NOT_CONTROLLER if this broker is not the active controller."""
        if not self.is_active_controller:
            raise KafkaError(ErrorCode.not_controller,
                             f"Broker {self.broker_id} is not the active controller "
                             f"(controller: {self.image.controller_id})")
        self.shutting_down.add(broker_id)
        await self.controller.commit_with(
            lambda image: controlled_shutdown(image, broker_id, self.shutting_down))
        return sorted((t.name, p) for t in self.image.topics_by_id.values()
                      for p, s in t.partitions.items()
                      if s.leader == broker_id and len(s.replicas) > 1)

    # -- reactions ----------------------------------------------------------------------------

    async def _on_elected(self, epoch: int, epoch_version: int) -> None:
        # Catch up first: the image must hold what the previous controller wrote.
        await self.sync.refresh(full=True)
        if self.election.elected != (epoch, epoch_version):
            return  # lost it meanwhile
        self.store.arm(epoch, epoch_version)
        log.info("broker %d is the active controller (epoch %d)", self.broker_id, epoch)
        self._spawn(self._watch_deletions(epoch))
        self._spawn(watch_legacy_reassignments(
            self.zk, self.controller,
            lambda: self.store.fence is not None and self.store.fence[0] == epoch))
        self._spawn(self._purge_notifications(epoch))
        self._spawn(self._auto_rebalance(epoch))
        self._after_round(self.sync.cache.state())
        self._reconcile_soon()

    def _on_resigned(self) -> None:
        self.store.disarm()

    def _on_metadata(self, _image: MetadataImage, records: Sequence[MetadataRecord]) -> None:
        brokers_changed = False
        for record in records:
            if isinstance(record, RegisterBrokerRecord | UnregisterBrokerRecord):
                brokers_changed = True
                self.shutting_down.discard(record.broker_id)
            elif isinstance(record, ConfigRecord) and record.name == UNCLEAN_KEY:
                # Kafka's controller elects offline partitions again when unclean election
                # is enabled dynamically (topic or broker).
                brokers_changed = True
        if brokers_changed and self.is_active_controller:
            self._reconcile_soon()

    def _after_round(self, state: ClusterState) -> None:
        if self.is_active_controller and not self._fixing and unfinished(state):
            self._fixing = True
            self._spawn(self._finish_topics())

    async def _finish_topics(self) -> None:
        """Complete topics other tools wrote (see :func:`topic_fixups`)."""
        try:
            fence = self.store.fence
            state = self.sync.cache.state()
            names = unfinished(state)
            if fence is None or not names:
                return
            existing: set[str] = set()
            for name in names:
                try:
                    children = await self.zk.get_children(layout.partitions_path(name))
                except NoNodeError:
                    continue
                existing.add(layout.partitions_path(name))
                existing |= {f"{layout.partitions_path(name)}/{c}" for c in children}
            versions = {path: znode[1].version for path, znode in self.sync.cache.data.items()
                        if znode is not None}
            ops = topic_fixups(state, versions, set(self.image.brokers), fence[0], existing)
            if ops:
                log.info("controller: completing topic(s) %s written by another tool",
                         ", ".join(names))
                await self.store.write_ops(ops)
        except (KafkaError, KazooException) as exc:
            log.warning("completing topics written by another tool failed: %s", exc)
        finally:
            self._fixing = False

    async def _purge_notifications(self, epoch: int) -> None:
        """Delete config change notifications older than Kafka's 15 minutes
        (``ZkNodeChangeNotificationListener``'s expiry), while controller of ``epoch``."""
        while self.store.fence is not None and self.store.fence[0] == epoch:
            try:
                now_ms = layout.now_ms()
                for child in await self.zk.get_children(layout.CONFIG_CHANGES):
                    path = f"{layout.CONFIG_CHANGES}/{child}"
                    stat = await self.zk.exists(path)
                    if stat is not None and stat.ctime < now_ms - NOTIFICATION_EXPIRY_MS:
                        await self.zk.delete(path)
            except KazooException as exc:
                log.debug("purging %s: %r", layout.CONFIG_CHANGES, exc)
            await asyncio.sleep(NOTIFICATION_PURGE_INTERVAL_S)

    async def _auto_rebalance(self, epoch: int) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``, while controller of ``epoch``."""
        delay = FIRST_REBALANCE_CHECK_S
        while self.rebalance is not None:
            enabled, interval_s, percentage = self.rebalance()
            await asyncio.sleep(min(delay, interval_s))
            delay = interval_s
            if self.store.fence is None or self.store.fence[0] != epoch:
                return
            if not enabled:
                continue
            try:
                partitions = imbalanced_partitions(self.image, percentage, self.shutting_down)
                if not partitions:
                    continue
                results = await self.controller.elect_leaders(PREFERRED, partitions)
            except (KafkaError, KazooException) as exc:
                log.warning("automatic preferred leader election failed: %s", exc)
                continue
            elected = [f"{t}-{p}" for (t, p), (code, _) in results.items()
                       if code == ErrorCode.none]
            log.info("controller: leader imbalance over %d%% "
                     "(leader.imbalance.per.broker.percentage): preferred replicas lead %s "
                     "again", percentage, ", ".join(elected) or "no partition")

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _reconcile_soon(self) -> None:
        if not self._reconcile_pending:
            self._reconcile_pending = True
            self._spawn(self._reconcile())

    async def _reconcile(self) -> None:
        self._reconcile_pending = False
        if not self.is_active_controller:
            return
        try:
            records = await self.controller.commit_with(
                lambda image: leader_elections(image, self.shutting_down,
                                               self.unclean_enabled))
        except Exception as exc:
            if isinstance(exc, KafkaError):
                log.warning("leader election after a broker change failed: %s", exc)
            else:
                log.exception("leader election after a broker change failed")
            if self.is_active_controller:
                await asyncio.sleep(1.0)
                self._reconcile_soon()
            return
        if records:
            log.info("controller: %d partition leadership/ISR change(s) after broker changes",
                     len(records))
        try:
            # A controller elected mid-move finishes the reassignments whose new replicas
            # joined the ISR meanwhile; a broker back may also be the leader one needed.
            await self.controller.complete_reassignments()
        except KafkaError as exc:
            log.warning("completing reassignments after a controller or broker change "
                        "failed: %s", exc)

    async def _watch_deletions(self, epoch: int) -> None:
        """Delete the topics named under ``/admin/delete_topics`` (old tools' way to ask),
        while this broker is the controller of ``epoch``."""
        while self.store.fence is not None and self.store.fence[0] == epoch:
            try:
                names, fired = await self.zk.get_children_watched(layout.DELETE_TOPICS)
            except KazooException as exc:  # ZooKeeper trouble: retry later
                log.info("reading %s failed: %r", layout.DELETE_TOPICS, exc)
                await asyncio.sleep(1.0)
                continue
            known = [n for n in names if n in self.image.topics_by_name]
            unknown = [n for n in names if n not in self.image.topics_by_name]
            if known:
                await self.controller.delete_topics(known)
            for name in unknown:
                try:
                    await self.zk.delete(layout.delete_topic_path(name))
                except (KazooException, ValueError) as exc:  # gone, or not a topic name
                    log.debug("removing %s/%s: %r", layout.DELETE_TOPICS, name, exc)
            await fired
