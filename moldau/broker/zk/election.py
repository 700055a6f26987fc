"""Controller election through ZooKeeper, as Kafka's ``KafkaController.elect`` does it.

Every broker watches ``/controller``. When it is missing, a broker reads ``/controller_epoch``
(creating it as ``0`` when missing) and its znode version *v*, then tries one multi-op: create
the ephemeral ``/controller`` (Kafka's JSON, version 2) and set ``/controller_epoch`` to
epoch + 1 *if its version is still v*. One broker wins; the others get NodeExists or
BadVersion and keep watching. The winner's store is armed with (epoch, new version of
``/controller_epoch``): every write it makes is then fenced by that version (:mod:`.store`).

A broker competes only while its session holds its registration ``/brokers/ids/<id>``
(after a session expiry it re-registers first, then competes, as Kafka does). The controller
stops at once — its store disarmed, so new writes answer NOT_CONTROLLER — when
``/controller`` changes or disappears (an operator deleted it to force a re-election, as with
Kafka) or its session is lost; writes already in flight fail by the epoch check. A broker
that is merely disconnected (SUSPENDED) stays controller, as in Kafka: if its session expires
meanwhile, another broker is elected and its own writes are refused by version.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kazoo.client import KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KeeperState

from . import layout
from .aio import AsyncZooKeeper, TransactionFailed
from .layout import ControllerEpoch, ControllerRegistration

log = logging.getLogger(__name__)

RETRY_DELAY_S = 0.5


async def try_elect(zk: AsyncZooKeeper, broker_id: int) -> tuple[int, int] | None:
    """One election attempt: (epoch, ``/controller_epoch`` version) if this broker won, None
    if another holds ``/controller`` or won the race."""
    try:
        await zk.create(layout.CONTROLLER_EPOCH,
                        ControllerEpoch(layout.INITIAL_CONTROLLER_EPOCH).to_json())
    except NodeExistsError:
        pass
    data, stat = await zk.get(layout.CONTROLLER_EPOCH)
    epoch = ControllerEpoch.from_json(data).epoch + 1
    txn = zk.transaction()
    txn.create(layout.CONTROLLER, ControllerRegistration(broker_id).to_json(), ephemeral=True)
    txn.set_data(layout.CONTROLLER_EPOCH, ControllerEpoch(epoch).to_json(), stat.version)
    try:
        results = await zk.commit(txn)
    except TransactionFailed as exc:
        if isinstance(exc.cause, NodeExistsError | NoNodeError) or "BadVersion" in repr(
                exc.cause):
            return None
        raise
    return epoch, results[1].version


class ControllerElection:
    """Runs the election for one broker for as long as it is started.

    ``on_elected(epoch, epoch_version)`` is awaited after a win (the caller catches up and
    arms its store); ``on_resigned()`` is called, synchronously, as soon as the broker stops
    being the controller."""

    def __init__(self, zk: AsyncZooKeeper, broker_id: int,
                 on_elected: Callable[[int, int], Awaitable[None]],
                 on_resigned: Callable[[], None]) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.on_elected = on_elected
        self.on_resigned = on_resigned
        #: (epoch, version) while this broker holds ``/controller``.
        self.elected: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._listener: object = None
        self._changed = asyncio.Event()

    def start(self) -> None:
        self._listener = self.zk.add_state_listener(self._on_state)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop competing; give up ``/controller`` if held (another broker takes over)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._listener is not None:
            self.zk.remove_state_listener(self._listener)  # type: ignore[arg-type]
        if self.elected is not None:
            self._resign("the broker is shutting down")
            try:
                stat = await asyncio.wait_for(self.zk.exists(layout.CONTROLLER), 5)
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    await asyncio.wait_for(self.zk.delete(layout.CONTROLLER, stat.version), 5)
            except (KazooException, TimeoutError):
                log.info("could not delete %s; it goes with the session", layout.CONTROLLER)

    async def abdicate(self) -> None:
        """Stop being the controller and delete ``/controller`` if this session holds it, so
        that the brokers elect one afresh — after a write found ``/controller_epoch`` moved
        on while this broker still held ``/controller``."""
        self._resign(f"{layout.CONTROLLER_EPOCH} moved on")
        try:
            stat = await self.zk.exists(layout.CONTROLLER)
            if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                await self.zk.delete(layout.CONTROLLER, stat.version)
        except KazooException as exc:
            log.info("could not give up %s: %r", layout.CONTROLLER, exc)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST and self.elected is not None:
            self._resign("its ZooKeeper session expired")
        self._changed.set()

    def _resign(self, why: str) -> None:
        if self.elected is None:
            return
        log.warning("broker %d is no longer the controller (epoch %d): %s", self.broker_id,
                    self.elected[0], why)
        self.elected = None
        self.on_resigned()

    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as exc:
                log.info("controller election: ZooKeeper unavailable (%r); retrying", exc)
                if isinstance(exc, SessionExpiredError):
                    self._resign("its ZooKeeper session expired")
                await asyncio.sleep(RETRY_DELAY_S)
            except Exception:
                log.exception("controller election failed; retrying")
                await asyncio.sleep(RETRY_DELAY_S)

    async def _registered(self) -> bool:
        """Whether this session holds the broker's registration; if not, wait until it (or
        ``/controller``) changes. As in Kafka, a broker competes only once registered (after
        a session expiry: re-register, then elect)."""
        stat, fired = await self.zk.exists_watched(layout.broker_path(self.broker_id))
        if stat is not None and stat.ephemeralOwner == self.zk.session_id:
            return True
        _, controller_changed = await self.zk.exists_watched(layout.CONTROLLER)
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait([fired, controller_changed, changed],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        return False

    async def _step(self) -> None:
        self._changed.clear()
        stat, fired = await self.zk.exists_watched(layout.CONTROLLER)
        if stat is None:
            self._resign(f"{layout.CONTROLLER} was deleted")
            if not await self._registered():
                return
            won = await try_elect(self.zk, self.broker_id)
            if won is not None:
                log.info("broker %d is the controller, epoch %d", self.broker_id, won[0])
                self.elected = won
                try:
                    await self.on_elected(*won)
                except Exception:
                    self._resign("taking over failed")
                    raise
            return  # watch again
        mine = stat.ephemeralOwner == self.zk.session_id
        if self.elected is not None and not mine:
            self._resign(f"another broker holds {layout.CONTROLLER}")
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait([fired, changed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if fired.done() and self.elected is not None:
            event = fired.result()
            if event.type == EventType.NONE:
                # kazoo fires every watch with NONE when the connection drops (and forgets
                # them); only an expired session ends the controller, seen by the state
                # listener. Watch again once reconnected.
                if event.state == KeeperState.EXPIRED_SESSION:
                    self._resign("its ZooKeeper session expired")
                return
            self._resign(f"{layout.CONTROLLER} {str(event.type).lower()}")
