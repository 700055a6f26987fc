"""Synchronous facade over the asyncio clients, for scripts, the CLI and Spark executors.

All sync clients of a process share one event loop running in a daemon thread; each call
hands its coroutine to that loop and waits. ``SyncProducer.send`` does not wait: records go
into a thread-safe queue that the loop drains in bulk (one wake-up per burst, not per
record), and it returns a ``concurrent.futures.Future`` of the RecordMetadata.

``SyncConsumer`` runs rebalance callbacks on the thread that called ``poll()`` (or
``close()``/``unsubscribe()``), so they may call the consumer, e.g. ``commit()`` in
``on_revoke``; the loop waits for them as the asyncio consumer waits for async callbacks.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import queue
import re
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from .admin import AdminClient
from .consumer import Consumer
from .decode import BatchColumns
from .group.listener import Callback, RebalanceListener, make_listener
from .group.membership import CommitCallback
from .group.types import OffsetAndMetadata
from .producer import Producer
from .types import ConsumerGroupMetadata, ConsumerRecord, RecordMetadata, TopicPartition

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared event loop thread (started on first use; uvloop when installed)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            try:
                import uvloop

                loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
                loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="moldau-client-loop", daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def _run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    loop = background_loop()
    if threading.current_thread().name == "moldau-client-loop":
        coro.close()
        raise RuntimeError("sync client called from its own event loop thread; use the "
                           "async client there")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


class _SyncBase:
    _client: Any

    def close(self) -> None:
        _run(self._client.close())

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncAdminClient(_SyncBase):
    """Blocking AdminClient: every async method of AdminClient, called synchronously."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._client = AdminClient(config)
        _run(self._client.start())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return _run(attr(*args, **kwargs))

        call.__doc__ = attr.__doc__
        return call


class SyncProducer(_SyncBase):
    """Blocking-safe Producer: ``send()`` returns a concurrent.futures.Future."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._client = Producer(config)
        self._queue: collections.deque[tuple[tuple[Any, ...], dict[str, Any],
                                             concurrent.futures.Future[RecordMetadata]]] = (
            collections.deque())
        self._scheduled = False
        self._qlock = threading.Lock()
        _run(self._client.start())
        # Flush at interpreter exit without keeping the producer alive until then.
        ref = weakref.ref(self)
        atexit.register(lambda: (p := ref()) is not None and p._atexit())

    def send(self, topic: str, value: bytes | str | None, key: bytes | str | None = None,
             headers: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; the future resolves to its RecordMetadata (or raises)."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        item = ((topic, value, key, headers, partition, timestamp_ms), {}, result)
        with self._qlock:
            self._queue.append(item)
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            background_loop().call_soon_threadsafe(self._drain)
        return result

    def _drain(self) -> None:
        with self._qlock:
            items = list(self._queue)
            self._queue.clear()
            self._scheduled = False
        for args, kwargs, result in items:
            try:
                fut = self._client.send(*args, **kwargs)
            except BaseException as exc:
                result.set_exception(exc)
                continue
            fut.add_done_callback(lambda f, r=result: _transfer(f, r))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        async def flush() -> None:
            self._drain()
            await self._client.flush()

        _run(flush(), timeout)

    def close(self) -> None:
        self.flush()
        super().close()

    def _atexit(self) -> None:
        if not self._client._closed and _loop is not None and not _loop.is_closed():
            try:
                self.close()
            except Exception:
                pass

    def partitions_for(self, topic: str) -> list[int]:
        return self._client.partitions_for(topic)

    # --- transactions (see moldau.client.transactions) ------------------------------------

    def _after_queued(self, coro_fn: Any, timeout: float | None = None) -> Any:
        """Run a producer call on the loop once the sends queued before it are handed over,
        so records sent before commit/abort belong to the transaction they were sent in."""
        async def call() -> Any:
            self._drain()
            return await coro_fn()

        return _run(call(), timeout)

    def init_transactions(self) -> None:
        """Register transactional.id with its coordinator, fencing earlier producers."""
        self._after_queued(self._client.init_transactions)

    def begin_transaction(self) -> None:
        """Start a transaction."""
        async def begin() -> None:
            self._client.begin_transaction()

        self._after_queued(begin)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, Any],
                                    group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit consumer offsets to the group atomically with the transaction."""
        self._after_queued(
            lambda: self._client.send_offsets_to_transaction(offsets, group_metadata))

    def commit_transaction(self) -> None:
        """Flush and commit the transaction."""
        self._after_queued(self._client.commit_transaction)

    def abort_transaction(self) -> None:
        """Drop unsent records and abort the transaction."""
        self._after_queued(self._client.abort_transaction)


def _transfer(source: asyncio.Future[T], target: concurrent.futures.Future[T]) -> None:
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())


class _CallerThread:
    """Runs a coroutine on the loop while the calling thread serves callback requests."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...]] | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._queue is not None:  # re-entered from a callback: plain call
            return _run(coro)
        inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

        async def runner() -> None:
            try:
                inbox.put(("done", await coro, None))
            except BaseException as exc:
                inbox.put(("done", None, exc))

        self._queue = inbox
        try:
            asyncio.run_coroutine_threadsafe(runner(), background_loop())
            while True:
                item = inbox.get()
                if item[0] == "done":
                    if item[2] is not None:
                        raise item[2]
                    return item[1]  # type: ignore[no-any-return]
                _kind, fn, args, done = item
                try:
                    done.set_result(fn(*args))
                except BaseException as exc:
                    done.set_exception(exc)
        finally:
            self._queue = None

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """From the loop: run ``fn(*args)`` on the waiting caller thread and await it."""
        inbox = self._queue
        if inbox is None:
            return fn(*args)
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        inbox.put(("call", fn, args, done))
        return await asyncio.wrap_future(done)


class _ThreadListener(RebalanceListener):
    """Forwards rebalance callbacks to the thread blocked in a SyncConsumer call."""

    def __init__(self, caller: _CallerThread, listener: RebalanceListener) -> None:
        self._caller = caller
        self._listener = listener

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Any:
        return await self._caller.call(self._listener.on_partitions_revoked, partitions)

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Any:
        return await self._caller.call(self._listener.on_partitions_assigned, partitions)

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> Any:
        return await self._caller.call(self._listener.on_partitions_lost, partitions)


class SyncConsumer(_SyncBase):
    """Blocking Consumer: assign/seek/poll/position, groups and commits without asyncio."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._client = Consumer(config)
        self._caller = _CallerThread()
        _run(self._client.start())

    def _call(self, fn: Any, *args: Any) -> Any:
        async def call() -> Any:
            return fn(*args)

        return _run(call())

    def close(self) -> None:
        self._caller.run(self._client.close())

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._call(self._client.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._client.assignment()

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        self._call(self._client.seek, partition, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._call(self._client.seek_to_beginning, partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._call(self._client.seek_to_end, partitions)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._client.pause, list(partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._call(self._client.resume, list(partitions))

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        return _run(self._client.position(partition))

    def poll(self, timeout: float = 1.0, max_records: int | None = None
             ) -> list[ConsumerRecord]:
        return self._caller.run(self._client.poll(timeout, max_records))

    def poll_batches(self, timeout: float = 1.0, max_records: int | None = None
                     ) -> list[tuple[TopicPartition, BatchColumns]]:
        return self._caller.run(self._client.poll_batches(timeout, max_records))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return _run(self._client.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return _run(self._client.end_offsets(list(partitions)))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, tuple[int, int] | None]:
        return _run(self._client.offsets_for_times(timestamps))

    def partitions_for(self, topic: str) -> list[int]:
        async def get() -> list[int]:
            await self._client.cluster.wait_for_topics(
                [topic], self._client.config["default.api.timeout.ms"])
            return self._client.cluster.partitions_for(topic)

        return _run(get())

    # --- groups ---------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: RebalanceListener | None = None,
        *,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Consumer.subscribe(); callbacks run on the thread calling poll()/close()."""
        inner = make_listener(listener, on_assign, on_revoke, on_lost)
        self._call(self._client.subscribe, topics, _ThreadListener(self._caller, inner))

    def unsubscribe(self) -> None:
        self._caller.run(self._client.unsubscribe())

    def commit(
        self,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """Consumer.commit(). Asynchronous commits return None at once; ``callback`` then
        runs on the client's loop thread (it must not call the sync clients)."""
        async def commit() -> Any:
            result = await self._client.commit(offsets, asynchronous=asynchronous,
                                               callback=callback)
            return None if asynchronous else result

        return _run(commit())  # type: ignore[no-any-return]

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]]
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return _run(self._client.committed(list(partitions)))

    def subscription(self) -> set[str]:
        return self._client.subscription_topics()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """See Consumer.group_metadata()."""
        return self._client.group_metadata()

    @property
    def member_id(self) -> str:
        return self._client.member_id

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._client._closed:
            yield from self.poll(1.0)
