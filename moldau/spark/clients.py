"""Per-process client caches for Spark's Python workers and the driver-side planner.

Spark pickles the data source and its readers/writers to every task, and sockets cannot be
pickled; with worker reuse a Python worker process runs many tasks one after another. So
clients live here, at module level, keyed by their configuration: a task finds the client the
previous task of the same process left behind, with its connections, metadata and — for a
consumer that stopped exactly where the next range starts — its prefetched records.

All clients run on the moldau client's shared background event loop
(:func:`moldau.client.sync.background_loop`); :func:`call` runs a coroutine there and waits.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from moldau.client import AdminClient, Consumer, Producer
from moldau.client.sync import background_loop
from moldau.client.types import TopicPartition

T = TypeVar("T")


class _Client(Protocol):
    async def start(self) -> Any: ...


C = TypeVar("C", bound=_Client)

MAX_CONSUMERS = 8
MAX_ADMINS = 4
MAX_PRODUCERS = 4
# Transactional producers are cached per transactional id, and a worker runs the tasks of
# several partitions (one id each) over time.
MAX_TXN_PRODUCERS = 16

_lock = threading.Lock()


def call(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the client loop and return its result (raises its exception)."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop()).result(timeout)


def config_key(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


@dataclass
class CachedConsumer:
    """A consumer assigned one partition, and where it stands (None: unknown, seek first)."""

    consumer: Consumer
    tp: TopicPartition
    next_offset: int | None = None


class _Cache:
    """A small LRU of started clients; evicted clients are closed on the client loop."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        with _lock:
            item = self.items.get(key)
            if item is not None:
                self.items.move_to_end(key)
            return item

    def put(self, key: Any, item: Any) -> None:
        evicted = []
        with _lock:
            self.items[key] = item
            self.items.move_to_end(key)
            while len(self.items) > self.limit:
                evicted.append(self.items.popitem(last=False)[1])
        for old in evicted:
            _close_quietly(old)

    def pop(self, key: Any) -> Any:
        with _lock:
            return self.items.pop(key, None)

    def get_or_start(self, key: Any, start: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """The item cached for ``key``, or a new one made by ``start()`` on the client loop."""
        item = self.get(key)
        if item is None:
            item = call(start())
            self.put(key, item)
        return item  # type: ignore[no-any-return]

    def drop(self, key: Any) -> None:
        """Close and forget the item for ``key`` (after an error left it in an unknown state)."""
        item = self.pop(key)
        if item is not None:
            _close_quietly(item)


def _close_quietly(item: Any) -> None:
    client = item.consumer if isinstance(item, CachedConsumer) else item
    try:
        call(client.close(), timeout=30)
    except Exception:
        pass


_consumers = _Cache(MAX_CONSUMERS)
_admins = _Cache(MAX_ADMINS)
_producers = _Cache(MAX_PRODUCERS)
_txn_producers = _Cache(MAX_TXN_PRODUCERS)


async def _started(kind: Callable[[dict[str, Any]], C], config: Mapping[str, Any]) -> C:
    """A client of ``kind`` made and started on the client loop."""
    client = kind(dict(config))
    await client.start()
    return client


def consumer_for(config: Mapping[str, Any], tp: TopicPartition) -> CachedConsumer:
    """The process's consumer for ``tp`` with this configuration (created on first use)."""

    async def start() -> CachedConsumer:
        consumer = await _started(Consumer, config)
        consumer.assign([tp])
        return CachedConsumer(consumer, tp)

    return _consumers.get_or_start((config_key(config), tp), start)


def drop_consumer(config: Mapping[str, Any], tp: TopicPartition) -> None:
    """Close and forget a consumer (after an error left it in an unknown state)."""
    _consumers.drop((config_key(config), tp))


def admin_for(config: Mapping[str, Any]) -> AdminClient:
    """The process's admin client for this configuration (driver side)."""
    return _admins.get_or_start(config_key(config), lambda: _started(AdminClient, config))


def drop_admin(config: Mapping[str, Any]) -> None:
    _admins.drop(config_key(config))


def producer_for(config: Mapping[str, Any]) -> Producer:
    """The process's producer for this configuration (idempotent unless configured off)."""
    return _producers.get_or_start(config_key(config), lambda: _started(Producer, config))


def drop_producer(config: Mapping[str, Any]) -> None:
    _producers.drop(config_key(config))


async def _initialised(config: Mapping[str, Any]) -> Producer:
    """A transactional producer, started and past ``init_transactions`` (which fences every
    earlier producer of its transactional id and completes their open transaction)."""
    producer = await _started(Producer, config)
    try:
        await producer.init_transactions()
    except BaseException:
        await producer.close()
        raise
    return producer


def transactional_producer_for(config: Mapping[str, Any]) -> tuple[Producer, bool]:
    """The process's producer for ``config['transactional.id']``, and whether it is new.

    A new one has just run ``init_transactions``; a cached one may have been fenced since
    by a task of the same id in another process (see :mod:`.txn_sink`).
    """
    key = config_key(config)
    producer = _txn_producers.get(key)
    if producer is not None:
        return producer, False
    producer = call(_initialised(config))
    _txn_producers.put(key, producer)
    return producer, True


def drop_transactional_producer(config: Mapping[str, Any]) -> None:
    """Close and forget a transactional producer (fenced, or its state is unknown)."""
    _txn_producers.drop(config_key(config))
