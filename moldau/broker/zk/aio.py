"""kazoo from an asyncio loop: awaitable ZooKeeper operations, and watches and session-state
changes delivered on the loop.

kazoo runs its own threads: a connection thread (socket I/O, ping, reconnects, and the session
state listeners) and a completion thread (async results and watch callbacks). Nothing the
broker owns may be touched from them. This module never blocks the loop and never lets a
kazoo thread into broker code:

- operations use kazoo's ``*_async`` calls (they only enqueue a request, so they are safe to
  call on the loop) and their result is moved to an ``asyncio.Future`` with
  ``loop.call_soon_threadsafe`` — no thread per call;
- watch callbacks and state listeners are wrapped by :meth:`AsyncZooKeeper.on_loop`: in the
  kazoo thread the wrapper only schedules the real callback on the loop (a coroutine function
  becomes a task), so the callback runs on the loop like any other broker code;
- only :meth:`~AsyncZooKeeper.start` and :meth:`~AsyncZooKeeper.stop`, which block in kazoo,
  run in a worker thread (``asyncio.to_thread``).

Watches are ZooKeeper's one-shot watches (kazoo 2.11 has no persistent watches):
``get_children(path, watch=True)`` returns the children and a future that completes with the
``WatchedEvent`` that fired; read again (with a new watch) to see the change and keep watching,
as Kafka's controller does. When the session expires kazoo fires every pending watch with an
event of type ``NONE`` (state ``EXPIRED_SESSION``): ephemeral znodes (the broker's registration,
``/controller``) are gone and everything must be re-read and re-created. Unlike ZooKeeper's
Java client, kazoo does the same (state ``CONNECTING``) when only the connection drops, and
forgets its watches: after a reconnect, re-read (and so re-watch) whatever was watched.

While the connection is down kazoo holds new requests until it reconnects: an awaited
operation neither fails nor times out by itself (with no quorum, forever). Bound waits with
:meth:`AsyncZooKeeper.until_connected` (``deadline_s``) or ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    RolledBackError,
)
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How kazoo reconnects: forever, 0.1 s doubling to at most 1 s between rounds over the hosts
#: (ZooKeeper's own Java client waits up to 1 s). kazoo's default lets the wait grow to an
#: hour, so a broker would stay away long after its ZooKeeper came back.
RECONNECT = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


class TransactionFailed(KazooException):
    """A multi-op failed as a whole; ``results`` holds kazoo's per-op results (an exception
    instance per op: the one that failed, ``RolledBackError`` for the others)."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.results = list(results)
        self.cause = next((r for r in self.results if isinstance(r, Exception)
                           and not isinstance(r, RolledBackError)), None)
        super().__init__(f"ZooKeeper transaction failed: {self.cause!r} (results {self.results})")


def _stop_and_close(client: KazooClient) -> None:
    client.stop()
    client.close()


class AsyncZooKeeper:
    """One ZooKeeper session (a :class:`kazoo.client.KazooClient`) used from an asyncio loop.

    ``hosts`` is a ``zookeeper.connect`` string (``h1:2181,h2:2181/chroot``).
    ``session_timeout_ms`` is what the client asks for; the server may lower or raise it
    within its min/max session timeout.
    """

    def __init__(self, hosts: str, *, session_timeout_ms: int = 18000,
                 client: KazooClient | None = None) -> None:
        self.hosts = hosts
        self.client = client or KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000,
                                            connection_retry=KazooRetry(**RECONNECT))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("AsyncZooKeeper is not started: await start() first")
        return self._loop

    async def start(self, timeout: float = 15.0, *, create_chroot: bool = True) -> None:
        """Connect (in a worker thread: kazoo's ``start`` blocks); raises kazoo's
        ``KazooTimeoutError`` if no server answered within ``timeout`` seconds.

        A missing chroot is created first, as Kafka does, by a short session without the
        chroot (kazoo does not create it; every path under a missing chroot would fail with
        ``NoNodeError``)."""
        self._loop = asyncio.get_running_loop()

        def start_or_clean_up(client: KazooClient) -> None:
            try:
                client.start(timeout)
            except BaseException:
                # a failed start leaves kazoo's connection thread retrying forever
                client.stop()
                client.close()
                raise

        if create_chroot and self.client.chroot:
            root = KazooClient(hosts=self.hosts.split("/", 1)[0])
            await asyncio.to_thread(start_or_clean_up, root)
            try:
                await asyncio.to_thread(root.ensure_path, self.client.chroot)
            finally:
                await asyncio.to_thread(_stop_and_close, root)
        await asyncio.to_thread(start_or_clean_up, self.client)

    async def stop(self) -> None:
        """End the session (its ephemeral znodes go at once) and release kazoo's threads."""
        await asyncio.to_thread(_stop_and_close, self.client)
        for task in list(self._tasks):
            task.cancel()

    @property
    def session_id(self) -> int | None:
        """The current session id (a new one after an expiry), None before the first connect."""
        session = self.client.client_id
        return session[0] if session else None

    @property
    def state(self) -> str:
        """kazoo's view: ``CONNECTED``, ``SUSPENDED`` (connection lost, session may live) or
        ``LOST`` (session expired or closed)."""
        return str(self.client.state)

    # -- kazoo threads -> loop ---------------------------------------------------------------

    def on_loop(self, callback: Callable[..., Any]) -> Callable[..., None]:
        """Wrap ``callback`` so that kazoo may call the wrapper from its threads while
        ``callback`` itself runs on the loop (a coroutine function as a task, kept referenced
        until done). Calls after the loop closed are dropped."""
        loop = self.loop

        def run(*args: Any) -> None:
            result = callback(*args)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

        def from_kazoo(*args: Any) -> None:
            try:
                loop.call_soon_threadsafe(run, *args)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                log.debug("dropped a ZooKeeper callback after the loop closed")

        return from_kazoo

    def add_state_listener(self, callback: Callable[[KazooState], Any]) -> Callable[..., None]:
        """Call ``callback(state)`` on the loop on every session state change (``CONNECTED``,
        ``SUSPENDED``, ``LOST``). Returns the wrapper, for :meth:`remove_state_listener`."""
        wrapper = self.on_loop(callback)
        self.client.add_listener(wrapper)
        return wrapper

    def remove_state_listener(self, wrapper: Callable[..., None]) -> None:
        self.client.remove_listener(wrapper)

    def _future(self, async_result: Any) -> asyncio.Future[Any]:
        """An asyncio future completed (on the loop) from a kazoo ``IAsyncResult``."""
        loop = self.loop
        future: asyncio.Future[Any] = loop.create_future()

        def transfer(result: Any) -> None:
            if future.done():
                return
            try:
                future.set_result(result.get_nowait())
            except Exception as exc:  # kazoo's result carries the operation's error
                future.set_exception(exc)

        def from_kazoo(result: Any) -> None:
            try:
                loop.call_soon_threadsafe(transfer, result)
            except RuntimeError:
                log.debug("dropped a ZooKeeper result after the loop closed")

        async_result.rawlink(from_kazoo)
        return future

    def _watch(self, watch: bool) -> tuple[Callable[..., None] | None,
                                           asyncio.Future[WatchedEvent] | None]:
        if not watch:
            return None, None
        fired: asyncio.Future[WatchedEvent] = self.loop.create_future()

        def deliver(event: WatchedEvent) -> None:
            if not fired.done():
                fired.set_result(event)

        return self.on_loop(deliver), fired

    # -- operations --------------------------------------------------------------------------

    async def get(self, path: str, *, watcher: Callable[..., None] | None = None
                  ) -> tuple[bytes, ZnodeStat]:
        """Data and stat of ``path``; ``NoNodeError`` if it does not exist.

        ``watcher`` (here, in :meth:`exists` and :meth:`get_children`) is a callback made with
        :meth:`on_loop`, called once with the ``WatchedEvent``. kazoo keeps one watch per
        path and callback, so a reader that passes the same wrapper on every read (as
        :mod:`.sync` does) sets each watch once however often it re-reads."""
        data, stat = await self._future(self.client.get_async(path, watch=watcher))
        return data or b"", stat

    async def get_watched(self, path: str) -> tuple[bytes, ZnodeStat,
                                                    asyncio.Future[WatchedEvent]]:
        """Like :meth:`get`, plus a future that completes when the data changes or the znode
        is deleted (one-shot)."""
        watcher, fired = self._watch(True)
        data, stat = await self._future(self.client.get_async(path, watch=watcher))
        assert fired is not None
        return data or b"", stat, fired

    async def exists(self, path: str, *, watcher: Callable[..., None] | None = None
                     ) -> ZnodeStat | None:
        return await self._future(self.client.exists_async(path, watch=watcher))

    async def exists_watched(self, path: str) -> tuple[ZnodeStat | None,
                                                       asyncio.Future[WatchedEvent]]:
        """Stat (or None) plus a future that completes when the znode is created, changed or
        deleted — how a broker waits for ``/controller`` to go away."""
        watcher, fired = self._watch(True)
        stat = await self._future(self.client.exists_async(path, watch=watcher))
        assert fired is not None
        return stat, fired

    async def get_children(self, path: str, *, watcher: Callable[..., None] | None = None
                           ) -> list[str]:
        return list(await self._future(self.client.get_children_async(path, watch=watcher)))

    async def get_children_watched(self, path: str) -> tuple[list[str],
                                                             asyncio.Future[WatchedEvent]]:
        """Children plus a future that completes when a child is added or removed."""
        watcher, fired = self._watch(True)
        children = await self._future(self.client.get_children_async(path, watch=watcher))
        assert fired is not None
        return list(children), fired

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        """Create ``path``; its real path (with the sequence suffix). ``NodeExistsError`` if
        it exists, ``NoNodeError`` if the parent does not (without ``makepath``)."""
        return await self._future(self.client.create_async(
            path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath))

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Write ``path`` if its version is ``version`` (-1: any); ``BadVersionError`` if not."""
        return await self._future(self.client.set_async(path, value, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._future(self.client.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents (empty data); no error if it exists."""
        await self._future(self.client.ensure_path_async(path))

    async def until_connected(self, operation: Callable[..., Awaitable[T]], *args: Any,
                              deadline_s: float | None = None, **kwargs: Any) -> T:
        """``await operation(*args, **kwargs)`` until it succeeds while the session lives —
        Kafka's ``retryRequestUntilConnected`` — or until ``deadline_s`` seconds passed
        (then ``OperationTimeoutError``).

        While the connection is down (``SUSPENDED``) kazoo holds a new request until it has
        reconnected: it neither fails nor times out, so only the deadline bounds the wait. A
        request in flight when the connection drops fails with ``ConnectionLoss`` and is sent
        again. ``SessionExpiredError`` is raised at once: the session and its ephemeral znodes
        are gone. Two consequences for callers: a ``create`` retried after ``ConnectionLoss``
        may meet its own znode (``NodeExistsError``), and a request given up at the deadline
        may still be applied after a reconnect — give up only on conditional writes (a znode
        version or the controller epoch checked), which cannot apply late by surprise."""
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        delay = 0.05
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await asyncio.wait_for(operation(*args, **kwargs), remaining)
            except TimeoutError as exc:
                raise OperationTimeoutError(
                    f"ZooKeeper did not answer within {deadline_s} s (state {self.state}); "
                    f"check that a quorum of {self.hosts} is up") from exc
            except (ConnectionLoss, OperationTimeoutError):
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def transaction(self) -> TransactionRequest:
        """A multi-op to fill (``check``, ``create``, ``set_data``, ``delete``) and pass to
        :meth:`commit`."""
        return self.client.transaction()

    async def commit(self, transaction: TransactionRequest) -> list[Any]:
        """Commit a multi-op atomically; kazoo's per-op results. Raises
        :class:`TransactionFailed` if any op failed (then none was applied)."""
        results = await self._future(transaction.commit_async())
        if any(isinstance(r, Exception) for r in results):
            raise TransactionFailed(results)
        return list(results)

    async def fenced_commit(self, epoch_path: str, epoch_version: int,
                            fill: Callable[[TransactionRequest], None]) -> list[Any]:
        """Commit the ops ``fill`` adds, only if ``epoch_path`` still has version
        ``epoch_version`` — Kafka's controller fencing (a check op on ``/controller_epoch``'s
        version first, then the writes, all in one multi-op). A deposed controller gets
        :class:`TransactionFailed` whose ``cause`` is ``BadVersionError``; nothing is
        written. The results omit the check op's."""
        txn = self.transaction()
        txn.check(epoch_path, epoch_version)
        fill(txn)
        return (await self.commit(txn))[1:]
