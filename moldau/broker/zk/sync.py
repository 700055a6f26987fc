"""How a broker keeps its metadata image equal to ZooKeeper: :class:`ZkMetadataSync`.

Every broker (the active controller too) reads the cluster-state znodes (``snapshot``'s
:data:`~.snapshot.CHILDREN_PATHS` and the data znodes :func:`~.snapshot.paths_to_read` names:
``/controller``, ``/controller_epoch``, ``/brokers/ids/<id>``, ``/brokers/topics/<t>`` and each
partition ``state``, ``/config/topics/<t>``, ``/config/brokers/<n>``,
``/latest_producer_id_block``) with one-shot watches, keeps what it read in a
:class:`ZnodeCache`, and when a watch fires re-reads just what it names (a child list, or one
znode) plus what is new. The decoded state is diffed against the image and the records are
replayed through :meth:`Controller.follow
<moldau.broker.metadata.controller.Controller.follow>` — the same replay + listener path a
commit takes, in the same serial order as the controller's own operations.

- Watches are ZooKeeper's one-shot watches, re-armed by the next read. All reads pass one
  watcher callback, so kazoo and the server hold a single watch per znode.
- A missing znode is watched with ``exists`` (it fires on creation).
- Session expiry (an event of type NONE, or the state listener's LOST) and reconnection
  re-read everything: a new session has no watches, and changes may have been missed.
- The active controller replays its own writes at once. A read that raced with one of them
  could be older than the image; the store's ``generation`` tells a round that a write began
  or ended while it read (the diff is then dropped and the round runs again) and its
  ``on_written`` hook marks the written paths to be read again, so the diff never undoes the
  controller's own records and, once caught up, finds nothing.
- Reads of different znodes are not one snapshot: a broker may briefly see half of another
  controller's multi-op (two partitions' new leaders, one after the other), as a Kafka broker
  sees UpdateMetadata requests arrive one after another. It never goes backwards: ZooKeeper's
  reads of one session are monotonic, and each znode's latest read wins.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, WatchedEvent

from ..metadata.controller import Controller
from ..metadata.records import MetadataRecord
from . import layout
from .aio import AsyncZooKeeper
from .snapshot import (
    CHILDREN_PATHS,
    ClusterState,
    Memo,
    Znode,
    decode,
    decode_assignment,
    diff,
    paths_to_read,
)
from .store import ZkMetadataStore

log = logging.getLogger(__name__)

# Pause before another round after ZooKeeper failed one (the connection is down).
RETRY_DELAY_S = 0.5


class ZnodeCache:
    """The cluster-state znodes last read: child lists and data (None: no such znode)."""

    def __init__(self) -> None:
        self.children: dict[str, list[str]] = {}
        self.data: dict[str, Znode] = {}
        self.memo: Memo = {}

    def state(self) -> ClusterState:
        return decode(self.data, self.children, self.memo)

    async def refresh(self, zk: AsyncZooKeeper, watcher: Any = None, *, full: bool = True,
                      children: set[str] | frozenset[str] = frozenset(),
                      data: set[str] | frozenset[str] = frozenset()) -> None:
        """Read what is missing from the cache, the child lists in ``children`` and the
        znodes in ``data`` (everything when ``full``), setting ``watcher`` on each read, and
        forget znodes that no longer belong to the cluster state."""
        if full:
            self.children.clear()
            self.data.clear()
        stale_children = [p for p in CHILDREN_PATHS if p not in self.children or p in children]
        lists = await asyncio.gather(*(_read_children(zk, p, watcher) for p in stale_children))
        self.children.update(zip(stale_children, lists, strict=True))
        stale = set(data)
        while True:
            needed = paths_to_read(self.children, self._assignments())
            todo = [p for p in needed if p not in self.data or p in stale]
            if not todo:
                break
            stale.difference_update(todo)
            values = await asyncio.gather(*(_read_data(zk, p, watcher) for p in todo))
            self.data.update(zip(todo, values, strict=True))
        keep = set(needed)
        for path in [p for p in self.data if p not in keep]:
            del self.data[path]
        for path in [p for p in self.memo if p not in keep]:
            del self.memo[path]

    def _assignments(self) -> dict[str, Any]:
        out = {}
        for topic in self.children.get(layout.TOPICS, ()):
            try:
                path = layout.topic_path(topic)
            except ValueError:
                continue
            if path in self.data:
                assignment = decode_assignment(topic, self.data[path], self.memo)
                if assignment is not None:
                    out[topic] = assignment
        return out


async def _read_children(zk: AsyncZooKeeper, path: str, watcher: Any) -> list[str]:
    while True:
        try:
            return sorted(await zk.get_children(path, watcher=watcher))
        except NoNodeError:
            if await zk.exists(path, watcher=watcher) is None:
                return []


async def _read_data(zk: AsyncZooKeeper, path: str, watcher: Any) -> Znode:
    while True:
        try:
            return await zk.get(path, watcher=watcher)
        except NoNodeError:
            # get sets no watch on a missing znode; exists does (it fires on creation)
            if await zk.exists(path, watcher=watcher) is None:
                return None


async def read_cluster_state(zk: AsyncZooKeeper) -> ClusterState:
    """The cluster state in ZooKeeper now (one-off reads, no watches)."""
    cache = ZnodeCache()
    await cache.refresh(zk)
    return cache.state()


class ZkMetadataSync:
    """Keeps one broker's image equal to ZooKeeper (see the module docstring).

    ``controller`` is the broker's :class:`~moldau.broker.metadata.controller.Controller`
    (active or not: its listeners are the broker's, and :meth:`Controller.follow` replays in
    its serial order); ``store`` is its :class:`~.store.ZkMetadataStore`, whose writes the
    sync must not race. :meth:`start` returns once the image holds the cluster state.
    """

    def __init__(self, zk: AsyncZooKeeper, controller: Controller,
                 store: ZkMetadataStore | None = None) -> None:
        self.zk = zk
        self.controller = controller
        self.store = store
        self.cache = ZnodeCache()
        self.rounds = 0  # rounds applied, for tests and logs
        #: Records replayed from ZooKeeper so far (on the active controller: only what it did
        #: not write itself — broker and controller changes, other tools' writes).
        self.replayed = 0
        self._full = True
        self._dirty_children: set[str] = set()
        self._dirty_data: set[str] = set()
        self._wake = asyncio.Event()
        self._requested = 0
        self._applied = 0
        self._caught_up = asyncio.Condition()
        #: Called with the decoded state after each applied round (the active controller
        #: looks for what other tools wrote and it must complete).
        self.on_round: list[Callable[[ClusterState], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._watcher: Any = None
        self._state_listener: Any = None

    async def start(self) -> None:
        """Read the cluster state, replay it into the image, then follow changes."""
        self._watcher = self.zk.on_loop(self._on_event)
        self._state_listener = self.zk.add_state_listener(self._on_state)
        if self.store is not None:
            self.store.on_written.append(self.mark_dirty)
        self._task = asyncio.ensure_future(self._run())
        await self.refresh(full=True)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._state_listener is not None:
            self.zk.remove_state_listener(self._state_listener)
            self._state_listener = None
        if self.store is not None and self.mark_dirty in self.store.on_written:
            self.store.on_written.remove(self.mark_dirty)

    async def refresh(self, *, full: bool = False) -> None:
        """Return once a round that began after this call has been applied (``full``: one
        that re-read every znode) — how a newly elected controller catches up first."""
        if full:
            self._full = True
        self._requested += 1
        target = self._requested
        self._wake.set()
        async with self._caught_up:
            await self._caught_up.wait_for(lambda: self._applied >= target)

    def mark_dirty(self, data: set[str], parents: set[str]) -> None:
        """Read these znodes and child lists again before the next diff (the store's hook)."""
        self._dirty_data |= data
        self._dirty_children |= parents
        self._wake.set()

    # -- events --------------------------------------------------------------------------------

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            self._full = True
        elif event.type == EventType.CHILD:
            self._dirty_children.add(event.path)
        elif event.type == EventType.DELETED:
            self._dirty_data.add(event.path)
            self._dirty_children.add(event.path)
        else:  # CREATED, CHANGED
            self._dirty_data.add(event.path)
            self._dirty_children.add(event.path)
        self._wake.set()

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._full = True  # the watches went with the session
        elif state == KazooState.CONNECTED:
            self._full = True  # changes may have been missed while away
            self._wake.set()

    # -- rounds --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            seq = self._requested
            try:
                applied = await self._round()
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as exc:
                log.info("re-reading the cluster state from ZooKeeper after %r", exc)
                self._full = True
                applied = False
                await asyncio.sleep(RETRY_DELAY_S)
            except Exception:
                # Whatever went wrong, this broker must not stop following the cluster.
                log.exception("following the cluster state in ZooKeeper failed; reading it "
                              "all again")
                self._full = True
                applied = False
                await asyncio.sleep(RETRY_DELAY_S)
            if not applied:
                self._wake.set()
                continue
            async with self._caught_up:
                self._applied = max(self._applied, seq)
                self._caught_up.notify_all()

    async def _round(self) -> bool:
        """Read what changed, diff, replay; False if it must run again (a write of this
        broker's controller raced with the reads, or a read failed)."""
        store = self.store
        generation = store.generation if store is not None else 0
        full, self._full = self._full, False
        children, self._dirty_children = self._dirty_children, set()
        data, self._dirty_data = self._dirty_data, set()
        try:
            await self.cache.refresh(self.zk, self._watcher, full=full, children=children,
                                     data=data)
        except BaseException:
            # read them again next round
            self._full |= full
            self._dirty_children |= children
            self._dirty_data |= data
            raise
        state = self.cache.state()
        stale = False

        def change(image: Any) -> Sequence[MetadataRecord] | None:
            nonlocal stale
            if store is not None and (generation % 2 or store.generation != generation):
                stale = True
                return None
            return diff(image, state)

        records = await self.controller.follow(change)
        if stale:
            return False
        self.rounds += 1
        if records:
            self.replayed += len(records)
        for callback in self.on_round:
            callback(state)
            log.debug("replayed %d metadata records from ZooKeeper", len(records))
        return True
